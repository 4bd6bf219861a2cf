"""The asynchronous Kubernetes API client: the only place in koordpy that sends API requests.

Objects go in and come out as raw JSON dicts (decoded with orjson); interpreting them is the job of
``koordpy.model``. Every failure raises an exception from :mod:`koordpy.kube.errors`.

Credentials renew (:mod:`koordpy.kube.credentials`): every request carries the connection's newest
``Authorization`` header, and a request answered 401 is sent once more when renewing the credentials
gave a different header (a 401 means the API server did nothing with the request).

A client built with a ``fence`` (:class:`WriteFence`, e.g. a leader's
:class:`koordpy.kube.leaderelection.LeaseElector`) asks it right before each write goes out (after the
credentials were fetched, so nothing of the client's own awaits lies between the check and the send):
a write the fence refuses is never sent, and one it admits must be answered within the seconds the fence
grants (else it fails as a timeout). Reads (GET, HEAD, OPTIONS) pass unasked. Its connections close by
reset (``SO_LINGER`` 0): a write given up on (the grant ran out while the network was cut) is dropped
with its connection, never delivered by the kernel once the network is back.

Not guaranteed: other retries. Each call is one request (``list`` one request per page), or two after a
401; callers decide what to retry with :func:`koordpy.kube.errors.is_temporary`. No state is kept
across clients but the connection's credentials, which its clients share.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import socket
import struct
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, Protocol, Self

import aiohttp
import orjson

from koordpy.kube import resources
from koordpy.kube.connection import ConnectionInfo, load_connection
from koordpy.kube.credentials import Credentials
from koordpy.kube.errors import ApiConnectionError, ApiError, error_from_response, error_from_status
from koordpy.kube.resources import ResourceRef

__all__ = [
    "READ_METHODS",
    "ApiClient",
    "ClientSettings",
    "ListResult",
    "PatchType",
    "WatchEvent",
    "WriteFence",
    "abortive_socket",
    "authorize_middleware",
    "fence_middleware",
]

PatchType = Literal["merge", "json", "strategic"]
WatchEvent = tuple[str, dict[str, Any]]

_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}


@dataclass(frozen=True)
class ClientSettings:
    """Client tuning knobs.

    - ``request_timeout``: total seconds for one non-watch request (per call overridable with ``timeout=``).
    - ``connect_timeout``: seconds to establish a connection (also for watches).
    - ``watch_grace``: extra seconds the client waits past a watch's ``timeoutSeconds`` before treating
      the stream as dead (the server is expected to close it at ``timeoutSeconds``).
    - ``page_size``: default ``limit`` for chunked lists.
    - ``max_connections``: aiohttp connector pool size (watches hold one each).
    - ``user_agent``: sent on every request.
    """

    request_timeout: float = 30.0
    connect_timeout: float = 10.0
    watch_grace: float = 30.0
    page_size: int = 500
    max_connections: int = 100
    user_agent: str = "koordpy"


@dataclass
class ListResult:
    """All items of a (possibly chunked) list and the collection resourceVersion to watch from."""

    items: list[dict[str, Any]]
    resource_version: str
    pages: int = 1
    metadata: dict[str, Any] = field(default_factory=dict)


def _selectors(label_selector: str | None, field_selector: str | None) -> dict[str, str]:
    params: dict[str, str] = {}
    if label_selector:
        params["labelSelector"] = label_selector
    if field_selector:
        params["fieldSelector"] = field_selector
    return params


def _namespace_of(resource: ResourceRef, namespace: str | None, body: Mapping[str, Any] | None) -> str | None:
    if not resource.namespaced:
        return None
    if namespace is not None:
        return namespace
    meta = (body or {}).get("metadata") or {}
    ns = meta.get("namespace")
    if not ns:
        raise ValueError(f"{resource.qualified} is namespaced: pass namespace= or set metadata.namespace")
    return str(ns)


def authorize_middleware(credentials: Credentials) -> aiohttp.ClientMiddlewareType:
    """An aiohttp client middleware that sends ``credentials``' newest header with every request, reports
    each answer to them, and sends a request answered 401 once more when renewing gives another header.
    Used by :class:`ApiClient` and by the session the manager hands to kopf."""

    async def authorize(request: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType) -> aiohttp.ClientResponse:
        sent = await credentials.header()
        _set_authorization(request, sent)
        sent_at = credentials.clock()
        response = await handler(request)
        credentials.observe(response.status, sent)
        if response.status != 401:
            return response
        renewed = await credentials.renew(sent, sent_at)
        if renewed == sent:
            return response
        response.release()
        _set_authorization(request, renewed)
        response = await handler(request)
        credentials.observe(response.status, renewed)
        return response

    return authorize


READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods that change nothing on the API server; every other one is a write."""


