"""Load-aware placement on the real control plane, checked decision by decision against the plugin oracle.

The chart's koordpy-scheduler (stock kube-scheduler, the chart's KubeSchedulerConfiguration) calls the
extender through a recording proxy (``Components.record_extender_calls``), so every filter, prioritize
and bind call is known with its body, its answer and when it was forwarded and answered. The oracle
(``loadaware_oracle``) replays each answer with the same ``ClusterState`` and plugins that
``koordpy scheduler explain`` uses, bracketed by what the extender could have known at that moment.

Cluster shape: kwok nodes of 16 cpu / 64 GiB reporting cpu at 5, 13, ..., 77 % by node index (memory
30 %); pods request 800m / 2 GiB, so the default estimator (85 % cpu, 70 % memory) estimates 680m /
1434 MiB per pod; the chart's default thresholds are cpu 65 %, memory 95 %. A node reporting u % cpu
takes pods while round((u % x 16000 + k x 680) / 16000 x 100) <= 65, e.g. u = 5 -> k <= 14, u = 53 -> k <= 2, u = 61 ->
k <= 1, u >= 69 -> none. Each node also runs the chart's agent DaemonSet pod (50m / 96 MiB requested),
which the extender counts like any assigned pod (and so might be a pod of the chart's Deployments): the
oracle starts from the same pods.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from typing import Any

import pytest
import yaml
from bindings import one_binding_each
from cluster_kit import RELEASE_NAMESPACE, Components, Kube, Space, wait_until
from extender_calls import Decision, decisions_from, filter_probe
from loadaware_oracle import final_usage, sandwich_violations, score_mismatches
from nodemetrics import CPU_MILLI, FRESH_FOR_THE_RUN, populate, report, stored

from koordpy.config.scheduler import SchedulerConfiguration
from koordpy_testkit.controlplane import ControlPlane
from koordpy_testkit.faultproxy import FaultProxy

pytestmark = pytest.mark.cluster

LEVELS = [5 + 8 * k for k in range(10)]  # reported cpu %, 5 .. 77
REASON_EXPIRED = "node(s) nodeMetric expired"


# ---- set-up and reading back ----------------------------------------------------------------


def pods_already_on(kube: Kube, nodes: list[str]) -> list[dict[str, Any]]:
    """The pods bound to ``nodes`` before the run: the chart's agent DaemonSet pod on each, and any other
    pod of the chart the default scheduler put there (its Deployments' pods go to any kwok node). Waits
    until the real controllers bound an agent pod on each node and no pod of the chart is pending."""
    wanted = set(nodes)

    def settled() -> list[dict[str, Any]] | None:
        chart = kube.list("Pod", RELEASE_NAMESPACE)
        agents = sorted(
            p["spec"].get("nodeName", "") for p in chart if p["metadata"]["name"].startswith("koordpy-agent-")
        )
        if [n for n in agents if n in wanted] != sorted(wanted) or any(not p["spec"].get("nodeName") for p in chart):
            return None
        return [p for p in kube.list("Pod") if p["spec"].get("nodeName") in wanted]

    pods: list[dict[str, Any]] = wait_until(
        f"the chart's pods bound, an agent pod on each of {len(nodes)} nodes", settled
    )
    return pods


def extender_config(koordpy: Components) -> SchedulerConfiguration:
    """The configuration the extender runs (the chart's, as ``start_extender`` wrote it)."""
    raw = yaml.safe_load((koordpy.workdir / "extender-config.yaml").read_text())
    return SchedulerConfiguration.model_validate(raw)


def served(koordpy: Components) -> dict[tuple[str, str], int]:
    """``koordpy_extender_requests_total`` from the extender's own /metrics: (verb, outcome) -> count."""
    out: dict[tuple[str, str], int] = {}
    for line in koordpy.extender_metrics().splitlines():
        if line.startswith("koordpy_extender_requests_total{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}", 1)[0]))
            count = int(float(line.rsplit(" ", 1)[1]))
            if count:
                out[(labels["verb"], labels["outcome"])] = count
    return out


def answered_binds(front: FaultProxy, count: int) -> list[Decision] | None:
    """The cycles so far once ``count`` bind calls were answered ``ok`` (for :func:`wait_until`)."""
    decisions = decisions_from(front.exchanges())
    return decisions if sum(d.bind_outcome == "ok" for d in decisions) == count else None


