"""NodeLoad bookkeeping: the sums depend only on the current set of pods and metric.

The rule itself is covered by the filter/score tables; these tests check that adding, replacing
and removing rows (swap-remove, growth) never leaves stale contributions behind.
"""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from koordpy.model.objects import nodemetric_from_dict, pod_from_dict
from koordpy.scheduler.plugins.loadaware.nodeload import AssignedPod, NodeLoad, Vectorizer, saturate, saturated
from koordpy_testkit import NodeMetricBuilder, PodBuilder
from koordpy_testkit.scheduling import NOW

VEC = Vectorizer(("cpu", "memory"))
GI = 2**30


def assigned(i: int, rng: random.Random) -> AssignedPod:
    builder = PodBuilder(f"p{i}", "ns").requests(cpu=f"{rng.randint(1, 8) * 250}m", memory=f"{rng.randint(1, 4)}Gi")
    if i % 3 == 0:
        builder = builder.priority(9500)  # Prod
    pod = pod_from_dict(builder.build())
    estimate = None if i % 7 == 0 else np.array([rng.randint(0, 2000), rng.randint(0, 4) * GI], np.int64)
    deadline = NOW + rng.choice([-100, 100]) if i % 4 == 0 else None
    return AssignedPod(pod=pod, timestamp=NOW - rng.choice([10, 30, 600]), estimated=estimate, deadline=deadline)


def metric(rng: random.Random, count: int) -> object:
    builder = NodeMetricBuilder("n").updated(NOW - 20).report_interval(60).usage(cpu="3", memory="20Gi")
    builder.system_usage(cpu="500m", memory="1Gi")
    for i in range(0, count, 2):  # every other pod reported, some of them as Prod
        builder.pod(
            "ns", f"p{i}", priority="koord-prod" if i % 6 == 0 else "koord-batch", cpu=f"{rng.randint(0, 1500)}m"
        )
    return nodemetric_from_dict(builder.build())


def sums(load: NodeLoad) -> list[list[int]]:
    return [v.tolist() for v in (load.node_delta, load.prod_delta, load.node_estimated, load.prod_usage)]


def test_sums_do_not_depend_on_event_order_or_removed_pods() -> None:
    rng = random.Random(7)
    pods = [assigned(i, rng) for i in range(40)]
    nm = metric(rng, 40)
    churned = NodeLoad(2)
    churned.set_metric(nm, VEC, include_sys=True)  # type: ignore[arg-type]
    for pod in pods:  # all 40 in: the arrays grow from 4 rows several times
        churned.add_pod(pod)
    gone = rng.sample(range(40), 15)
    for i in gone:  # swap-removes from the middle
        churned.remove_pod(pods[i].pod.uid)
    churned.add_pod(pods[(set(range(40)) - set(gone)).pop()])  # re-adding a present pod replaces it
    churned.remove_pod("no-such-uid")
    churned.set_metric(nm, VEC, include_sys=True)  # type: ignore[arg-type]

    kept = [p for i, p in enumerate(pods) if i not in gone]
    rng.shuffle(kept)
    fresh = NodeLoad(2)
    for pod in kept:  # pods first, metric last: the other order
        fresh.add_pod(pod)
    fresh.set_metric(nm, VEC, include_sys=True)  # type: ignore[arg-type]
    assert sums(churned) == sums(fresh)
    assert sorted(churned.pods) == sorted(p.pod.uid for p in kept)
    assert fresh.node_estimated.tolist() != [0, 0]  # the comparison is not between two empty loads


def test_removing_every_pod_leaves_only_system_usage() -> None:
    rng = random.Random(3)
    load = NodeLoad(2)
    load.set_metric(metric(rng, 6), VEC, include_sys=True)  # type: ignore[arg-type]
    pods = [assigned(i, rng) for i in range(6)]
    for pod in pods:
        load.add_pod(pod)
    for pod in pods:
        load.remove_pod(pod.pod.uid)
    # systemUsage 500m / 1Gi counts towards prodUsage (prodUsageIncludeSys); nothing else is left
    assert sums(load) == [[0, 0], [0, 0], [0, 0], [500, GI]]


