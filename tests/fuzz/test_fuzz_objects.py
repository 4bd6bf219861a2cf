"""Fuzz object conversion: a pod, node or NodeMetric built from any JSON raises ObjectError or nothing.

Objects are drawn around the real shapes (so the fuzzer reaches the quantity and resource code, not
just the first type check) with any JSON value, hostile quantity or Unicode digit in any slot.
Bounded and reproducible as the quantity fuzz tests (``derandomize``, ``max_examples``, CPU seconds per example).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from koordpy.model.objects import (
    ANNOTATION_RAW_ALLOCATABLE,
    ObjectError,
    node_from_dict,
    nodemetric_from_dict,
    pod_from_dict,
)
from koordpy_testkit.bounds import cpu_bounded

FUZZ = settings(
    max_examples=300,
    deadline=None,  # wall-clock time; each example is bounded in CPU seconds (cpu_bounded)
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)

HOSTILE = ["1e99999999", "1e400", "-1", "\uff11", "\u0663Gi", "8Ei", "9223372036854775808", "Gi", "1e-99999999"]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=8),
    st.sampled_from(HOSTILE),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8,
)
quantities = st.one_of(st.sampled_from(["1", "250m", "2Gi", *HOSTILE]), scalars)
resource_lists = st.one_of(
    st.dictionaries(st.sampled_from(["cpu", "memory", "pods", "kubernetes.io/batch-cpu"]), quantities, max_size=3),
    json_values,
)
maybe = st.one_of  # readability: maybe(good shape, anything)


def containers() -> st.SearchStrategy[Any]:
    container = maybe(
        st.fixed_dictionaries(
            {"name": st.just("c")},
            optional={
                "resources": maybe(
                    st.fixed_dictionaries({}, optional={"requests": resource_lists, "limits": resource_lists}),
                    json_values,
                )
            },
        ),
        json_values,
    )
    return maybe(st.lists(container, max_size=3), json_values)


pods = st.fixed_dictionaries(
    {"metadata": maybe(st.fixed_dictionaries({"name": st.just("p")}, optional={"labels": json_values}), json_values)},
    optional={
        "spec": maybe(
            st.fixed_dictionaries(
                {},
                optional={
                    "containers": containers(),
                    "initContainers": containers(),
                    "overhead": resource_lists,
                    "priority": scalars,
                    "terminationGracePeriodSeconds": scalars,
                },
            ),
            json_values,
        ),
        "status": json_values,
    },
)

raw_allocatable = st.one_of(
    st.dictionaries(st.sampled_from(["cpu", "memory"]), quantities, max_size=2).map(json.dumps),
    st.text(max_size=12),
    st.just("[" * 50_000),
)
nodes = st.fixed_dictionaries(
    {
        "metadata": maybe(
            st.fixed_dictionaries(
                {"name": st.just("n")},
                optional={
                    "annotations": maybe(
                        st.fixed_dictionaries({ANNOTATION_RAW_ALLOCATABLE: raw_allocatable}), json_values
                    )
                },
            ),
            json_values,
        )
    },
    optional={
        "status": maybe(
            st.fixed_dictionaries({}, optional={"allocatable": resource_lists, "capacity": resource_lists}), json_values
        ),
        "spec": json_values,
    },
)

resource_maps = maybe(st.fixed_dictionaries({"resources": resource_lists}), json_values)
nodemetrics = st.fixed_dictionaries(
    {"metadata": maybe(st.fixed_dictionaries({"name": st.just("n")}), json_values)},
    optional={
        "spec": maybe(
            st.fixed_dictionaries(
                {
                    "metricCollectPolicy": st.fixed_dictionaries(
                        {}, optional={"reportIntervalSeconds": scalars, "aggregateDurationSeconds": scalars}
                    )
                }
            ),
            json_values,
        ),
        "status": maybe(
            st.fixed_dictionaries(
                {},
                optional={
                    "updateTime": scalars,
                    "nodeMetric": maybe(
                        st.fixed_dictionaries(
                            {},
                            optional={
                                "nodeUsage": resource_maps,
                                "systemUsage": resource_maps,
                                "aggregatedNodeUsages": maybe(
                                    st.lists(
                                        st.fixed_dictionaries(
                                            {},
                                            optional={
                                                "duration": scalars,
                                                "usage": maybe(
                                                    st.dictionaries(
                                                        st.sampled_from(["avg", "p95"]), resource_maps, max_size=2
                                                    ),
                                                    json_values,
                                                ),
                                            },
                                        ),
                                        max_size=2,
                                    ),
                                    json_values,
                                ),
                            },
                        ),
                        json_values,
                    ),
                    "podsMetric": maybe(
                        st.lists(
                            st.fixed_dictionaries({"name": st.just("p")}, optional={"podUsage": resource_maps}),
                            max_size=2,
                        ),
                        json_values,
                    ),
                },
            ),
            json_values,
        ),
    },
)


@FUZZ
@given(pods)
@example({"metadata": {"name": "p"}, "spec": {"containers": [None, 5]}})
@example({"metadata": {"name": "p"}, "spec": {"containers": [{"resources": {"limits": {"cpu": "1e400"}}}]}})
@example({"metadata": {"name": "p"}, "spec": {"containers": [{"resources": {"requests": {"cpu": "1e99999999"}}}]}})
@cpu_bounded(0.5)
def test_pod_conversion_raises_only_object_error(raw: Any) -> None:
    with contextlib.suppress(ObjectError):
        pod_from_dict(raw)


@FUZZ
@given(nodes)
@example({"metadata": {"name": "n", "annotations": {ANNOTATION_RAW_ALLOCATABLE: '{"cpu":"1e99999999"}'}}})
@example({"metadata": {"name": "n", "annotations": {ANNOTATION_RAW_ALLOCATABLE: '{"cpu":"1e400"}'}}})
@example({"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "1e400"}}})
@cpu_bounded(0.5)
def test_node_conversion_raises_only_object_error(raw: Any) -> None:
    with contextlib.suppress(ObjectError):
        node_from_dict(raw)


@FUZZ
@given(nodemetrics)
@example({"metadata": {"name": "n"}, "status": {"nodeMetric": {"nodeUsage": {"resources": {"cpu": "1e99999999"}}}}})
@example({"metadata": {"name": "n"}, "status": {"nodeMetric": {"nodeUsage": {"resources": {"cpu": "1e400"}}}}})
@example({"metadata": {"name": "n"}, "status": {"nodeMetric": {"nodeUsage": {"resources": {"cpu": "-1"}}}}})
@cpu_bounded(0.5)
def test_nodemetric_conversion_raises_only_object_error(raw: Any) -> None:
    try:
        metric = nodemetric_from_dict(raw)
    except ObjectError:
        return
    # Whatever was accepted is usable downstream: non-negative integers within int64.
    for usage in (metric.node_usage or {}, metric.system_usage, *(p.usage for p in metric.pods)):
        assert all(type(v) is int and 0 <= v < 2**63 for v in usage.values())
