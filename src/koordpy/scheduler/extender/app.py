"""The FastAPI application: the three extender verbs plus health, readiness, metrics and debug.

The verbs are plain Starlette routes (``Request`` in, ``Response(bytes)`` out): no dependency
injection, no pydantic, no ``jsonable_encoder`` on the hot path. Request bodies are size-limited
(``extender.maxRequestBytes``) and must be ``application/json``.

``create_ops_app`` is the operations app for the optional second listener (``extender.metricsPort``):
the same ``/healthz``, ``/readyz`` and ``/metrics`` handlers, and nothing else, so it can listen on
the pod IP for the kubelet and Prometheus while the verbs (``/bind`` creates bindings) stay on loopback.

Not guaranteed: anything but the verbs is for operators (``/debug`` has no stable schema).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import orjson
from fastapi import FastAPI
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Router

from koordpy.runtime.metrics import render
from koordpy.scheduler.extender.debug import describe_node
from koordpy.scheduler.extender.protocol import ProtocolError, encode_bind_result, encode_filter_error, error_body
from koordpy.scheduler.extender.service import ExtenderService, Reply

__all__ = ["VerbFastPath", "add_ops_routes", "create_app", "create_ops_app", "declared_length", "read_body"]

JSON = "application/json"
Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]


def declared_length(content_type: str, length: str | None, limit: int) -> int | None:
    """Check a verb request's head: :class:`ProtocolError` 415 (not JSON), 400 (bad Content-Length) or 413
    (declared too large); else the declared length (None when not declared)."""
    media = content_type.partition(";")[0].strip().lower()
    if media != JSON and not media.endswith("+json"):
        raise ProtocolError(415, f"Content-Type must be application/json, got {content_type or 'none'!r}")
    if length is None:
        return None
    try:
        declared = int(length)
    except ValueError:
        raise ProtocolError(400, "invalid Content-Length") from None
    if declared > limit:
        raise ProtocolError(413, f"request body of {declared} bytes exceeds maxRequestBytes={limit}")
    return declared


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, or :class:`ProtocolError` (413 too large, 415 not JSON, 400 unreadable)."""
    declared = declared_length(request.headers.get("content-type", ""), request.headers.get("content-length"), limit)
    if declared is not None:
        try:
            return await request.body()
        except Exception as exc:
            raise ProtocolError(400, f"could not read the request body: {type(exc).__name__}") from None
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ProtocolError(413, f"request body exceeds maxRequestBytes={limit}")
            chunks.append(chunk)
    except ProtocolError:
        raise
    except Exception as exc:
        raise ProtocolError(400, f"could not read the request body: {type(exc).__name__}") from None
    return b"".join(chunks)


ASGIMessage = dict[str, Any]
Receive = Callable[[], Awaitable[ASGIMessage]]
Send = Callable[[ASGIMessage], Awaitable[None]]
ASGIApp = Callable[[dict[str, Any], Receive, Send], Awaitable[None]]


class VerbFastPath:
    """Pure ASGI middleware answering ``POST /filter``, ``/prioritize`` and ``/preempt`` before Starlette's routing.

    The same checks and answers as the routes (``declared_length``, ``maxRequestBytes`` while
    reading, the service's reply), without a ``Request``/``Response`` object, routing or the exception
    middleware per call. Everything else (``/bind``, health, metrics, debug, lifespan) goes to the app.

    Not guaranteed: a request whose ``Content-Length`` disagrees with its body is read as sent (the
    server's parser decides where the body ends).
    """

    def __init__(self, app: ASGIApp, service: ExtenderService) -> None:
        self.app = app
        self.service = service
        self.limit = service.settings.max_request_bytes
        self.verbs: dict[str, tuple[str, Callable[[bytes, float], Reply]]] = {
            "/filter": ("filter", service.filter),
            "/prioritize": ("prioritize", service.prioritize),
            "/preempt": ("preempt", service.preempt),
        }

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            verb = self.verbs.get(scope["path"])
            if verb is not None:
                await self._answer(verb[0], verb[1], scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _read(self, scope: dict[str, Any], receive: Receive) -> bytes:
        content_type: str = ""
        length: str | None = None
        for key, value in scope["headers"]:
            if key == b"content-type":
                content_type = value.decode("latin-1")
            elif key == b"content-length":
                length = value.decode("latin-1")
        declared_length(content_type, length, self.limit)
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                raise ProtocolError(400, "could not read the request body: client disconnected")
            chunk = message.get("body", b"")
            if chunk:
                size += len(chunk)
                if size > self.limit:
                    raise ProtocolError(413, f"request body exceeds maxRequestBytes={self.limit}")
                chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def _answer(
        self, name: str, answer: Callable[[bytes, float], Reply], scope: dict[str, Any], receive: Receive, send: Send
    ) -> None:
        started = time.perf_counter()
        try:
            body = await self._read(scope, receive)
        except ProtocolError as exc:
            reply = self.service.reject(name, exc, started)
        else:
            try:
                reply = answer(body, started)
            except Exception as exc:  # the verbs catch everything; this is the last resort
                self.service.log.error("request.crashed", path=scope["path"], error=f"{type(exc).__name__}: {exc}")
                reason = f"koordpy extender internal error: {type(exc).__name__}"
                if name == "preempt":
                    reply = Reply(500, error_body(reason))
                else:
                    reply = Reply(200, encode_filter_error(reason) if name == "filter" else b"[]")
        await send(
            {
                "type": "http.response.start",
                "status": reply.status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(reply.body))],
            }
        )
        await send({"type": "http.response.body", "body": reply.body})


