"""The operator's view on a real Prometheus: every alert of the chart fires on its fault and resolves after
the repair, and every query of the chart's dashboard has data.

A real Prometheus (``tools/build-prometheus.sh``) runs on loopback beside the real control plane. Its
configuration is the chart's own, as the Prometheus Operator would make it (``koordpy_testkit.
prometheus_operator``): the ServiceMonitors and the PrometheusRule rendered by the real helm with this
module's values, the targets discovered from the Services and Pods of the installed release, each pod's
address replaced by the host process that plays it (kwok runs no containers): the extender's ops port and
kube-scheduler's secure port for the scheduler pod (HTTPS, its certificate verified against the CA in the
chart's TLS Secret, the chart's metrics-reader token authorized by the real API server), the manager for
the manager pod, an agent for each node's agent pod. Time is shortened only through the chart's values
(``DRILL_VALUES``: every alert's ``for`` and windows, the pending bound, a one-second scrape interval) and
Prometheus' own evaluation interval (``EVALUATION``).

The drills run in two phases; the faults of one phase run at once, as they do not touch each other:

- phase 1: the extender restarted on its fallback path (a uvicorn whose private name the fast path uses is
  renamed), its pods/binding calls answered 500 by a fault proxy, a gang one member short past the pending
  bound, an agent killed (its node's NodeMetric goes stale), an agent whose throttled pod's ``cpu.max``
  can no longer be read or written as its node cools (the throttle never restores), a PodMigrationJob whose
  status writes are answered 500 (the migration stalls), a pod bound to a node that turns hot at once (its
  agent evicts the pod it placed there moments before: a repeat move). Each is repaired as soon as its alert fires; the
  extender goes back to its fast path once the others have resolved (its restart would clear their faults).
- phase 2: the extender's token revoked, with pods to bind (its credentials refused, then its filter
  answers "not ready"), and the manager stopped.

For each alert, through Prometheus' HTTP API: quiet before any fault; after its fault, pending and then
firing, the two ``ALERTS`` samples at most its ``for`` plus two evaluation intervals apart (and at least
its ``for``); after the repair, no longer active, with the component healthy again. An alert the chart
gains fails ``test_every_alert_of_the_chart_has_a_drill`` until its drill is written here (``drills`` in
the ``drilled`` fixture).

The same Prometheus then answers every panel query of the dashboard over the module's run (the workload
of the drills: binds, a gang, a migration, a throttle), each with Grafana's substitutions
(``koordpy_testkit.grafana``); the panels that cannot have data in this tier are ``NO_DATA_HERE``, and the
test fails when one of them does have data.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from cluster_kit import (
    CHART,
    HELM,
    RELEASE_NAMESPACE,
    SYSTEM_NODE,
    Components,
    Kube,
    Release,
    Space,
    fake_node_files,
    poll,
    wait_until,
)
from tokens import RotatingToken, refused

from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.cgroupfs import BusyProc, FakeCgroupTree
from koordpy_testkit.controlplane import ControlPlane
from koordpy_testkit.controlplane.pki import serving_certificate
from koordpy_testkit.faultproxy import Rule, server_error
from koordpy_testkit.grafana import (
    interval_seconds,
    panel_queries,
    resolve_variables,
    substitute,
    time_range_seconds,
)
from koordpy_testkit.processes import LOOPBACK, Proc
from koordpy_testkit.projected import ProjectedVolume
from koordpy_testkit.prometheus import PrometheusServer
from koordpy_testkit.prometheus_operator import endpoint_targets, rule_file, scrape_configs, targets_file_name
from koordpy_testkit.uvicorn_release import uvicorn_release

pytestmark = pytest.mark.cluster

EVALUATION = 2.0
"""Prometheus' rule evaluation interval here, in seconds (its configuration, not the chart's)."""
SCRAPE = 1.0
"""serviceMonitor.interval here, in seconds."""
FOR = 6.0
"""Every alert's ``for`` here, in seconds."""
SERVING_SECRET = "koordpy-scheduler-serving"
DRILL_VALUES: dict[str, Any] = {
    "serviceMonitor": {"interval": f"{SCRAPE:.0f}s", "kubeScheduler": {"enabled": True}},
    "scheduler": {"kubeScheduler": {"tls": {"secretName": SERVING_SECRET}}},
    "prometheusRule": {
        "pendingSeconds": 3,
        "repeatMovesPerHour": 0,
        "alerts": {
            "KoordpyExtenderFilterErrors": {"for": f"{FOR:.0f}s", "window": "15s"},
            "KoordpyExtenderBindErrors": {"for": f"{FOR:.0f}s", "window": "15s"},
            "KoordpyPodsPendingTooLong": {"for": f"{FOR:.0f}s"},
            "KoordpyExtenderFastPathOff": {"for": f"{FOR:.0f}s"},
            "KoordpyNodeMetricsExpired": {"for": f"{FOR:.0f}s"},
            "KoordpyAgentFailingOpen": {"for": f"{FOR:.0f}s", "window": "10s", "stallWindow": "10s"},
            "KoordpyMigrationsFailing": {"for": f"{FOR:.0f}s", "window": "20s"},
            "KoordpyManagerDown": {"for": f"{FOR:.0f}s"},
            "KoordpyCredentialsRefused": {"for": f"{FOR:.0f}s"},
            "KoordpyRepeatMoves": {"for": f"{FOR:.0f}s", "window": "20s"},
        },
    },
}
EXTENDER = {
    # a killed agent's NodeMetric expires within seconds; the others report every second
    "loadAware": {"nodeMetricExpirationSeconds": 5},
    "credentials": {"refusedNotReadySeconds": 1},
}
MANAGER = {
    "migrationController": {"defaultJobMode": "EvictDirectly", "arbitrationArgs": {"interval": "200ms"}},
    "nodeMetric": {"reportIntervalSeconds": 1, "aggregateDurationSeconds": 1},
}
AGENT = {"collectIntervalSeconds": 0.5}


