"""``POST /filter``, ``POST /prioritize`` and ``POST /bind`` answered inside the HTTP protocol, without an
ASGI cycle.

Filter and prioritize are synchronous computations on one body, so the protocol answers them from its
parser callbacks: the body is collected as it arrives and the reply is written when the message is
complete. No task, no ASGI messages, no flow-control pauses at 64 KiB, no ``Request``/``Response``
object: measured at 5,000 nodes this is most of what HTTP added to a filter+prioritize pair
(see ``bench/extender.py``).

Bind awaits the API (and a gang member waits at the barrier), so it is started in the parser callback
(``ExtenderService.start_bind`` records the placement, so a ``/filter`` read after it, even in the same
read from another connection, counts the pod) and finished as one task per request that writes the reply
when ``ExtenderService.finish_bind`` returns; the client closing the connection meanwhile sets
the service's ``gone`` event, as the ASGI route's disconnect watcher does. Meanwhile a stand-in cycle
marks the connection busy, so requests pipelined behind the bind queue in uvicorn's pipeline and are
answered after it, in order (kube-scheduler never pipelines; this is for other clients). Measured with
``bench/scheduler_path.py`` on the 2-core development machine: the ASGI cycle cost about 0.2 ms per bind (more
on a slower or busier machine).

A request is answered inline only when nothing about it needs the general path: method ``POST``, a path
of exactly ``/filter``, ``/prioritize`` or ``/bind``, no response in flight on the connection (no pipelining
queue), no ``Expect: 100-continue``, a JSON content type and a declared length within
``maxRequestBytes`` (or none: chunked), and a transport that is not holding back writes. Anything else,
including every malformed head, goes to the ASGI app (``VerbFastPath`` there gives the same answers).

It stands on uvicorn's ``HttpToolsProtocol``, which is not public API: the extender checks it at start-up
(:mod:`koordpy.scheduler.extender.fastpath`) and serves through the ASGI app when it no longer works.

Not guaranteed: a chunked body over ``maxRequestBytes`` is answered 413 once the whole message has
been read (the ASGI path answers as soon as the bound is passed; both discard the bytes past it). As
with uvicorn's own pipelining, a request queued behind a bind pauses reading, and a close by the client
is then noticed only when reading resumes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, Protocol

from koordpy.runtime.listeners import DEFAULT_LIMITS, ListenerLimits
from koordpy.scheduler.extender.app import declared_length
from koordpy.scheduler.extender.listener import LimitedHttpToolsProtocol
from koordpy.scheduler.extender.protocol import ProtocolError, encode_bind_result, encode_filter_error
from koordpy.scheduler.extender.service import BindStart, Reply

__all__ = ["InlineVerbProtocol", "VerbService", "inline_verb_protocol"]

_JSON_HEAD = b"content-type: application/json\r\ncontent-length: %d\r\n"
_VERBS = {b"/filter": "filter", b"/prioritize": "prioritize", b"/bind": "bind"}
_STATUS_LINE = {s.value: b"HTTP/1.1 %d %s\r\n" % (s.value, s.phrase.encode()) for s in HTTPStatus}


class _Settings(Protocol):
    @property
    def max_request_bytes(self) -> int: ...


class VerbService(Protocol):
    """What the protocol calls of :class:`~koordpy.scheduler.extender.service.ExtenderService` (the start-up
    check of :mod:`koordpy.scheduler.extender.fastpath` passes a stand-in)."""

    @property
    def settings(self) -> _Settings: ...

    @property
    def log(self) -> Any: ...

    def filter(self, body: bytes, started: float | None = None) -> Reply: ...

    def prioritize(self, body: bytes, started: float | None = None) -> Reply: ...

    def reject(self, verb: str, exc: ProtocolError, started: float) -> Reply: ...

    def start_bind(self, body: bytes, started: float | None = None) -> BindStart | Reply: ...

    async def finish_bind(self, bind: BindStart | Reply, gone: asyncio.Event | None = None) -> Reply: ...


class InlineVerbProtocol(LimitedHttpToolsProtocol):
    """Use :func:`inline_verb_protocol` to get a subclass bound to one service and one ``ListenerLimits``."""

    service: VerbService | None = None
    answered_inline = 0
    """Requests answered here, over all subclasses (read in tests)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._verb: str | None = None
        """The verb whose body is being read: ``filter``, ``prioritize`` or ``bind``."""
        self._chunks: list[bytes] = []
        self._size = 0
        self._started = 0.0
        self._close_after = False
        self._bind_task: asyncio.Task[None] | None = None
        self._gone: asyncio.Event | None = None
        """Set when the client goes away while its bind is answered."""

    def _inline_verb(self) -> str | None:
        service = self.service
        if service is None or self.parser.get_method() != b"POST":
            return None
        verb = _VERBS.get(self.url)
        if verb is None:
            return None
        if self.expect_100_continue or self.pipeline or self.flow.write_paused or self.parser.should_upgrade():
            return None
        if self.cycle is not None and not self.cycle.response_complete:
            return None
        content_type, length = "", None
        for name, value in self.headers:
            if name == b"content-type":
                content_type = value.decode("latin-1")
            elif name == b"content-length":
                length = value.decode("latin-1")
        try:
            declared_length(content_type, length, service.settings.max_request_bytes)
        except ProtocolError:
            return None  # the ASGI path answers it (415, 400 or 413), as it always did
        return verb

    # -- transport callbacks ------------------------------------------------------------------------

    def connection_lost(self, exc: Exception | None) -> None:
        if self._gone is not None:
            self._gone.set()
        super().connection_lost(exc)

    # -- parser callbacks ---------------------------------------------------------------------------

    def on_headers_complete(self) -> None:
        verb = self._inline_verb()
        if verb is None:
            super().on_headers_complete()
            return
        self._in_head = False
        self._verb = verb
        self._chunks = []
        self._size = 0
        self._started = time.perf_counter()

    def on_body(self, body: bytes) -> None:
        if self._verb is None:
            super().on_body(body)
            return
        self._size += len(body)
        if self._size <= self._limit():
            self._chunks.append(body)
        else:
            self._chunks = []  # keep reading (and dropping) to the end of the message, then answer 413

    def on_message_complete(self) -> None:
        name = self._verb
        if name is None:
            super().on_message_complete()
            return
        self._disarm()
        self._in_head, self._raw_bytes = True, 0
        self._verb = None
        chunks, self._chunks = self._chunks, []
        assert self.service is not None
        if name == "bind" and self._size <= self._limit():
            body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
            self._gone = asyncio.Event()
            busy = _BindInFlight(self._gone)
            self.cycle = busy  # type: ignore[assignment]  # what uvicorn reads of a cycle: see _BindInFlight
            keep_alive = self.parser.should_keep_alive()
            # started here, before any request read after this one is answered: the placement is recorded
            # before kube-scheduler's next /filter (on another connection, maybe in the same read) is decided
            bind = self.service.start_bind(body, self._started)
            task = self.loop.create_task(self._answer_bind(bind, busy, keep_alive))
            self._bind_task = task
            self.tasks.add(task)  # the server waits for it on a graceful shutdown
            task.add_done_callback(self.tasks.discard)
            return
        if self._size > self._limit():
            reason = f"request body exceeds maxRequestBytes={self._limit()}"
            reply = self.service.reject(name, ProtocolError(413, reason), self._started)
        else:
            body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
            answer: Callable[[bytes, float], Reply] = (
                self.service.filter if name == "filter" else self.service.prioritize
            )
            try:
                reply = answer(body, self._started)
            except Exception as exc:  # the verbs catch everything; this is the last resort
                self.service.log.error("request.crashed", path=f"/{name}", error=f"{type(exc).__name__}: {exc}")
                reason = f"koordpy extender internal error: {type(exc).__name__}"
                reply = Reply(200, encode_filter_error(reason) if name == "filter" else b"[]")
        InlineVerbProtocol.answered_inline += 1
        self._write(reply)

    async def _answer_bind(self, bind: BindStart | Reply, busy: _BindInFlight, keep_alive: bool) -> None:
        assert self.service is not None
        try:
            reply = await self.service.finish_bind(bind, busy.message_event)
        except Exception as exc:  # the service catches everything; this is the last resort
            self.service.log.error("request.crashed", path="/bind", error=f"{type(exc).__name__}: {exc}")
            reply = Reply(200, encode_bind_result(f"koordpy extender internal error: {type(exc).__name__}"))
        finally:
            self._bind_task = self._gone = None
            busy.response_complete = True
        InlineVerbProtocol.answered_inline += 1
        if self.transport.is_closing():
            return  # the client went away: nothing to answer
        keep_alive = keep_alive and not self._close_after
        self._send(reply, keep_alive)
        if keep_alive:
            self.on_response_complete()  # uvicorn's: counts it, starts a queued request or arms keep-alive
        else:
            self.server_state.total_requests += 1
            self.transport.close()

    def _limit(self) -> int:
        assert self.service is not None
        return self.service.settings.max_request_bytes

    def _write(self, reply: Reply) -> None:
        keep_alive = not self._close_after and self.parser.should_keep_alive()
        self._send(reply, keep_alive)
        self.server_state.total_requests += 1
        if not keep_alive:
            self.transport.close()
            return
        self._unset_keepalive_if_required()
        self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, self.timeout_keep_alive_handler)

    def _send(self, reply: Reply, keep_alive: bool) -> None:
        head = [_STATUS_LINE[reply.status]]
        for name, value in self.server_state.default_headers:
            head.extend((name, b": ", value, b"\r\n"))
        head.append(_JSON_HEAD % len(reply.body))
        if not keep_alive:
            head.append(b"connection: close\r\n")
        head.append(b"\r\n")
        self.transport.writelines((b"".join(head), reply.body))

    def shutdown(self) -> None:
        if self._verb is not None or self._bind_task is not None:  # answer the request, then close
            self._close_after = True
            return
        super().shutdown()


class _BindInFlight:
    """Stands in for uvicorn's request cycle while a bind is answered.

    uvicorn reads three things of ``self.cycle``: ``response_complete`` (False: a request parsed now is
    queued in its pipeline), and on ``connection_lost`` it sets ``disconnected`` and ``message_event``.
    The event is the ``gone`` handed to ``ExtenderService.bind``.
    """

    def __init__(self, gone: asyncio.Event) -> None:
        self.response_complete = False
        self.disconnected = False
        self.message_event = gone
        self.keep_alive = True


def inline_verb_protocol(service: VerbService, limits: ListenerLimits = DEFAULT_LIMITS) -> type[InlineVerbProtocol]:
    """A protocol class for ``uvicorn.Config(http=...)`` answering the three verbs of ``service`` inline."""
    return type("InlineVerbProtocol", (InlineVerbProtocol,), {"service": service, "limits": limits})
