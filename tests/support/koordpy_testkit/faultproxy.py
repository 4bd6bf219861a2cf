"""A fault-injecting HTTP proxy for the real-cluster tier: it sits between one client (a koordpy component,
or kube-scheduler calling the extender) and its server (the real kube-apiserver over TLS, or the extender),
forwards every request, and by rule answers some of them itself or loses the answer.

Faults (:class:`Fault`), chosen by :class:`Rule` (verb, resource, subresource, namespace, name; a
probability drawn from the proxy's seeded generator; how many matching requests to let through first and
how many to inject at most):

- :func:`status_fault` (and :func:`too_many_requests`, :func:`server_error`, :func:`conflict`): answered
  by the proxy with a Kubernetes ``Status`` body, **not forwarded** (the server never sees the request;
  429 carries ``Retry-After`` and ``details.retryAfterSeconds`` as kube-apiserver's own do);
- :func:`lost_response`: **forwarded**, the server's answer read whole (so a write took effect), then the
  client's connection is closed without a byte of it: the client cannot tell whether its write happened;
- :func:`watch_gone`: a watch answered ``200`` with one ``ERROR`` event carrying a ``410 Expired`` Status,
  as kube-apiserver answers a watch from a compacted resourceVersion (not forwarded);
- :meth:`FaultProxy.cut_watches`: the watch streams open now are cut mid-stream;
- :meth:`FaultProxy.cut` until :meth:`FaultProxy.restore`: a network partition between the client and the
  server. Nothing passes either way: requests are held, not forwarded; answers not yet given are held;
  open streams stop relaying. When the path is back, what the client still waits for goes on (a request
  forwarded, an answer or a stream's bytes delivered late, as TCP delivers what it retransmitted), and
  what the client gave up meanwhile (its connection closed) is dropped (recorded with the fault ``cut``):
  the proxy holds the request whole, so a client that reset its connection is modelled, not the kernel
  of one that closed it gracefully, which would still deliver the bytes it had queued.

Every exchange is recorded (:class:`Exchange`: attributes, status the client got and the server gave,
the fault, monotonic timestamps of receipt, forwarding and answer; bodies when ``capture_bodies``), so a
test can assert what was injected and how the client reacted (its retries, their spacing, a relist).

The proxy runs its own event loop in a daemon thread, so synchronous tests use it as they are.

Not guaranteed: HTTP/2 and upgrades (exec, attach, port-forward); streamed request bodies (each body is
read whole before it is forwarded); the upstream's chunk boundaries (a stream is re-chunked); faults
drawn in the same order across runs when several clients race (the draws are seeded, the arrival order
is the clients').
"""

from __future__ import annotations

import asyncio
import itertools
import random
import ssl
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp
import orjson
from aiohttp import web

from koordpy_testkit.processes import LOOPBACK
from koordpy_testkit.requestinfo import WRITE_VERBS, Call, call_from_http

__all__ = [
    "Exchange",
    "Fault",
    "FaultProxy",
    "Rule",
    "conflict",
    "lost_response",
    "server_error",
    "status_fault",
    "too_many_requests",
    "watch_gone",
]

FaultKind = Literal["status", "lost_response", "watch_gone", "cut"]

INJECTED = "injected by the test's fault proxy"

_REASONS = {
    409: "Conflict",
    410: "Expired",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)


@dataclass(frozen=True, slots=True)
class Fault:
    kind: FaultKind
    status: int = 0
    retry_after: int | None = None
    message: str = INJECTED

    def __str__(self) -> str:
        if self.kind == "status":
            after = f" Retry-After {self.retry_after}" if self.retry_after is not None else ""
            return f"{self.status}{after}"
        return self.kind

    def status_body(self) -> dict[str, Any]:
        """The Kubernetes ``Status`` a kube-apiserver would send with this code."""
        code = 410 if self.kind == "watch_gone" else self.status
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": _REASONS.get(code, "Unknown"),
            "code": code,
        }
        if self.retry_after is not None:
            body["details"] = {"retryAfterSeconds": self.retry_after}
        return body