def canonical_answers(front: FaultProxy) -> list[str]:
    """Answers whose shape is not exactly what kube-scheduler's decoder expects: the Go field names, scores
    0..10 (kube-scheduler does not clamp an extender's score)."""
    problems = []
    for exchange in front.exchanges():
        if exchange.status != 200:
            continue
        verb = exchange.path.rstrip("/").rsplit("/", 1)[-1]
        answer = exchange.answer_json()
        if verb == "filter" and set(answer) != {
            "Nodes",
            "NodeNames",
            "FailedNodes",
            "FailedAndUnresolvableNodes",
            "Error",
        }:
            problems.append(f"filter {sorted(answer)}")
        elif verb == "prioritize" and any(set(r) != {"Host", "Score"} or not 0 <= r["Score"] <= 10 for r in answer):
            problems.append(f"prioritize {answer}")
        elif verb == "bind" and set(answer) != {"Error"}:
            problems.append(f"bind {sorted(answer)}")
    return problems


# ---- the scenarios ----------------------------------------------------------------------------


def test_load_aware_placement_on_50_nodes_matches_the_oracle(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube
) -> None:
    """(a) 50 nodes at 5..77 % cpu, 200 pods through the real kube-scheduler: every filter and prioritize
    answer agrees with the plugin oracle, no node ends over its threshold, each pod is bound once."""
    level_of = populate(space, kube, [LEVELS[i % len(LEVELS)] for i in range(50)])
    names = sorted(level_of)
    before = pods_already_on(kube, names)
    nodes, metrics = stored(kube, names, "Node"), stored(kube, names, "NodeMetric")
    koordpy.start_extender(FRESH_FOR_THE_RUN)
    front = koordpy.record_extender_calls()
    koordpy.start_scheduler()
    config = extender_config(koordpy)

    created = {}
    for i in range(200):
        raw = space.create_pod(f"web-{i:03d}", cpu="800m", memory="2Gi")
        created[raw["metadata"]["uid"]] = raw
    wait_until("all 200 pods bound", lambda: space.count_bound(200))
    decisions: list[Decision] = wait_until("200 bind calls answered", lambda: answered_binds(front, 200))
    final = [p for p in space.pods().values() if p["spec"].get("nodeName")]

    # One scheduling cycle per pod, each answered "ok" by the extender (its own /metrics agree), except
    # where a bind arrived after the next pod's filter and found its node full: refused, and the pod
    # bound in a later cycle (scenario (d) makes that happen on purpose).
    refused = [d for d in decisions if d.bind_outcome == "error"]
    assert all("no longer fits node" in d.bind_error for d in refused), refused
    assert {d.uid for d in decisions if d.cycle > 1} <= {d.uid for d in refused}
    assert len(decisions) == 200 + len(refused) and all(d.outcome == "filtered" for d in decisions)
    prioritized = sum(d.prioritize_sent is not None for d in decisions)
    expected = {("filter", "ok"): 200 + len(refused), ("prioritize", "ok"): prioritized, ("bind", "ok"): 200}
    if refused:
        expected[("bind", "no_longer_fits")] = len(refused)
    assert served(koordpy) == expected
    assert canonical_answers(front) == []
    # Every placement was among the nodes the extender's filter passed in that cycle.
    for d in decisions:
        assert d.node in d.passed and d.node not in d.failed and d.node not in d.unresolvable, d
    # The filter answers agree with the oracle, given what the extender could have known ...
    now = time.time()
    problems, checked = sandwich_violations(decisions, created, nodes, metrics, config, now, assigned=before)
    assert problems == []
    assert checked == len(decisions)
    # ... and the oracle is discriminating: with a 50 % cpu threshold it disagrees with these answers.
    stricter = config.model_copy(
        update={"load_aware": config.load_aware.model_copy(update={"usage_thresholds": {"cpu": 50, "memory": 95}})}
    )
    wrong, _ = sandwich_violations(decisions, created, nodes, metrics, stricter, now, assigned=before)
    assert wrong
    # Prioritize answers (0..10) agree with the plugin's extender score, bracketed the same way.
    mismatched, compared, exact = score_mismatches(decisions, created, nodes, metrics, config, now, assigned=before)
    assert mismatched == []
    assert compared >= 200 and exact >= compared // 2, (compared, exact)
    # No node pushed past its threshold; hot nodes took none, cold ones the most.
    usage = final_usage(config, nodes, metrics, [*final, *before], now)
    per_node = Counter(p["spec"]["nodeName"] for p in final)
    assert {n: u.over() for n, u in usage.items() if per_node[n] and u.over()} == {}
    per_level: Counter[int] = Counter()
    for name, level in level_of.items():
        per_level[level] += per_node[name]
    print(f"\n(a) pods per cpu level {dict(sorted(per_level.items()))}; host scores {compared} ({exact} pinned)")
    assert per_level[69] == 0 and per_level[77] == 0
    assert per_level[5] > per_level[29] > per_level[53], per_level
    assert one_binding_each(control_plane, space.namespace, set(space.pods())) == []


