"""Filter rules, one table per rule, arithmetic worked in the comments.

Node n: 10 cpu / 100Gi allocatable unless said otherwise. Incoming pod: BestEffort-like
estimate 250m / 200Mi unless said otherwise (a pod with no requests).
"""

from __future__ import annotations

import json

import pytest

from koordpy.config import LoadAwareSchedulingArgs, validate
from koordpy.model.objects import pod_from_dict
from koordpy.scheduler.framework import Code
from koordpy.scheduler.plugins.loadaware.profile import AggregatedProfile, threshold_profile
from koordpy_testkit import NodeBuilder, NodeMetricBuilder, PodBuilder
from koordpy_testkit.scheduling import NOW
from koordpy_testkit.scheduling import ClusterHarness as Harness

GI = 2**30


def node(name: str = "n", cpu: str = "10", memory: str = "100Gi") -> dict[str, object]:
    return NodeBuilder(name).allocatable(cpu=cpu, memory=memory).build()


def metric(name: str = "n", cpu: str = "1", memory: str = "10Gi", at: float = NOW - 30) -> NodeMetricBuilder:
    return NodeMetricBuilder(name).updated(at).usage(cpu=cpu, memory=memory)


BE_POD = PodBuilder("incoming").build()  # estimate 250m cpu, 200Mi memory


@pytest.mark.parametrize(
    ("node_cpu_usage", "passes"),
    [
        # (usage + 250m) / 10 cores: 6.2c -> 64.5% -> round 65 -> 65 > 65 false -> pass
        ("6200m", True),
        # 6.25c + 0.25c = 6.5c -> 65.0% -> 65 -> pass (strictly greater fails)
        ("6250m", True),
        # 6.3c + 0.25c = 6.55c -> 65.5% -> Go rounds half away -> 66 > 65 -> fail
        ("6300m", False),
        # 6.249c + 0.25c = 6.499c -> 64.99% -> 65 -> pass
        ("6249m", True),
    ],
)
def test_cpu_threshold_strictly_greater_on_rounded_percent(node_cpu_usage: str, passes: bool) -> None:
    h = Harness().node(node()).metric(metric(cpu=node_cpu_usage).build())
    assert (h.reason(BE_POD, "n") is None) is passes
    if not passes:
        assert h.reason(BE_POD, "n") == "node(s) cpu usage exceed threshold"


def test_memory_threshold_and_reason() -> None:
    # memory: 95Gi + 200Mi = 95.195Gi of 100Gi -> 95.2% -> 95 -> pass; 95.5Gi -> 95.7 -> 96 -> fail
    assert Harness().node(node()).metric(metric(memory="95Gi").build()).reason(BE_POD, "n") is None
    h = Harness().node(node()).metric(metric(memory="95.5Gi").build())
    assert h.reason(BE_POD, "n") == "node(s) memory usage exceed threshold"


def test_cpu_checked_before_memory() -> None:
    h = Harness().node(node()).metric(metric(cpu="9", memory="99Gi").build())
    assert h.reason(BE_POD, "n") == "node(s) cpu usage exceed threshold"


def test_missing_nodemetric_passes() -> None:
    assert Harness().node(node()).reason(BE_POD, "n") is None


def test_nodemetric_without_status_passes() -> None:
    h = Harness().node(node()).metric(NodeMetricBuilder("n").updated(NOW - 10).build())
    assert h.reason(BE_POD, "n") is None


@pytest.mark.parametrize(
    ("args", "age", "expected"),
    [
        # age 179s < 180s: fresh; usage 9c -> 92.5% -> fail on cpu
        ({}, 179, "node(s) cpu usage exceed threshold"),
        # age 180s >= 180s: expired (>=), blocked with the expired reason
        ({}, 180, "node(s) nodeMetric expired"),
        # expired but enableScheduleWhenNodeMetricsExpired: pass without checking usage
        ({"enableScheduleWhenNodeMetricsExpired": True}, 500, None),
        # filterExpiredNodeMetrics false: the stale usage is still checked -> cpu fails
        ({"filterExpiredNodeMetrics": False}, 500, "node(s) cpu usage exceed threshold"),
        ({"nodeMetricExpirationSeconds": 600}, 500, "node(s) cpu usage exceed threshold"),
    ],
)
def test_expiry(args: dict[str, object], age: int, expected: str | None) -> None:
    h = Harness(**args).node(node()).metric(metric(cpu="9", at=NOW - age).build())
    assert h.reason(BE_POD, "n") == expected


