"""Assembly of the ``koordpy extender`` process: cluster state, watches, app and uvicorn.

``build_extender`` wires everything around an optional API client (tests pass one pointed at the
emulator, or none to feed the cache by hand). The app's lifespan opens the client, starts one
reflector per resource (nodes, pods in all namespaces, NodeMetrics, Reservations), and once every first list is
delivered freezes the garbage collector's view of the cache (``gc.freeze``) so full collections stop
walking it on the hot path.

``serve`` first checks the uvicorn internals the fast path stands on (:mod:`koordpy.scheduler.extender.fastpath`
chooses how to serve), then runs the main uvicorn server (the verbs, on loopback) and, with
``extender.metricsPort``, a second one for the operations app (``/healthz``, ``/readyz``, ``/metrics``) in
the same event loop. The main server keeps the lifespan (the watches); the signals are handled once for
both (``serve_all``).

Not guaranteed: readiness without the NodeMetric or the Reservation CRD (its reflector keeps retrying,
so the extender stays unready: load-aware scheduling needs the metrics, and a pod filtered before the
Reservations are known could take reserved room).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Literal

import uvicorn
import uvloop
from fastapi import FastAPI
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette

from koordpy.config.scheduler import SchedulerConfiguration
from koordpy.kube.binder import BindingClient
from koordpy.kube.client import ApiClient
from koordpy.kube.credentials import CredentialsWatch, pod_from_env, register_credentials_metrics
from koordpy.kube.reflector import Reflector, run_reflectors
from koordpy.kube.resources import (
    NODEMETRICS,
    NODES,
    PODGROUPS,
    PODGROUPS_NATIVE,
    PODGROUPS_VOLCANO,
    PODGROUPS_X_K8S,
    PODS,
    RESERVATIONS,
    ResourceRef,
)
from koordpy.kube.watchmetrics import register_reflector_metrics
from koordpy.model.clock import Clock
from koordpy.model.objects import PodInfo
from koordpy.runtime.clock import SystemClock
from koordpy.runtime.listeners import DEFAULT_LIMITS, ListenerLimits
from koordpy.runtime.logging import get_logger
from koordpy.runtime.metrics import new_registry
from koordpy.scheduler.extender.app import create_app, create_ops_app
from koordpy.scheduler.extender.cache import ClusterCache
from koordpy.scheduler.extender.fastpath import ServingMode, check_protocols
from koordpy.scheduler.extender.gangs import GangBarrier, GangMetrics
from koordpy.scheduler.extender.inline import inline_verb_protocol
from koordpy.scheduler.extender.invalid_events import NodeEventReporter
from koordpy.scheduler.extender.listener import limited_protocol
from koordpy.scheduler.extender.metrics import ExtenderMetrics
from koordpy.scheduler.extender.protocol import HostFragments
from koordpy.scheduler.extender.reservations import ReservationTracker
from koordpy.scheduler.extender.service import ExtenderService
from koordpy.scheduler.framework.cluster import ClusterState
from koordpy.scheduler.plugins.loadaware import LoadAwarePlugin
from koordpy.scheduler.profile import build_plugins

__all__ = ["Extender", "build_extender", "build_servers", "checked_mode", "listener_limits", "serve", "serve_all"]

WATCHED: tuple[tuple[str, ResourceRef], ...] = (
    ("nodes", NODES),
    ("pods", PODS),
    ("nodemetrics", NODEMETRICS),
    ("reservations", RESERVATIONS),
)
GANG_WATCHED: tuple[ResourceRef, ...] = (PODGROUPS, PODGROUPS_X_K8S, PODGROUPS_VOLCANO, PODGROUPS_NATIVE)
"""PodGroups of the four APIs. Optional for readiness: a missing CRD or API (404: the chart installs only the
sigs.k8s.io CRD, and ``scheduling.k8s.io/v1beta1`` is served only with the ``GenericWorkload`` gate) is
retried slowly and only leaves that API's gangs un-initialised (their members wait)."""