def waterline(name: str, node: str, action: dict[str, Any]) -> list[dict[str, Any]]:
    """A NodeQOSEnsurancePolicy for ``node`` (over 4 cores used, twice running) and its AvoidanceAction."""
    return [
        {
            "apiVersion": "ensurance.crane.io/v1alpha1",
            "kind": "NodeQOSEnsurancePolicy",
            "metadata": {"name": name},
            "spec": {
                "selector": {"matchLabels": {"kubernetes.io/hostname": node}},
                "objectiveEnsurances": [
                    {
                        "name": "cpu",
                        "avoidanceThreshold": 2,
                        "restoreThreshold": 2,
                        "actionName": name,
                        "metricRule": {"name": "cpu_total_usage", "value": 4000},
                    }
                ],
            },
        },
        {
            "apiVersion": "ensurance.crane.io/v1alpha1",
            "kind": "AvoidanceAction",
            "metadata": {"name": name},
            "spec": {"coolDownSeconds": 1, **action},
        },
    ]


THROTTLE = {"throttle": {"cpuThrottle": {"minCPURatio": 0, "stepCPURatio": 50}}}
EVICT = {"eviction": {"terminationGracePeriodSeconds": 0}}
POD_GROUP_LABEL = "pod-group.scheduling.sigs.k8s.io"
UNRESTRICTED = "max 100000"


def seconds(duration: str) -> float:
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    for unit in ("ms", "s", "m", "h"):
        if duration.endswith(unit):
            return float(duration[: -len(unit)]) * units[unit]
    raise ValueError(duration)


# ---- the chart, rendered as the Prometheus Operator would read it ------------------------------------


def render(values: Path) -> list[dict[str, Any]]:
    rendered = subprocess.run(
        [
            str(HELM),
            "template",
            "koordpy",
            str(CHART),
            "-n",
            RELEASE_NAMESPACE,
            "--api-versions",
            "monitoring.coreos.com/v1",
            "-f",
            str(values),
        ],
        capture_output=True,
        text=True,
        timeout=HANG_BACKSTOP,
        check=True,
    ).stdout
    return [o for o in yaml.safe_load_all(rendered) if o]


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def kubectl(plane: ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(HELM.parent / "kubectl"), "--kubeconfig", str(plane.admin_kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=HANG_BACKSTOP,
        check=False,
    )


# ---- the targets: the release's pods, each played by a host process -----------------------------------


@dataclass
class Targets:
    """The file_sd file of the release namespace, written from the real Services and Pods and the stand-ins."""

    kube: Kube
    directory: Path
    stand_ins: dict[tuple[str, int], str] = field(default_factory=dict)

    def write(self) -> None:
        services = self.kube.list("Service", RELEASE_NAMESPACE)
        pods = [p for p in self.kube.list("Pod", RELEASE_NAMESPACE) if not p["metadata"].get("deletionTimestamp")]
        groups = endpoint_targets(services, pods, self.stand_ins)
        path = self.directory / targets_file_name(RELEASE_NAMESPACE)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(groups, indent=1))
        os.replace(tmp, path)

    def play(self, pod: str, port: int, address: str) -> None:
        self.stand_ins[(pod, port)] = address.removeprefix("http://").removeprefix("https://")
        self.write()


def chart_pod(kube: Kube, component: str, node: str | None = None) -> str:
    """The name of the release's pod of ``component`` (made by its Deployment or DaemonSet), on ``node``."""

    def find() -> str | None:
        selector = {"labelSelector": f"app.kubernetes.io/component={component}"}
        if node:
            selector["fieldSelector"] = f"spec.nodeName={node}"
        for pod in kube.list("Pod", RELEASE_NAMESPACE, **selector):
            meta = pod["metadata"]
            if meta.get("ownerReferences") and not meta.get("deletionTimestamp") and pod["status"].get("podIP"):
                return str(meta["name"])
        return None

    found: str = wait_until(f"the release's {component} pod{' on ' + node if node else ''}", find)
    return found