def test_no_metric_means_zero_sums_and_reported_usage_is_per_pod() -> None:
    rng = random.Random(5)
    load = NodeLoad(2)
    pods = [assigned(i, rng) for i in range(4)]
    for pod in pods:
        load.add_pod(pod)
    assert sums(load) == [[0, 0]] * 4
    load.set_metric(metric(rng, 4), VEC, include_sys=False)  # type: ignore[arg-type]
    assert load.reported_usage(("ns", "p0")) is not None
    assert load.reported_usage(("ns", "p1")) is None  # odd pods are not in podsMetric
    load.set_metric(None, VEC, include_sys=False)
    assert sums(load) == [[0, 0]] * 4


def test_reported_vectors_are_made_from_the_current_metric_only() -> None:
    # Vectors are made on first use: a second NodeMetric must not leave the first one's usage behind.
    load = NodeLoad(2)
    pod = pod_from_dict(PodBuilder("p0", "ns").requests(cpu="1", memory="1Gi").build())
    load.add_pod(AssignedPod(pod=pod, timestamp=NOW - 600, estimated=np.array([1000, GI], np.int64), deadline=None))

    def reporting(cpu: str | None, *repeat: str) -> object:
        builder = NodeMetricBuilder("n").updated(NOW - 20).report_interval(60).usage(cpu="3", memory="20Gi")
        if cpu is not None:
            builder.pod("ns", "p0", cpu=cpu)
        for later in repeat:  # the same name again: its last entry counts
            builder.pod("ns", "p0", cpu=later)
        return nodemetric_from_dict(builder.build())

    # estimate 1000m; reported 400m, assigned long ago: nodeDelta = 0 (not estimated), usage is reported
    load.set_metric(reporting("400m"), VEC, include_sys=False)  # type: ignore[arg-type]
    assert load.reported_usage(("ns", "p0")).tolist() == [400, 0]  # type: ignore[union-attr]
    assert load.node_delta.tolist() == [0, 0]
    # not reported any more: the full estimate 1000m / 1Gi is in nodeDelta again
    load.set_metric(reporting(None), VEC, include_sys=False)  # type: ignore[arg-type]
    assert load.reported_usage(("ns", "p0")) is None
    assert load.node_delta.tolist() == [1000, GI]
    # 300m first, then 900m for the same pod: 900m is the usage
    load.set_metric(reporting("300m", "900m"), VEC, include_sys=False)  # type: ignore[arg-type]
    assert load.reported_usage(("ns", "p0")).tolist() == [900, 0]  # type: ignore[union-attr]


