"""State the extender keeps per node and per pod goes with its object: nothing grows while nodes and pods come
and go (autoscaled clusters, batch jobs). The cache is fed with the watch handlers the reflectors call; the
verbs are the service's own, with a binder that records."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from koordpy.config import SchedulerConfiguration, validate
from koordpy.scheduler.extender.server import Extender, build_extender
from koordpy_testkit import FakeClock, NodeBuilder, NodeMetricBuilder, PodBuilder

NODES = ["n0", "n1", "n2"]


class Binder:
    async def create_binding(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return {}

    async def list_page(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return {"items": []}


def extender() -> Extender:
    clock = FakeClock()
    ext = build_extender(validate(SchedulerConfiguration, {}), None, clock=clock, freeze_gc=False)
    ext.service.binder = ext.service.reader = Binder()
    for name in NODES:
        ext.cache.handler("nodes")("ADDED", NodeBuilder(name).allocatable(cpu="32", memory="128Gi", pods="110").build())
        metric = NodeMetricBuilder(name).updated(clock.now()).usage(cpu="1", memory="1Gi").build()
        ext.cache.handler("nodemetrics")("ADDED", metric)
    return ext


def pending_pod(name: str) -> dict[str, Any]:
    raw = PodBuilder(name, "team").requests(cpu="1", memory="1Gi").build()
    raw["metadata"]["resourceVersion"] = "3"
    return raw


async def filter_and_bind(ext: Extender, raw: dict[str, Any], node: str) -> None:
    ext.cache.handler("pods")("ADDED", raw)
    ext.service.filter(orjson.dumps({"Pod": raw, "Nodes": None, "NodeNames": NODES}), 0.0)
    meta = raw["metadata"]
    args = {"PodName": meta["name"], "PodNamespace": "team", "PodUID": meta["uid"], "Node": node}
    answer = await ext.service.bind(orjson.dumps(args))
    assert orjson.loads(answer.body) == {"Error": ""}


def test_a_deleted_node_leaves_no_placement_record() -> None:
    async def run() -> None:
        ext = extender()
        for i, node in enumerate(NODES):
            await filter_and_bind(ext, pending_pod(f"p{i}"), node)
        assert sorted(ext.service._placed_on) == NODES
        ext.cache.handler("nodes")("DELETED", NodeBuilder("n1").build())
        assert sorted(ext.service._placed_on) == ["n0", "n2"]
        await ext.gangs.close()  # type: ignore[union-attr]

    asyncio.run(run())


def test_a_deleted_pod_leaves_no_request_filter_mark_or_preemption_backoff() -> None:
    async def run() -> None:
        ext = extender()
        raws = [pending_pod(f"p{i}") for i in range(3)]
        for raw, node in zip(raws, NODES, strict=True):
            await filter_and_bind(ext, raw, node)
        service = ext.service
        uids = {raw["metadata"]["uid"] for raw in raws}
        service.backoff.offered(raws[0]["metadata"]["uid"], ["n0"])  # a pod that preempted
        service.backoff.observe(raws[0]["metadata"]["uid"], "n0", 0.0)
        assert set(service._recent) == uids and set(service._filtered_at) == uids and len(service.backoff) == 1
        for raw in raws:
            bound = {**raw, "spec": {**raw["spec"], "nodeName": "n0"}}
            ext.cache.handler("pods")("DELETED", bound)
        assert (len(service._recent), len(service._filtered_at), len(service.backoff)) == (0, 0, 0)
        await ext.gangs.close()  # type: ignore[union-attr]

    asyncio.run(run())


def test_a_deleted_podgroup_leaves_no_ignored_fields_warning() -> None:
    async def run() -> None:
        ext = extender()
        gangs = ext.gangs
        assert gangs is not None
        handle = gangs.podgroup_handler("scheduling.volcano.sh")
        podgroup = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "team", "uid": "pg-1", "resourceVersion": "1"},
            "spec": {"minMember": 2, "queue": "research"},  # a field koordpy does not honour: warned once
        }
        handle("ADDED", podgroup)
        assert list(gangs._ignored) == ["team/train"]
        handle("DELETED", podgroup)
        assert gangs._ignored == {}
        await gangs.close()

    asyncio.run(run())
