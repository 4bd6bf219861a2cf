"""LowNodeLoad on the real control plane: the manager (the chart's configuration and ServiceAccount token, short
intervals) judges a node by the NodeMetric an agent would write, files PodMigrationJobs only after
``consecutiveAbnormalities`` rounds, arbitration lets one migration off the node run at a time
(``maxMigratingPerNode: 1``), the chart's default ReservationFirst migrations move the pods through the koordpy
profile onto idle nodes, and the NodeMetrics the test then writes (as the agents would) show the node under its
high threshold; no pod moves twice (the audit log). A node hot for fewer rounds gets nothing; ``paused`` and
``dryRun`` file nothing (``dryRun`` logs and counts its decisions); a contradictory configuration is refused by
the real ``helm install``.

The scene, one per module (its tests run in file order and the last one moves pods): two kwok nodes of 16 cpu;
Deployment ``web``, 8 pods of 1 cpu requested, all on n0 (placed by the koordpy profile while n1 is cordoned). n1
reports 1600m (10 %): idle. Thresholds: low 30 %, high 75 % (12000m). n0 hot: 500m + 8 x 1800m = 14900m (93.1 %);
after two moves 11300m (70.6 %). n0 cool: 500m + 8 x 1000m = 8500m (53.1 %, normal). One idle node, so that a
replacement has one place to go: the extender's preference for its Reservation's node is not a guarantee against
kube-scheduler's own scores (docs/reservations.md), and a replacement bound elsewhere leaves its job to fail at its
ttl although the pod moved.
"""

from __future__ import annotations

import datetime
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from cluster_kit import CHART, PROFILE, Components, Kube, Release, Space, deep_merge, helm, wait_until
from nodemetrics import FRESH_FOR_THE_RUN, report_pods

from koordpy.descheduler.lownodeload import LABEL_PLUGIN, NAME
from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.controlplane import ControlPlane

pytestmark = pytest.mark.cluster

MANAGER_SA = "system:serviceaccount:koordpy-system:koordpy-manager"
SCHEDULER_SA = "system:serviceaccount:koordpy-system:koordpy-scheduler"
ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"
INTERVAL = 2.0
"""``deschedulingInterval`` (seconds)."""
ABNORMALITIES = 3
"""``consecutiveAbnormalities``: a hot node is acted on in its fourth consecutive hot round."""
REPLICAS = 8
HOT, COOL = 1800, 1000
"""A web pod's cpu usage (millicores) while n0 is hot, and while it is cool."""
SYSTEM = {"n0": 500, "n1": 1600}


@dataclass
class Scene:
    space: Space
    koordpy: Components
    nodes: dict[str, str]
    """Short name (n0, n1) -> node name."""
    initial: dict[str, str]
    """The web pods placed at set-up -> their node (all n0)."""
    scheduler_config: Path
    """The manager's ``scheduler.yaml`` as the chart renders it, with the extender's override of this run."""

    def start_manager(self, name: str, **low_node_load: Any) -> Any:
        """The manager on the chart's configuration (``low_node_load`` merged into its ``lowNodeLoad``)."""
        overrides = {"lowNodeLoad": low_node_load} if low_node_load else {}
        return self.koordpy.start_manager(
            overrides, name=name, extra_args=["--scheduler-config", str(self.scheduler_config)]
        )

    def web(self) -> dict[str, str]:
        """The web pods bound and not being deleted -> their short node name."""
        short = {node: name for name, node in self.nodes.items()}
        return {
            pod_name: short[pod["spec"]["nodeName"]]
            for pod_name, pod in self.space.pods().items()
            if pod["metadata"].get("labels", {}).get("app") == "web"
            and pod["spec"].get("nodeName") in short
            and not pod["metadata"].get("deletionTimestamp")
        }

    def report(self, kube: Kube, placement: dict[str, str], usage: int) -> None:
        """Every node's NodeMetric as its agent would write it: the web pods on it at ``usage`` each."""
        for short, node in self.nodes.items():
            pods = {pod: usage for pod, where in placement.items() if where == short}
            report_pods(kube, node, self.space.namespace, pods, system_milli=SYSTEM[short])