def test_a_new_metric_re_accounts_exactly_the_pods_whose_inputs_changed() -> None:
    # set_metric only re-accounts pods whose (reported usage, Prod by the metric, should be estimated)
    # changed. After each random event the sums must equal a NodeLoad built afresh from the same pods
    # and metric; updateTime moving past a pod's assignment time (+ reportInterval) or its deadline,
    # usage changing, entries disappearing and the metric going away all change some pod's inputs; the
    # same podsMetric again with another updateTime or reportInterval changes only "should be estimated".
    rng = random.Random(11)
    pods = [assigned(i, rng) for i in range(30)]
    for i in (0, 3, 4):  # a recreated pod: the same name as an assigned one, another uid
        twin = assigned(i, rng)
        raw = PodBuilder(f"p{i}", "ns").requests(cpu="2", memory="1Gi").priority(9500).build()
        raw["metadata"]["uid"] = f"twin-{i}"
        pods.append(AssignedPod(pod_from_dict(raw), twin.timestamp, twin._estimate, twin.deadline))
    load = NodeLoad(2)
    present: dict[str, AssignedPod] = {}
    current: object = None
    entries: list[tuple[str, str, str, str | None]] = []  # namespace, name, priority, cpu
    changed_inputs = 0
    timing = (-20, 60)  # updateTime - NOW, reportInterval
    for step in range(600):
        roll = rng.random()
        if roll < 0.3:
            pod = rng.choice(pods)
            load.add_pod(pod)
            present[pod.pod.uid] = pod
        elif roll < 0.45 and present:
            uid = rng.choice(sorted(present))
            load.remove_pod(uid)
            del present[uid]
        elif roll < 0.5:
            current = None
            load.set_metric(None, VEC, include_sys=True)
        else:
            if rng.random() < 0.5:  # else the same updateTime and reportInterval as the last report
                timing = (rng.choice([-700, -20, 0, 0, 40, 40, 200, 200]), rng.choice([30, 60]))
            builder = NodeMetricBuilder("n").updated(NOW + timing[0])
            builder.report_interval(timing[1]).usage(cpu="3", memory="20Gi")
            builder.system_usage(cpu=f"{rng.randint(0, 900)}m", memory="1Gi")
            mode = rng.random()
            if mode < 0.4:  # a new podsMetric
                entries = [
                    (
                        rng.choice(["ns", "ns", "ns", "other"]),  # "other": the same name in another namespace
                        f"p{i}",
                        rng.choice(["koord-prod", "koord-batch"]),
                        f"{rng.choice([0, 300, 1500])}m",
                    )
                    for i in range(0, 30, rng.choice([1, 2, 3]))
                ]
            elif mode < 0.6 and entries:  # one entry changed (usage or priority), the others as last time
                k = rng.randrange(len(entries))
                entries = [*entries]
                entries[k] = (*entries[k][:2], rng.choice(["koord-prod", "koord-batch"]), f"{rng.randint(0, 2)}")
            elif mode < 0.85:  # the last podsMetric with entries appended: names already reported (another
                # usage or priority: the last usage counts, Prod if any entry says so), new names, pods of
                # other nodes or namespaces, and entries without usage (cpu None: no podUsage resources at all)
                entries = [
                    *entries,
                    *(
                        (
                            rng.choice(["ns", "ns", "other"]),
                            rng.choice([f"p{rng.randrange(30)}", f"elsewhere-{rng.randrange(5)}"]),
                            rng.choice(["koord-prod", "koord-batch"]),
                            rng.choice([None, "0m", "300m", "1500m", f"{rng.randint(1, 2)}"]),
                        )
                        for _ in range(rng.randint(1, 4))
                    ),
                ]
            # else: the same podsMetric as the last report
            for namespace, pod_name, priority, cpu in entries:
                if cpu is None:
                    builder.pod(namespace, pod_name, priority=priority)
                else:
                    builder.pod(namespace, pod_name, priority=priority, cpu=cpu, memory="1Gi")
            before = sums(load)
            current = nodemetric_from_dict(builder.build())
            load.set_metric(current, VEC, include_sys=True)  # type: ignore[arg-type]
            changed_inputs += before != sums(load)
        fresh = NodeLoad(2)
        for pod in present.values():
            fresh.add_pod(pod)
        fresh.set_metric(current, VEC, include_sys=True)  # type: ignore[arg-type]
        assert sums(load) == sums(fresh), f"step {step}"
        for pod in pods:  # reported vectors (made on first use, kept between reports) are the current ones
            want, got = fresh.reported_usage(pod.key), load.reported_usage(pod.key)
            assert (None if want is None else want.tolist()) == (None if got is None else got.tolist()), f"step {step}"
    assert changed_inputs > 100  # the metrics did move the sums: not a comparison of unchanging loads


