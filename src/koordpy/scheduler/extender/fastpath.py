"""Whether the extender's two HTTP protocols still work with the installed uvicorn, checked once at start-up,
and what serves when they do not.

:class:`~koordpy.scheduler.extender.listener.LimitedHttpToolsProtocol` (the listener limits) and
:class:`~koordpy.scheduler.extender.inline.InlineVerbProtocol` (the verbs answered inside the protocol)
subclass uvicorn's ``HttpToolsProtocol``, which is not public API: they override its parser callbacks and
read about twenty of its attributes. A uvicorn release that renamed one would make each request fail
inside a parser callback, which uvicorn answers with HTTP 400, while ``/healthz`` still answered 200: every
pod of the profile would stay Pending. So before serving, :func:`check_protocols`

1. looks up every class, method and module name the two protocols use (:data:`METHODS`);
2. serves requests through each protocol on a loopback port with the real uvicorn (started through its
   public ``Config``/``Server``), with a stand-in service whose answers echo the request: through the
   limited protocol a plain request and a head over the bound (431) and a request left unfinished past
   the read bound (closed); through the inline one ``/filter``, ``/prioritize``, ``/bind`` and
   ``/filter`` again on one kept-alive connection, each answered byte for byte as it must be and none of
   them by the ASGI app; it also checks the attributes a connection holds (:data:`ATTRIBUTES`).

The outcome (:class:`ProtocolCheck`) chooses how the extender serves:

- ``inline``: both work; the fast path serves (``koordpy_extender_fast_path`` 1);
- ``limited``: the inline protocol failed; the verbs go through the ASGI app (``VerbFastPath``: the same
  answers), the listener limits still hold (gauge 0);
- ``standard``: the limited protocol failed too; uvicorn's own h11 protocol with the head bounded by
  ``h11_max_incomplete_event_size`` (public configuration); the read-time bound is then not enforced
  (gauge 0).

Either fallback is logged once as a warning naming what failed. Not guaranteed: that a uvicorn change
which keeps every name and passes these exchanges behaves as before in every other case (pipelining,
flow control, shutdown with a bind in flight are covered by the tests, not by this check).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import socket
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import uvicorn

from koordpy.runtime.listeners import ListenerLimits
from koordpy.scheduler.extender.protocol import ProtocolError
from koordpy.scheduler.extender.service import BindStart, Reply

__all__ = ["ATTRIBUTES", "METHODS", "ProtocolCheck", "ServingMode", "check_protocols", "missing_names"]

ServingMode = Literal["inline", "limited", "standard"]

IMPL_MODULE = "uvicorn.protocols.http.httptools_impl"
IMPL_CLASS = "HttpToolsProtocol"
LIMITED_METHODS = (
    "connection_made",
    "connection_lost",
    "data_received",
    "on_message_begin",
    "on_url",
    "on_header",
    "on_headers_complete",
    "on_message_complete",
    "send_400_response",
)
"""Methods of ``HttpToolsProtocol`` the listener limits override."""
INLINE_METHODS = (
    "on_body",
    "on_response_complete",
    "shutdown",
    "timeout_keep_alive_handler",
    "_unset_keepalive_if_required",
)
"""Methods the inline verbs override or call besides those."""
METHODS = LIMITED_METHODS + INLINE_METHODS
ATTRIBUTES = (
    "loop",
    "transport",
    "client",
    "parser",
    "url",
    "headers",
    "expect_100_continue",
    "pipeline",
    "flow",
    "cycle",
    "tasks",
    "server_state",
    "timeout_keep_alive",
    "timeout_keep_alive_task",
)
"""Attributes a connection's ``HttpToolsProtocol`` instance holds that the two protocols read or set."""
PER_REQUEST = ("url", "expect_100_continue")
"""Those of :data:`ATTRIBUTES` set when a request begins (the others once the connection is made)."""
NESTED = (
    ("parser", "get_method"),
    ("parser", "should_keep_alive"),
    ("parser", "should_upgrade"),
    ("flow", "write_paused"),
    ("server_state", "total_requests"),
    ("server_state", "default_headers"),
)

PROBE_LIMITS = ListenerLimits(max_header_bytes=4096, request_read_seconds=0.1)
_ASGI_MARK = b"answered by the ASGI app"


@dataclass(frozen=True)
class ProtocolCheck:
    mode: ServingMode
    problems: tuple[str, ...] = ()
    """What failed, one line each (empty in ``inline`` mode)."""

    @property
    def fast_path(self) -> bool:
        return self.mode == "inline"