def balance_values(space: Space) -> dict[str, Any]:
    """The chart's values this module installs (``manager.config``): LowNodeLoad on the scene's nodes and namespace,
    one migration per node at a time, short intervals."""
    return {
        "deschedulingInterval": f"{INTERVAL:g}s",
        "lowNodeLoad": {
            "nodeSelector": {"matchLabels": space.selector},
            "evictableNamespaces": {"include": [space.namespace]},
            "lowThresholds": {"cpu": 30},
            "highThresholds": {"cpu": 75},
            "anomalyCondition": {"consecutiveAbnormalities": ABNORMALITIES},
            "nodeMetricExpirationSeconds": 3600,  # the test writes each report once
        },
        "migrationController": {
            "maxMigratingPerNode": 1,
            "arbitrationArgs": {"interval": "200ms"},
            # a workload's evictions: 2 (the per-workload rule for 8 replicas) per 10 s, not per 5 minutes
            "objectLimiters": {"workload": {"duration": "10s"}},
        },
        "reservation": {"intervalSeconds": 1},
    }


def deployment(space: Space, replicas: int) -> dict[str, Any]:
    template = space.pod("unused", cpu="1", memory="1Gi", labels={"app": "web"})
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": space.namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": template["spec"]},
        },
    }


def cordon(kube: Kube, node: str, on: bool) -> None:
    kube.patch("Node", node, {"spec": {"unschedulable": on}})


@pytest.fixture(scope="module")
def balancing(module_space: Space, release: Release) -> Iterator[None]:
    """The release with :func:`balance_values` (its RBAC then grants what the balance loop does), back to the
    defaults afterwards."""
    values = balance_values(module_space)
    with release.changed(
        *(a for k, v in values.items() for a in ("--set-json", f"manager.config.{k}={json.dumps(v)}"))
    ):
        yield


@pytest.fixture(scope="module")
def scene(
    balancing: None, module_space: Space, module_koordpy: Components, kube: Kube, release: Release
) -> Iterator[Scene]:
    nodes = {f"n{i}": module_space.node(f"n{i}", cpu="16", memory="64Gi") for i in range(2)}
    module_space.wait_nodes_ready()
    for short, node in nodes.items():
        report_pods(kube, node, module_space.namespace, {}, system_milli=SYSTEM[short])
    module_koordpy.start_scheduling(FRESH_FOR_THE_RUN)
    cordon(kube, nodes["n1"], True)
    kube.create(deployment(module_space, REPLICAS))
    # the chart renders the scheduler's configuration into the manager's ConfigMap and points the manager at it
    rendered = release.configmap("manager")["scheduler.yaml"]
    assert yaml.safe_load(rendered) == yaml.safe_load(release.configmap("scheduler")["config.yaml"])
    manager_pod = kube.get("Deployment", f"{release.name}-manager", release.namespace)
    assert manager_pod is not None
    command = manager_pod["spec"]["template"]["spec"]["containers"][0]["command"]
    assert "--scheduler-config=/etc/koordpy/scheduler.yaml" in command, command
    path = module_koordpy.workdir / "scheduler-config.yaml"
    path.write_text(yaml.safe_dump(deep_merge(yaml.safe_load(rendered), FRESH_FOR_THE_RUN), sort_keys=False))
    found = Scene(module_space, module_koordpy, nodes, {}, path)
    placed = wait_until(f"{REPLICAS} web pods on n0", lambda: len(w := found.web()) == REPLICAS and w)
    assert set(placed.values()) == {"n0"}, placed
    cordon(kube, nodes["n1"], False)
    found.initial = dict(placed)
    yield found


# ---- reading the manager and the audit log -------------------------------------------------------------------


def exposition(koordpy: Components) -> str:
    return httpx.get(koordpy.manager_base + "/metrics", timeout=HANG_BACKSTOP).text