def test_a_stale_nodemetric_gets_no_pods(koordpy: Components, space: Space, kube: Kube) -> None:
    """(b) the coldest node's report goes an hour stale mid-run (the chart's default expiry is 180 s):
    from the moment the extender's filter calls it expired, no pod goes there."""
    level_of = populate(space, kube, LEVELS)
    coldest = min(level_of, key=level_of.__getitem__)
    pods_already_on(kube, sorted(level_of))
    koordpy.start_extender()
    front = koordpy.record_extender_calls()
    koordpy.start_scheduler()
    for i in range(20):
        space.create_pod(f"before-{i:02d}", cpu="800m", memory="2Gi")
    before = Counter(wait_until("the first 20 pods bound", lambda: space.count_bound(20)).values())
    assert before[coldest] > 0, before  # the coldest node took pods while its report was fresh

    report(kube, coldest, CPU_MILLI * level_of[coldest] // 100, updated=time.time() - 3600)
    wait_until(
        f"the extender's filter calls {coldest} expired",
        lambda: filter_probe(koordpy.extender_base, coldest)["FailedNodes"].get(coldest) == REASON_EXPIRED,
    )
    for i in range(20):
        space.create_pod(f"after-{i:02d}", cpu="800m", memory="2Gi")
    bound = wait_until("all 40 pods bound", lambda: space.count_bound(40))

    assert [pod for pod, node in bound.items() if pod.startswith("after-") and node == coldest] == []
    later = [d for d in decisions_from(front.exchanges()) if d.pod.split("/")[1].startswith("after-")]
    assert later, "no filter call for the later pods"
    assert all(coldest in d.candidates for d in later)  # it still fits by requests: kube-scheduler sent it
    assert {d.failed.get(coldest) for d in later} == {REASON_EXPIRED}
    assert all(d.outcome == "filtered" for d in later)


def test_extender_killed_mid_run_and_restarted_binds_every_pod_once(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube
) -> None:
    """(c) SIGKILL the extender after 40 of 100 pods are bound, create 50 more while it is down, restart it
    on the same port: kube-scheduler's calls fail meanwhile and its pods back off; then all 150 pods are
    bound exactly once (the audit log shows every binding), and the answers before and after the restart
    pass the same oracle (the restarted extender's cache counts every pod bound before the crash)."""
    level_of = populate(space, kube, [LEVELS[i % len(LEVELS)] for i in range(30)])
    names = sorted(level_of)
    before = pods_already_on(kube, names)
    nodes, metrics = stored(kube, names, "Node"), stored(kube, names, "NodeMetric")
    extender = koordpy.start_extender(FRESH_FOR_THE_RUN)
    front = koordpy.record_extender_calls()
    koordpy.start_scheduler()
    config = extender_config(koordpy)
    total = 150

    created = {}
    for i in range(100):
        raw = space.create_pod(f"job-{i:03d}", cpu="800m", memory="2Gi")
        created[raw["metadata"]["uid"]] = raw
    wait_until("40 pods bound before the kill", lambda: len(space.bound()) >= 40)
    extender.kill()
    bound_at_kill = len(space.bound())
    for i in range(100, total):
        raw = space.create_pod(f"job-{i:03d}", cpu="800m", memory="2Gi")
        created[raw["metadata"]["uid"]] = raw

    def failed_filters() -> int:
        return sum(d.outcome == "filter-error" for d in decisions_from(front.exchanges()))

    wait_until("kube-scheduler's filter calls fail while the extender is down", lambda: failed_filters() >= 2)
    koordpy.restart(extender, koordpy.extender_base + "/readyz")
    wait_until(f"all {total} pods bound after the restart", lambda: space.count_bound(total))
    decisions = decisions_from(front.exchanges())
    print(f"\n(c) bound at kill {bound_at_kill}; failed filter calls {failed_filters()}; cycles {len(decisions)}")

    assert one_binding_each(control_plane, space.namespace, set(space.pods())) == []
    assert {d.uid for d in decisions if d.bind_outcome == "ok"} <= set(created)
    now = time.time()
    problems, checked = sandwich_violations(decisions, created, nodes, metrics, config, now, assigned=before)
    assert problems == []
    restarted = [d for d in decisions if d.filter_sent is not None and d.outcome == "filtered"]
    assert checked == len(restarted) >= total
    final = [p for p in space.pods().values() if p["spec"].get("nodeName")]
    usage = final_usage(config, nodes, metrics, [*final, *before], now)
    per_node = Counter(p["spec"]["nodeName"] for p in final)
    assert {n: u.over() for n, u in usage.items() if per_node[n] and u.over()} == {}


def test_binds_that_arrive_after_later_filters_never_push_a_node_past_its_threshold(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube
) -> None:
    """(d) kube-scheduler answers the next pod's scheduling cycle while the last pod's bind is on its way.
    The proxy holds every /bind for 3 s, so the 12 pods are filtered before their binds arrive, the
    answers passing all three nodes (53 % cpu: room for about two pods each, worked in the module
    docstring). The binds that find their node full are refused ("no longer fits") and kube-scheduler
    retries those pods; no node ends over its threshold, and each pod bound was bound once."""
    level_of = populate(space, kube, [53, 53, 53])
    names = sorted(level_of)
    before = pods_already_on(kube, names)
    nodes, metrics = stored(kube, names, "Node"), stored(kube, names, "NodeMetric")
    koordpy.start_extender(FRESH_FOR_THE_RUN)
    front = koordpy.record_extender_calls()
    held = 3.0
    front.delay("/bind", held)
    config = extender_config(koordpy)
    created = {}
    for i in range(12):
        raw = space.create_pod(f"late-{i:02d}", cpu="800m", memory="2Gi")
        created[raw["metadata"]["uid"]] = raw
    koordpy.start_scheduler()  # it finds all 12 pending and runs their cycles back to back

    def settled() -> list[Decision] | None:
        """The cycles once every pod is bound or was filtered out of every node in a later cycle."""
        decisions = decisions_from(front.exchanges())
        bound = space.bound()
        latest = {d.uid: d for d in decisions}
        for uid, raw in created.items():
            name = raw["metadata"]["name"]
            last = latest.get(uid)
            if name in bound:
                continue
            if last is None or last.cycle < 2 or last.outcome != "filtered" or last.passed:
                return None
        return decisions

    decisions: list[Decision] = wait_until("every pod bound, or refused and then filtered out", settled)
    binds = [e for e in front.exchanges() if e.path == "/bind"]
    assert binds and all(e.forwarded is not None and e.forwarded - e.received >= held for e in binds)
    refused = [d for d in decisions if d.bind_outcome == "error"]
    assert refused
    assert all("no longer fits node" in d.bind_error and "cpu usage exceed threshold" in d.bind_error for d in refused)
    assert served(koordpy).get(("bind", "no_longer_fits")) == len(refused)

    now = time.time()
    problems, _ = sandwich_violations(decisions, created, nodes, metrics, config, now, assigned=before)
    assert problems == []
    final = [p for p in space.pods().values() if p["spec"].get("nodeName")]
    usage = final_usage(config, nodes, metrics, [*final, *before], now)
    per_node = Counter(p["spec"]["nodeName"] for p in final)
    print(f"\n(d) bound per node {dict(sorted(per_node.items()))}; binds refused {len(refused)}")
    assert {n: u.over() for n, u in usage.items() if per_node[n] and u.over()} == {}
    assert one_binding_each(control_plane, space.namespace, set(space.bound())) == []