class WriteFence(Protocol):
    """Decides whether a write may go out now (see :func:`fence_middleware`)."""

    def admit(self, method: str, url: str) -> float:
        """The seconds a write sent now may take until its answer; raises an :class:`ApiError` to refuse it
        (it is then not sent)."""
        ...


def fence_middleware(fence: WriteFence) -> aiohttp.ClientMiddlewareType:
    """An aiohttp client middleware that asks ``fence`` before each write is sent (every attempt, the second
    one after a 401 too) and bounds the wait for its answer by what the fence granted. Put it after
    :func:`authorize_middleware`, so that it runs last before the request goes out."""

    async def fenced(request: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType) -> aiohttp.ClientResponse:
        if request.method.upper() in READ_METHODS:
            return await handler(request)
        granted = fence.admit(request.method.upper(), request.url.path)
        async with asyncio.timeout(granted):
            return await handler(request)

    return fenced


def abortive_socket(addr_info: tuple[Any, ...]) -> socket.socket:
    """An aiohttp ``socket_factory`` whose sockets close by reset (``SO_LINGER`` on, 0 s): what the kernel
    had not delivered yet is discarded at close, not sent once the network is back (a fenced client's)."""
    family, kind, proto = addr_info[0], addr_info[1], addr_info[2]
    sock = socket.socket(family=family, type=kind, proto=proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    return sock


def _set_authorization(request: aiohttp.ClientRequest, header: str | None) -> None:
    if header:
        request.headers["Authorization"] = header
    else:
        request.headers.pop("Authorization", None)


class ApiClient:
    """Async API client over one aiohttp session. Use as ``async with ApiClient(conn) as api: ...``.

    ``fence`` (optional) admits or refuses each write before it is sent (see the module docstring).

    Not thread-safe; bound to the event loop it was opened on.
    """

    def __init__(
        self, connection: ConnectionInfo, settings: ClientSettings | None = None, *, fence: WriteFence | None = None
    ) -> None:
        self.connection = connection
        self.settings = settings or ClientSettings()
        self.fence = fence
        self._session: aiohttp.ClientSession | None = None

    @classmethod
    def from_kubeconfig(
        cls,
        kubeconfig: str | None = None,
        *,
        context: str | None = None,
        in_cluster: bool | None = None,
        settings: ClientSettings | None = None,
    ) -> ApiClient:
        """Build a client from :func:`koordpy.kube.connection.load_connection` (not opened yet)."""
        return cls(load_connection(kubeconfig, context=context, in_cluster=in_cluster), settings)

    # -- lifecycle --------------------------------------------------------------------------------

    async def open(self) -> None:
        if self._session is not None:
            return
        ssl_arg = self.connection.ssl_context()
        connector = aiohttp.TCPConnector(
            limit=self.settings.max_connections,
            ssl=ssl_arg,
            socket_factory=abortive_socket if self.fence is not None else None,
        )
        headers = {"User-Agent": self.settings.user_agent, "Accept": "application/json"}
        headers.update(self.connection.headers())
        middlewares = [authorize_middleware(self.connection.credentials)]
        if self.fence is not None:
            middlewares.append(fence_middleware(self.fence))
        self._session = aiohttp.ClientSession(
            base_url=None,
            connector=connector,
            headers=headers,
            json_serialize=lambda obj: orjson.dumps(obj).decode(),
            middlewares=tuple(middlewares),
        )

    async def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("ApiClient is not open; use `async with ApiClient(...)` or await open()")
        return self._session

    # -- transport --------------------------------------------------------------------------------

    def _timeout(self, timeout: float | None) -> aiohttp.ClientTimeout:
        return aiohttp.ClientTimeout(
            total=timeout if timeout is not None else self.settings.request_timeout,
            sock_connect=self.settings.connect_timeout,
        )

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Send one request and return the decoded JSON object. Raises :class:`ApiError` subclasses."""
        url = self.connection.server + path
        data = orjson.dumps(body) if body is not None else None
        headers = {"Content-Type": content_type} if data is not None else None
        try:
            async with self.session.request(
                method,
                url,
                params=params,
                data=data,
                headers=headers,
                timeout=self._timeout(timeout),
                server_hostname=self.connection.tls_server_name,
            ) as resp:
                raw = await resp.read()
                if resp.status >= 400:
                    raise error_from_response(resp.status, raw, retry_after=resp.headers.get("Retry-After"))
        except ApiError:
            raise
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise ApiConnectionError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
        if not raw:
            return {}
        try:
            decoded = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise ApiError(resp.status, "BadResponse", f"{method} {path}: undecodable body") from exc
        return decoded if isinstance(decoded, dict) else {"items": decoded}

    # -- reads ------------------------------------------------------------------------------------

    async def get(
        self,
        resource: ResourceRef,
        name: str,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        return await self.request("GET", resource.path(namespace, name, subresource), timeout=timeout)

    async def list_page(
        self,
        resource: ResourceRef,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """One raw list response (``metadata.continue`` set when more pages follow)."""
        params = _selectors(label_selector, field_selector)
        if limit:
            params["limit"] = str(limit)
        if continue_token:
            params["continue"] = continue_token
        elif resource_version is not None:
            params["resourceVersion"] = resource_version
        return await self.request("GET", resource.path(namespace), params=params, timeout=timeout)

    async def list(
        self,
        resource: ResourceRef,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int | None = None,
        resource_version: str | None = None,
        timeout: float | None = None,
    ) -> ListResult:
        """List every object, following ``continue`` tokens (``page_size`` items per request, 0 = unchunked).

        Items get ``apiVersion``/``kind`` filled in (the server omits them inside lists). The result's
        ``resource_version`` is the collection RV of the first page, the point to start a watch from.
        A continue token that expired mid-list raises :class:`~koordpy.kube.errors.Gone`.
        """
        size = self.settings.page_size if page_size is None else page_size
        items: list[dict[str, Any]] = []
        token: str | None = None
        first_meta: dict[str, Any] | None = None
        pages = 0
        while True:
            page = await self.list_page(
                resource,
                namespace=namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                limit=size or None,
                continue_token=token,
                resource_version=resource_version,
                timeout=timeout,
            )
            pages += 1
            meta = page.get("metadata") or {}
            if first_meta is None:
                first_meta = dict(meta)
            for item in page.get("items") or ():
                if isinstance(item, dict):  # anything else is passed on for the caller to skip and report
                    item.setdefault("apiVersion", resource.api_version)
                    item.setdefault("kind", resource.kind)
                items.append(item)
            token = meta.get("continue") or None
            if not token:
                break
        assert first_meta is not None
        first_meta.pop("continue", None)
        return ListResult(items, str(first_meta.get("resourceVersion") or ""), pages, first_meta)

    async def watch(
        self,
        resource: ResourceRef,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
        on_open: Callable[[], None] | None = None,
    ) -> AsyncIterator[WatchEvent]:
        """Stream ``(type, object)`` for ``ADDED``/``MODIFIED``/``DELETED``/``BOOKMARK`` until the server ends it.

        A watch ``ERROR`` event is raised as the matching :class:`ApiError` (code 410 → ``Gone``), never
        yielded. A dropped or stalled stream (no bytes for ``timeout_seconds + watch_grace``) raises
        :class:`ApiConnectionError`. Without ``timeout_seconds`` a silent stream is waited on forever.
        To stop early, break out inside ``contextlib.aclosing(client.watch(...))`` so the connection is
        released at once rather than when the generator is garbage-collected. ``on_open`` is called once the
        server accepted the watch (its answer's status, before any event).
        """
        params = _selectors(label_selector, field_selector)
        params["watch"] = "true"
        if allow_bookmarks:
            params["allowWatchBookmarks"] = "true"
        if resource_version is not None:
            params["resourceVersion"] = resource_version
        if timeout_seconds is not None:
            params["timeoutSeconds"] = str(int(timeout_seconds))
        read_timeout = None if timeout_seconds is None else timeout_seconds + self.settings.watch_grace
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.settings.connect_timeout, sock_read=read_timeout)
        path = resource.path(namespace)
        try:
            async with self.session.get(
                self.connection.server + path,
                params=params,
                timeout=timeout,
                server_hostname=self.connection.tls_server_name,
            ) as resp:
                if resp.status >= 400:
                    raw = await resp.read()
                    raise error_from_response(resp.status, raw, retry_after=resp.headers.get("Retry-After"))
                if on_open is not None:
                    on_open()
                pending = bytearray()  # bytes of an event line not terminated yet
                async for chunk in resp.content.iter_any():
                    pending += chunk
                    if b"\n" not in chunk:
                        continue
                    *lines, rest = bytes(pending).split(b"\n")
                    pending = bytearray(rest)
                    for line in lines:
                        if line.strip():
                            yield _decode_event(line)
                if pending.strip():
                    yield _decode_event(bytes(pending))
        except ApiError:
            raise
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise ApiConnectionError(f"WATCH {path}: {type(exc).__name__}: {exc}") from exc

    # -- writes -----------------------------------------------------------------------------------

    async def create(
        self,
        resource: ResourceRef,
        body: Mapping[str, Any],
        *,
        namespace: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        ns = _namespace_of(resource, namespace, body)
        return await self.request("POST", resource.path(ns), body=dict(body), timeout=timeout)

    async def replace(
        self,
        resource: ResourceRef,
        body: Mapping[str, Any],
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """PUT the whole object. With ``metadata.resourceVersion`` set, a stale version raises Conflict."""
        ns = _namespace_of(resource, namespace, body)
        obj_name = name or (body.get("metadata") or {}).get("name")
        if not obj_name:
            raise ValueError("replace needs name= or metadata.name")
        return await self.request(
            "PUT", resource.path(ns, str(obj_name), subresource), body=dict(body), timeout=timeout
        )

    async def patch(
        self,
        resource: ResourceRef,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        namespace: str | None = None,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """PATCH with a merge patch (dict), a JSON patch (list of ops) or a strategic merge patch."""
        body: Any = [dict(op) for op in patch] if patch_type == "json" else dict(patch)  # type: ignore[arg-type]
        return await self.request(
            "PATCH",
            resource.path(namespace if resource.namespaced else None, name, subresource),
            body=body,
            content_type=_PATCH_CONTENT_TYPES[patch_type],
            timeout=timeout,
        )

    async def patch_status(
        self,
        resource: ResourceRef,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        namespace: str | None = None,
        patch_type: PatchType = "merge",
        timeout: float | None = None,
    ) -> dict[str, Any]:
        return await self.patch(
            resource, name, patch, namespace=namespace, patch_type=patch_type, subresource="status", timeout=timeout
        )

    async def replace_status(
        self,
        resource: ResourceRef,
        body: Mapping[str, Any],
        *,
        namespace: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        return await self.replace(resource, body, namespace=namespace, subresource="status", timeout=timeout)

    async def delete(
        self,
        resource: ResourceRef,
        name: str,
        namespace: str | None = None,
        *,
        grace_period_seconds: int | None = None,
        propagation_policy: str | None = None,
        precondition_uid: str | None = None,
        precondition_resource_version: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """DELETE; returns the server's answer (the object, possibly with ``deletionTimestamp``, or a Status)."""
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if propagation_policy is not None:
            options["propagationPolicy"] = propagation_policy
        preconditions = {
            k: v for k, v in (("uid", precondition_uid), ("resourceVersion", precondition_resource_version)) if v
        }
        if preconditions:
            options["preconditions"] = preconditions
        return await self.request(
            "DELETE", resource.path(namespace if resource.namespaced else None, name), body=options, timeout=timeout
        )

    async def create_binding(
        self,
        namespace: str,
        name: str,
        uid: str | None,
        node: str,
        *,
        annotations: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """POST ``pods/{name}/binding`` (what a scheduler's binder does). ``uid`` guards against a pod that was
        deleted and recreated under the same name (the server answers 409). Already bound → Conflict.
        ``annotations`` are set on the pod in the same write as its node (the API server copies a
        Binding's annotations onto the pod)."""
        meta: dict[str, Any] = {"name": name, "namespace": namespace}
        if uid:
            meta["uid"] = uid
        if annotations:
            meta["annotations"] = dict(annotations)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        return await self.request("POST", resources.PODS.path(namespace, name, "binding"), body=body, timeout=timeout)

    async def evict(
        self,
        namespace: str,
        name: str,
        grace_period_seconds: int | None = None,
        *,
        delete_options: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """POST a policy/v1 Eviction. A PodDisruptionBudget refusal raises TooManyRequests (429).

        ``delete_options`` (metav1.DeleteOptions) are sent as given; ``grace_period_seconds`` overrides
        their ``gracePeriodSeconds``.
        """
        body: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        options = dict(delete_options) if delete_options is not None else {}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if options:
            body["deleteOptions"] = options
        return await self.request("POST", resources.PODS.path(namespace, name, "eviction"), body=body, timeout=timeout)

    async def create_event(
        self,
        involved_object: Mapping[str, Any],
        *,
        reason: str,
        message: str,
        event_type: Literal["Normal", "Warning"] = "Normal",
        component: str = "koordpy",
        action: str | None = None,
        host: str | None = None,
        now: dt.datetime | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Create a core/v1 Event about ``involved_object`` (a raw API object; its kind/apiVersion/uid are copied).

        Cluster-scoped objects (nodes) get their events in namespace ``default``, as kubelet does. No
        aggregation or de-duplication of repeated events is done. ``now`` defaults to the current UTC time.
        """
        meta = involved_object.get("metadata") or {}
        obj_name = str(meta.get("name") or "")
        namespace = str(meta.get("namespace") or "default")
        stamp = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
        ts = stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
        ref: dict[str, Any] = {
            "apiVersion": involved_object.get("apiVersion", "v1"),
            "kind": involved_object.get("kind", ""),
            "name": obj_name,
        }
        if meta.get("namespace"):
            ref["namespace"] = meta["namespace"]
        for src, dst in (("uid", "uid"), ("resourceVersion", "resourceVersion")):
            if meta.get(src):
                ref[dst] = meta[src]
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{obj_name}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
            "involvedObject": ref,
            "reason": reason,
            "message": message[:1024],
            "type": event_type,
            "source": {"component": component, **({"host": host} if host else {})},
            "reportingComponent": component,
            "reportingInstance": host or component,
            "firstTimestamp": ts,
            "lastTimestamp": ts,
            "count": 1,
        }
        if action:
            body["action"] = action
        return await self.request("POST", resources.EVENTS.path(namespace), body=body, timeout=timeout)


def _decode_event(line: bytes) -> WatchEvent:
    try:
        event = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise ApiConnectionError(f"undecodable watch line: {line[:200]!r}") from exc
    if not isinstance(event, dict):  # valid JSON but not an event: the reflector skips type ""
        return "", {}
    etype = str(event.get("type") or "")
    obj = event.get("object")
    if not isinstance(obj, dict):
        obj = {}
    if etype == "ERROR":
        code = obj.get("code")
        raise error_from_status(int(code) if isinstance(code, int) else 500, obj)
    return etype, obj