@dataclass
class Extender:
    """One assembled extender. ``reflectors`` is empty without an API client."""

    app: FastAPI
    ops_app: Starlette
    """``/healthz``, ``/readyz`` and ``/metrics`` only, for the ``extender.metricsPort`` listener."""
    service: ExtenderService
    cache: ClusterCache
    state: ClusterState
    registry: CollectorRegistry
    reflectors: list[Reflector] = field(default_factory=list)
    synced: asyncio.Event | None = None
    """Set once every reflector delivered its first list (and the GC was frozen)."""
    reporter: NodeEventReporter | None = None
    """Warning Events for nodes whose Node or NodeMetric cannot be read (posted only with a client)."""
    gangs: GangBarrier | None = None
    gang_reflectors: list[Reflector] = field(default_factory=list)
    """The PodGroup watches: not part of ``not_ready`` (see ``GANG_WATCHED``)."""
    credentials: CredentialsWatch | None = None
    """The API client's credentials and what the API server makes of them (None without a client)."""

    def not_ready(self) -> str | None:
        """Why the verbs' view of the cluster cannot be trusted, or None.

        Ready means every reflector delivered its first list and none is in a failure loop (see
        ``Reflector.failing``: repeated list/watch failures, not one dropped connection and not a
        skipped malformed object), and the API server has not refused the credentials for
        ``credentials.refusedNotReadySeconds`` (binds would fail). Not guaranteed: that the cache is
        complete (objects the cache could not convert are missing; they are counted in
        ``koordpy_extender_watch_conversion_errors``).
        """
        if self.credentials is not None:
            refused = self.credentials.credentials.not_ready(self.credentials.after_seconds)
            if refused is not None:
                return refused
        waiting = [r.resource.plural for r in self.reflectors if not r.synced.is_set()]
        if waiting:
            return "waiting for the first list of " + ", ".join(waiting)
        failing = [reason for r in self.reflectors if (reason := r.not_ready()) is not None]
        if failing:
            return "watch failing: " + "; ".join(failing)
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
    reservations = ReservationTracker()
    state = ClusterState([*build_plugins(config), fragments, reservations])
    reservations.attach(state)
    reporter = NodeEventReporter(log)
    by_resource: dict[str, Reflector] = {}

    def rejected(resource: str, event_type: str, raw: Mapping[str, Any], exc: Exception) -> None:
        # one Event per object version where users look (kubectl describe), besides the cache's counter
        if (reflector := by_resource.get(resource)) is not None:
            reflector.report_rejected(event_type, raw, "conversion_error", f"{type(exc).__name__}: {exc}")

    cache = ClusterCache(
        state, clock, log, report=reporter.report if client is not None else None, on_rejected=rejected
    )
    cache.reservations = reservations
    metrics = ExtenderMetrics(registry)
    reflectors: list[Reflector] = []
    if client is not None:
        reflectors = [
            Reflector(
                client,
                resource,
                cache.handler(name),
                watch_timeout_seconds=config.extender.watch_timeout_seconds,
                post_events=True,
                event_component="koordpy-extender",
            )
            for name, resource in WATCHED
        ]
        by_resource.update(zip((name for name, _ in WATCHED), reflectors, strict=True))
    holder: dict[str, Extender] = {}
    gangs = GangBarrier(
        config.gang,
        clock=clock,
        log=log,
        metrics=GangMetrics(registry, lambda: holder["extender"].gangs if "extender" in holder else None),
        binder=lambda: holder["extender"].service.binder,
        events=client,
        patcher=lambda: client,
        status_patcher=lambda: client,
        state=state,
        bind_timeout=config.extender.bind_timeout_seconds,
    )
    cache.held_node = gangs.held_node
    gang_reflectors: list[Reflector] = []
    if client is not None:

        def podgroup_rejected(index: int) -> Any:
            def rejected(event_type: str, raw: Mapping[str, Any], error: str) -> None:
                gang_reflectors[index].report_rejected(event_type, raw, "conversion_error", error)

            return rejected

        gang_reflectors = [
            Reflector(
                client,
                resource,
                gangs.podgroup_handler(resource.group, podgroup_rejected(index)),
                watch_timeout_seconds=config.extender.watch_timeout_seconds,
                backoff_initial=5.0,
                backoff_max=120.0,
                post_events=True,
                event_component="koordpy-extender",
                optional=True,  # scheduler-plugins' and Volcano's CRDs are installed by those projects, if at all
            )
            for index, resource in enumerate(GANG_WATCHED)
        ]
        native = gang_reflectors[GANG_WATCHED.index(PODGROUPS_NATIVE)]
        gangs.native_absent = lambda: native.absent

    def not_ready() -> str | None:
        return holder["extender"].not_ready()

    binder = BindingClient.for_connection(client.connection, client) if client is not None else None
    service = ExtenderService(
        cache=cache,
        fragments=fragments,
        settings=config.extender,
        metrics=metrics,
        binder=binder,
        clock=clock,
        log=log,
        not_ready=not_ready,
        gangs=gangs,
        reader=client,
        events=client,
    )

    def on_pod(event_type: str, pod: PodInfo, raw: Mapping[str, Any] | None) -> None:
        gangs.on_pod(event_type, pod, raw)
        if event_type == "DELETED":
            service.forget_pod(pod.uid)

    cache.pod_listener = on_pod
    cache.node_listener = service.forget_node

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        extender = holder["extender"]
        if client is None:
            try:
                yield
            finally:
                await gangs.close()
            return
        await client.open()
        watches = asyncio.create_task(run_reflectors([*reflectors, *gang_reflectors]), name="extender reflectors")
        freezer = asyncio.create_task(_after_sync(extender, freeze_gc, log), name="extender sync")
        events = asyncio.create_task(reporter.run(client), name="extender invalid-node events")
        tasks = [freezer, watches, events]
        if extender.credentials is not None:
            tasks.append(asyncio.create_task(extender.credentials.run(), name="extender credentials"))
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            await gangs.close()
            if isinstance(binder, BindingClient):
                await binder.close()
            await client.close()

    app = create_app(service, registry, lifespan=lifespan)
    ops_app = create_ops_app(service, registry)
    extender = Extender(
        app, ops_app, service, cache, state, registry, reflectors, asyncio.Event(), reporter, gangs, gang_reflectors
    )
    if client is not None:
        extender.credentials = CredentialsWatch(
            client.connection.credentials,
            config.credentials.refused_not_ready_seconds,
            "koordpy-extender",
            post_event=client.create_event,
            pod=pod_from_env(),
        )
        register_credentials_metrics(registry, client.connection.credentials)
    else:
        register_credentials_metrics(registry)
    holder["extender"] = extender
    metrics.watch_collector(cache, extender.watch_stats)
    profile = config.extender.scheduler_name
    load_aware = next((p for p in state.plugins if isinstance(p, LoadAwarePlugin)), None)

    def pending() -> Mapping[str, tuple[int, float]]:
        uids = {uid for uid, pod in cache.pending.items() if pod.scheduler_name == profile}
        return service.pending.summary(uids, clock.now())

    metrics.scheduling_collector(pending, lambda: load_aware.expired_metrics(clock.now()) if load_aware else 0)
    register_reflector_metrics(registry, "koordpy_extender", lambda: [*extender.reflectors, *extender.gang_reflectors])
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


