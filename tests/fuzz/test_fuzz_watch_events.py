"""Fuzz: arbitrary watch lines and list items through the client's decoder and the reflector's list and
watch paths never raise, and a good event after them is always applied with its resourceVersion.

Bounded: explicit ``max_examples`` and CPU seconds per example, derandomized (the same examples on every run).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from koordpy.kube.client import ListResult, _decode_event
from koordpy.kube.reflector import Reflector
from koordpy.kube.resources import NODES
from koordpy_testkit.bounds import cpu_bounded

SENTINEL = "zz-last-good"  # random names below use [a-c] only, so never this one
SENTINEL_RV = "99999999"
BOUNDED = settings(
    max_examples=150,
    deadline=None,  # wall-clock time; each example is bounded in CPU seconds (cpu_bounded)
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)

scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats() | st.text(max_size=8)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)
names = st.text(alphabet="abc", max_size=3) | scalars
metadata = st.fixed_dictionaries(
    {},
    optional={
        "name": names,
        "namespace": st.sampled_from(["", "default"]) | scalars,
        "resourceVersion": st.from_regex(r"\A[0-9]{1,4}\Z") | scalars,
        "uid": st.text(alphabet="abc", max_size=3) | scalars,
    },
)
objects = st.fixed_dictionaries({}, optional={"metadata": metadata | json_values, "spec": json_values}) | json_values
event_types = st.sampled_from(["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "", "SURPRISE"]) | scalars
events = st.fixed_dictionaries({}, optional={"type": event_types, "object": objects}) | json_values


class FakeClient:
    """What the reflector calls: one list, one watch stream of already decoded events, Event posts."""

    def __init__(self, items: list[Any], stream: list[tuple[str, dict[str, Any]]]) -> None:
        self.items = items
        self.stream = stream
        self.posted = 0

    async def list(self, *_: Any, **__: Any) -> ListResult:
        return ListResult(list(self.items), "1")

    async def watch(self, *_: Any, **__: Any) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        for event in self.stream:
            yield event

    async def create_event(self, *_: Any, **__: Any) -> dict[str, Any]:
        self.posted += 1
        return {}


def decoded(raw: Any) -> tuple[str, dict[str, Any]] | None:
    """The event as ``ApiClient.watch`` would yield it; None for an ERROR event (the client raises those)."""
    if isinstance(raw, dict) and raw.get("type") == "ERROR":
        return None
    return _decode_event(orjson.dumps(raw))


def run(items: list[Any], raw_events: list[Any], *, last_good: bool = True) -> tuple[Reflector, list[tuple[str, str]]]:
    delivered: list[tuple[str, str]] = []

    def handler(etype: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        delivered.append((etype, name))
        if name.startswith("c"):
            raise RuntimeError("a handler bug")  # contained by the reflector

    good = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": SENTINEL, "resourceVersion": SENTINEL_RV}}
    stream = [e for e in (decoded(raw) for raw in raw_events) if e is not None]
    if last_good:
        stream.append(("ADDED", good))
    reflector = Reflector(FakeClient(items, stream), NODES, handler, post_events=True)  # type: ignore[arg-type]

    async def main() -> None:
        await reflector._list()
        await reflector._watch()
        await asyncio.sleep(0)  # let the Event posts run

    asyncio.run(main())
    return reflector, delivered


@BOUNDED
@given(items=st.lists(objects, max_size=5), raw_events=st.lists(events, max_size=10))
@example(items=[None], raw_events=[{"type": "MODIFIED", "object": {"metadata": "oops"}}])
@example(items=[{"metadata": {"name": "a"}}, None, 5], raw_events=[[1, 2], "x", None, {"type": "BOOKMARK"}])
@example(
    items=[],
    raw_events=[{"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": 7}}}],
)
@cpu_bounded(2)
def test_malformed_events_never_raise_and_never_block_a_later_good_event(
    items: list[Any], raw_events: list[Any]
) -> None:
    reflector, delivered = run(items, raw_events)
    assert delivered[-1] == ("ADDED", SENTINEL)
    assert reflector.resource_version == SENTINEL_RV
    assert SENTINEL in reflector.known
    assert reflector.errors == 0


@settings(BOUNDED, max_examples=75)
@given(raw_events=st.lists(events, max_size=10))
@cpu_bounded(2)
def test_a_skipped_event_with_a_string_resource_version_advances_it(raw_events: list[Any]) -> None:
    poison = {"type": "MODIFIED", "object": {"metadata": {"name": 5, "resourceVersion": "4242"}}}
    reflector, delivered = run([], [*raw_events, poison], last_good=False)
    assert reflector.resource_version == "4242"  # skipped, yet a resume starts after it
    assert reflector.bad_objects["missing_name"] >= 1
    assert all(isinstance(name, str) and name for _, name in delivered)  # only named objects reach handlers