Answer = Callable[[bytes, float], Reply | Awaitable[Reply]]
"""A service verb: (body, started) -> reply; ``bind`` is a coroutine."""


def _response(reply: Reply) -> Response:
    return Response(reply.body, status_code=reply.status, media_type=JSON)


def add_ops_routes(router: Router, service: ExtenderService, registry: CollectorRegistry) -> None:
    """``GET /healthz``, ``/readyz`` and ``/metrics``: one implementation for the main and the ops app."""

    async def healthz(_: Request) -> Response:
        return PlainTextResponse("ok")

    async def readyz(_: Request) -> Response:
        reason = service.not_ready()
        if reason is not None:
            return PlainTextResponse(f"not ready: {reason}", status_code=503)
        return PlainTextResponse("ok")

    async def metrics(_: Request) -> Response:
        body, content_type = render(registry)
        return Response(body, media_type=content_type)

    router.add_route("/healthz", healthz, methods=["GET"])
    router.add_route("/readyz", readyz, methods=["GET"])
    router.add_route("/metrics", metrics, methods=["GET"])


def _crashed(service: ExtenderService, request: Request, exc: Exception) -> str:
    """Log a request that escaped its route; the one-line reason for the response."""
    service.log.error("request.crashed", path=request.url.path, error=f"{type(exc).__name__}: {exc}")
    return f"koordpy extender internal error: {type(exc).__name__}"


def _error(reason: str) -> Response:
    return Response(orjson.dumps({"Error": reason}), status_code=503, media_type=JSON)


def create_app(
    service: ExtenderService,
    registry: CollectorRegistry,
    *,
    lifespan: Lifespan | None = None,
) -> FastAPI:
    """Build the app around one service. ``lifespan`` starts/stops the watches (see ``server``)."""
    app = FastAPI(
        title="koordpy extender",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    limit = service.settings.max_request_bytes

    def verb(name: str, answer: Answer) -> Callable[[Request], Awaitable[Response]]:
        """One route per verb: read the size-limited body, then the service answers (``bind`` awaits)."""

        async def handle(request: Request) -> Response:
            started = time.perf_counter()
            try:
                body = await read_body(request, limit)
            except ProtocolError as exc:
                return _response(service.reject(name, exc, started))
            reply = answer(body, started)
            return _response(reply if isinstance(reply, Reply) else await reply)

        return handle

    app.router.add_route("/filter", verb("filter", service.filter), methods=["POST"])
    app.router.add_route("/prioritize", verb("prioritize", service.prioritize), methods=["POST"])
    app.router.add_route("/preempt", verb("preempt", service.preempt), methods=["POST"])

    async def bind(request: Request) -> Response:
        """Like ``verb``, plus a watcher for the client closing the connection (kube-scheduler's binder
        ``httpTimeout``): a held gang bind is then abandoned, never bound from this request."""
        started = time.perf_counter()
        try:
            body = await read_body(request, limit)
        except ProtocolError as exc:
            return _response(service.reject("bind", exc, started))
        gone = asyncio.Event()

        async def watch_disconnect() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass
            gone.set()

        watcher = asyncio.ensure_future(watch_disconnect())
        try:
            return _response(await service.bind(body, started, gone))
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watcher

    app.router.add_route("/bind", bind, methods=["POST"])

    add_ops_routes(app.router, service, registry)

    @app.get("/debug/nodes/{name}")
    async def debug_node(name: str) -> Response:
        view = describe_node(service.state, name, service.clock.now())
        if view is None:
            return Response(orjson.dumps({"Error": f"node {name!r} is not in the cache"}), 404, media_type=JSON)
        return Response(orjson.dumps(view, option=orjson.OPT_SERIALIZE_NUMPY), media_type=JSON)

    @app.get("/debug/gangs")
    async def debug_gangs() -> Response:
        gangs = service.gangs.describe() if service.gangs is not None else []
        return Response(orjson.dumps({"gangs": gangs}), media_type=JSON)

    @app.get("/debug/gangs/{namespace}/{name}")
    async def debug_gang(namespace: str, name: str) -> Response:
        found = service.gangs.describe(f"{namespace}/{name}") if service.gangs is not None else []
        if not found:
            return Response(orjson.dumps({"Error": f"gang {namespace}/{name} is not known"}), 404, media_type=JSON)
        return Response(orjson.dumps(found[0]), media_type=JSON)

    async def unexpected(request: Request, exc: Exception) -> Response:
        """Last resort: anything that escaped a route becomes the protocol's error shape, logged."""
        reason = _crashed(service, request, exc)
        path = request.url.path
        if path.endswith("/filter"):
            return Response(encode_filter_error(reason), media_type=JSON)
        if path.endswith("/prioritize"):
            return Response(b"[]", media_type=JSON)
        if path.endswith("/bind"):
            return Response(encode_bind_result(reason), media_type=JSON)
        return _error(reason)

    app.add_exception_handler(Exception, unexpected)
    app.add_middleware(VerbFastPath, service=service)
    return app


def create_ops_app(service: ExtenderService, registry: CollectorRegistry) -> Starlette:
    """The operations app: ``GET /healthz``, ``/readyz``, ``/metrics`` only; any other path is 404.

    No lifespan of its own: the main app's lifespan runs the watches both apps report on.
    """
    app = Starlette()
    add_ops_routes(app.router, service, registry)

    async def unexpected(request: Request, exc: Exception) -> Response:
        return _error(_crashed(service, request, exc))

    app.add_exception_handler(Exception, unexpected)
    return app