def uvicorn_config(
    app: Any,
    host: str,
    port: int,
    *,
    lifespan: Literal["on", "off"] = "on",
    limits: ListenerLimits = DEFAULT_LIMITS,
    service: ExtenderService | None = None,
    mode: ServingMode = "inline",
) -> uvicorn.Config:
    """One worker, uvloop + httptools with ``limits`` on head size and read time (see
    :mod:`koordpy.scheduler.extender.listener`), no access log (one line per filter call would be noise).
    With ``service``, its ``/filter``, ``/prioritize`` and ``/bind`` are answered in the protocol (see
    :mod:`koordpy.scheduler.extender.inline`).

    ``mode`` (what :func:`~koordpy.scheduler.extender.fastpath.check_protocols` found): ``limited`` never
    answers in the protocol (the verbs go through the app), ``standard`` uses uvicorn's h11 protocol with
    the head bounded by ``limits`` (no read-time bound)."""
    http: Any
    extra: dict[str, Any] = {}
    if mode == "standard":
        http = "h11"
        extra["h11_max_incomplete_event_size"] = limits.max_header_bytes
    elif service is None or mode == "limited":
        http = limited_protocol(limits)
    else:
        http = inline_verb_protocol(service, limits)
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        loop="uvloop",
        http=http,
        access_log=False,
        log_config=None,
        lifespan=lifespan,
        timeout_keep_alive=75,
        **extra,
    )