def test_metric_without_update_time_is_expired() -> None:
    h = Harness().node(node()).metric(NodeMetricBuilder("n").usage(cpu="1").build())
    assert h.reason(BE_POD, "n") == "node(s) nodeMetric expired"


def test_expired_metrics_counts_the_nodes_whose_metric_exists_but_is_stale() -> None:
    # fresh (30 s), expired (600 s >= 180 s), expired (no updateTime), no NodeMetric at all: 2 stale
    h = Harness()
    assert h.plugin.expired_metrics(NOW) == 0  # no node yet
    h.node(node("fresh")).metric(metric("fresh").build())
    h.node(node("old")).metric(metric("old", at=NOW - 600).build())
    h.node(node("unset")).metric(NodeMetricBuilder("unset").usage(cpu="1").build())
    h.node(node("none"))
    assert h.plugin.expired_metrics(NOW) == 2
    # 200 s later the fresh one (230 s) is stale too; a node without a NodeMetric never counts
    assert h.plugin.expired_metrics(NOW + 200) == 3


def test_expired_is_unschedulable_not_unresolvable() -> None:
    h = Harness().node(node()).metric(metric(at=NOW - 1000).build())
    status = h.filter(BE_POD)["n"]
    assert status is not None and status.code is Code.UNSCHEDULABLE


def test_daemonset_pods_skip_filter() -> None:
    h = Harness().node(node()).metric(metric(cpu="10", at=NOW - 1000).build())
    assert h.reason(PodBuilder("ds").owner("DaemonSet").build(), "n") is None


def test_zero_threshold_or_zero_allocatable_is_skipped() -> None:
    # cpu threshold 0 disables the cpu check; memory allocatable 0 skips memory
    h = Harness(usageThresholds={"cpu": 0, "memory": 10}).node(node(memory="0")).metric(metric(cpu="10").build())
    assert h.reason(BE_POD, "n") is None


@pytest.mark.parametrize(
    ("thresholds", "allocatable_cpu", "reason"),
    [
        # threshold 1 %: (100m + 250m) / 10 = 3.5 % -> 4 > 1 -> fail; the smallest threshold still counts
        ({"cpu": 1}, "10", "node(s) cpu usage exceed threshold"),
        # allocatable 1m: (100m + 250m) / 1m = 35000 % > 65 -> fail; the smallest allocatable still counts
        ({"cpu": 65}, "1m", "node(s) cpu usage exceed threshold"),
        # threshold 4 %: 4 is not > 4 -> pass
        ({"cpu": 4}, "10", None),
    ],
)
def test_the_smallest_threshold_and_allocatable_are_checked(
    thresholds: dict[str, int], allocatable_cpu: str, reason: str | None
) -> None:
    h = Harness(usageThresholds=thresholds).node(node(cpu=allocatable_cpu)).metric(metric(cpu="100m").build())
    assert h.reason(BE_POD, "n") == reason


def test_a_prod_pod_over_nodes_with_and_without_prod_thresholds() -> None:
    # a carries prodUsageThresholds cpu 5 (prodUsage 0 + 0.85c -> 8.5 -> 9 > 5: fail) and its own usageThresholds
    # cpu 90 (not used for a Prod pod there); b has no annotation, so the args' usageThresholds apply there
    # (7c + 0.85c -> 78.5 -> 79 > 65: fail, a's 90 is not b's); c: 1c + 0.85c -> 18.5 -> 19 -> pass
    prod = PodBuilder("p").requests(cpu="1").build()  # Burstable, priority unset -> Prod; estimate 850m
    annotated = NodeBuilder("a").allocatable(cpu="10", memory="100Gi")
    annotated.annotation(
        "scheduling.koordinator.sh/usage-thresholds",
        json.dumps({"prodUsageThresholds": {"cpu": 5}, "usageThresholds": {"cpu": 90}}),
    )
    h = Harness().node(annotated.build()).node(node("b")).node(node("c"))
    h.metric(metric("a", cpu="1").build()).metric(metric("b", cpu="7").build()).metric(metric("c", cpu="1").build())
    cpu = "node(s) cpu usage exceed threshold"
    assert {n: h.reason(prod, n) for n in ("a", "b", "c")} == {"a": cpu, "b": cpu, "c": None}