def test_sums_are_clamped_when_read_and_exact_underneath() -> None:
    # two pods of 2^62 millicores each: nodeEstimated reads 2^53 (the clamp), and taking one pod back
    # leaves exactly 2^62 underneath (still clamped); taking both back leaves 0, not a wrapped value
    load = NodeLoad(2)
    load.set_metric(metric(random.Random(1), 0), VEC, include_sys=False)  # type: ignore[arg-type]
    huge = [
        AssignedPod(pod_from_dict(PodBuilder(f"h{i}", "ns").build()), NOW - 600, (2**62, 5), None) for i in range(2)
    ]
    for pod in huge:
        load.add_pod(pod)
    assert load.node_estimated.tolist() == [2**53, 10]
    load.remove_pod(huge[0].pod.uid)
    assert load.node_estimated.tolist() == [2**53, 5]
    load.remove_pod(huge[1].pod.uid)
    assert load.node_estimated.tolist() == [0, 0]


def test_an_appended_entry_that_only_makes_a_pod_prod_is_accounted() -> None:
    # The same usage again for p0, now as koord-prod: only Prod-by-the-metric changes. p0 is Prod by spec,
    # assigned long ago (not estimated): prodUsage = its reported 400m once the metric calls it Prod too.
    pod = pod_from_dict(PodBuilder("p0", "ns").requests(cpu="1", memory="1Gi").priority(9500).build())

    def reporting(*priorities: str) -> object:
        builder = NodeMetricBuilder("n").updated(NOW - 20).report_interval(60).usage(cpu="3", memory="20Gi")
        for priority in priorities:
            builder.pod("ns", "p0", priority=priority, cpu="400m")
        return nodemetric_from_dict(builder.build())

    load = NodeLoad(2)
    load.add_pod(AssignedPod(pod=pod, timestamp=NOW - 600, estimated=np.array([1000, GI], np.int64), deadline=None))
    load.set_metric(reporting("koord-batch"), VEC, include_sys=False)  # type: ignore[arg-type]
    assert load.prod_usage.tolist() == [0, 0]
    assert load.prod_delta.tolist() == [1000, GI]  # Prod by spec, not by the metric: the full estimate
    load.set_metric(reporting("koord-batch", "koord-prod"), VEC, include_sys=False)  # type: ignore[arg-type]
    assert load.prod_usage.tolist() == [400, 0]
    assert load.prod_delta.tolist() == [0, 0]  # reported and not estimated: no delta


def test_aggregated_usage_is_read_from_the_current_metric_only() -> None:
    # (type, duration) pairs are vectorised when first looked up and kept until the next NodeMetric: the second
    # metric's answers differ from the first's for every pair looked up below, so a kept answer fails.
    def reporting(*entries: tuple[str, dict[str, dict[str, str]]]) -> object:
        raw = NodeMetricBuilder("n").updated(NOW - 20).report_interval(60).usage(cpu="4", memory="8Gi").build()
        raw["status"]["nodeMetric"]["aggregatedNodeUsages"] = [
            {"duration": duration, "usage": {kind: {"resources": res} for kind, res in usage.items()}}
            for duration, usage in entries
        ]
        return nodemetric_from_dict(raw)

    def looked_up(load: NodeLoad) -> dict[tuple[str, float], list[int] | None]:
        pairs = [("p95", 300.0), ("p95", 1800.0), ("p95", 0.0), ("avg", 0.0), ("avg", 1800.0), ("p50", 300.0)]
        return {pair: None if (v := load.aggregated(*pair)) is None else v.tolist() for pair in pairs}

    load = NodeLoad(2)
    first = reporting(
        ("5m", {"p95": {"cpu": "2"}}),
        ("30m", {"p95": {"cpu": "3"}, "avg": {}}),  # avg without data: as if absent
        ("5m", {"p95": {"cpu": "6"}}),  # the same duration again: the last entry counts
    )
    load.set_metric(first, VEC, include_sys=False)  # type: ignore[arg-type]
    # p95: 5m -> 6 cores (the later entry), 30m -> 3, longest (0) -> 30m; avg has no data: nodeUsage for
    # duration 0 (4 cores, 8Gi), nothing for 30m; p50 is not reported at all
    assert looked_up(load) == {
        ("p95", 300.0): [6000, 0],
        ("p95", 1800.0): [3000, 0],
        ("p95", 0.0): [3000, 0],
        ("avg", 0.0): [4000, 8 * GI],
        ("avg", 1800.0): None,
        ("p50", 300.0): None,
    }
    second = reporting(("5m", {"p95": {"cpu": "1"}, "avg": {"cpu": "500m"}}), ("30m", {"avg": {"cpu": "700m"}}))
    load.set_metric(second, VEC, include_sys=False)  # type: ignore[arg-type]
    # p95 only for 5m now (1 core, also the longest); avg 5m 500m, 30m 700m (the longest); p50 now reported
    # for no duration still
    assert looked_up(load) == {
        ("p95", 300.0): [1000, 0],
        ("p95", 1800.0): None,
        ("p95", 0.0): [1000, 0],
        ("avg", 0.0): [700, 0],
        ("avg", 1800.0): [700, 0],
        ("p50", 300.0): None,
    }
    load.set_metric(None, VEC, include_sys=False)
    assert set(looked_up(load).values()) == {None}