def sample(text: str, series: str) -> float:
    """A sample of the exposition (0 when the series is absent)."""
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def rounds(text: str, outcome: str = "done") -> int:
    return int(sample(text, f'koordpy_descheduler_rounds_total{{outcome="{outcome}"}}'))


def hot_nodes(text: str) -> int:
    return int(sample(text, 'koordpy_descheduler_nodes{pool="__default_node_pool__",state="hot"}'))


def after_rounds(koordpy: Components, count: int, what: str) -> str:
    """The exposition once ``count`` more balance rounds (done or paused) have run."""
    start = exposition(koordpy)
    seen = rounds(start) + rounds(start, "paused")
    wanted = seen + count
    text: str = wait_until(
        f"{count} more balance rounds ({what})",
        lambda: (t := exposition(koordpy)) and rounds(t) + rounds(t, "paused") >= wanted and t,
    )
    return text


def plugin_jobs(kube: Kube, space: Space) -> list[dict[str, Any]]:
    """The PodMigrationJobs LowNodeLoad filed for this scene's pods, oldest first."""
    jobs = [
        job
        for job in kube.list("PodMigrationJob")
        if (job["metadata"].get("labels") or {}).get(LABEL_PLUGIN) == NAME
        and job["spec"]["podRef"]["namespace"] == space.namespace
    ]
    return sorted(jobs, key=lambda job: job["metadata"]["creationTimestamp"])


def audited(plane: ControlPlane, user: str, resource: str, verb: str, subresource: str = "") -> list[dict[str, Any]]:
    return [
        e
        for e in plane.audit_events()
        if e["user"]["username"] == user
        and e["verb"] == verb
        and (e.get("objectRef") or {}).get("resource") == resource
        and (e.get("objectRef") or {}).get("subresource", "") == subresource
    ]


