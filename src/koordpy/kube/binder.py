"""``POST pods/{name}/binding`` over kept-alive HTTP/1.1 connections: the extender's one API call per pod.

The extender binds every pod of its profile, so this request is on its hot path. Through
:class:`koordpy.kube.client.ApiClient` (aiohttp) one binding cost about 0.4 ms of the extender's CPU;
here a request is one pre-assembled write and a response parsed by httptools in an
``asyncio.Protocol`` (about 0.15 ms, most of it TLS). It speaks exactly what this call needs: a JSON
body out, a status and a JSON body back, ``Content-Length`` or chunked.

At most ``max_connections`` connections are open; a request that finds none idle opens one while under
that bound and otherwise waits for the next one released (kube-scheduler starts a binding per pod
without limit, and a TLS handshake costs the API server more than the binding itself: Go's client
avoids it with one multiplexed HTTP/2 connection). Idle connections are reused last-in-first-out (as
Go's transport does) and dropped after ``idle_seconds`` unused, before the API server's own idle
timeout closes them under us (kube-apiserver: 90 s).

Errors are raised as :class:`koordpy.kube.client.ApiClient` raises them: an HTTP error status as the
matching :class:`koordpy.kube.errors.ApiError`, anything on the way (refused, reset, closed before the
answer was complete, TLS) as :class:`koordpy.kube.errors.ApiConnectionError`. A binding that may have
been applied is never sent twice (kube-scheduler retries the pod); the one retry is after a 401, which
the API server answers before it does anything with the request: the binding is sent once more when
renewing the connection's credentials (:mod:`koordpy.kube.credentials`) gave a different header.
The request head is assembled once per header, not per bind; the header is reloaded when due (a token
file at most once a minute), never per bind.

Not guaranteed: HTTP proxies (:meth:`BindingClient.for_connection` falls back to ``ApiClient`` when the
connection names one); HTTP/2; thread safety (one event loop).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any, cast
from urllib.parse import urlsplit

import httptools
import orjson

from koordpy.kube.client import ApiClient
from koordpy.kube.connection import ConnectionInfo
from koordpy.kube.errors import ApiConnectionError, ApiError, error_from_response

__all__ = ["BindingClient"]


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection; one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.answer: asyncio.Future[tuple[int, bytes]] | None = None
        self.body: list[bytes] = []
        self.retry_after: str | None = None
        self.keep_alive = True
        self.closed = False
        self.idle_since = 0.0

    # -- transport --

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not subclasses

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(ApiConnectionError(f"connection closed before the answer: {exc or 'EOF'}"))

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(ApiConnectionError(f"malformed HTTP answer: {exc}"))
            self.close()

    def eof_received(self) -> bool | None:
        return None  # close the transport

    # -- parser callbacks --

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"retry-after":
            self.retry_after = value.decode("latin-1")

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.keep_alive = self.parser.should_keep_alive()
        answer, self.answer = self.answer, None
        if answer is not None and not answer.done():
            answer.set_result((self.parser.get_status_code(), b"".join(self.body)))

    # -- use --

    def send(self, request: bytes) -> asyncio.Future[tuple[int, bytes]]:
        assert self.transport is not None and self.answer is None
        self.body = []
        self.retry_after = None
        self.answer = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self.answer

    def _fail(self, exc: Exception) -> None:
        answer, self.answer = self.answer, None
        if answer is not None and not answer.done():
            answer.set_exception(exc)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class BindingClient:
    """Creates Bindings for one API server (``connection``). Close it with :meth:`close`."""

    def __init__(
        self,
        connection: ConnectionInfo,
        *,
        idle_seconds: float = 60.0,
        max_connections: int = 16,
        connect_timeout: float = 10.0,
        user_agent: str = "koordpy",
    ) -> None:
        parts = urlsplit(connection.server)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"server {connection.server!r}: expected http(s)://host[:port]")
        self.connection = connection
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.base_path = parts.path.rstrip("/")
        if max_connections < 1:
            raise ValueError("max_connections: must be at least 1")
        self.idle_seconds = idle_seconds
        self.max_connections = max_connections
        self.connect_timeout = connect_timeout
        self._ssl = connection.ssl_context() if connection.is_tls else None
        host_header = parts.netloc.rsplit("@", 1)[-1]
        head = [f"Host: {host_header}", f"User-Agent: {user_agent}", "Accept: application/json"]
        head += [f"{name}: {value}" for name, value in connection.headers().items()]
        head.append("Content-Type: application/json")
        self._head_lines = head
        self.credentials = connection.credentials
        self._head_auth: str | None = None
        self._head = self._assemble(None)
        self._idle: list[_Connection] = []
        self._open = 0
        """Connections opened and not closed yet (idle or in use)."""
        self._waiting: list[asyncio.Future[_Connection | None]] = []
        """Requests waiting for a connection: handed a released one, or None (open your own)."""
        self._closed = False

    @classmethod
    def for_connection(cls, connection: ConnectionInfo, fallback: ApiClient) -> BindingClient | ApiClient:
        """A ``BindingClient`` for ``connection``, or ``fallback`` when the connection goes through a proxy."""
        return fallback if connection.proxy else cls(connection)

    async def create_binding(
        self,
        namespace: str,
        name: str,
        uid: str | None,
        node: str,
        *,
        annotations: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """POST the Binding (``uid`` as a precondition when given, ``annotations`` onto the pod). Returns
        the decoded answer; raises ``ApiError`` (e.g. 409 when already bound) or ``ApiConnectionError``."""
        meta: dict[str, Any] = {"name": name, "namespace": namespace}
        if uid:
            meta["uid"] = uid
        if annotations:
            meta["annotations"] = dict(annotations)
        body = orjson.dumps(
            {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": meta,
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            }
        )
        path = f"{self.base_path}/api/v1/namespaces/{namespace}/pods/{name}/binding"
        start = b"POST %s HTTP/1.1\r\n" % path.encode()
        end = b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        credentials = self.credentials
        sent = await credentials.header()
        sent_at = credentials.clock()
        status, raw, retry_after = await self._exchange(start + self._head_with(sent) + end)
        credentials.observe(status, sent)
        if status == 401 and (renewed := await credentials.renew(sent, sent_at)) != sent:
            # a 401 is answered before anything is done: the binding was not applied, send it once more
            status, raw, retry_after = await self._exchange(start + self._head_with(renewed) + end)
            credentials.observe(status, renewed)
        if status >= 400:
            raise error_from_response(status, raw, retry_after=retry_after)
        try:
            decoded = orjson.loads(raw) if raw else {}
        except orjson.JSONDecodeError as exc:
            raise ApiError(status, "BadResponse", f"POST {path}: undecodable body") from exc
        return decoded if isinstance(decoded, dict) else {}

    def _assemble(self, authorization: str | None) -> bytes:
        lines = list(self._head_lines)
        if authorization:
            lines.insert(3, f"Authorization: {authorization}")
        return ("\r\n".join(lines) + "\r\n").encode("latin-1")

    def _head_with(self, authorization: str | None) -> bytes:
        """The request head for ``authorization``, assembled again only when the header changed."""
        if authorization != self._head_auth:
            self._head, self._head_auth = self._assemble(authorization), authorization
        return self._head

    async def _exchange(self, request: bytes) -> tuple[int, bytes, str | None]:
        if self._closed:
            raise ApiConnectionError("the binding client is closed")
        conn = await self._acquire()
        try:
            status, raw = await conn.send(request)
        except BaseException:
            self._discard(conn)  # half a request or half an answer: the connection cannot be reused
            raise
        retry_after = conn.retry_after
        if conn.keep_alive and not conn.closed and not self._closed:
            self._release(conn)
        else:
            self._discard(conn)
        return status, raw, retry_after

    async def _acquire(self) -> _Connection:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed and now - conn.idle_since < self.idle_seconds:
                return conn
            self._discard(conn)
        while self._open >= self.max_connections:
            waiter: asyncio.Future[_Connection | None] = asyncio.get_running_loop().create_future()
            self._waiting.append(waiter)
            try:
                handed = await waiter
            except BaseException:
                if waiter in self._waiting:
                    self._waiting.remove(waiter)
                elif waiter.done() and not waiter.cancelled():  # handed over as we gave up: pass it on
                    late = waiter.result()
                    if late is not None:
                        self._release(late)
                    else:
                        self._wake(None)
                raise
            if handed is not None:
                return handed
        self._open += 1
        try:
            return await self._connect()
        except BaseException:
            self._open -= 1
            self._wake(None)
            raise

    def _release(self, conn: _Connection) -> None:
        """A connection that is good for another request: to the first waiter, else to the idle pool."""
        while self._waiting:
            waiter = self._waiting.pop(0)
            if not waiter.done():
                waiter.set_result(conn)
                return
        conn.idle_since = time.monotonic()
        self._idle.append(conn)

    def _discard(self, conn: _Connection) -> None:
        conn.close()
        self._open -= 1
        self._wake(None)

    def _wake(self, conn: _Connection | None) -> None:
        while self._waiting:
            waiter = self._waiting.pop(0)
            if not waiter.done():
                waiter.set_result(conn)  # None: a slot is free, open a connection
                return

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout):
                _, conn = await loop.create_connection(
                    _Connection,
                    self.host,
                    self.port,
                    ssl=self._ssl,
                    server_hostname=(self.connection.tls_server_name or self.host) if self._ssl else None,
                )
        except (OSError, TimeoutError) as exc:  # ssl.SSLError is an OSError
            raise ApiConnectionError(f"connect {self.host}:{self.port}: {type(exc).__name__}: {exc}") from exc
        return conn

    async def close(self) -> None:
        self._closed = True
        while self._idle:
            self._discard(self._idle.pop())
        for waiter in self._waiting:
            if not waiter.done():
                waiter.set_exception(ApiConnectionError("the binding client is closed"))
        self._waiting.clear()