def status_fault(status: int, *, retry_after: int | None = None, message: str | None = None) -> Fault:
    """Answer ``status`` instead of forwarding."""
    return Fault("status", status, retry_after, message or INJECTED)


def too_many_requests(retry_after: int = 1) -> Fault:
    """429 with ``Retry-After`` (seconds), as kube-apiserver's max-in-flight and priority-and-fairness
    filters answer."""
    return status_fault(429, retry_after=retry_after, message="Too many requests, please try again later.")


def server_error(status: int = 500) -> Fault:
    return status_fault(status, message="Internal error occurred: injected by the test's fault proxy")


def conflict() -> Fault:
    """409 Conflict, as an update or patch on a stale resourceVersion gets it."""
    return status_fault(
        409,
        message="Operation cannot be fulfilled: the object has been modified; please apply your changes to the "
        "latest version and try again",
    )


def lost_response() -> Fault:
    """Forward, then close the client's connection without answering."""
    return Fault("lost_response")


def watch_gone() -> Fault:
    """A watch answered by one ``ERROR`` event with a 410 Expired Status (too old resource version)."""
    return Fault("watch_gone", message="too old resource version")


@dataclass
class Rule:
    """Which requests get ``fault``. ``None`` matches anything; ``subresource=""`` only the resource itself;
    ``verbs`` may name ``"write"`` for every writing verb. ``skip`` matching requests pass first, then each
    match is injected with ``probability`` (the proxy's seeded draw) until ``count`` were (None: no limit).
    ``matched`` and ``injected`` count what happened."""

    fault: Fault
    verbs: frozenset[str] = frozenset()
    resource: str | None = None
    subresource: str | None = None
    namespace: str | None = None
    name: str | None = None
    probability: float = 1.0
    count: int | None = 1
    skip: int = 0
    matched: int = 0
    injected: int = 0

    def matches(self, call: Call | None) -> bool:
        if call is None:
            return False
        return (
            (not self.verbs or call.verb in self.verbs)
            and (self.resource is None or call.resource == self.resource)
            and (self.subresource is None or call.subresource == self.subresource)
            and (self.namespace is None or call.namespace == self.namespace)
            and (self.name is None or call.name == self.name)
        )

    @property
    def spent(self) -> bool:
        return self.count is not None and self.injected >= self.count


@dataclass(frozen=True, slots=True)
class Exchange:
    """One request through the proxy. ``status`` is what the client got (None: its connection was closed
    first), ``upstream_status`` what the server answered (None: not forwarded). Times are
    ``time.monotonic()``: ``received`` once the request was read, ``forwarded`` when it was sent on,
    ``answered`` when the server's answer was read whole (for a stream: its headers)."""

    seq: int
    method: str
    path: str
    call: Call | None
    status: int | None
    upstream_status: int | None
    fault: Fault | None
    received: float
    forwarded: float | None
    answered: float | None
    request_body: bytes | None = None
    response_body: bytes | None = None

    def json(self) -> Any:
        """The request body decoded (the extender's verbs are JSON)."""
        return orjson.loads(self.request_body or b"null")

    def answer_json(self) -> Any:
        return orjson.loads(self.response_body or b"null")


@dataclass
class _Stream:
    call: Call | None
    transport: asyncio.BaseTransport | None
    upstream: aiohttp.ClientResponse


