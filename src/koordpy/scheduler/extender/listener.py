"""uvicorn's httptools protocol with :class:`koordpy.runtime.listeners.ListenerLimits` enforced.

uvicorn bounds neither the size of a request head under httptools nor the time a client takes to send
a request (its keep-alive timeout only runs between requests, and a byte of the next request cancels
it). This protocol adds both, per connection:

- the head (request line and headers) may take ``max_header_bytes``; past that the client is answered
  431 and disconnected, and nothing of the request reaches the app. httptools buffers a header until
  it is complete, so the bytes received while a head is incomplete are counted too: at most one read
  chunk past the bound is ever held;
- a request must be read completely (head and body) within ``request_read_seconds`` of the connection
  opening, or of the first byte of a later request on a kept-alive connection; otherwise the
  connection is closed (no answer: the client is not reading in any useful way).

Bodies are not limited here; the extender's app checks ``maxRequestBytes`` itself (413).

``HttpToolsProtocol`` is not uvicorn's public API: :mod:`koordpy.scheduler.extender.fastpath` checks at
start-up that what this protocol uses is still there and works, and serves without it otherwise. This
module imports even where it is gone (the class then stands on ``object`` and the check reports it).

Not guaranteed: the exact byte at which a head is refused (up to one read chunk later); the timer
pauses neither while the app holds back reading (flow control) nor for pipelined requests queued
behind a slow response.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from typing import TYPE_CHECKING, Any

from koordpy.runtime.listeners import DEFAULT_LIMITS, ListenerLimits

if TYPE_CHECKING:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
else:
    try:
        HttpToolsProtocol = importlib.import_module("uvicorn.protocols.http.httptools_impl").HttpToolsProtocol
    except (ImportError, AttributeError):  # reported by fastpath.check_protocols, which then serves without it
        HttpToolsProtocol = object

__all__ = ["LimitedHttpToolsProtocol", "limited_protocol"]

log = logging.getLogger(__name__)

_REFUSED_HEAD = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"content-length: 32\r\n"
    b"connection: close\r\n\r\n"
    b"request header fields too large\n"
)


class _HeadTooLargeError(Exception):
    pass


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """Use :func:`limited_protocol` to get a subclass bound to one ``ListenerLimits``."""

    limits: ListenerLimits = DEFAULT_LIMITS
    refused_heads = 0
    """Connections answered 431, over all subclasses (read in tests and debugging)."""
    timed_out = 0
    """Connections closed because a request was not read in time."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_bytes = 0
        """Head bytes the parser reported for the current request."""
        self._raw_bytes = 0
        """Bytes received since the current head began (a head and possibly the start of a body)."""
        self._in_head = True
        self._head_refused = False
        self._read_timer: asyncio.TimerHandle | None = None

    # -- the read deadline --------------------------------------------------------------------------

    def _arm(self) -> None:
        if self._read_timer is None:
            self._read_timer = self.loop.call_later(self.limits.request_read_seconds, self._read_expired)

    def _disarm(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _read_expired(self) -> None:
        self._read_timer = None
        if self.transport is not None and not self.transport.is_closing():
            LimitedHttpToolsProtocol.timed_out += 1
            seconds = self.limits.request_read_seconds
            log.info("listener: request not read within %.1fs from %s; closing", seconds, self.client)
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._head_refused:
            return
        if self._in_head:
            self._raw_bytes += len(data)
        super().data_received(data)
        if self._in_head and self._raw_bytes > self.limits.max_header_bytes and not self._head_refused:
            self._head_refused = True  # still no complete head after more than the bound
            self.send_400_response("")

    # -- parser callbacks ---------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_bytes = 0
        self._arm()

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()

    def _count(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > self.limits.max_header_bytes:
            self._head_refused = True
            raise _HeadTooLargeError  # the parser stops; uvicorn answers through send_400_response below

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)  # "name: value\r\n"
        super().on_header(name, value)

    def on_message_complete(self) -> None:
        self._disarm()
        self._in_head, self._raw_bytes = True, 0
        super().on_message_complete()

    def send_400_response(self, msg: str) -> None:
        if not self._head_refused:
            super().send_400_response(msg)
            return
        LimitedHttpToolsProtocol.refused_heads += 1
        log.info("listener: request head over %d bytes from %s; 431", self.limits.max_header_bytes, self.client)
        self.transport.write(_REFUSED_HEAD)
        self.transport.close()


def limited_protocol(limits: ListenerLimits) -> type[LimitedHttpToolsProtocol]:
    """A protocol class for ``uvicorn.Config(http=...)`` that enforces ``limits``."""
    return type("LimitedHttpToolsProtocol", (LimitedHttpToolsProtocol,), {"limits": limits})