def missing_names(methods: tuple[str, ...] = METHODS) -> list[str]:
    """The module, the class and those of ``methods`` the installed uvicorn lacks."""
    try:
        module = importlib.import_module(IMPL_MODULE)
    except ImportError as exc:
        return [f"{IMPL_MODULE} cannot be imported: {exc}"]
    base = getattr(module, IMPL_CLASS, None)
    if not isinstance(base, type):
        return [f"{IMPL_MODULE}.{IMPL_CLASS} is missing"]
    return [f"{IMPL_CLASS}.{name} is missing" for name in methods if not callable(getattr(base, name, None))]


# -- the stand-in service -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Settings:
    max_request_bytes: int = 64 * 1024


def _echo(verb: str, body: bytes) -> bytes:
    return b'{"probe":"' + verb.encode() + b'","body":' + body + b"}"


class _ProbeService:
    """Answers each verb with its body echoed (so the check sees the body was collected whole)."""

    settings = _Settings()
    log = logging.getLogger("koordpy.extender.fastpath")

    def __init__(self) -> None:
        self.calls: list[str] = []

    def filter(self, body: bytes, started: float | None = None) -> Reply:
        self.calls.append("filter")
        return Reply(200, _echo("filter", body))

    def prioritize(self, body: bytes, started: float | None = None) -> Reply:
        self.calls.append("prioritize")
        return Reply(200, _echo("prioritize", body))

    def reject(self, verb: str, exc: ProtocolError, started: float) -> Reply:
        self.calls.append(f"reject {verb}")
        return Reply(exc.status, b"{}")

    def start_bind(self, body: bytes, started: float | None = None) -> BindStart | Reply:
        self.calls.append("bind")
        return Reply(200, _echo("bind", body))

    async def finish_bind(self, bind: BindStart | Reply, gone: asyncio.Event | None = None) -> Reply:
        await asyncio.sleep(0)  # answered from a task, after the parser callback returned, as a real bind is
        assert isinstance(bind, Reply)
        return bind


async def _asgi(scope: dict[str, Any], receive: Callable[[], Awaitable[Any]], send: Any) -> None:
    """The app behind both probes: 200 and a mark, so an answer that came from it is recognised."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    headers = [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(_ASGI_MARK))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": _ASGI_MARK})


# -- one exchange over a raw connection -----------------------------------------------------------------


@dataclass
class _Answer:
    status: int
    headers: dict[bytes, bytes]
    body: bytes


async def _read_answer(reader: asyncio.StreamReader) -> _Answer:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head[:-4].split(b"\r\n")
    status = int(lines[0].split(b" ")[1])
    headers: dict[bytes, bytes] = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get(b"content-length", b"0")))
    return _Answer(status, headers, body)


def _post(path: str, body: bytes, close: bool = False) -> bytes:
    head = f"POST {path} HTTP/1.1\r\nhost: probe\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
    return head.encode() + (b"connection: close\r\n" if close else b"") + b"\r\n" + body


# -- the two probes ---------------------------------------------------------------------------------------

Exchange = Callable[[int], Awaitable[list[str]]]
"""A probe's requests against the port the protocol serves on; what went wrong, one line each."""


async def _serving(protocol: type[Any], exchange: Exchange) -> list[str]:
    """Serve the probe app through ``protocol`` on a loopback port and run ``exchange(port)``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    config = uvicorn.Config(_asgi, http=protocol, lifespan="off", log_config=None, access_log=False, ws="none")
    server = _QuietServer(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()
                return ["uvicorn did not start"]
            await asyncio.sleep(0.005)
        return await asyncio.wait_for(exchange(port), timeout=10.0)
    finally:
        server.should_exit = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, timeout=10.0)
        sock.close()


class _QuietServer(uvicorn.Server):
    """Leaves the process's signal handlers alone (the probe runs before the real servers take them)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Any:
        yield


async def _probe_limited(port: int) -> list[str]:
    problems: list[str] = []
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET /probe HTTP/1.1\r\nhost: probe\r\n\r\n")
        answer = await _read_answer(reader)
        if (answer.status, answer.body) != (200, _ASGI_MARK):
            problems.append(f"a plain request was answered {answer.status} {answer.body[:80]!r}")
    finally:
        writer.close()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(
            b"GET /probe HTTP/1.1\r\nhost: probe\r\nx-probe: " + b"a" * PROBE_LIMITS.max_header_bytes + b"\r\n\r\n"
        )
        answer = await _read_answer(reader)
        if answer.status != 431:
            problems.append(f"a head over the bound was answered {answer.status}, not 431")
    finally:
        writer.close()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET /probe HTTP/1.1\r\nhost: probe\r\n")  # never finished
        if await reader.read() != b"":
            problems.append("a request left unfinished was answered instead of closed")
    finally:
        writer.close()
    return problems