@dataclass
class FaultProxy:
    """Forwards ``host:port`` (``port`` 0 picks a free one) to ``upstream``.

    ``upstream_ssl`` verifies the server (an ``ssl.SSLContext`` trusting its CA); ``listen_ssl`` serves
    TLS to the client (e.g. with the API server's own serving certificate, so a kubeconfig differs only
    in its port). Start with :meth:`start` or ``with FaultProxy(...) as proxy:``.
    """

    upstream: str
    upstream_ssl: ssl.SSLContext | None = None
    listen_ssl: ssl.SSLContext | None = None
    seed: int = 0
    capture_bodies: bool = False
    host: str = LOOPBACK
    port: int = 0
    rules: list[Rule] = field(default_factory=list)
    delays: dict[str, float] = field(default_factory=dict)
    """Request path → seconds each request on it is held before it is forwarded (:meth:`delay`)."""
    body_delays: dict[tuple[str, bytes], float] = field(default_factory=dict)
    """(request path, bytes its body contains) → seconds such a request is held (:meth:`delay` with
    ``body_contains``); checked before ``delays``."""
    _exchanges: list[Exchange] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _seq: itertools.count[int] = field(default_factory=itertools.count)
    _streams: dict[int, _Stream] = field(default_factory=dict)
    _in_flight: dict[int, tuple[str, str, float]] = field(default_factory=dict)
    _open: asyncio.Event | None = None
    """Set while the path is up (cleared by :meth:`cut`); created on the proxy's loop."""
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _runner: web.AppRunner | None = None
    _session: aiohttp.ClientSession | None = None

    def __post_init__(self) -> None:
        self.upstream = self.upstream.rstrip("/")
        self._rng = random.Random(self.seed)

    # ---- lifecycle ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        scheme = "https" if self.listen_ssl is not None else "http"
        return f"{scheme}://{self.host}:{self.port}"

    def start(self, timeout: float = 60.0) -> FaultProxy:
        started = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._serve())
            except BaseException as exc:  # why: reported to start() below, which raises it
                failure.append(exc)
                started.set()
                return
            started.set()
            loop.run_forever()
            loop.run_until_complete(self._shutdown())
            loop.close()

        self._thread = threading.Thread(target=run, name=f"fault-proxy-{self.upstream}", daemon=True)
        self._thread.start()
        if not started.wait(timeout) or failure:
            raise RuntimeError(f"fault proxy for {self.upstream} did not start: {failure}")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(60)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _serve(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        connector = aiohttp.TCPConnector(ssl=self.upstream_ssl if self.upstream_ssl is not None else False, limit=0)
        self._session = aiohttp.ClientSession(
            connector=connector,
            auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
            skip_auto_headers=("Accept-Encoding", "User-Agent", "Content-Type"),
        )
        app = web.Application(client_max_size=1 << 30)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=5.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self.listen_ssl)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def _shutdown(self) -> None:
        for stream in list(self._streams.values()):
            stream.upstream.close()
            if stream.transport is not None:
                _abort(stream.transport)
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()
        # Transports closing now (TLS ones exchange close_notify) need the loop a little longer; then
        # anything still running is cancelled, so no socket outlives the loop.
        await asyncio.sleep(0.25)
        current = asyncio.current_task()
        leftovers = [task for task in asyncio.all_tasks() if task is not current]
        for task in leftovers:
            task.cancel()
        await asyncio.gather(*leftovers, return_exceptions=True)

    # ---- rules ----------------------------------------------------------------------------

    def inject(
        self,
        fault: Fault,
        *,
        verbs: Iterable[str] = (),
        resource: str | None = None,
        subresource: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        probability: float = 1.0,
        count: int | None = 1,
        skip: int = 0,
    ) -> Rule:
        """Add a rule (after the existing ones: the first rule that matches and is not spent decides)."""
        wanted = set(verbs)
        if "write" in wanted:
            wanted = (wanted - {"write"}) | WRITE_VERBS
        rule = Rule(fault, frozenset(wanted), resource, subresource, namespace, name, probability, count, skip)
        with self._lock:
            self.rules.append(rule)
        return rule

    def delay(self, path: str, seconds: float, *, body_contains: bytes | None = None) -> None:
        """Hold every request whose path is exactly ``path`` (and, with ``body_contains``, whose body holds
        those bytes: one pod's ``/bind`` among many) for ``seconds`` before forwarding it (0: stop).
        Requests are held concurrently; an ``Exchange``'s ``forwarded`` is when the hold ended."""
        with self._lock:
            table: dict[Any, float] = self.delays if body_contains is None else self.body_delays
            key: Any = path if body_contains is None else (path, body_contains)
            if seconds > 0:
                table[key] = seconds
            else:
                table.pop(key, None)

    def remove(self, rule: Rule) -> None:
        with self._lock:
            self.rules.remove(rule)

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()

    def choose(self, call: Call | None) -> Fault | None:
        """The fault for a request with attributes ``call`` (None: forward it); counts the match."""
        with self._lock:
            for rule in self.rules:
                if rule.spent or not rule.matches(call):
                    continue
                rule.matched += 1
                if rule.matched <= rule.skip:
                    continue
                if rule.probability < 1.0 and self._rng.random() >= rule.probability:
                    continue
                rule.injected += 1
                return rule.fault
        return None

    # ---- records --------------------------------------------------------------------------

    def exchanges(self) -> list[Exchange]:
        with self._lock:
            return list(self._exchanges)

    def injected(self) -> list[Exchange]:
        return [e for e in self.exchanges() if e.fault is not None]

    def calls(
        self, verb: str | None = None, resource: str | None = None, subresource: str | None = None
    ) -> list[Exchange]:
        """The recorded resource requests matching the filters (None: any), oldest first."""
        return [
            e
            for e in self.exchanges()
            if e.call is not None
            and (verb is None or e.call.verb == verb)
            and (resource is None or e.call.resource == resource)
            and (subresource is None or e.call.subresource == subresource)
        ]

    def _record(self, exchange: Exchange) -> None:
        with self._lock:
            self._exchanges.append(exchange)

    def open_watches(self, resource: str | None = None) -> int:
        with self._lock:
            return sum(
                1 for s in self._streams.values() if resource is None or (s.call and s.call.resource == resource)
            )

    def cut_watches(self, resource: str | None = None) -> int:
        """Cut the open streams (of ``resource``): the client sees its watch end mid-stream. Returns how many."""
        assert self._loop is not None, "start() the proxy first"

        async def cut() -> int:
            victims = [
                s for s in list(self._streams.values()) if resource is None or (s.call and s.call.resource == resource)
            ]
            for stream in victims:
                stream.upstream.close()
                if stream.transport is not None:
                    _abort(stream.transport)
            return len(victims)

        return asyncio.run_coroutine_threadsafe(cut(), self._loop).result(60)

    def cut(self) -> float:
        """Partition the client from the server (see the module docstring) until :meth:`restore`; returns
        the ``time.monotonic()`` at which the cut took effect on the proxy's loop."""
        return self._set_open(False)

    def restore(self) -> float:
        """End a :meth:`cut`: what the client still waits for goes on. Returns when it took effect."""
        return self._set_open(True)

    def _set_open(self, value: bool) -> float:
        assert self._loop is not None and self._open is not None, "start() the proxy first"
        gate = self._open

        async def apply() -> float:
            if value:
                gate.set()
            else:
                gate.clear()
            return time.monotonic()

        return asyncio.run_coroutine_threadsafe(apply(), self._loop).result(60)

    def in_flight(self) -> list[tuple[str, str, float]]:
        """The requests received and not answered yet (method, path, ``time.monotonic()`` received), oldest
        first: held by a delay or a cut, or waiting for the server."""
        with self._lock:
            return sorted(self._in_flight.values(), key=lambda item: item[2])

    async def _passable(self, request: web.Request) -> bool:
        """Wait while the path is cut; False when the client closed its connection meanwhile."""
        assert self._open is not None
        if self._open.is_set():
            return True
        await self._open.wait()
        return request.transport is not None and not request.transport.is_closing()

    # ---- the proxy ------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        received = time.monotonic()
        seq = next(self._seq)
        with self._lock:
            self._in_flight[seq] = (request.method, request.path_qs, received)
        try:
            return await self._exchange(request, body, received, seq)
        finally:
            with self._lock:
                self._in_flight.pop(seq, None)

    async def _exchange(self, request: web.Request, body: bytes, received: float, seq: int) -> web.StreamResponse:
        call = call_from_http("", request.method, request.path_qs)
        fault = self.choose(call)
        captured = body if self.capture_bodies else None

        def record(
            status: int | None,
            upstream: int | None,
            forwarded: float | None,
            answered: float | None,
            answer: bytes | None = None,
        ) -> None:
            self._record(
                Exchange(
                    seq,
                    request.method,
                    request.path_qs,
                    call,
                    status,
                    upstream,
                    fault,
                    received,
                    forwarded,
                    answered,
                    captured,
                    answer if self.capture_bodies else None,
                )
            )

        if fault is not None and fault.kind == "status":
            record(fault.status, None, None, None)
            headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else {}
            return web.Response(
                status=fault.status,
                body=orjson.dumps(fault.status_body()),
                content_type="application/json",
                headers=headers,
            )
        if fault is not None and fault.kind == "watch_gone":
            record(200, None, None, None)
            line = orjson.dumps({"type": "ERROR", "object": fault.status_body()}) + b"\n"
            return web.Response(status=200, body=line, content_type="application/json")

        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        with self._lock:
            held = next(
                (sec for (path, part), sec in self.body_delays.items() if path == request.path and part in body),
                self.delays.get(request.path, 0.0),
            )
        if held:
            await asyncio.sleep(held)
        if not await self._passable(request):
            fault = Fault("cut")
            record(None, None, None, None)
            _close(request)
            return web.Response(status=502)  # never reaches the client: its connection is gone
        forwarded = time.monotonic()
        try:
            upstream = await self._session.request(
                request.method,
                self.upstream + request.path_qs,
                data=body or None,
                headers=headers,
                allow_redirects=False,
            )
        except (aiohttp.ClientError, OSError) as exc:
            record(502, None, forwarded, time.monotonic())
            unreachable = Fault("status", 502, None, f"fault proxy: upstream unreachable: {exc}")
            return web.Response(
                status=502, body=orjson.dumps(unreachable.status_body()), content_type="application/json"
            )
        out_headers = _response_headers(upstream.headers)
        if call is not None and call.verb == "watch":
            if fault is not None:  # a lost answer to a watch: the stream is cut before its first byte
                upstream.close()
                record(None, upstream.status, forwarded, time.monotonic())
                _close(request)
                return web.Response(status=502)
            if upstream.status == 200:
                return await self._stream(request, call, upstream, out_headers, record, forwarded)
        try:
            answer = await upstream.read()
        except (aiohttp.ClientError, OSError):
            record(None, upstream.status, forwarded, time.monotonic())
            _close(request)
            return web.Response(status=502)
        finally:
            upstream.release()
        answered = time.monotonic()
        if not await self._passable(request):
            fault = Fault("cut")
            record(None, upstream.status, forwarded, answered, answer)
            _close(request)
            return web.Response(status=502)
        if fault is not None and fault.kind == "lost_response":
            record(None, upstream.status, forwarded, answered, answer)
            _close(request)
            return web.Response(status=502)  # never reaches the client: its connection is closed
        record(upstream.status, upstream.status, forwarded, answered, answer)
        return web.Response(status=upstream.status, body=answer, headers=out_headers)

    async def _stream(
        self,
        request: web.Request,
        call: Call,
        upstream: aiohttp.ClientResponse,
        headers: Mapping[str, str],
        record: Any,
        forwarded: float,
    ) -> web.StreamResponse:
        key = id(upstream)
        with self._lock:
            self._streams[key] = _Stream(call, request.transport, upstream)
        record(200, 200, forwarded, time.monotonic())
        out = web.StreamResponse(status=upstream.status, headers=headers)
        try:
            await out.prepare(request)
            async for chunk in upstream.content.iter_any():
                if not await self._passable(request):
                    break
                await out.write(chunk)
            await out.write_eof()
        except (aiohttp.ClientError, OSError):
            _close(request)
        except asyncio.CancelledError:
            upstream.close()
            raise
        finally:
            with self._lock:
                self._streams.pop(key, None)
            upstream.release()
        return out


def _response_headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in _HOP_BY_HOP}


def _close(request: web.Request) -> None:
    """Drop the client's connection at once (no TLS close_notify: a lost answer, not a polite end)."""
    if request.transport is not None:
        _abort(request.transport)


def _abort(transport: asyncio.BaseTransport) -> None:
    if isinstance(transport, asyncio.Transport):
        transport.abort()
    else:
        transport.close()
