"""Assembly of the ``koordpy extender`` process: cluster state, watches, app and uvicorn.

``build_extender`` wires everything around an optional API client (tests pass one pointed at the
emulator, or none to feed the cache by hand). The app's lifespan opens the client, starts one
reflector per resource (nodes, pods in all namespaces, NodeMetrics), and once every first list is
delivered freezes the garbage collector's view of the cache (``gc.freeze``) so full collections stop
walking it on the hot path.

Not guaranteed: readiness without the NodeMetric CRD (its reflector keeps retrying, so the extender
stays unready: load-aware scheduling needs the metrics).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from koordpy.config.scheduler import SchedulerConfiguration
from koordpy.kube.client import ApiClient
from koordpy.kube.reflector import Reflector, run_reflectors
from koordpy.kube.resources import NODEMETRICS, NODES, PODS, ResourceRef
from koordpy.model.clock import Clock
from koordpy.runtime.clock import SystemClock
from koordpy.runtime.logging import get_logger
from koordpy.runtime.metrics import new_registry
from koordpy.scheduler.extender.app import create_app
from koordpy.scheduler.extender.cache import ClusterCache
from koordpy.scheduler.extender.metrics import ExtenderMetrics
from koordpy.scheduler.extender.protocol import HostFragments
from koordpy.scheduler.extender.service import ExtenderService
from koordpy.scheduler.framework.cluster import ClusterState
from koordpy.scheduler.profile import build_plugins

__all__ = ["Extender", "build_extender", "serve"]

WATCHED: tuple[tuple[str, ResourceRef], ...] = (("nodes", NODES), ("pods", PODS), ("nodemetrics", NODEMETRICS))


@dataclass
class Extender:
    """One assembled extender. ``reflectors`` is empty without an API client."""

    app: FastAPI
    service: ExtenderService
    cache: ClusterCache
    state: ClusterState
    registry: CollectorRegistry
    reflectors: list[Reflector] = field(default_factory=list)
    synced: asyncio.Event | None = None
    """Set once every reflector delivered its first list (and the GC was frozen)."""

    def not_ready(self) -> str | None:
        waiting = [r.resource.plural for r in self.reflectors if not r.synced.is_set()]
        if waiting:
            return "waiting for the first list of " + ", ".join(waiting)
        return None

    def watch_stats(self) -> Mapping[str, Mapping[str, int]]:
        return {r.resource.plural: {"restarts": r.restarts, "relists": r.relists} for r in self.reflectors}


def build_extender(
    config: SchedulerConfiguration,
    client: ApiClient | None,
    *,
    clock: Clock | None = None,
    registry: CollectorRegistry | None = None,
    freeze_gc: bool = True,
) -> Extender:
    clock = clock or SystemClock()
    registry = registry or new_registry()
    log = get_logger("koordpy.extender")
    fragments = HostFragments()
    state = ClusterState([*build_plugins(config), fragments])
    cache = ClusterCache(state, clock, log)
    metrics = ExtenderMetrics(registry)
    reflectors: list[Reflector] = []
    if client is not None:
        reflectors = [
            Reflector(
                client,
                resource,
                cache.handler(name),
                watch_timeout_seconds=config.extender.watch_timeout_seconds,
            )
            for name, resource in WATCHED
        ]
    holder: dict[str, Extender] = {}

    def not_ready() -> str | None:
        return holder["extender"].not_ready()

    service = ExtenderService(
        cache=cache,
        fragments=fragments,
        settings=config.extender,
        metrics=metrics,
        binder=client,
        clock=clock,
        log=log,
        not_ready=not_ready,
    )

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        extender = holder["extender"]
        if client is None:
            yield
            return
        await client.open()
        watches = asyncio.create_task(run_reflectors(reflectors), name="extender reflectors")
        freezer = asyncio.create_task(_after_sync(extender, freeze_gc, log), name="extender sync")
        try:
            yield
        finally:
            for task in (freezer, watches):
                task.cancel()
            for task in (freezer, watches):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            await client.close()

    app = create_app(service, registry, lifespan=lifespan)
    extender = Extender(app, service, cache, state, registry, reflectors, asyncio.Event())
    holder["extender"] = extender
    metrics.watch_collector(cache, extender.watch_stats)
    return extender


async def _after_sync(extender: Extender, freeze_gc: bool, log: Any) -> None:
    for reflector in extender.reflectors:
        await reflector.synced.wait()
    if freeze_gc:
        gc.collect()
        gc.freeze()
    log.info("cache.synced", **extender.cache.sizes(), gc_frozen=freeze_gc)
    assert extender.synced is not None
    extender.synced.set()


def uvicorn_config(app: FastAPI, host: str, port: int) -> uvicorn.Config:
    """One worker, uvloop + httptools, no access log (one line per filter call would be noise)."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        loop="uvloop",
        http="httptools",
        access_log=False,
        log_config=None,
        lifespan="on",
        timeout_keep_alive=75,
    )


def serve(config: SchedulerConfiguration, client: ApiClient, host: str, port: int) -> None:
    """Run the extender until SIGINT/SIGTERM (blocking)."""
    extender = build_extender(config, client)
    uvicorn.Server(uvicorn_config(extender.app, host, port)).run()