# ---- the hot node: an agent whose throttled pod's cgroup can break --------------------------------------


class HotNode:
    """A node's fabricated tree for its agent: its /proc at ``busy`` of 16 cpu, a BestEffort pod (from
    :meth:`place` on) using ``pod_cores``, its ``cpu.max`` breakable (a dangling link: every read and write
    fails). Cool until :meth:`heat`."""

    def __init__(self, root: Path) -> None:
        self.uid = ""
        self.busy = BusyProc(root / "proc", cpus=16, mem_total_kib=64 << 20, mem_avail_kib=48 << 20)
        self.tree = FakeCgroupTree(root / "cgroup", version=2, driver="systemd")
        self.rel = ""
        self.state = root / "agent-state"
        self.pod_cores = 0.0
        self.busy.busy_fraction = 0.05
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._burn, daemon=True)

    def place(self, uid: str) -> None:
        """The pod ``uid`` in the tree (the kubelet's cgroup for it)."""
        self.uid = uid
        self.rel = self.tree.add_pod(uid, qos="besteffort", containers=["c" * 64])

    def _burn(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(0.1):
            now = time.monotonic()
            self.busy.tick()
            if self.rel:
                self.tree.advance_cpu(self.rel, self.pod_cores * (now - last))
            last = now

    def heat(self) -> None:
        self.busy.busy_fraction, self.pod_cores = 0.5, 3.0

    def cool(self) -> None:
        self.busy.busy_fraction, self.pod_cores = 0.05, 0.2

    @property
    def cpu_max(self) -> Path:
        return self.tree.root / self.rel / "cpu.max"

    def quota(self) -> str:
        return self.tree.quota(self.rel) if not self.cpu_max.is_symlink() else "<broken>"

    def break_cpu_max(self) -> None:
        self.cpu_max.unlink()
        self.cpu_max.symlink_to(self.tree.root / "gone" / "cpu.max")

    def mend_cpu_max(self) -> None:
        """The file back, holding the cap the agent wrote last (its state file says which), as the kernel
        would still hold it."""
        original = json.loads((self.state / "throttle-originals.json").read_text())[self.uid]
        self.cpu_max.unlink()
        self.cpu_max.write_text(f"{original['written']} {original['period']}\n")

    def __enter__(self) -> HotNode:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


# ---- the drills -----------------------------------------------------------------------------------------


@dataclass
class Drill:
    alert: str
    phase: int
    fault: str
    """What is done, in words (printed)."""
    inject: Callable[[], object]
    repair: Callable[[], object]
    healthy: Callable[[], object]
    """Truthy once the component works again after the repair."""
    repair_after: tuple[str, ...] = ()
    """Alerts that must have resolved before this drill's repair (it would clear their faults)."""
    awaits: tuple[str, ...] = ()
    """Alerts of the same fault that must have fired before the repair."""
    repaired_by: str = ""
    """The drill whose fault and repair are this alert's too (this one injects and repairs nothing)."""


@dataclass
class Seen:
    fault_at: float = 0.0
    repaired_at: float = 0.0
    resolved_at: float = 0.0
    pending: list[float] = field(default_factory=list)
    """The ALERTS{alertstate="pending"} sample times after the fault (Prometheus' evaluation times)."""
    firing: list[float] = field(default_factory=list)
    healthy: Any = None
    error: str = ""

    def went_pending(self) -> float | None:
        """The first evaluation of the pending run that turned into firing (a run that lapsed before does
        not count): consecutive pending samples at most 1.5 evaluation intervals apart."""
        if not self.firing:
            return None
        before = [t for t in self.pending if t < self.firing[0]]
        if not before:
            return None
        start = before[-1]
        for earlier in reversed(before[:-1]):
            if start - earlier > 1.5 * EVALUATION:
                break
            start = earlier
        return start


@dataclass
class Run:
    prometheus: PrometheusServer
    rules: list[dict[str, Any]]
    dashboard: dict[str, Any]
    started: float
    baseline: list[dict[str, Any]]
    """Alerts active before the first fault."""
    seen: dict[str, Seen]
    drills: dict[str, Drill]
    stand_ins: dict[tuple[str, int], str]
    ended: float = 0.0


def alert_samples(prometheus: PrometheusServer, alert: str, since: float) -> tuple[list[float], list[float]]:
    """The times of ``alert``'s ``ALERTS`` samples since ``since``: (pending, firing), each sorted."""
    window = max(1, int(time.time() - since) + 2)
    found: dict[str, list[float]] = {"pending": [], "firing": []}
    for series in prometheus.query(f'ALERTS{{alertname="{alert}"}}[{window}s]'):
        state = series["metric"]["alertstate"]
        found[state] += [float(t) for t, _ in series["values"] if float(t) >= since]
    return sorted(found["pending"]), sorted(found["firing"])


def run_phase(prometheus: PrometheusServer, drills: list[Drill], seen: dict[str, Seen]) -> None:
    """Inject every fault of the phase, repair each one once its alert (and those it ``awaits``) fired and
    those of ``repair_after`` resolved, wait until every alert has resolved (or the hang backstop passed:
    the drills not done say so), then judge whether each component is healthy."""
    for drill in drills:
        seen[drill.alert].fault_at = time.time()  # the fault starts with its injection (a restart: at its stop)
        drill.inject()
        print(f"[{time.strftime('%H:%M:%S')}] fault: {drill.alert}: {drill.fault}")
    waiting = {d.alert: d for d in drills}
    resolving: set[str] = set()
    fired: set[str] = set()
    deadline = time.monotonic() + HANG_BACKSTOP
    while (waiting or resolving) and time.monotonic() < deadline:
        active = {(a["labels"]["alertname"], a["state"]) for a in prometheus.alerts()}
        fired |= {name for name, state in active if state == "firing" and name in seen}
        for alert, drill in list(waiting.items()):
            if alert not in fired:
                continue
            if drill.repaired_by:
                if seen[drill.repaired_by].repaired_at:
                    seen[alert].repaired_at = seen[drill.repaired_by].repaired_at
                    resolving.add(waiting.pop(alert).alert)
                continue
            blocked = [a for a in drill.repair_after if a in waiting or a in resolving]
            if blocked or not set(drill.awaits) <= fired:
                continue
            drill.repair()
            seen[alert].repaired_at = time.time()
            print(f"[{time.strftime('%H:%M:%S')}] firing, repaired: {alert}")
            resolving.add(waiting.pop(alert).alert)
        for alert in list(resolving):
            if not any(name == alert for name, _ in active):
                seen[alert].resolved_at = time.time()
                print(f"[{time.strftime('%H:%M:%S')}] resolved: {alert}")
                resolving.discard(alert)
        time.sleep(0.5)
    for alert in [*waiting, *resolving]:
        seen[alert].error = f"{'never fired' if alert in waiting else 'never resolved'} within {HANG_BACKSTOP} s"
    for drill in drills:
        record = seen[drill.alert]
        record.pending, record.firing = alert_samples(prometheus, drill.alert, record.fault_at)
        if not record.error:
            record.healthy = poll(f"{drill.alert}: healthy after the repair", drill.healthy)


def metric_value(prometheus: PrometheusServer, expr: str) -> list[float]:
    return [float(r["value"][1]) for r in prometheus.query(expr)]


@pytest.fixture(scope="module")
def drilled(
    control_plane: ControlPlane,
    release: Release,
    kube: Kube,
    module_space: Space,
    module_koordpy: Components,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Run]:
    """Everything set up, a quiet baseline, the two phases of drills; then the run for the tests to judge."""
    koordpy, space, plane = module_koordpy, module_space, control_plane
    work_dir = tmp_path_factory.mktemp("alert-drills")
    started = time.time()
    values = work_dir / "values.yaml"
    values.write_text(yaml.safe_dump(DRILL_VALUES))
    objects = render(values)
    monitors = of_kind(objects, "ServiceMonitor")
    (rules,) = of_kind(objects, "PrometheusRule")
    (board,) = [o for o in of_kind(objects, "ConfigMap") if o["metadata"]["name"].endswith("-dashboard")]
    readers = [o for o in objects if o["metadata"]["name"] == f"{release.name}-metrics-reader"]

    with contextlib.ExitStack() as stack:
        # kube-scheduler's serving certificate in the Secret the chart's values name (as cert-manager writes
        # it), and the identity Prometheus presents to it: the chart's metrics-reader objects
        assert plane.pki is not None
        (monitor,) = [m for m in monitors if m["metadata"]["name"].endswith("-scheduler")]
        server_name = next(e for e in monitor["spec"]["endpoints"] if e.get("scheme") == "https")["tlsConfig"]
        cert, key = serving_certificate(plane.pki, work_dir / "serving", "kube-scheduler", [server_name["serverName"]])
        kube.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": SERVING_SECRET, "namespace": RELEASE_NAMESPACE},
                "type": "kubernetes.io/tls",
                "data": {
                    name: base64.b64encode(path.read_bytes()).decode()
                    for name, path in (("tls.crt", cert), ("tls.key", key), ("ca.crt", plane.pki.ca_cert))
                },
            }
        )
        stack.callback(kube.delete, "Secret", SERVING_SECRET, RELEASE_NAMESPACE)
        manifest = work_dir / "metrics-reader.yaml"
        manifest.write_text(yaml.safe_dump_all(readers))
        applied = kubectl(plane, "apply", "--server-side", "-f", str(manifest))
        assert applied.returncode == 0, applied.stderr
        stack.callback(kubectl, plane, "delete", "--ignore-not-found", "-f", str(manifest))
        # the nodes: a node for the workload, one whose agent the drill kills, one whose agent evicts a pod
        # placed there moments before, and the system node (the chart's pods) whose agent throttles a pod
        work, stale = space.node("work", cpu="16", memory="64Gi"), space.node("stale", cpu="16", memory="64Gi")
        moved = space.node("moved", cpu="16", memory="64Gi")
        space.wait_nodes_ready()
        policies = [
            *waterline("alert-drills-throttle", SYSTEM_NODE, THROTTLE),
            *waterline("alert-drills-evict", moved, EVICT),
        ]
        for obj in policies:
            plural = "nodeqosensurancepolicies" if obj["kind"] == "NodeQOSEnsurancePolicy" else "avoidanceactions"
            resp = kube.client.post(f"/apis/ensurance.crane.io/v1alpha1/{plural}", json=obj)
            assert resp.status_code == 201, resp.text
            stack.callback(kube.client.delete, f"/apis/ensurance.crane.io/v1alpha1/{plural}/{obj['metadata']['name']}")

        def key_file(kind: str, namespace: str, name: str, key: str) -> str:
            """A Secret's key in a file, as the operator mounts it for Prometheus (a token: once filled in)."""
            assert kind == "Secret", kind

            def data() -> str | None:
                found = (kube.get("Secret", name, namespace) or {}).get("data") or {}
                return found.get(key)

            path = work_dir / "keys" / f"{namespace}-{name}-{key}"
            path.parent.mkdir(exist_ok=True)
            path.write_bytes(base64.b64decode(wait_until(f"Secret {namespace}/{name} has {key}", data)))
            return str(path)

        targets = Targets(kube, work_dir / "targets")
        targets.directory.mkdir()
        targets.write()
        prometheus = PrometheusServer(
            work_dir / "prometheus",
            scrape_configs(monitors, key_file, str(targets.directory)),
            [rule_file(rules)],
            scrape_interval=f"{SCRAPE:.0f}s",
            evaluation_interval=f"{EVALUATION:.0f}s",
        ).start()
        stack.callback(prometheus.stop)

        besteffort = space.create_pod(
            "besteffort",
            cpu="0",
            memory="0",
            scheduler="default-scheduler",
            node_selector={},
            extra_spec={"nodeName": SYSTEM_NODE},
        )
        hot = stack.enter_context(HotNode(work_dir / "hot"))
        hot.place(besteffort["metadata"]["uid"])
        hot.heat()
        evicting = stack.enter_context(HotNode(work_dir / "evicting"))

        # the manager through a fault proxy, the agents, the extender (through a fault proxy, on a token
        # file) and kube-scheduler with the serving certificate, /metrics authorized through the API server
        manager_api = koordpy.api_proxy()
        manager = koordpy.start_manager(MANAGER, api=manager_api)
        targets.play(chart_pod(kube, "manager"), 8080, koordpy.manager_base)
        agents: dict[str, tuple[Proc, str]] = {}
        agents[SYSTEM_NODE] = koordpy.start_ready_agent(SYSTEM_NODE, hot.tree.root, hot.busy.root, hot.state, AGENT)
        for node in (work, stale):
            cgroup_root, proc_root = stack.enter_context(fake_node_files(work_dir / node))
            agents[node] = koordpy.start_ready_agent(node, cgroup_root, proc_root, work_dir / f"state-{node}", AGENT)
        agents[moved] = koordpy.start_ready_agent(moved, evicting.tree.root, evicting.busy.root, evicting.state, AGENT)
        for node, (_, readyz) in agents.items():
            targets.play(chart_pod(kube, "agent", node), 9316, readyz.removesuffix("/readyz"))
        extender_api = koordpy.api_proxy()
        token = RotatingToken(
            plane, kube, release.service_account("scheduler"), ProjectedVolume(work_dir / "extender-token")
        )
        token.write_fresh()
        extender = koordpy.start_extender(
            EXTENDER, api=extender_api, kubeconfig=koordpy.token_file_kubeconfig("extender", token.path, extender_api)
        )
        scheduler = koordpy.start_scheduler(
            always_allow_paths=("/healthz", "/readyz", "/livez"), serving_cert=(cert, key)
        )
        scheduler_pod = chart_pod(kube, "scheduler")
        targets.play(scheduler_pod, 10263, koordpy.extender_ops)
        targets.play(scheduler_pod, 10259, f"{LOOPBACK}:{plane.secure_ports[scheduler.name]}")
        extender_ready = koordpy.extender_ops + "/readyz"

        # the workload: a Deployment on the work node (the migration's), the hot node throttling
        labels = {"app": "web"}
        template = space.pod("web", scheduler="default-scheduler", node_selector={"kubernetes.io/hostname": work})
        kube.create(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web", "namespace": space.namespace},
                "spec": {
                    "replicas": 2,
                    "selector": {"matchLabels": labels},
                    "template": {"metadata": {"labels": labels}, "spec": template["spec"]},
                },
            }
        )

        def running_web() -> list[str]:
            pods = [p for p in space.pods().values() if labels.items() <= p["metadata"].get("labels", {}).items()]
            return sorted(
                p["metadata"]["name"]
                for p in pods
                if p.get("status", {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
            )

        victim = wait_until("web's two pods Running", lambda: running_web() if len(running_web()) == 2 else None)[0]
        wait_until("the agent throttles the hot node's pod", lambda: hot.quota() != UNRESTRICTED)
        space.create_pod("warm-up", cpu="100m", memory="128Mi")
        wait_until("a pod bound through the profile", lambda: "warm-up" in space.bound())

        def every_target_up() -> bool:
            # Discovery follows the API as Prometheus' does: the release's pods on the nodes other test files
            # deleted leave the file once the pod garbage collector deletes them (about 40 s after their node).
            targets.write()
            found = prometheus.targets()
            return len(found) == len(targets.stand_ins) and all(t["health"] == "up" for t in found)

        wait_until("every target scraped", every_target_up, interval=1.0)
        wait_until(
            "every rule evaluated",
            lambda: all(r.get("lastEvaluation", "0001").startswith("2") for r in prometheus.rules()),
        )
        time.sleep(2 * EVALUATION)  # every rule evaluated on scraped data
        baseline = prometheus.alerts()

        # -- the drills ------------------------------------------------------------------------------------
        fallback = uvicorn_release(work_dir / "uvicorn-release", "pipeline", "queued_cycles")
        bind_rule: list[Rule] = []
        status_rule: list[Rule] = []
        job = f"{space.namespace}-move"

        def bound(*names: str) -> bool:
            return set(names) <= set(space.bound())

        def to_fallback() -> None:
            extender.stop()
            koordpy.restart(extender, extender_ready, env={"PYTHONPATH": str(fallback)})

        def to_fast_path() -> None:
            extender.stop()
            koordpy.restart(extender, extender_ready, env={})

        def fail_binds() -> None:
            bind_rule.append(
                extender_api.inject(
                    server_error(), verbs=["create"], resource="pods", subresource="binding", count=None
                )
            )
            for index in range(2):
                space.create_pod(f"bind-{index}")

        def short_gang() -> None:
            kube.create(
                {
                    "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
                    "kind": "PodGroup",
                    "metadata": {"name": "pair", "namespace": space.namespace},
                    "spec": {"minMember": 2},
                }
            )
            space.create_pod("pair-a", labels={POD_GROUP_LABEL: "pair"})

        def stall_migration() -> None:
            status_rule.append(
                manager_api.inject(server_error(), verbs=["patch"], resource="podmigrationjobs", count=None)
            )
            kube.create(
                {
                    "apiVersion": "scheduling.koordinator.sh/v1alpha1",
                    "kind": "PodMigrationJob",
                    "metadata": {"name": job},
                    "spec": {
                        "mode": "EvictDirectly",
                        "ttl": "5m",
                        "podRef": {"namespace": space.namespace, "name": victim},
                    },
                }
            )
            stack.callback(kube.delete, "PodMigrationJob", job)

        def migrated() -> bool:
            return (kube.get("PodMigrationJob", job) or {}).get("status", {}).get("phase") == "Succeeded"

        def break_throttle() -> None:
            hot.break_cpu_max()
            hot.cool()

        def place_on_hot_node() -> None:
            """A BestEffort pod bound to the evicting node, which turns hot: the agent evicts the pod it
            placed moments before (a repeat move, cause agent_eviction)."""
            pod = space.create_pod(
                "placed",
                cpu="0",
                memory="0",
                scheduler="default-scheduler",
                node_selector={},
                extra_spec={"nodeName": moved},
            )
            evicting.place(pod["metadata"]["uid"])
            evicting.heat()

        def evicted() -> bool:
            return "placed" not in space.pods() and metric_value(
                prometheus, f'koordpy_agent_evictions_total{{node="{moved}",outcome="evicted"}}'
            ) == [1.0]

        def revoke() -> None:
            # the API server caches a token's authentication for a few seconds: the pods come once it
            # refuses the revoked one, so that their binds meet the refusal
            for name, revoked in token.revoke(keep_newest=False):
                wait_until(f"token bound to {name} refused", lambda t=revoked: refused(plane, t))
            for index in range(2):
                space.create_pod(f"refused-{index}")

        stale_agent, stale_ready = agents[stale]
        drills = [
            Drill(
                "KoordpyExtenderFastPathOff",
                1,
                "the extender restarted with a uvicorn that renamed a name its fast path uses",
                to_fallback,
                to_fast_path,
                lambda: metric_value(prometheus, "koordpy_extender_fast_path") == [1.0],
                repair_after=(
                    "KoordpyExtenderBindErrors",
                    "KoordpyPodsPendingTooLong",
                    "KoordpyNodeMetricsExpired",
                    "KoordpyAgentFailingOpen",
                    "KoordpyMigrationsFailing",
                ),
            ),
            Drill(
                "KoordpyExtenderBindErrors",
                1,
                "the extender's pods/binding calls answered 500, two pods to bind",
                fail_binds,
                lambda: extender_api.remove(bind_rule[0]),
                lambda: bound("bind-0", "bind-1"),
            ),
            Drill(
                "KoordpyPodsPendingTooLong",
                1,
                "a gang of minMember 2 with one member, refused every node",
                short_gang,
                lambda: space.create_pod("pair-b", labels={POD_GROUP_LABEL: "pair"}),
                lambda: metric_value(prometheus, 'koordpy_extender_pending_oldest_seconds{reason="gang"}') == [0.0],
            ),
            Drill(
                "KoordpyNodeMetricsExpired",
                1,
                f"the agent of {stale} killed",
                stale_agent.kill,
                lambda: koordpy.restart(stale_agent, stale_ready),
                lambda: metric_value(prometheus, "koordpy_extender_nodemetrics_expired") == [0.0],
            ),
            Drill(
                "KoordpyAgentFailingOpen",
                1,
                f"{SYSTEM_NODE} cools while its throttled pod's cpu.max can be neither read nor written",
                break_throttle,
                hot.mend_cpu_max,
                lambda: hot.quota() == UNRESTRICTED,
            ),
            Drill(
                "KoordpyMigrationsFailing",
                1,
                "a PodMigrationJob whose status writes the API answers 500",
                stall_migration,
                lambda: manager_api.remove(status_rule[0]),
                migrated,
            ),
            Drill(
                "KoordpyRepeatMoves",
                1,
                f"a pod bound to {moved}, which turns hot: its agent evicts the pod placed there moments before",
                place_on_hot_node,
                evicting.cool,
                evicted,
            ),
            Drill(
                "KoordpyCredentialsRefused",
                2,
                "the extender's token revoked, nothing newer in its token file, two pods to bind",
                revoke,
                token.write_fresh,
                lambda: (
                    metric_value(prometheus, 'koordpy_kube_credentials_refused{job="scheduler"}') == [0.0]
                    and bound("refused-0", "refused-1")
                ),
                awaits=("KoordpyExtenderFilterErrors",),
            ),
            Drill(
                "KoordpyExtenderFilterErrors",
                2,
                "the extender not ready: its credentials refused (the fault above, repaired with it)",
                lambda: None,
                lambda: None,
                lambda: bound("refused-0", "refused-1"),
                repaired_by="KoordpyCredentialsRefused",
            ),
            Drill(
                "KoordpyManagerDown",
                2,
                "the manager stopped",
                manager.stop,
                lambda: koordpy.restart(manager, koordpy.manager_base + "/healthz"),
                lambda: metric_value(prometheus, 'up{job="manager"}') == [1.0],
            ),
        ]
        run = Run(
            prometheus,
            [r for g in rules["spec"]["groups"] for r in g["rules"]],
            json.loads(board["data"]["koordpy.json"]),
            started,
            baseline,
            {d.alert: Seen() for d in drills},
            {d.alert: d for d in drills},
            dict(targets.stand_ins),
        )
        for phase in (1, 2):
            run_phase(prometheus, [d for d in drills if d.phase == phase], run.seen)
        wait_until("the gang bound", lambda: bound("pair-a", "pair-b"))
        run.ended = time.time()
        print(f"\ndrills: {run.ended - started:.0f} s from the module's start (set-up included)")
        yield run


# ---- the alerts ----------------------------------------------------------------------------------------


def test_every_alert_of_the_chart_has_a_drill(drilled: Run) -> None:
    assert sorted(r["alert"] for r in drilled.rules) == sorted(drilled.drills)


def test_every_component_is_a_target_with_the_servicemonitors_labels(drilled: Run) -> None:
    """Each stand-in is a target of its ServiceMonitor's job, labelled as the chart's alerts and dashboard
    expect; kube-scheduler over HTTPS (its certificate verified, the metrics-reader token authorized)."""
    found = {(t["labels"]["job"], t["labels"]["endpoint"], t["labels"]["pod"]): t for t in drilled.prometheus.targets()}
    assert len(found) == len(drilled.stand_ins)
    jobs = sorted({(job, endpoint) for job, endpoint, _ in found})
    assert jobs == [
        ("agent", "http-metrics"),
        ("manager", "http-metrics"),
        ("scheduler", "http-metrics"),
        ("scheduler", "https-metrics"),
    ]
    for (job, endpoint, pod), target in found.items():
        labels = target["labels"]
        assert labels["namespace"] == RELEASE_NAMESPACE and labels["service"] == f"koordpy-{job}", labels
        assert pod.startswith(f"koordpy-{job}-") and labels["node"] and labels["container"], labels
        assert target["scrapeUrl"].startswith("https://" if endpoint == "https-metrics" else "http://")
        assert target["health"] == "up", target
    secure = next(t for (_, endpoint, _), t in found.items() if endpoint == "https-metrics")
    assert secure["scrapePool"] == "serviceMonitor/koordpy-system/koordpy-scheduler/1"
    assert drilled.prometheus.query('scheduler_schedule_attempts_total{job="scheduler"}'), "kube-scheduler's own series"


def test_no_alert_is_active_before_the_faults(drilled: Run) -> None:
    assert [(a["labels"]["alertname"], a["state"], a["labels"]) for a in drilled.baseline] == []


@pytest.mark.parametrize(
    "alert",
    [
        "KoordpyExtenderFilterErrors",
        "KoordpyExtenderBindErrors",
        "KoordpyPodsPendingTooLong",
        "KoordpyExtenderFastPathOff",
        "KoordpyNodeMetricsExpired",
        "KoordpyAgentFailingOpen",
        "KoordpyMigrationsFailing",
        "KoordpyManagerDown",
        "KoordpyCredentialsRefused",
        "KoordpyRepeatMoves",
    ],
)
def test_the_alert_fires_on_its_fault_and_resolves_after_the_repair(drilled: Run, alert: str) -> None:
    seen, drill = drilled.seen[alert], drilled.drills[alert]
    (rule,) = [r for r in drilled.rules if r["alert"] == alert]
    hold = seconds(rule["for"])
    pending, firing = seen.went_pending(), (seen.firing or [None])[0]
    if pending is not None and firing is not None:
        print(
            f"{alert}: {drill.fault}: pending {pending - seen.fault_at:.1f} s after the fault, firing "
            f"{firing - pending:.1f} s after pending (for {hold:.0f} s), resolved "
            f"{seen.resolved_at - seen.repaired_at:.1f} s after the repair"
        )
    assert not seen.error, seen.error
    assert pending is not None and firing is not None, (seen.pending, seen.firing)
    assert hold <= firing - pending <= hold + 2 * EVALUATION, (pending, firing, seen.pending)
    assert firing <= seen.repaired_at <= seen.resolved_at
    assert seen.healthy, f"{alert}: the component is not healthy after the repair"


# ---- the dashboard -------------------------------------------------------------------------------------

PANEL_POINTS = 1000
"""Data points per panel (Grafana: the panel's width in pixels), for ``$__interval``."""
NO_DATA_HERE: dict[tuple[str, str], str] = {}
"""(panel title, query refId) -> why that query cannot have data in this tier. The test fails when one of
them has data (the entry is stale) as when any other query has none."""


def test_every_dashboard_query_returns_series(drilled: Run) -> None:
    """Each panel's each query as Grafana sends it when the dashboard opens on its default time range (the
    namespace from ``label_values``; ``$__interval`` and ``$__rate_interval`` for that range, 1,000 points and
    the one-second scrape interval) answers at least one series: the drills' workload (binds, a gang, a
    migration, a throttle) and their faults are in the range."""
    prometheus = drilled.prometheus
    variables = resolve_variables(drilled.dashboard, prometheus.label_values)
    assert variables == {"namespace": RELEASE_NAMESPACE}
    span = time_range_seconds(drilled.dashboard)
    end = time.time()
    interval = interval_seconds(span, PANEL_POINTS, SCRAPE)
    queries = panel_queries(drilled.dashboard)
    assert len(queries) >= 30 and len({q.panel for q in queries}) >= 20
    empty: dict[tuple[str, str], str] = {}
    answered: dict[tuple[str, str], int] = {}
    for query in queries:
        expr = substitute(query.expr, variables, interval=interval, scrape_interval=SCRAPE, range_seconds=span)
        series = prometheus.query_range(expr, end - span, end, interval)
        answered[(query.panel, query.ref_id)] = len(series)
        if not series:
            empty[(query.panel, query.ref_id)] = expr
    print("\n".join(f"{panel} [{ref}]: {count} series" for (panel, ref), count in answered.items()))
    assert sorted(empty) == sorted(NO_DATA_HERE), {k: empty.get(k, "has data") for k in set(empty) ^ set(NO_DATA_HERE)}