# One pod ns/p0, Prod by spec, assigned 10 s before updateTime - 20 s (so "should be estimated"), estimate
# 1000m. podsMetric entries are (namespace, priority, cpu or None for an entry without usage), all named p0.
# Reported u (the last entry of ns/p0 with usage): nodeDelta = 1000 - u; Prod by the metric when any of ns/p0's
# entries with usage says koord-prod: then prodUsage = u and prodDelta = 1000 - u, else prodUsage = 0 and
# prodDelta = the full estimate 1000.
REPEATED_NAMES = [
    pytest.param([("ns", "koord-prod", "400m")], 600, 400, 600, id="one entry"),
    # an earlier entry says Prod: 1000 - 400 = 600 and prodUsage 400 (the last entry alone would say batch)
    pytest.param([("ns", "koord-prod", "400m"), ("ns", "koord-batch", "400m")], 600, 400, 600, id="earlier prod"),
    # p0 in another namespace, last: ns/p0's own entry still counts
    pytest.param([("ns", "koord-prod", "400m"), ("other", "koord-prod", "900m")], 600, 400, 600, id="other namespace"),
    pytest.param([("other", "koord-prod", "900m"), ("ns", "koord-prod", "400m")], 600, 400, 600, id="other first"),
    # the last entry has no usage: the last one with usage (400m) counts
    pytest.param([("ns", "koord-prod", "400m"), ("ns", "koord-prod", None)], 600, 400, 600, id="last without usage"),
    # two batch entries with usage: the last (700m) counts, 1000 - 700 = 300; not Prod by the metric
    pytest.param([("ns", "koord-batch", "400m"), ("ns", "koord-batch", "700m")], 300, 0, 1000, id="last usage"),
]


@pytest.mark.parametrize("entries, node_delta, prod_usage, prod_delta", REPEATED_NAMES)
@pytest.mark.parametrize("index", ["converted", "built by NodeLoad"])
def test_repeated_pod_names_in_podsmetric(
    entries: list[tuple[str, str, str | None]], node_delta: int, prod_usage: int, prod_delta: int, index: str
) -> None:
    builder = NodeMetricBuilder("n").updated(NOW - 20).report_interval(60).usage(cpu="3", memory="20Gi")
    for namespace, priority, cpu in entries:
        if cpu is None:
            builder.pod(namespace, "p0", priority=priority)
        else:
            builder.pod(namespace, "p0", priority=priority, cpu=cpu)
    metric = nodemetric_from_dict(builder.build())
    assert metric.pods_by_name is not None  # the conversion's index
    if index == "built by NodeLoad":
        metric = dataclasses.replace(metric)  # a copy does not carry the conversion's index over
        assert metric.pods_by_name is None
    pod = pod_from_dict(PodBuilder("p0", "ns").requests(cpu="1", memory="1Gi").priority(9500).build())
    load = NodeLoad(2)
    load.add_pod(AssignedPod(pod=pod, timestamp=NOW - 30, estimated=np.array([1000, 0], np.int64), deadline=None))
    load.set_metric(metric, VEC, include_sys=False)
    assert load.node_delta.tolist() == [node_delta, 0]
    assert load.prod_usage.tolist() == [prod_usage, 0]
    assert load.prod_delta.tolist() == [prod_delta, 0]


