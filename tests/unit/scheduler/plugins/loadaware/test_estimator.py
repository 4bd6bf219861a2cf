import pytest

from koordpy.config import LoadAwareSchedulingArgs, validate
from koordpy.model.objects import ObjectError, node_from_dict, pod_from_dict
from koordpy.scheduler.plugins.loadaware import estimate_node, estimate_pod
from koordpy.scheduler.plugins.loadaware.estimator import custom_seconds, go_round
from koordpy_testkit import NodeBuilder, PodBuilder

GI = 2**30
DEFAULTS = validate(LoadAwareSchedulingArgs, {})


@pytest.mark.parametrize(
    ("builder", "expected"),
    [
        # Guaranteed 4 cpu / 8Gi: cpu 4000m*85% = 3400m; memory 8Gi*70% = 6012954214.4 -> 6012954214
        (
            PodBuilder("g").requests(cpu="4", memory="8Gi").limits(cpu="4", memory="8Gi"),
            {"cpu": 3400, "memory": 6012954214},
        ),
        # Burstable req 4 lim 8: q = limit 8000m -> 8000*85% = 6800m (based on the limit)
        (
            PodBuilder("b").requests(cpu="4", memory="1Gi").limits(cpu="8", memory="1Gi"),
            {"cpu": 6800, "memory": 751619277},
        ),
        # BestEffort: nothing set -> 250m and 200MiB defaults
        (PodBuilder("be"), {"cpu": 250, "memory": 200 * 2**20}),
        # request only: 1 cpu * 85% = 850m, no limit cap
        (PodBuilder("r").requests(cpu="1", memory="1Gi"), {"cpu": 850, "memory": 751619277}),
        # rounding half away from zero: 3m * 85% = 2.55m -> 3m; 1m*85% = 0.85 -> 1
        (PodBuilder("tiny").requests(cpu="3m", memory="10"), {"cpu": 3, "memory": 7}),
    ],
)
def test_default_estimator(builder: PodBuilder, expected: dict[str, int]) -> None:
    assert estimate_pod(pod_from_dict(builder.build()), DEFAULTS) == expected


def test_estimate_capped_at_limit() -> None:
    # factor 100 on req=lim=1 -> 1000m; a factor can never push above the limit
    args = validate(LoadAwareSchedulingArgs, {"estimatedScalingFactors": {"cpu": 100}})
    pod = pod_from_dict(PodBuilder("p").requests(cpu="1").limits(cpu="1").build())
    assert estimate_pod(pod, args)["cpu"] == 1000


def test_batch_pods_read_batch_resources() -> None:
    pod = pod_from_dict(
        PodBuilder("batch")
        .label("koordinator.sh/priority-class", "koord-batch")
        .resource("requests", "kubernetes.io/batch-cpu", "2000")
        .resource("requests", "kubernetes.io/batch-memory", str(4 * GI))
        .build()
    )
    # batch-cpu 2000 (milli) * 85% = 1700; batch-memory 4Gi * 70% = 3006477107.2 -> 3006477107
    assert estimate_pod(pod, DEFAULTS) == {"cpu": 1700, "memory": 3006477107}


def test_batch_pod_without_batch_resources_gets_defaults() -> None:
    pod = pod_from_dict(PodBuilder("b").label("koordinator.sh/priority-class", "koord-batch").requests(cpu="8").build())
    assert estimate_pod(pod, DEFAULTS) == {"cpu": 250, "memory": 200 * 2**20}


def test_mid_pods_without_mid_resources_estimate_zero() -> None:
    pod = pod_from_dict(PodBuilder("m").label("koordinator.sh/priority-class", "koord-mid").requests(cpu="8").build())
    assert estimate_pod(pod, DEFAULTS) == {"cpu": 0, "memory": 0}


def test_custom_factors_only_when_allowed() -> None:
    raw = (
        PodBuilder("c")
        .requests(cpu="1", memory="1Gi")
        .annotation("scheduling.koordinator.sh/load-estimated-scaling-factors", '{"cpu": 100}')
        .build()
    )
    pod = pod_from_dict(raw)
    assert estimate_pod(pod, DEFAULTS)["cpu"] == 850
    allowed = validate(LoadAwareSchedulingArgs, {"allowCustomizeEstimation": True})
    # cpu from the annotation (100%), memory merged from args (70%)
    assert estimate_pod(pod, allowed) == {"cpu": 1000, "memory": 751619277}


def test_raw_allocatable_overrides_keys() -> None:
    raw = (
        NodeBuilder("n")
        .allocatable(cpu="32", memory="64Gi")
        .annotation("node.koordinator.sh/raw-allocatable", '{"cpu": "16"}')
        .build()
    )
    estimated = estimate_node(node_from_dict(raw))
    assert estimated["cpu"] == 16000 and estimated["memory"] == 64 * GI
    # An unreadable annotation makes the Node unreadable (ObjectError naming the annotation): falling
    # back to the amplified 32 cpu, as upstream does, would make the node look emptier.
    for bad in ("{oops", '{"cpu": "1e400"}', '{"cpu": "-1"}', "[" * 100_000):
        broken = NodeBuilder("n").allocatable(cpu="32").annotation("node.koordinator.sh/raw-allocatable", bad).build()
        with pytest.raises(ObjectError, match=r"metadata\.annotations\[node\.koordinator\.sh/raw-allocatable\]"):
            node_from_dict(broken)