def test_incoming_estimate_counts() -> None:
    # usage 5c; pod req=lim 2 cpu -> estimate 1700m; (5 + 1.7) / 10 = 67% > 65 -> fail
    pod = PodBuilder("big").requests(cpu="2", memory="1Gi").limits(cpu="2", memory="1Gi").build()
    h = Harness().node(node()).metric(metric(cpu="5").build())
    assert h.reason(pod, "n") == "node(s) cpu usage exceed threshold"
    assert h.reason(BE_POD, "n") is None  # 5.25c -> 52.5 -> 53 -> pass


@pytest.mark.parametrize(
    ("reservation", "expected"),
    [
        # an assigned pod req=lim 4 cpu adds its estimate 3400m: (6 + 3.4 + 0.25) / 10 = 96.5% -> 97 > 65
        ("", "node(s) cpu usage exceed threshold"),
        # a Reservation's placeholder pod adds nothing: (6 + 0.25) / 10 = 62.5% -> 63 <= 65
        ("r1", None),
    ],
)
def test_reservation_placeholder_pods_add_no_load(reservation: str, expected: str | None) -> None:
    builder = PodBuilder("placed").requests(cpu="4").limits(cpu="4").node("n")
    if reservation:
        builder.annotation("scheduling.koordinator.sh/reservation", reservation)
    h = Harness().node(node()).metric(metric(cpu="6").build()).assigned(builder.build())
    assert h.reason(BE_POD, "n") == expected


def test_a_pod_estimated_at_zero_has_no_estimate() -> None:
    # a Mid pod without mid resources estimates 0 / 0: kept as "no estimate" (None, what /debug shows),
    # while a pod estimated above zero keeps its vector (req=lim 4 cpu -> 3400m; memory 200Mi default)
    mid = PodBuilder("mid").label("koordinator.sh/priority-class", "koord-mid").requests(cpu="8").node("n").build()
    big = PodBuilder("big").requests(cpu="4").limits(cpu="4").node("n").build()
    h = Harness().node(node()).metric(metric().build()).assigned(mid).assigned(big)
    pods = h.plugin.loads["n"].pods
    assert pods[pod_from_dict(mid).uid].estimated is None
    assert pods[pod_from_dict(big).uid].estimated.tolist() == [3400, 200 * 2**20]  # type: ignore[union-attr]


def test_pod_events_without_the_node_index_find_the_node_by_name() -> None:
    # the plugin's own entry points accept index None (looked up by name): the verdicts follow the event
    h = Harness().node(node()).metric(metric(cpu="6").build())
    placed = pod_from_dict(PodBuilder("placed").requests(cpu="4").limits(cpu="4").node("n").build())
    assert h.reason(BE_POD, "n") is None
    h.plugin.on_pod_assigned(None, "n", placed, NOW)  # 6 + 3.4 + 0.25 of 10 -> 97 > 65
    assert h.reason(BE_POD, "n") == "node(s) cpu usage exceed threshold"
    h.plugin.on_pod_unassigned(None, "n", placed)
    assert h.reason(BE_POD, "n") is None