def _attribute_problems(instances: list[Any], names: tuple[str, ...]) -> list[str]:
    """What an open connection's protocol instance lacks of ``names`` and :data:`NESTED`."""
    if not instances:
        return ["no connection was made"]
    instance = instances[0]
    problems = [f"{IMPL_CLASS} instances have no attribute {n}" for n in names if not hasattr(instance, n)]
    problems += [
        f"{IMPL_CLASS}.{outer} has no attribute {inner}"
        for outer, inner in NESTED
        if hasattr(instance, outer) and not hasattr(getattr(instance, outer), inner)
    ]
    return problems


async def _probe_inline(port: int, service: _ProbeService, instances: list[Any]) -> list[str]:
    problems: list[str] = []
    verbs = ("filter", "prioritize", "bind", "filter")
    bodies = {verb: b'{"verb":"%s","pad":"%s"}' % (verb.encode(), b"x" * 3000) for verb in verbs}
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for _ in range(1000):  # the server's side of the connection is made within a few loop iterations
            if instances:
                break
            await asyncio.sleep(0.001)
        problems += _attribute_problems(instances, tuple(a for a in ATTRIBUTES if a not in PER_REQUEST))
        for index, verb in enumerate(verbs):
            last = index == len(verbs) - 1
            if last:  # requests have begun on this connection: the per-request attributes are set
                problems += _attribute_problems(instances, PER_REQUEST)
            request = _post(f"/{verb}", bodies[verb], close=last)
            try:
                writer.write(request[:100])  # the body arrives in two reads
                await writer.drain()
                await asyncio.sleep(0)
                writer.write(request[100:])
                answer = await _read_answer(reader)
            except (OSError, asyncio.IncompleteReadError) as exc:
                problems.append(f"/{verb} was not answered: {type(exc).__name__}: {exc}")
                break
            if (answer.status, answer.body) != (200, _echo(verb, bodies[verb])):
                problems.append(f"/{verb} was answered {answer.status} {answer.body[:80]!r}")
            elif answer.headers.get(b"content-type") != b"application/json":
                problems.append(f"/{verb} was answered with content-type {answer.headers.get(b'content-type')!r}")
        else:
            if await reader.read() != b"":
                problems.append("the connection was not closed after a request with connection: close")
    finally:
        writer.close()
    if service.calls != list(verbs):
        problems.append(f"the verbs reached the service as {service.calls}, not in the protocol")
    return problems


async def _probe(
    name: str, make: Callable[[], type[Any]], exchange: Callable[[int], Awaitable[list[str]]]
) -> list[str]:
    try:
        protocol = make()
        return [f"{name}: {p}" for p in await _serving(protocol, exchange)]
    except Exception as exc:  # anything at all: a broken internal shows as any error
        return [f"{name}: {type(exc).__name__}: {exc}"]


@contextlib.contextmanager
def _uvicorn_quiet() -> Iterator[None]:
    """uvicorn logs each refused head ("Invalid HTTP request received."): not for the probe's own."""
    logger = logging.getLogger("uvicorn.error")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


async def check_protocols() -> ProtocolCheck:
    """Check both protocols against the installed uvicorn (see the module doc); never raises."""
    missing = missing_names(LIMITED_METHODS)
    if missing:
        return ProtocolCheck("standard", tuple(missing))
    with _uvicorn_quiet():
        return await _check_serving(missing_names(INLINE_METHODS))


async def _check_serving(inline_missing: list[str]) -> ProtocolCheck:
    from koordpy.scheduler.extender.inline import inline_verb_protocol
    from koordpy.scheduler.extender.listener import limited_protocol

    service = _ProbeService()
    instances: list[Any] = []

    def make_inline() -> type[Any]:
        base = inline_verb_protocol(service, PROBE_LIMITS)

        def connection_made(self: Any, transport: Any) -> None:
            instances.append(self)
            base.connection_made(self, transport)

        return type("ProbedInlineVerbProtocol", (base,), {"connection_made": connection_made})

    async def no_inline_probe() -> list[str]:
        return []

    # both at once (each waits on its own server's start and stop)
    limited, inline = await asyncio.gather(
        _probe("listener limits", lambda: limited_protocol(PROBE_LIMITS), _probe_limited),
        no_inline_probe()
        if inline_missing
        else _probe("inline verbs", make_inline, lambda port: _probe_inline(port, service, instances)),
    )
    if limited:
        return ProtocolCheck("standard", tuple(limited))
    if inline_missing:
        return ProtocolCheck("limited", tuple(inline_missing))
    return ProtocolCheck("limited", tuple(inline)) if inline else ProtocolCheck("inline")