@pytest.mark.parametrize(
    ("x", "rounded"), [(0.5, 1), (1.5, 2), (2.5, 3), (-0.5, -1), (0.49999999999999994, 0), (2.4, 2)]
)
def test_go_round_is_half_away_from_zero(x: float, rounded: int) -> None:
    assert go_round(x) == rounded


def test_the_plugins_memoised_estimates_equal_estimate_pod() -> None:
    # Pods of the same requests and limits but another priority class (batch reads batch-cpu), or with
    # their own scaling factors, must not get each other's estimate through the memo.
    from koordpy.scheduler.plugins.loadaware import LoadAwarePlugin

    args = validate(LoadAwareSchedulingArgs, {"allowCustomizeEstimation": True})
    plugin = LoadAwarePlugin(args)
    same = {"cpu": "2", "memory": "4Gi", "kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "1Gi"}
    pods = [
        PodBuilder("prod").requests(**same).priority(9500),
        PodBuilder("batch").requests(**same).priority(5500),
        PodBuilder("factors")
        .requests(**same)
        .priority(9500)
        .annotation("scheduling.koordinator.sh/load-estimated-scaling-factors", '{"cpu": 10}'),
        PodBuilder("limits").requests(**same).limits(cpu="3").priority(9500),
    ]
    for _ in range(2):  # the second round is served from the memo (all but the custom factors)
        got = [plugin.estimate(pod_from_dict(b.build())).tolist() for b in pods]
        want = [plugin.vectorize(estimate_pod(pod_from_dict(b.build()), args)).tolist() for b in pods]
        assert got == want
    assert len({tuple(g) for g in got}) == 4  # four different estimates: the memo keys tell them apart
    assert len(plugin._estimates) == 3


FACTORS = "scheduling.koordinator.sh/load-estimated-scaling-factors"
CUSTOM = validate(LoadAwareSchedulingArgs, {"allowCustomizeEstimation": True})


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        # a factor that is not a JSON integer is dropped, the others count: cpu from args 85% = 850m,
        # memory 100% of 1Gi
        ('{"cpu": "100", "memory": 100}', {"cpu": 850, "memory": GI}),
        ('{"cpu": true, "memory": 100}', {"cpu": 850, "memory": GI}),
        # int64's extremes are read as Go reads them: -2^63 makes cpu 1000m * -2^63 / 100 < 0 -> 0,
        # 2^63 - 1 makes it huge and the 1-cpu limit caps it at 1000m; memory 100% either way
        (f'{{"cpu": {-(2**63)}, "memory": 100}}', {"cpu": 0, "memory": GI}),
        (f'{{"cpu": {2**63 - 1}, "memory": 100}}', {"cpu": 1000, "memory": GI}),
        # one factor beyond int64 fails Go's json.Unmarshal: the whole annotation is ignored (85% / 70%)
        (f'{{"cpu": {2**63}, "memory": 100}}', {"cpu": 850, "memory": 751619277}),
        (f'{{"cpu": {-(2**63) - 1}, "memory": 100}}', {"cpu": 850, "memory": 751619277}),
    ],
)
def test_custom_factors_are_int64_integers(annotation: str, expected: dict[str, int]) -> None:
    pod = pod_from_dict(
        PodBuilder("c").requests(cpu="1", memory="1Gi").limits(cpu="1").annotation(FACTORS, annotation).build()
    )
    assert estimate_pod(pod, CUSTOM) == expected


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (None, -1),  # absent
        ("30", 30),
        ("+30", 30),
        ("-5", -5),  # read as Go reads it; callers treat any negative as "not set"
        ("30s", -1),  # not an integer
        ("", -1),
        (str(2**63 - 1), 2**63 - 1),  # int64's extremes are valid
        (str(-(2**63)), -(2**63)),
        ("9999999999999999999", -1),  # 19 digits beyond int64: Go's ParseInt fails
        ("-9999999999999999999", -1),
    ],
)
def test_custom_seconds_reads_an_int64_or_answers_minus_one(value: str | None, seconds: int) -> None:
    annotation = "scheduling.koordinator.sh/load-estimated-seconds-after-pod-scheduled"
    builder = PodBuilder("p")
    if value is not None:
        builder.annotation(annotation, value)
    assert custom_seconds(pod_from_dict(builder.build()), annotation) == seconds


def test_the_plugin_keeps_at_most_4096_estimates() -> None:
    # 4100 pod shapes (requests 1m .. 4100m): the first 4096 estimates are kept, the others computed each time
    from koordpy.scheduler.plugins.loadaware import LoadAwarePlugin

    plugin = LoadAwarePlugin(DEFAULTS)
    for millis in range(1, 4101):
        pod = pod_from_dict(PodBuilder("p").requests(cpu=f"{millis}m").build())
        assert plugin.estimate(pod)[0] == go_round(millis * 0.85)
    assert len(plugin._estimates) == 4096