@pytest.mark.parametrize(
    ("amount", "clamped"),
    [
        (5, 5),
        (-5, -5),
        (2**53, 2**53),  # the bounds themselves are kept
        (-(2**53), -(2**53)),
        (2**53 + 1, 2**53),  # beyond them: the bound of that sign
        (-(2**53) - 1, -(2**53)),
        (2**70, 2**53),
    ],
)
def test_saturate_clamps_to_plus_minus_two_to_the_53(amount: int, clamped: int) -> None:
    assert saturate(amount) == clamped
    assert saturated([amount, 1]) == [clamped, 1]


def test_a_reported_entry_counts_only_with_usage_and_in_the_pods_namespace() -> None:
    builder = NodeMetricBuilder("n").updated(NOW - 20).usage(cpu="3", memory="20Gi")
    builder.pod("other", "same-name", cpu="700m")  # another namespace: not the pod ns/same-name
    builder.pod("ns", "no-usage")  # an entry without usage: not reported
    builder.pod("ns", "no-priority", priority="", cpu="300m")  # usage without a priority class: reported
    load = NodeLoad(2)
    load.set_metric(nodemetric_from_dict(builder.build()), VEC, include_sys=False)
    assert load.reported_usage(("ns", "same-name")) is None
    assert load.reported_usage(("other", "same-name")).tolist() == [700, 0]  # type: ignore[union-attr]
    assert load.reported_usage(("ns", "no-usage")) is None
    assert load.reported_usage(("ns", "no-priority")).tolist() == [300, 0]  # type: ignore[union-attr]


def test_aggregated_usage_needs_status_and_reads_every_entry() -> None:
    def reporting(node_usage: bool, *entries: tuple[str, dict[str, dict[str, str]]]) -> object:
        builder = NodeMetricBuilder("n").updated(NOW - 20)
        if node_usage:
            builder.usage(cpu="4", memory="8Gi")
        raw = builder.build()
        raw.setdefault("status", {}).setdefault("nodeMetric", {})["aggregatedNodeUsages"] = [
            {"duration": duration, "usage": {kind: {"resources": res} for kind, res in usage.items()}}
            for duration, usage in entries
        ]
        if not node_usage:
            del raw["status"]["nodeMetric"]
        return nodemetric_from_dict(raw)

    load = NodeLoad(2)
    # an entry without p95 data comes first; the p95 entries after it still count, and of two entries of the
    # same (longest) duration the last one counts: 5 cores
    entries = (("1m", {"avg": {"cpu": "1"}}), ("30m", {"p95": {"cpu": "2"}}), ("30m", {"p95": {"cpu": "5"}}))
    load.set_metric(reporting(True, *entries), VEC, include_sys=False)  # type: ignore[arg-type]
    assert load.aggregated("p95", 0.0).tolist() == [5000, 0]  # type: ignore[union-attr]
    assert load.aggregated("p95", 1800.0).tolist() == [5000, 0]  # type: ignore[union-attr]
    # an entry shorter than a second is an entry like any other: the longest with data
    load.set_metric(reporting(True, ("500ms", {"p95": {"cpu": "3"}})), VEC, include_sys=False)  # type: ignore[arg-type]
    assert load.aggregated("p95", 0.0).tolist() == [3000, 0]  # type: ignore[union-attr]
    # without status.nodeMetric there is no usage at all, aggregated or not
    load = NodeLoad(2)
    load.set_metric(reporting(False), VEC, include_sys=False)  # type: ignore[arg-type]
    assert load.aggregated("p95", 0.0) is None and load.node_usage is None