class _Server(uvicorn.Server):
    """A uvicorn server that leaves SIGINT/SIGTERM to :func:`serve_all`.

    ``uvicorn.Server.serve`` replaces the process's handlers with its own for as long as it runs and
    re-raises the captured signals when it ends. Two of them in one loop would each install theirs over
    the other's (only the last one would hear SIGTERM) and restore them out of order.
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def build_servers(
    extender: Extender,
    host: str,
    port: int,
    *,
    metrics_host: str = "0.0.0.0",
    metrics_port: int | None = None,
    limits: ListenerLimits = DEFAULT_LIMITS,
    mode: ServingMode = "inline",
) -> list[uvicorn.Server]:
    """The main server (verbs, lifespan with the watches), then the ops server when ``metrics_port`` is set.

    Both bound request heads and read time with ``limits``; the main server's bodies are bounded by
    ``maxRequestBytes`` in the app. ``mode``: see :func:`uvicorn_config`; it sets the extender's
    ``koordpy_extender_fast_path`` gauge (1 for ``inline``).
    """
    extender.service.metrics.fast_path.set(1 if mode == "inline" else 0)
    main = uvicorn_config(extender.app, host, port, limits=limits, service=extender.service, mode=mode)
    servers: list[uvicorn.Server] = [_Server(main)]
    if metrics_port is not None:
        ops = uvicorn_config(extender.ops_app, metrics_host, metrics_port, lifespan="off", limits=limits, mode=mode)
        servers.append(_Server(ops))
    return servers


async def checked_mode(log: Any) -> ServingMode:
    """How to serve, from :func:`~koordpy.scheduler.extender.fastpath.check_protocols`, logged once: an info
    line when the fast path serves, a warning naming what failed when it does not."""
    check = await check_protocols()
    if check.fast_path:
        log.info("extender.fast_path", serving="inline", uvicorn=uvicorn.__version__)
    else:
        serving = "asgi" if check.mode == "limited" else "asgi on uvicorn's h11 protocol, no read-time bound"
        log.warning(
            "extender.fast_path_off",
            serving=serving,
            uvicorn=uvicorn.__version__,
            problems=list(check.problems),
            metric="koordpy_extender_fast_path 0",
        )
    return check.mode


def listener_limits(config: SchedulerConfiguration) -> ListenerLimits:
    """The head size and read time bounds ``extender.maxHeaderBytes`` / ``requestReadTimeoutSeconds`` set."""
    return ListenerLimits(
        max_header_bytes=config.extender.max_header_bytes,
        request_read_seconds=config.extender.request_read_timeout_seconds,
    )


HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def _signals_stop(servers: Sequence[uvicorn.Server]) -> Iterator[None]:
    """uvicorn's signal semantics, for all servers at once.

    The first SIGINT/SIGTERM shuts every server down gracefully, a second SIGINT forces it. Afterwards
    the previous handlers are restored and the signals re-raised, so the exit status says why the
    process stopped (as with a single ``uvicorn.Server``). Only the main thread can handle signals.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    captured: list[int] = []

    def handle(sig: int, _: FrameType | None) -> None:
        captured.append(sig)
        force = sig == signal.SIGINT and all(s.should_exit for s in servers)
        for server in servers:
            server.should_exit = True
            server.force_exit = server.force_exit or force

    previous = {handled: signal.signal(handled, handle) for handled in HANDLED_SIGNALS}
    try:
        yield
    finally:
        for handled, handler in previous.items():
            signal.signal(handled, handler)
    for sig in reversed(captured):
        signal.raise_signal(sig)


async def serve_all(servers: Sequence[uvicorn.Server]) -> None:
    """Run the servers in this loop until SIGINT/SIGTERM, or until one of them stops: then all stop.

    A server that fails to start (port in use, lifespan start-up failure) makes uvicorn exit; the others
    are shut down gracefully first, then ``SystemExit`` is raised with uvicorn's status. Any other error
    of a server is raised likewise once the others stopped.
    """
    failures: list[BaseException] = []

    async def run(server: uvicorn.Server) -> None:
        try:
            await server.serve()
        except (SystemExit, Exception) as exc:  # SystemExit would otherwise escape the event loop at once
            failures.append(exc)
        finally:
            for other in servers:
                other.should_exit = True

    with _signals_stop(servers):
        await asyncio.gather(*(run(server) for server in servers))
    if failures:
        raise failures[0]


def serve(
    config: SchedulerConfiguration,
    client: ApiClient,
    host: str,
    port: int,
    *,
    metrics_host: str = "0.0.0.0",
    metrics_port: int | None = None,
) -> None:
    """Run the extender until SIGINT/SIGTERM (blocking); with ``metrics_port``, the ops listener as well.
    Both listeners take their head size and read time bounds from ``config.extender``."""
    extender = build_extender(config, client)
    limits = listener_limits(config)

    async def main() -> None:
        mode = await checked_mode(extender.service.log)
        servers = build_servers(
            extender, host, port, metrics_host=metrics_host, metrics_port=metrics_port, limits=limits, mode=mode
        )
        await serve_all(servers)

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main())