def stamp(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def log_events(manager: Any, event: str) -> list[dict[str, Any]]:
    out = []
    for line in manager.log.read_text(errors="replace").splitlines():
        if line.startswith("{") and f'"{event}"' in line:
            parsed = json.loads(line)
            if parsed.get("event") == event:
                out.append(parsed)
    return out


# ---- the tests ----------------------------------------------------------------------------------------------


def test_a_contradictory_configuration_is_refused_at_install_with_the_field_paths(
    control_plane: ControlPlane, kube: Kube, release: Release
) -> None:
    """Koordinator's shipped descheduler example (memory high 80) beside the extender's default memory threshold
    (95): the real helm refuses the install, naming both paths, and installs nothing."""
    name = "koordpy-contradiction"
    refused = helm(
        control_plane,
        "install",
        name,
        str(CHART),
        "-n",
        "koordpy-contradiction",
        "--create-namespace",
        "--set-json",
        'manager.config.lowNodeLoad={"lowThresholds":{"cpu":45,"memory":55},"highThresholds":{"cpu":75,"memory":80}}',
        check=False,
    )
    assert refused.returncode != 0
    message = refused.stderr
    assert "contradictory thresholds" in message, message
    assert (
        "scheduler → descheduler: scheduler.config.loadAware.usageThresholds.memory (95) > "
        "manager.config.lowNodeLoad.highThresholds.memory (80)"
    ) in message, message
    listed = helm(control_plane, "list", "-A", "-q")
    assert name not in listed.stdout.split()
    assert kube.get("Namespace", "koordpy-contradiction") is None or not kube.list(
        "ConfigMap", "koordpy-contradiction", labelSelector=f"app.kubernetes.io/instance={name}"
    )


def test_paused_and_dry_run_file_nothing_and_dry_run_shows_its_decisions(scene: Scene, kube: Kube) -> None:
    koordpy = scene.koordpy
    scene.report(kube, scene.initial, HOT)
    paused = scene.start_manager("manager-paused", paused=True)
    text = after_rounds(koordpy, ABNORMALITIES + 3, "paused")
    assert rounds(text) == 0 and rounds(text, "paused") >= ABNORMALITIES + 3
    assert hot_nodes(text) == 0  # a paused round decides nothing, not even the classes
    assert plugin_jobs(kube, scene.space) == []
    paused.stop()

    dry = scene.start_manager("manager-dry-run", dryRun=True)
    series = 'koordpy_descheduler_moves_total{kind="node",outcome="dry_run",reason="cpu"}'
    text = wait_until(
        "the dry run's two decisions", lambda: (t := exposition(koordpy)) and sample(t, series) >= 2 and t
    )
    assert hot_nodes(text) == 1
    assert plugin_jobs(kube, scene.space) == []
    told = log_events(dry, "balance.dry_run_move")[:2]
    assert {(e["node"], e["pod"].split("/")[0]) for e in told} == {(scene.nodes["n0"], scene.space.namespace)}
    assert {e["pod"].split("/")[1] for e in told} <= set(scene.initial) and len({e["pod"] for e in told}) == 2
    assert [e["reason"] for e in told] == [
        "node is overutilized, cpu usage(93.12%)>threshold(75.00%)",
        "node is overutilized, cpu usage(81.88%)>threshold(75.00%)",
    ]
    assert {e["destination"] for e in told} == {scene.nodes["n1"]}
    dry.stop()
    assert plugin_jobs(kube, scene.space) == []


def test_a_node_hot_for_fewer_rounds_than_the_anomaly_condition_gets_nothing(scene: Scene, kube: Kube) -> None:
    koordpy = scene.koordpy
    scene.report(kube, scene.initial, COOL)
    manager = scene.start_manager("manager-brief")
    after_rounds(koordpy, 1, "the first, on a cool n0")
    scene.report(kube, scene.initial, HOT)
    seen_hot = wait_until("a round sees n0 hot", lambda: (t := exposition(koordpy)) and hot_nodes(t) == 1 and t)
    scene.report(kube, scene.initial, COOL)
    seen_cool = wait_until("a round sees n0 cool", lambda: (t := exposition(koordpy)) and hot_nodes(t) == 0 and t)
    hot_rounds = rounds(seen_cool) - rounds(seen_hot) + 1  # at most: the scrape may fall inside a round
    print(f"n0 was hot for at most {hot_rounds} round(s) of {INTERVAL:g} s")
    assert hot_rounds <= ABNORMALITIES, f"precondition: n0 hot for {hot_rounds} rounds, the test wanted fewer"
    text = after_rounds(koordpy, ABNORMALITIES + 2, "after the burst")
    assert plugin_jobs(kube, scene.space) == []
    assert sample(text, 'koordpy_descheduler_abnormal_nodes{kind="node"}') == 0
    assert log_events(manager, "balance.node_acted") == []
    manager.stop()


def test_a_hot_node_is_drained_through_arbitration_onto_idle_nodes_and_no_pod_moves_twice(
    control_plane: ControlPlane, scene: Scene, kube: Kube
) -> None:
    koordpy, space = scene.koordpy, scene.space
    scene.report(kube, scene.initial, COOL)
    manager = scene.start_manager("manager-drain")
    after_rounds(koordpy, 1, "the first, on a cool n0")
    hot_at = time.time()
    scene.report(kube, scene.initial, HOT)
    jobs = wait_until("two jobs filed", lambda: len(j := plugin_jobs(kube, space)) >= 2 and j)
    started = time.monotonic()

    # the agents' reports follow the pods: a pod gone from n0 leaves its NodeMetric, a replacement shows up on its
    # node at the same usage
    placement = dict(scene.initial)

    def settled() -> bool:
        nonlocal placement
        now = scene.web()
        if now != placement:
            placement = now
            scene.report(kube, placement, HOT)
        phases = [
            (kube.get("PodMigrationJob", j["metadata"]["name"]) or {}).get("status", {}).get("phase") for j in jobs
        ]
        return all(phase in ("Succeeded", "Failed") for phase in phases) and len(placement) == REPLICAS

    wait_until("both migrations done and the replacements placed", settled, timeout=HANG_BACKSTOP * 3)
    scene.report(kube, placement, HOT)
    drained = time.monotonic() - started
    final = {j["metadata"]["name"]: kube.get("PodMigrationJob", j["metadata"]["name"]) or {} for j in jobs}
    assert {n: j["status"]["phase"] for n, j in final.items()} == {n: "Succeeded" for n in final}, final

    # not before consecutiveAbnormalities rounds: the first hot round follows the report, each round INTERVAL apart
    creates = audited(control_plane, MANAGER_SA, "podmigrationjobs", "create")
    ours = {j["metadata"]["name"] for j in jobs}
    filed = sorted(stamp(e["requestReceivedTimestamp"]) for e in creates if e["objectRef"].get("name") in ours)
    print(
        f"hot -> first job {filed[0] - hot_at:.1f} s (at least {ABNORMALITIES} x {INTERVAL:g} s), jobs filed "
        f"{filed[-1] - filed[0]:.2f} s apart, both migrations done {drained:.1f} s after the jobs appeared"
    )
    assert len(filed) == 2 and filed[0] - hot_at >= ABNORMALITIES * INTERVAL
    assert filed[-1] - filed[0] < INTERVAL  # one round filed both
    reasons = sorted(j["metadata"]["annotations"]["koordinator.sh/evict-reason"] for j in jobs)
    assert reasons == [
        "node is overutilized, cpu usage(81.88%)>threshold(75.00%)",
        "node is overutilized, cpu usage(93.12%)>threshold(75.00%)",
    ]
    moved = {j["spec"]["podRef"]["name"] for j in jobs}
    assert len(moved) == 2 and moved <= set(scene.initial)
    assert {j["metadata"]["annotations"]["koordpy.io/source-node"] for j in jobs} == {scene.nodes["n0"]}

    # arbitration: one migration off n0 at a time (maxMigratingPerNode 1); the other waited, and said so
    waits = {name: [e["reason"] for e in kube.events("default", involved=name)] for name in ours}
    assert sorted("MaxMigratingPerNode" in reasons for reasons in waits.values()) == [False, True], waits

    # the replacements: placed by the koordpy profile, through their Reservations, on the idle node
    pods = space.pods()
    replacements = sorted(set(placement) - set(scene.initial))
    assert len(replacements) == 2 and moved.isdisjoint(placement)
    bound_by = {
        e["objectRef"]["name"]: e["user"]["username"]
        for e in control_plane.audit_events()
        if (e.get("objectRef") or {}).get("subresource") == "binding"
        and e["verb"] == "create"
        and (e.get("objectRef") or {}).get("namespace") == space.namespace
    }
    for name in replacements:
        assert pods[name]["spec"]["schedulerName"] == PROFILE
        assert placement[name] == "n1", placement
        assert bound_by[name] == SCHEDULER_SA
        assert ALLOCATED in pods[name]["metadata"].get("annotations", {}), name

    # under its high threshold, as the manager judges it: 500m + 6 x 1800m = 11300m = 70.6 % <= 75 %
    n0_usage = SYSTEM["n0"] + HOT * sum(1 for where in placement.values() if where == "n0")
    assert n0_usage == 11300
    text = after_rounds(koordpy, ABNORMALITIES + 2, "after the NodeMetrics show the moves")
    assert hot_nodes(text) == 0

    # no pod moved twice: two jobs, one eviction each, none for a replacement, no repeat counted
    assert len(plugin_jobs(kube, space)) == 2
    evictions = [
        (e["objectRef"]["name"], e["responseStatus"]["code"])
        for e in audited(control_plane, MANAGER_SA, "pods", "create", "eviction")
        if e["objectRef"].get("namespace") == space.namespace
    ]
    assert sorted(evictions) == sorted((name, 201) for name in moved), evictions
    assert sample(text, 'koordpy_descheduler_repeat_moves_total{cause="moved_again"}') == 0
    assert sample(text, 'koordpy_descheduler_moves_total{kind="node",outcome="filed",reason="cpu"}') == 2
    assert {e["pod"].split("/")[1] for e in log_events(manager, "balance.job_filed")} == moved
    assert "Traceback" not in manager.log.read_text(errors="replace")
    manager.stop()
