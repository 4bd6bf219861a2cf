"""GcFreezer: survivors of each full collection are frozen, everything is unfrozen once an interval; and
with the real gc, a frozen cache is skipped by a full collection."""

from __future__ import annotations

import gc
import time
from typing import Any

from koordpy.runtime.gcfreeze import GcFreezer


class FakeGc:
    def __init__(self) -> None:
        self.full = 0
        self.calls: list[str] = []

    def get_stats(self) -> list[dict[str, Any]]:
        return [{"collections": 0}, {"collections": 0}, {"collections": self.full}]

    def freeze(self) -> None:
        self.calls.append("freeze")

    def unfreeze(self) -> None:
        self.calls.append("unfreeze")

    def collect(self, generation: int = 2) -> int:
        self.calls.append(f"collect({generation})")
        return 0


def test_freezes_after_each_full_collection_and_unfreezes_once_an_interval() -> None:
    fake = FakeGc()
    now = [0.0]
    freezer = GcFreezer(3600, warmup_seconds=0, gc_module=fake, clock=lambda: now[0])
    freezer.tick()
    assert fake.calls == []  # no full collection yet
    fake.full = 1
    freezer.tick()
    freezer.tick()
    assert fake.calls == ["collect(1)", "freeze"]  # once per full collection, the young garbage freed first
    fake.full = 3  # two ran between ticks: one freeze covers both
    now[0] = 10.0
    freezer.tick()
    assert fake.calls == ["collect(1)", "freeze"] * 2
    now[0] = 3600.0
    fake.full = 4
    freezer.tick()  # the interval is over: unfreeze (the next full collection sees every object once)
    assert fake.calls == ["collect(1)", "freeze", "collect(1)", "freeze", "unfreeze"]
    freezer.tick()
    assert fake.calls[-1] == "unfreeze" and (freezer.freezes, freezer.unfreezes) == (2, 1)


def test_while_warming_up_every_tick_freezes() -> None:
    fake = FakeGc()
    now = [0.0]
    freezer = GcFreezer(3600, warmup_seconds=300, gc_module=fake, clock=lambda: now[0])
    for at in (1.0, 2.0, 299.0):
        now[0] = at
        freezer.tick()
    assert fake.calls == ["collect(1)", "freeze"] * 3
    now[0] = 300.0
    freezer.tick()  # warmed up, no full collection since: nothing
    assert fake.calls == ["collect(1)", "freeze"] * 3


def test_a_frozen_cache_is_not_walked_by_full_collections() -> None:
    cache = [{"metadata": {"name": f"job-{i}", "labels": {"a": "b"}}, "spec": {"podRef": {}}} for i in range(50_000)]
    gc.collect()
    before = gc.get_freeze_count()
    try:
        gc.freeze()
        assert gc.get_freeze_count() - before >= len(cache)  # the cache's dicts are in the permanent generation
        started = time.process_time()
        gc.collect()
        frozen_cpu = time.process_time() - started
        gc.unfreeze()
        started = time.process_time()
        gc.collect()
        full_cpu = time.process_time() - started
    finally:
        gc.unfreeze()
    assert frozen_cpu < full_cpu  # CPU time, not wall time: the frozen walk skips 200,000 objects
    del cache


class _Node:
    """A reference cycle holding a payload, as kopf's per-event objects (a body and its views) are."""

    def __init__(self, payload: bytes) -> None:
        self.payload = payload
        self.me = self


def test_cyclic_garbage_made_before_a_freeze_is_freed_not_frozen() -> None:
    """A cycle that became garbage since the last collection: the freezer's tick (while warming up, every
    tick freezes) frees it; frozen, it would outlive every full collection until the next unfreeze."""
    import weakref

    was_enabled = gc.isenabled()
    gc.disable()  # no automatic collection between making the garbage and the tick
    try:
        node = _Node(b"x" * 1024)
        alive = weakref.ref(node)
        del node  # garbage now, but only the cyclic collector can free it
        assert alive() is not None
        freezer = GcFreezer(3600, warmup_seconds=300)
        freezer.tick()
        gc.collect()  # a full collection skips frozen objects: only a cycle not frozen can be freed here
        assert alive() is None
    finally:
        gc.unfreeze()
        if was_enabled:
            gc.enable()
