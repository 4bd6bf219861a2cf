"""Fuzz the three extender verbs over the ASGI app: always a 2xx or 4xx with a valid JSON body, never a
5xx, never ``internal error``, and the cluster behind it holds objects with hostile quantities
(1e99999999, 1e400).

One extender (no API client, a recording binder) serves every example through ``httpx.ASGITransport``
in one event loop. Bounded and reproducible: ``derandomize``, ``max_examples``, CPU seconds per example.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from koordpy.config import SchedulerConfiguration, validate
from koordpy.scheduler.extender.server import Extender, build_extender
from koordpy_testkit import FakeClock, NodeBuilder, NodeMetricBuilder
from koordpy_testkit.bounds import cpu_bounded

FUZZ = settings(
    max_examples=250,
    deadline=None,  # wall-clock time; each example is bounded in CPU seconds (cpu_bounded)
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)
HOSTILE = ["1e99999999", "1e400", "-1", "\uff11", "\u0663Gi", "8Ei", "9223372036854775808", "Gi"]
NODES = ["n0", "n1", "n2", "n3", "n4"]


class RecordingBinder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str, str]] = []
        self.annotations: list[dict[str, str]] = []
        """The annotations each call's Binding carried, in call order."""

    async def create_binding(
        self, namespace: str, name: str, uid: str, node: str, *, annotations: dict[str, str] | None = None
    ) -> dict[str, Any]:
        self.calls.append((namespace, name, uid, node))
        self.annotations.append(dict(annotations or {}))
        return {}


class Served:
    def __init__(self, runner: asyncio.Runner, extender: Extender, http: httpx.AsyncClient) -> None:
        self.runner, self.extender, self.http = runner, extender, http

    def post(self, verb: str, body: bytes) -> httpx.Response:
        headers = {"Content-Type": "application/json"}
        return self.runner.run(self.http.post(f"/{verb}", content=body, headers=headers))


def _seed(extender: Extender, clock: FakeClock) -> None:
    nodes, metrics = extender.cache.handler("nodes"), extender.cache.handler("nodemetrics")
    for name in NODES[:4]:
        nodes("ADDED", NodeBuilder(name).allocatable(cpu="32", memory="128Gi", pods="110").build())
    fresh = clock.now() - 30
    metrics("ADDED", NodeMetricBuilder("n0").updated(fresh).usage(cpu="4", memory="8Gi").build())
    # n1: readable node, metric with an out-of-range usage; n2: raw-allocatable out of range; n3: both.
    metrics("ADDED", NodeMetricBuilder("n1").updated(fresh).usage(cpu="1e99999999", memory="1Gi").build())
    annotated = NodeBuilder("n2").allocatable(cpu="32", memory="128Gi")
    nodes("MODIFIED", annotated.annotation("node.koordinator.sh/raw-allocatable", '{"cpu":"1e400"}').build())
    metrics("ADDED", NodeMetricBuilder("n3").updated(fresh).usage(cpu="-2", memory="1e400").build())
    nodes("MODIFIED", NodeBuilder("n3").allocatable(cpu="1e400").build())


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    cfg = validate(
        SchedulerConfiguration,
        {"loadAware": {"usageThresholds": {"cpu": 65, "memory": 95}}, "extender": {"maxRequestBytes": 1 << 20}},
    )
    clock = FakeClock()
    extender = build_extender(cfg, None, clock=clock, freeze_gc=False)
    extender.service.binder = RecordingBinder()
    _seed(extender, clock)
    with asyncio.Runner() as runner:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=extender.app), base_url="http://extender")
        yield Served(runner, extender, http)
        runner.run(http.aclose())


scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=6))
json_values = st.recursive(
    st.one_of(scalars, st.sampled_from(HOSTILE)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=6,
)
quantity = st.one_of(st.sampled_from(["100m", "1", "2Gi", *HOSTILE]), scalars)
resources = st.dictionaries(st.sampled_from(["cpu", "memory"]), quantity, max_size=2)
pods = st.one_of(
    st.fixed_dictionaries(
        {
            "metadata": st.fixed_dictionaries(
                {"name": st.just("p"), "namespace": st.just("default")},
                optional={"uid": st.sampled_from(["u1", "u2"]), "resourceVersion": st.sampled_from(["1", "2"])},
            ),
            "spec": st.fixed_dictionaries(
                {
                    "containers": st.lists(
                        st.one_of(
                            st.fixed_dictionaries(
                                {"name": st.just("c")},
                                optional={
                                    "resources": st.fixed_dictionaries(
                                        {}, optional={"requests": resources, "limits": resources}
                                    )
                                },
                            ),
                            json_values,
                        ),
                        max_size=2,
                    )
                },
                optional={"priority": scalars},
            ),
        }
    ),
    json_values,
)
names = st.lists(st.one_of(st.sampled_from(NODES), st.text(max_size=5), scalars), max_size=6)
args = st.fixed_dictionaries({"Pod": pods}, optional={"NodeNames": st.one_of(names, json_values), "Nodes": json_values})
dns_ish = st.one_of(st.sampled_from(["default", "p", "n0", "..", "a/b", "%2e%2e", "", "Default"]), st.text(max_size=8))
bind_args = st.fixed_dictionaries(
    {},
    optional={
        "PodName": st.one_of(dns_ish, scalars),
        "PodNamespace": st.one_of(dns_ish, scalars),
        "PodUID": st.one_of(dns_ish, scalars),
        "Node": st.one_of(dns_ish, scalars),
    },
)

POD_1E400 = {"metadata": {"name": "p"}, "spec": {"containers": [{"resources": {"requests": {"cpu": "1e400"}}}]}}


def _dumps(value: Any) -> bytes:
    """Standard JSON (integers of any size, which orjson refuses to write)."""
    return json.dumps(value).encode()


def _json(resp: httpx.Response) -> Any:
    assert 200 <= resp.status_code < 500, resp.text
    return orjson.loads(resp.content)  # raises on invalid JSON


@FUZZ
@given(st.one_of(args.map(_dumps), st.binary(max_size=64)))
@example(orjson.dumps({"Pod": POD_1E400, "NodeNames": NODES}))
@example(orjson.dumps({"Pod": {"metadata": {"name": "p"}, "spec": {}}, "NodeNames": NODES}))
@cpu_bounded(2)
def test_filter_answers_cleanly(served: Served, body: bytes) -> None:
    answer = _json(served.post("filter", body))
    assert isinstance(answer, dict) and isinstance(answer.get("Error", ""), str)
    assert "internal error" not in answer.get("Error", "")
    failed = answer.get("FailedNodes") or {}
    # The hostile nodes are never passed: unknown usage or allocatable is the safe side.
    for bad in ("n1", "n2", "n3"):
        assert bad not in (answer.get("NodeNames") or [])
        if bad in failed:
            assert failed[bad] in ("node(s) nodeMetric invalid", "node(s) Node object invalid")


@FUZZ
@given(st.one_of(args.map(_dumps), st.binary(max_size=64)))
@example(orjson.dumps({"Pod": {"metadata": {"name": "p"}, "spec": {}}, "NodeNames": NODES}))
@cpu_bounded(2)
def test_prioritize_answers_valid_json(served: Served, body: bytes) -> None:
    resp = served.post("prioritize", body)
    answer = _json(resp)
    if resp.status_code == 200:
        assert isinstance(answer, list)
        for row in answer:
            assert set(row) == {"Host", "Score"} and 1 <= row["Score"] <= 10  # 0: left out
            assert row["Host"] not in ("n2", "n3")


@FUZZ
@given(bind_args.map(_dumps))
@example(orjson.dumps({"PodName": "p", "PodNamespace": "..", "PodUID": "u", "Node": "n0"}))
@cpu_bounded(2)
def test_bind_checks_names_before_binding(served: Served, body: bytes) -> None:
    binder = served.extender.service.binder
    assert isinstance(binder, RecordingBinder)
    before = len(binder.calls)
    resp = served.post("bind", body)
    answer = _json(resp)
    assert isinstance(answer["Error"], str) and "internal error" not in answer["Error"]
    if resp.status_code != 200:
        assert len(binder.calls) == before
    for namespace, name, _uid, node in binder.calls[before:]:
        for part in (namespace, name, node):
            assert part and "/" not in part and ".." not in part and part == part.lower()
