"""An extender served by uvicorn on a loopback port inside the test's event loop, fed by hand.

The cache is fed with the same watch handlers the reflectors call (``cache.handler(resource)``), so
these tests exercise conversion + protocol + HTTP; the API-backed tests add the real reflectors.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import pytest
import uvicorn

from koordpy.config import SchedulerConfiguration, validate
from koordpy.kube.client import ApiClient
from koordpy.kube.errors import ApiError
from koordpy.scheduler.extender.inline import inline_verb_protocol
from koordpy.scheduler.extender.server import Extender, build_extender
from koordpy_testkit import FakeClock, NodeBuilder, NodeMetricBuilder
from koordpy_testkit.bounds import HANG_BACKSTOP, eventually

CONFIG = {
    "loadAware": {
        "usageThresholds": {"cpu": 65, "memory": 95},
        "estimatedScalingFactors": {"cpu": 85, "memory": 70},
    },
    "extender": {"maxRequestBytes": 4 * 1024 * 1024},
    "gang": {"requeueSignal": "koordpy-system/koordpy-gang-requeue"},
}


class FakeBinder:
    """Records ``create_binding`` calls; raises ``fail_with`` when set. Reads pods as the API client does
    (``list_page`` with a name selector): ``readable`` is what the read answers (none by default: a pod
    read that finds nothing), ``read_fails_with`` an error it raises instead."""

    def __init__(self) -> None:
        self.readable: list[Any] = []
        self.read_fails_with: Exception | None = None
        self.reads = 0
        self.calls: list[tuple[str, str, str, str]] = []
        self.annotations: list[dict[str, str]] = []
        """The annotations each call's Binding carried, in call order."""
        self.fail_with: ApiError | None = None
        self.gate: asyncio.Event | None = None

    async def create_binding(
        self, namespace: str, name: str, uid: str, node: str, *, annotations: dict[str, str] | None = None
    ) -> dict[str, Any]:
        self.calls.append((namespace, name, uid, node))
        self.annotations.append(dict(annotations or {}))
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_with is not None:
            raise self.fail_with
        return {"kind": "Status", "status": "Success"}

    async def list_page(
        self, resource: Any, *, namespace: str | None = None, field_selector: str | None = None
    ) -> dict[str, Any]:
        self.reads += 1
        if self.read_fails_with is not None:
            raise self.read_fails_with
        name = (field_selector or "").removeprefix("metadata.name=")
        return {"items": [p for p in self.readable if (p.get("metadata") or {}).get("name") == name]}


@dataclass
class Running:
    extender: Extender
    clock: Any
    binder: FakeBinder
    http: httpx.AsyncClient
    url: str
    server: uvicorn.Server
    logs: list[str] = field(default_factory=list)

    def node(self, name: str, cpu: str = "32", memory: str = "128Gi") -> None:
        raw = NodeBuilder(name).allocatable(cpu=cpu, memory=memory, pods="110").build()
        self.extender.cache.handler("nodes")("ADDED", raw)

    def metric(self, name: str, cpu: str, memory: str, age: float = 30.0) -> None:
        raw = NodeMetricBuilder(name).updated(self.clock.now() - age).usage(cpu=cpu, memory=memory).build()
        self.extender.cache.handler("nodemetrics")("ADDED", raw)

    def pod_event(self, event: str, raw: dict[str, Any]) -> None:
        self.extender.cache.handler("pods")(event, raw)

    async def post(self, verb: str, body: Any) -> httpx.Response:
        """POST compact JSON with ``Content-Type: application/json``, as Go's encoding/json writes it."""
        return await self.http.post(
            f"/{verb}", content=orjson.dumps(body), headers={"Content-Type": "application/json"}
        )


def config(**extender: Any) -> SchedulerConfiguration:
    data = {**CONFIG, "extender": {**CONFIG["extender"], **extender}}
    return validate(SchedulerConfiguration, data)


async def start(
    cfg: SchedulerConfiguration, client: ApiClient | None = None, clock: Any = None, *, inline: bool = True
) -> Running:
    """Serve an extender; without ``client`` its binder is a :class:`FakeBinder` and nothing is watched.

    ``inline``: the verbs are answered in the HTTP protocol as ``koordpy extender`` serves them; False:
    through the ASGI app (``VerbFastPath``), the path every request the protocol does not take goes."""
    clock = clock or FakeClock()
    extender = build_extender(cfg, client, clock=clock, freeze_gc=False)
    binder = FakeBinder()
    if client is None:
        extender.service.binder = binder
        extender.service.reader = binder
    server = uvicorn.Server(
        uvicorn.Config(
            extender.app,
            host="127.0.0.1",
            port=0,
            log_config=None,
            access_log=False,
            ws="none",
            lifespan="on",
            http=inline_verb_protocol(extender.service) if inline else "httptools",
        )
    )
    task = asyncio.create_task(server.serve())
    await eventually(lambda: server.started or task.done(), "uvicorn started", interval=0.01)
    if task.done():
        task.result()
    assert server.started, "uvicorn did not start"
    port = server.servers[0].sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    http = httpx.AsyncClient(base_url=url, timeout=HANG_BACKSTOP)
    running = Running(extender, clock, binder, http, url, server)
    running.task = task  # type: ignore[attr-defined]
    return running


async def stop(running: Running) -> None:
    await running.http.aclose()
    running.server.should_exit = True
    await running.task  # type: ignore[attr-defined]


@pytest.fixture
async def make_ext() -> AsyncIterator[Callable[..., Awaitable[Running]]]:
    """``await make_ext(client=..., clock=..., inline=False, bindTimeoutSeconds=0.2)``: an extender with these
    settings (``inline`` as in :func:`start`)."""
    started: list[Running] = []

    async def make(client: ApiClient | None = None, clock: Any = None, inline: bool = True, **extender: Any) -> Running:
        running = await start(config(**extender), client=client, clock=clock, inline=inline)
        started.append(running)
        return running

    try:
        yield make
    finally:
        for running in started:
            await stop(running)


@pytest.fixture
async def ext() -> AsyncIterator[Running]:
    running = await start(config())
    try:
        yield running
    finally:
        await stop(running)
