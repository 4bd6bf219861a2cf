"""A kube-scheduler extender that decides nothing: the floor of the extender protocol, for benchmarks.

It answers the three verbs koordpy's chart configures (``/filter``, ``/prioritize``, ``/bind``) as cheaply
as a Python extender can, so that a profile pointed at it measures what the protocol itself costs
kube-scheduler (encoding the pod and the node names, three HTTP round trips, decoding the answers)
apart from what koordpy's decisions add:

- ``/filter``: every node passes. The answer is ``{"NodeNames":[...]}`` with the request's own
  ``NodeNames`` bytes copied (no JSON decode of the request: kube-scheduler encodes ``NodeNames`` as
  the last key of ``ExtenderArgs``). A request without ``NodeNames`` (not nodeCacheCapable) is decoded
  and its ``Nodes`` echoed.
- ``/prioritize``: ``[]`` (no scores: kube-scheduler adds nothing for a node that is not listed).
- ``/bind``: one ``pods/binding`` call with koordpy's own API client, then ``{"Error":""}`` (or the error).

No watches, no cache, no metrics, no logging per request. One asyncio protocol on uvloop, HTTP/1.1
parsed by httptools; ``GET /healthz`` answers ``ok``.

Run: ``python -m koordpy_testkit.noop_extender --port 10300 --kubeconfig FILE``.

Not guaranteed: HTTP beyond what Go's ``net/http`` client sends kube-scheduler's way (no pipelining: a
request that arrives while a bind on the same connection is in flight is answered after it; no
``Expect: 100-continue``; no chunked answers); any limit on request size.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import threading
from typing import Any, cast

import httptools
import orjson
import uvloop

from koordpy.kube.client import ApiClient

__all__ = ["NoopExtenderProtocol", "filter_reply", "main", "serve"]

_NAMES_KEY = b',"NodeNames":'
_STATUS = {200: b"200 OK", 400: b"400 Bad Request", 404: b"404 Not Found"}


def filter_reply(body: bytes) -> bytes:
    """Every candidate passes: the request's ``NodeNames`` (or ``Nodes``) handed back."""
    at = body.rfind(_NAMES_KEY)
    if at >= 0 and body.endswith(b"}"):
        names = body[at + len(_NAMES_KEY) : -1].strip()
        if names.startswith(b"[") and names.endswith(b"]"):
            return b'{"NodeNames":' + names + b"}"
    try:
        args = orjson.loads(body)
    except orjson.JSONDecodeError:
        return orjson.dumps({"Error": "request body is not valid JSON"})
    if not isinstance(args, dict):
        return orjson.dumps({"Error": "request body must be an ExtenderArgs object"})
    if args.get("NodeNames") is not None:
        return orjson.dumps({"NodeNames": args["NodeNames"]})
    return orjson.dumps({"Nodes": args.get("Nodes")})


class NoopExtenderProtocol(asyncio.Protocol):
    """One connection. ``binder`` is the open API client that binds pods."""

    def __init__(self, binder: ApiClient, tasks: set[asyncio.Task[None]]) -> None:
        self.binder = binder
        self.tasks = tasks
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.url = b""
        self.body: list[bytes] = []
        self.busy: asyncio.Task[None] | None = None
        self.queued: list[tuple[bytes, bytes, bool]] = []

    # -- transport ----------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's TCPTransport is not a subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self._send(400, b'{"Error":"malformed HTTP request"}', keep_alive=False)

    # -- parser callbacks ----------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self.url = b""
        self.body = []

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        request = (self.url, b"".join(self.body), self.parser.should_keep_alive())
        if self.busy is not None:
            self.queued.append(request)
        else:
            self._answer(*request)

    # -- answers -------------------------------------------------------------------------------

    def _answer(self, url: bytes, body: bytes, keep_alive: bool) -> None:
        path = url.split(b"?", 1)[0].rstrip(b"/")
        if path.endswith(b"/filter"):
            self._send(200, filter_reply(body), keep_alive)
        elif path.endswith(b"/prioritize"):
            self._send(200, b"[]", keep_alive)
        elif path.endswith(b"/bind"):
            self.busy = asyncio.get_running_loop().create_task(self._bind(body, keep_alive))
            self.tasks.add(self.busy)
            self.busy.add_done_callback(self.tasks.discard)
        elif path.endswith(b"/healthz") or path.endswith(b"/readyz"):
            self._send(200, b"ok", keep_alive, content_type=b"text/plain")
        else:
            self._send(404, b'{"Error":"not found"}', keep_alive)

    async def _bind(self, body: bytes, keep_alive: bool) -> None:
        error = ""
        try:
            args: Any = orjson.loads(body)
            await self.binder.create_binding(
                args["PodNamespace"], args["PodName"], args.get("PodUID") or None, args["Node"]
            )
        except Exception as exc:  # the answer carries it; kube-scheduler retries the pod
            error = f"binding failed: {type(exc).__name__}: {exc}"
        self._send(200, orjson.dumps({"Error": error}), keep_alive)
        self.busy = None
        while self.queued and self.busy is None:
            self._answer(*self.queued.pop(0))

    def _send(self, status: int, body: bytes, keep_alive: bool, content_type: bytes = b"application/json") -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        head = b"HTTP/1.1 %s\r\ncontent-type: %s\r\ncontent-length: %d\r\n%s\r\n" % (
            _STATUS[status],
            content_type,
            len(body),
            b"" if keep_alive else b"connection: close\r\n",
        )
        transport.writelines((head, body))
        if not keep_alive:
            transport.close()


async def serve(host: str, port: int, kubeconfig: str | None, stop: asyncio.Event | None = None) -> None:
    """Serve until ``stop`` is set (or SIGTERM/SIGINT when ``stop`` is None)."""
    loop = asyncio.get_running_loop()
    stop = stop or asyncio.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
    tasks: set[asyncio.Task[None]] = set()
    async with ApiClient.from_kubeconfig(kubeconfig) as binder:
        server = await loop.create_server(lambda: NoopExtenderProtocol(binder, tasks), host, port)
        async with server:
            await stop.wait()
        if tasks:
            await asyncio.wait(tasks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m koordpy_testkit.noop_extender", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--kubeconfig", help="kubeconfig of the identity that binds (default: the usual lookup)")
    args = parser.parse_args(argv)
    uvloop.run(serve(args.host, args.port, args.kubeconfig))
    return 0


if __name__ == "__main__":
    sys.exit(main())