def _pod(name: str, timestamp: float) -> AssignedPod:
    pod = pod_from_dict(PodBuilder(name, "ns").requests(cpu="2", memory="1Gi").build())
    return AssignedPod(pod=pod, timestamp=timestamp, estimated=(2000, GI), deadline=None)


def _reporting(update: float, *names: str) -> object:
    builder = NodeMetricBuilder("n").updated(update).report_interval(60).usage(cpu="3", memory="20Gi")
    for name in names:
        builder.pod("ns", name, priority="koord-batch", cpu="1")
    return nodemetric_from_dict(builder.build())


def test_a_pod_reported_late_stops_being_estimated_once_its_window_passes() -> None:
    # a, b, c were assigned long ago; p 10 s before the reports. p is first not reported (full estimate 2000m),
    # then reported at 1000m (delta 1000m while p "should be estimated": assigned after updateTime - 60 s),
    # then the same podsMetric 100 s later: p is outside its window, its delta is 0.
    load = NodeLoad(2)
    load.set_metric(_reporting(NOW, "a", "b", "c"), VEC, include_sys=False)  # type: ignore[arg-type]
    for name in ("a", "b", "c"):
        load.add_pod(_pod(name, NOW - 600))
    load.add_pod(_pod("p", NOW - 10))
    assert load.node_delta.tolist() == [2000, GI]
    load.set_metric(_reporting(NOW, "a", "b", "c", "p"), VEC, include_sys=False)  # type: ignore[arg-type]
    assert load.node_delta.tolist() == [1000, GI]
    load.set_metric(_reporting(NOW + 100, "a", "b", "c", "p"), VEC, include_sys=False)  # type: ignore[arg-type]
    assert load.node_delta.tolist() == [0, 0]


def test_a_removed_pod_is_not_looked_at_when_time_moves_on() -> None:
    # p (reported, inside its window) is removed; the same podsMetric 100 s later re-examines only the pods
    # whose share time alone could change, and p is none of them any more: the sums are a, b, c's (0 delta)
    load = NodeLoad(2)
    for name in ("a", "b", "c"):
        load.add_pod(_pod(name, NOW - 600))
    load.add_pod(_pod("p", NOW - 10))
    load.set_metric(_reporting(NOW, "a", "b", "c", "p"), VEC, include_sys=False)  # type: ignore[arg-type]
    assert load.node_delta.tolist() == [1000, GI]
    load.remove_pod(load.pods[next(u for u, a in load.pods.items() if a.pod.name == "p")].pod.uid)
    load.set_metric(_reporting(NOW + 100, "a", "b", "c", "p"), VEC, include_sys=False)  # type: ignore[arg-type]
    assert load.node_delta.tolist() == [0, 0] and load.node_estimated.tolist() == [6000, 3 * GI]


@pytest.mark.parametrize(
    "estimate",
    [(2000, GI), [2000, GI], np.array([2000, GI], np.int64)],
    ids=["tuple", "list", "array"],
)
def test_an_estimate_is_kept_as_plain_integers_whatever_it_came_as(estimate: object) -> None:
    pod = pod_from_dict(PodBuilder("p", "ns").build())
    assigned = AssignedPod(pod=pod, timestamp=5.0, estimated=estimate, deadline=None)  # type: ignore[arg-type]
    assert assigned.estimated.tolist() == [2000, GI]  # type: ignore[union-attr]
    assert repr(assigned) == f"AssignedPod('ns/p', timestamp=5.0, estimate=(2000, {GI}))"