class TestAssignedPodEstimates:
    """Pods placed but not yet (fully) reported add max(0, estimate - reported usage)."""

    def pod(self, name: str, scheduled: float) -> dict[str, object]:
        # req=lim 4 cpu -> estimate 3400m; memory 1Gi -> 751619277
        return (
            PodBuilder(name)
            .requests(cpu="4", memory="1Gi")
            .limits(cpu="4", memory="1Gi")
            .node("n")
            .scheduled_at(scheduled)
        ).build()

    def test_unreported_pod_adds_full_estimate(self) -> None:
        # node usage 3c + assigned 3.4c + incoming 0.25c = 6.65c -> 66.5 -> 67 > 65 -> fail
        h = Harness().node(node()).metric(metric(cpu="3").build()).assigned(self.pod("a", NOW - 5))
        assert h.reason(BE_POD, "n") == "node(s) cpu usage exceed threshold"

    def test_reported_old_pod_is_not_estimated(self) -> None:
        # scheduled 10 min before the report, reported at 1c: counted inside node usage only
        # 3c + 0.25c = 3.25c -> 33 -> pass
        m = metric(cpu="3").pod("default", "a", cpu="1", memory="1Gi").build()
        h = Harness().node(node()).metric(m).assigned(self.pod("a", NOW - 600))
        assert h.reason(BE_POD, "n") is None

    def test_reported_pod_inside_report_interval_adds_delta(self) -> None:
        # scheduled 40 s before the report (< 60 s interval): delta = 3.4c - 1c reported = 2.4c
        # 3c + 2.4c + 0.25c = 5.65c -> 56.5 -> 57 -> pass; with node usage 4c: 6.65c -> 67 -> fail
        report_at = NOW - 30
        m = metric(cpu="4", at=report_at).pod("default", "a", cpu="1", memory="1Gi").build()
        h = Harness().node(node()).metric(m).assigned(self.pod("a", report_at - 40))
        assert h.reason(BE_POD, "n") == "node(s) cpu usage exceed threshold"
        m = metric(cpu="3", at=report_at).pod("default", "a", cpu="1", memory="1Gi").build()
        h = Harness().node(node()).metric(m).assigned(self.pod("a", report_at - 40))
        assert h.reason(BE_POD, "n") is None

    def test_report_interval_from_the_metric_spec(self) -> None:
        # interval 30 s: a pod scheduled 40 s before the report is outside it -> not estimated
        report_at = NOW - 30
        m = metric(cpu="4", at=report_at).report_interval(30).pod("default", "a", cpu="1", memory="1Gi").build()
        h = Harness().node(node()).metric(m).assigned(self.pod("a", report_at - 40))
        assert h.reason(BE_POD, "n") is None  # 4c + 0.25c -> 43 -> pass

    def test_force_estimation_window_after_scheduled(self) -> None:
        # estimatedSecondsAfterPodScheduled 600: deadline = scheduled + 600 > report -> delta 2.4c
        report_at = NOW - 30
        m = metric(cpu="4", at=report_at).pod("default", "a", cpu="1", memory="1Gi").build()
        h = (
            Harness(estimatedSecondsAfterPodScheduled=600)
            .node(node())
            .metric(m)
            .assigned(self.pod("a", report_at - 300))
        )
        assert h.reason(BE_POD, "n") == "node(s) cpu usage exceed threshold"

    def test_force_estimation_window_after_initialized_wins(self) -> None:
        # initialized 500 s before the report with a 100 s window -> deadline in the past -> no delta,
        # even though the after-scheduled window (600 s) would still be open
        report_at = NOW - 30
        raw = self.pod("a", report_at - 520)
        raw["status"]["conditions"].append(  # type: ignore[index]
            {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-11-21T09:51:00Z"}
        )
        m = metric(cpu="4", at=report_at).pod("default", "a", cpu="1", memory="1Gi").build()
        h = (
            Harness(estimatedSecondsAfterPodScheduled=600, estimatedSecondsAfterInitialized=100)
            .node(node())
            .metric(m)
            .assigned(raw)
        )
        assert h.reason(BE_POD, "n") is None

    def test_unassigning_removes_the_estimate(self) -> None:
        h = Harness().node(node()).metric(metric(cpu="3").build()).assigned(self.pod("a", NOW - 5))
        assert h.reason(BE_POD, "n") is not None
        done = self.pod("a", NOW - 5)
        done["status"]["phase"] = "Succeeded"  # type: ignore[index]
        h.assigned(done)
        assert h.reason(BE_POD, "n") is None

    def test_bind_then_filter_sees_the_estimate(self) -> None:
        # the extender's bind path: assume() with no PodScheduled condition uses the bind time
        from koordpy.model.objects import pod_from_dict

        h = Harness().node(node()).metric(metric(cpu="3").build())
        assert h.reason(BE_POD, "n") is None
        pending = PodBuilder("a").requests(cpu="4").limits(cpu="4").build()
        h.state.assume(pod_from_dict(pending), "n", NOW)
        assert h.reason(BE_POD, "n") == "node(s) cpu usage exceed threshold"


SCHEDULED, INITIALIZED = NOW - 100, NOW - 50
AFTER_SCHEDULED = "scheduling.koordinator.sh/load-estimated-seconds-after-pod-scheduled"
AFTER_INITIALIZED = "scheduling.koordinator.sh/load-estimated-seconds-after-initialized"


@pytest.mark.parametrize(
    ("args", "annotations", "initialized", "deadline"),
    [
        # no window configured: the pod is estimated only while the metric has not seen it (no deadline)
        ({}, {}, False, None),
        # after scheduled 600 s: S + 600; 1 s (it matters with a reportIntervalSeconds below 1): S + 1
        ({"estimatedSecondsAfterPodScheduled": 600}, {}, False, SCHEDULED + 600),
        ({"estimatedSecondsAfterPodScheduled": 1}, {}, False, SCHEDULED + 1),
        # after initialized 100 s wins once the pod is initialized: I + 100; not initialized yet: S + 600
        (
            {"estimatedSecondsAfterPodScheduled": 600, "estimatedSecondsAfterInitialized": 100},
            {},
            True,
            INITIALIZED + 100,
        ),
        (
            {"estimatedSecondsAfterPodScheduled": 600, "estimatedSecondsAfterInitialized": 100},
            {},
            False,
            SCHEDULED + 600,
        ),
        # the pod's own windows, when allowed, replace the args: 30 s -> S + 30; not allowed: ignored
        (
            {"allowCustomizeEstimation": True, "estimatedSecondsAfterPodScheduled": 600},
            {AFTER_SCHEDULED: "30"},
            False,
            SCHEDULED + 30,
        ),
        ({"estimatedSecondsAfterPodScheduled": 600}, {AFTER_SCHEDULED: "30"}, False, SCHEDULED + 600),
        # a pod's window of 0 is set (only a negative or unreadable one falls back to the args): no window
        (
            {"allowCustomizeEstimation": True, "estimatedSecondsAfterPodScheduled": 600},
            {AFTER_SCHEDULED: "0"},
            False,
            None,
        ),
        # after initialized 0: that window is off, the after-scheduled one (args 600) applies: S + 600
        (
            {
                "allowCustomizeEstimation": True,
                "estimatedSecondsAfterPodScheduled": 600,
                "estimatedSecondsAfterInitialized": 100,
            },
            {AFTER_INITIALIZED: "0"},
            True,
            SCHEDULED + 600,
        ),
        # after initialized 1 s: I + 1 (the shortest window still counts)
        (
            {"allowCustomizeEstimation": True, "estimatedSecondsAfterPodScheduled": 600},
            {AFTER_INITIALIZED: "1"},
            True,
            INITIALIZED + 1,
        ),
    ],
)
def test_force_estimation_deadline(
    args: dict[str, object], annotations: dict[str, str], initialized: bool, deadline: float | None
) -> None:
    builder = PodBuilder("a").requests(cpu="4").node("n").scheduled_at(SCHEDULED)
    if initialized:
        builder.condition("Initialized", INITIALIZED)
    for key, value in annotations.items():
        builder.annotation(key, value)
    pod = pod_from_dict(builder.build())
    h = Harness(**args).node(node()).metric(metric().build()).assigned(builder.build())
    assert h.plugin.loads["n"].pods[pod.uid].deadline == deadline


class TestProdThresholds:
    def test_prod_pod_uses_prod_usage_only(self) -> None:
        # prod threshold cpu 30%. Node usage 8c (mostly batch); prod pod "a" reports 2c.
        # prod pod incoming (Burstable, req 1 cpu -> 850m): prodUsage 2c + 0.85c = 2.85c -> 28.5 -> 29 -> pass
        m = metric(cpu="8").pod("default", "a", priority="koord-prod", cpu="2", memory="1Gi").build()
        a = PodBuilder("a").requests(cpu="2", memory="1Gi").node("n").scheduled_at(NOW - 3600).build()
        incoming = PodBuilder("p").requests(cpu="1").build()
        h = Harness(prodUsageThresholds={"cpu": 30}, usageThresholds={"cpu": 100}).node(node()).metric(m).assigned(a)
        assert h.reason(incoming, "n") is None
        # a non-prod (batch) pod on the same node is checked against usageThresholds (100) -> pass
        batch = PodBuilder("b").label("koordinator.sh/priority-class", "koord-batch").build()
        assert h.reason(batch, "n") is None

    def test_prod_usage_ignores_pods_reported_as_non_prod(self) -> None:
        # pod is prod by spec but the metric calls it batch: its usage is not in prodUsage,
        # its full estimate (2 cpu req -> 1700m) goes into prodDelta instead.
        # 1.7c + 0.85c = 2.55c -> 25.5 -> 26 <= 25? no -> fail at threshold 25
        m = metric(cpu="8").pod("default", "a", priority="koord-batch", cpu="2", memory="1Gi").build()
        a = PodBuilder("a").requests(cpu="2", memory="1Gi").node("n").scheduled_at(NOW - 3600).build()
        incoming = PodBuilder("p").requests(cpu="1").build()
        h = Harness(prodUsageThresholds={"cpu": 25}).node(node()).metric(m).assigned(a)
        assert h.reason(incoming, "n") == "node(s) cpu usage exceed threshold"

    def test_prod_usage_include_sys(self) -> None:
        # systemUsage 2c added to prodUsage: 2c + 0.85c = 2.85c -> 29 > 25 -> fail; without it 0.85c passes
        m = metric(cpu="8").system_usage(cpu="2").build()
        incoming = PodBuilder("p").requests(cpu="1").build()
        assert Harness(prodUsageThresholds={"cpu": 25}).node(node()).metric(m).reason(incoming, "n") is None
        h = Harness(prodUsageThresholds={"cpu": 25}, prodUsageIncludeSys=True).node(node()).metric(m)
        assert h.reason(incoming, "n") == "node(s) cpu usage exceed threshold"


class TestAggregated:
    ARGS = {
        "aggregated": {"usageThresholds": {"cpu": 50}, "usageAggregationType": "p95", "usageAggregatedDuration": "5m"}
    }

    def test_aggregated_threshold_replaces_instant_thresholds(self) -> None:
        # p95 over 5m = 6c -> 6.25c -> 62.5 -> 63 > 50 -> fail with the aggregated reason,
        # although instant usage 1c would pass
        m = metric(cpu="1").aggregated("5m", "p95", cpu="6", memory="1Gi").build()
        h = Harness(**self.ARGS).node(node()).metric(m)
        assert h.reason(BE_POD, "n") == "node(s) cpu aggregated usage exceed threshold"

    def test_missing_specific_duration_falls_back_to_all_estimates(self) -> None:
        # only a 30m entry exists; 5m configured -> nodeEstimated (no assigned pods) + 0.25c -> pass
        m = metric(cpu="9").aggregated("30m", "p95", cpu="9").build()
        assert Harness(**self.ARGS).node(node()).metric(m).reason(BE_POD, "n") is None

    def test_duration_zero_takes_longest_then_node_usage(self) -> None:
        args = {"aggregated": {"usageThresholds": {"cpu": 50}, "usageAggregationType": "p95"}}
        # longest with data is 30m = 6c -> 63 -> fail
        m = metric(cpu="1").aggregated("5m", "p95", cpu="1").aggregated("30m", "p95", cpu="6").build()
        assert (
            Harness(**args).node(node()).metric(m).reason(BE_POD, "n")
            == "node(s) cpu aggregated usage exceed threshold"
        )
        # no p95 data at all -> nodeUsage 6c -> fail too; nodeUsage 1c -> pass
        assert Harness(**args).node(node()).metric(metric(cpu="6").build()).reason(BE_POD, "n") is not None
        assert Harness(**args).node(node()).metric(metric(cpu="1").build()).reason(BE_POD, "n") is None


class TestNodeAnnotationOverrides:
    KEY = "scheduling.koordinator.sh/usage-thresholds"

    def annotated(self, value: object) -> dict[str, object]:
        return NodeBuilder("n").allocatable(cpu="10", memory="100Gi").annotation(self.KEY, json.dumps(value)).build()

    def test_whole_map_replacement(self) -> None:
        # annotation {cpu: 90}: memory threshold (95 in args) is gone; memory 99Gi passes, cpu 8c passes
        h = (
            Harness()
            .node(self.annotated({"usageThresholds": {"cpu": 90}}))
            .metric(metric(cpu="8", memory="99Gi").build())
        )
        assert h.reason(BE_POD, "n") is None
        # and cpu 9c -> 92.5 -> 93 > 90 fails
        h = Harness().node(self.annotated({"usageThresholds": {"cpu": 90}})).metric(metric(cpu="9").build())
        assert h.reason(BE_POD, "n") == "node(s) cpu usage exceed threshold"

    def test_unparseable_annotation_uses_args(self) -> None:
        raw = NodeBuilder("n").allocatable(cpu="10", memory="100Gi").annotation(self.KEY, "{not json").build()
        h = Harness().node(raw).metric(metric(cpu="7").build())
        assert h.reason(BE_POD, "n") == "node(s) cpu usage exceed threshold"

    def test_annotation_aggregated_needs_type(self) -> None:
        # thresholds without a type -> ignored -> instant thresholds apply (7.25c -> 73 > 65)
        h = Harness().node(self.annotated({"aggregatedUsage": {"usageThresholds": {"cpu": 10}}}))
        h.metric(metric(cpu="7").aggregated("5m", "p95", cpu="1").build())
        assert h.reason(BE_POD, "n") == "node(s) cpu usage exceed threshold"

    def test_only_json_numbers_are_thresholds(self) -> None:
        # a string or a boolean is no threshold: it is dropped and the other resources of the map stay
        annotations = {self.KEY: json.dumps({"usageThresholds": {"cpu": "50", "memory": 60, "example.com/x": True}})}
        profile = threshold_profile(annotations, validate(LoadAwareSchedulingArgs, {}))
        assert profile.usage == {"memory": 60}

    @pytest.mark.parametrize(
        ("aggregated", "expected"),
        [
            # the node's own aggregated set: thresholds, type and duration (30m = 1800 s)
            (
                {"usageThresholds": {"cpu": 70}, "usageAggregationType": "p95", "usageAggregatedDuration": "30m"},
                AggregatedProfile({"cpu": 70}, "p95", 1800.0),
            ),
            # an unreadable duration reads as 0 (the longest with data)
            (
                {"usageThresholds": {"cpu": 70}, "usageAggregationType": "p95", "usageAggregatedDuration": "soon"},
                AggregatedProfile({"cpu": 70}, "p95", 0.0),
            ),
            # no usable aggregated set on the node: the args' (filter enabled: p99 over 5m, cpu 80)
            (None, AggregatedProfile({"cpu": 80}, "p99", 300.0)),
        ],
    )
    def test_aggregated_profile_of_a_node(self, aggregated: object, expected: AggregatedProfile) -> None:
        args = validate(
            LoadAwareSchedulingArgs,
            {
                "aggregated": {
                    "usageThresholds": {"cpu": 80},
                    "usageAggregationType": "p99",
                    "usageAggregatedDuration": "5m",
                }
            },
        )
        value = {"usageThresholds": {"cpu": 60}} if aggregated is None else {"aggregatedUsage": aggregated}
        assert threshold_profile({self.KEY: json.dumps(value)}, args).aggregated == expected

    def test_annotation_prod_thresholds(self) -> None:
        incoming = PodBuilder("p").requests(cpu="1").build()  # prod, 850m
        h = Harness().node(self.annotated({"prodUsageThresholds": {"cpu": 5}})).metric(metric(cpu="1").build())
        # 0.85c -> 8.5 -> 9 > 5 -> fail via the node's prod thresholds
        assert h.reason(incoming, "n") == "node(s) cpu usage exceed threshold"


def test_unknown_node_fails_retryably() -> None:
    h = Harness().node(node())
    outcome = h.state.filter(pod_from_dict(BE_POD), ["n", "ghost"], NOW)
    assert outcome.passed == ["n"]
    assert "ghost" in outcome.failed and not outcome.unresolvable
