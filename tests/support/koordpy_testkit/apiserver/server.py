"""The HTTP face of the API emulator (aiohttp.web), with request recording for RBAC checks.

Written on aiohttp.web directly rather than on kmock 0.8: kmock's ``KubernetesEmulator`` mutates its
store inside ``_handle`` before any reaction runs (so no resourceVersion preconditions or status
subresource rules can be put in front), ignores resourceVersion on watch, answers PUT and the pod
subresources with 404, and has no selectors, bookmarks or timeouts: every feature below would have
replaced a kmock code path. kmock stays a dev dependency for tests that want its DSL scripting.

Not emulated: authentication beyond mapping a bearer token to a user name (no authorization at all:
every call is allowed and recorded), server-side apply, ``resourceVersionMatch``, list at an old
resourceVersion (lists always answer the current state), protobuf, tables, OpenAPI documents.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import IO, Any, Literal

import orjson
from aiohttp import web

from koordpy_testkit.apiserver.errors import StatusError, status_body
from koordpy_testkit.apiserver.selectors import FieldSelector, LabelSelector
from koordpy_testkit.apiserver.state import RAW_EVENT, ClusterState, ResourceInfo, StoredEvent, Watcher

__all__ = ["ApiServerEmulator", "InjectedError"]

log = logging.getLogger(__name__)

_PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "merge",
    "application/json-patch+json": "json",
}


@dataclass
class InjectedError:
    """Answer the next ``count`` matching requests with ``status`` (None fields match anything)."""

    status: int
    verb: str | None = None
    resource: str | None = None
    subresource: str | None = None
    count: int = 1
    message: str = "injected failure"

    def matches(self, verb: str, resource: str, subresource: str | None) -> bool:
        return (
            self.count > 0
            and (self.verb is None or self.verb == verb)
            and (self.resource is None or self.resource == resource)
            and (self.subresource is None or self.subresource == subresource)
        )


@dataclass(frozen=True)
class _Target:
    info: ResourceInfo
    namespace: str | None
    name: str | None
    subresource: str | None


def _json(obj: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(obj), status=status, content_type="application/json")


class ApiServerEmulator:
    """An in-memory Kubernetes API server on loopback.

    ``state`` survives :meth:`stop`/:meth:`start` cycles, so a test can take the server down and bring it
    back on the same port with the same objects (or pass a fresh :class:`ClusterState`).
    ``tokens`` maps bearer tokens to user names; an unmapped token is its own user name; no token is
    ``system:anonymous``. Each resource request is recorded in :attr:`requests` (and appended to
    ``record_path`` as a JSON line) as ``{"user", "verb", "group", "resource", "subresource", "namespace",
    "name"}`` when it arrives, before it is served (so long-lived watches are recorded even if the process
    is killed). ``verb`` is the RBAC verb (get/list/watch/create/update/patch/delete/deletecollection).
    Discovery and health requests are recorded too, with ``"path"`` set and ``resource`` None (RBAC
    grants those to every authenticated user through ``system:discovery``).
    """

    def __init__(
        self,
        state: ClusterState | None = None,
        *,
        tokens: Mapping[str, str] | None = None,
        record_path: str | os.PathLike[str] | None = None,
        bookmark_interval: float = 5.0,
        watch_gone: Literal["event", "http"] = "event",
        require_auth: bool = False,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.state = state or ClusterState()
        self.ssl_context = ssl_context
        self.tokens = dict(tokens or {})
        self.record_path = os.fspath(record_path) if record_path is not None else None
        self.bookmark_interval = bookmark_interval
        self.watch_gone = watch_gone
        self.require_auth = require_auth
        self.accepted_tokens: set[str] | None = None
        """When set, a bearer token outside it is answered 401 (a revoked or unknown token), recorded in
        :attr:`refused` in order; tests change it while the server runs to revoke and issue tokens."""
        self.refused: list[str] = []
        self.requests: list[dict[str, Any]] = []
        self.injected: list[InjectedError] = []
        self.extra_list_items: dict[tuple[str, str], list[Any]] = {}
        self._record_file: IO[str] | None = None
        self._runner: web.AppRunner | None = None
        self._url: str | None = None
        self.host = "127.0.0.1"
        self.port = 0

    # -- lifecycle --------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self._url is None:
            raise RuntimeError("the emulator is not running")
        return self._url

    @property
    def running(self) -> bool:
        return self._runner is not None

    def make_app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        return app

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Listen on ``host:port`` (0 = any free port, or the previous port after a stop) and return the URL."""
        if self._runner is not None:
            raise RuntimeError("the emulator is already running")
        if port == 0 and self.port:
            port = self.port
        if self.record_path is not None and self._record_file is None:
            self._record_file = open(self.record_path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        runner = web.AppRunner(self.make_app(), handle_signals=False, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, host, port, reuse_address=True, ssl_context=self.ssl_context)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        bound = runner.addresses[0]
        self.host, self.port = host, int(bound[1])
        self._runner = runner
        scheme = "https" if self.ssl_context is not None else "http"
        self._url = f"{scheme}://{host}:{self.port}"
        return self._url

    async def stop(self) -> None:
        """Stop listening; open watches end. Objects are kept for a later :meth:`start`."""
        if self._runner is None:
            return
        runner, self._runner = self._runner, None
        self._url = None
        self.state.end_watches()
        await asyncio.sleep(0)
        await runner.cleanup()

    async def close(self) -> None:
        """Stop and release everything (pending graceful deletions, the record file)."""
        await self.stop()
        self.state.close()
        if self._record_file is not None:
            self._record_file.close()
            self._record_file = None

    async def __aenter__(self) -> ApiServerEmulator:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- test helpers -----------------------------------------------------------------------------

    def inject_error(
        self,
        status: int,
        *,
        verb: str | None = None,
        resource: str | None = None,
        subresource: str | None = None,
        count: int = 1,
        message: str = "injected failure",
    ) -> InjectedError:
        rule = InjectedError(status, verb, resource, subresource, count, message)
        self.injected.append(rule)
        return rule

    def inject_watch_event(self, resource: str, event: Any, *, group: str = "") -> int:
        """Send a raw watch line (any JSON value or bytes; ``event(rv)`` when callable) to watches of
        ``group``/``resource`` (a plural), live and resumed ones: see :meth:`ClusterState.commit_raw_event`."""
        return self.state.commit_raw_event(self.state.infos[(group, resource)], event)

    def inject_list_items(self, resource: str, *items: Any, group: str = "") -> None:
        """Append raw ``items`` (malformed ones included) to the last page of every list of
        ``group``/``resource`` until :attr:`extra_list_items` is cleared."""
        self.extra_list_items.setdefault((group, resource), []).extend(items)

    def seed(self, *objects: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Store objects as given (status included): see :meth:`ClusterState.seed`."""
        return [self.state.seed(obj) for obj in objects]

    # -- request plumbing -------------------------------------------------------------------------

    def _user(self, request: web.Request) -> str | None:
        auth = request.headers.get("Authorization", "")
        scheme, _, credential = auth.partition(" ")
        if scheme.lower() == "bearer" and credential.strip():
            token = credential.strip()
            return self.tokens.get(token, token)
        if scheme.lower() == "basic" and credential.strip():
            import base64

            try:
                return base64.b64decode(credential.strip()).decode().partition(":")[0]
            except ValueError:
                return None
        return None

    def _record(self, entry: dict[str, Any]) -> None:
        self.requests.append(entry)
        if self._record_file is not None:
            self._record_file.write(json.dumps(entry, sort_keys=True) + "\n")
            self._record_file.flush()

    def _parse_target(self, parts: list[str], group: str, version: str) -> _Target:
        namespace: str | None = None
        rest = parts
        if len(parts) >= 3 and parts[0] == "namespaces":
            namespace, rest = parts[1], parts[2:]
        if not rest or len(rest) > 3:
            raise StatusError(404, "the server could not find the requested resource", "NotFound")
        if (
            group == ""
            and namespace is not None
            and rest[0] not in ("pods",)
            and (group, rest[0]) not in self.state.infos
        ):
            # /api/v1/namespaces/{name}/status and friends
            rest, namespace = ["namespaces", namespace, *rest], None
        info = self.state.lookup(group, version, rest[0])
        if info.ref.namespaced is False and namespace is not None:
            raise StatusError(404, "the server could not find the requested resource", "NotFound")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub is not None and sub not in info.subresources:
            raise StatusError(404, "the server could not find the requested resource", "NotFound")
        return _Target(info, namespace, name, sub)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._dispatch(request)
        except StatusError as err:
            return _json(err.body, err.code)
        except Exception as exc:  # an emulator bug: answer like an API server would, and say what broke
            log.exception("emulator: %s %s failed", request.method, request.path_qs)
            return _json(status_body(500, "InternalError", f"emulator failure: {exc!r}"), 500)

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        parts = [p for p in path.split("/") if p]
        user = self._user(request)
        if self.require_auth and user is None:
            raise StatusError(401, "Unauthorized", "Unauthorized")
        if self.accepted_tokens is not None:
            scheme, _, token = request.headers.get("Authorization", "").partition(" ")
            if scheme.lower() != "bearer" or token.strip() not in self.accepted_tokens:
                self.refused.append(token.strip())
                raise StatusError(401, "Unauthorized", "Unauthorized")
        discovery = self._discovery(parts)
        if discovery is not None:
            if request.method != "GET":
                raise StatusError(405, "the server does not allow this method on the requested resource")
            self._record(
                {
                    "user": user or "system:anonymous",
                    "verb": "get",
                    "path": path,
                    "group": None,
                    "resource": None,
                    "subresource": None,
                    "namespace": None,
                    "name": None,
                }
            )
            return _json(discovery)
        if parts[:2] == ["api", "v1"] and len(parts) > 2:
            target = self._parse_target(parts[2:], "", "v1")
        elif parts[:1] == ["apis"] and len(parts) > 3:
            target = self._parse_target(parts[3:], parts[1], parts[2])
        else:
            raise StatusError(404, "the server could not find the requested resource", "NotFound")
        params = request.query
        verb = self._verb(request.method, target, params.get("watch"))
        self._record(
            {
                "user": user or "system:anonymous",
                "verb": verb,
                "group": target.info.ref.group,
                "resource": target.info.ref.plural,
                "subresource": target.subresource,
                "namespace": target.namespace,
                "name": target.name,
            }
        )
        if verb not in target.info.verbs:
            raise StatusError(405, f"{verb} is not supported on {target.info.ref.qualified}", "MethodNotAllowed")
        for rule in self.injected:
            if rule.matches(verb, target.info.ref.plural, target.subresource):
                rule.count -= 1
                raise StatusError(rule.status, rule.message)
        return await self._serve(request, verb, target)

    @staticmethod
    def _verb(method: str, target: _Target, watch: str | None) -> str:
        if method == "GET":
            if watch in ("true", "1"):
                return "watch"
            return "get" if target.name else "list"
        if method == "POST":
            return "create"
        if method == "PUT":
            return "update"
        if method == "PATCH":
            return "patch"
        if method == "DELETE":
            return "delete" if target.name else "deletecollection"
        raise StatusError(405, f"method {method} is not supported", "MethodNotAllowed")

    @staticmethod
    async def _body(request: web.Request, *, required: bool = True) -> Any:
        raw = await request.read()
        if not raw:
            if required:
                raise StatusError(400, "the request body is empty", "BadRequest")
            return None
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise StatusError(400, f"the request body is not valid JSON: {exc}", "BadRequest") from None

    async def _serve(self, request: web.Request, verb: str, t: _Target) -> web.StreamResponse:
        st, info = self.state, t.info
        params = request.query
        if verb == "watch":
            return await self._watch(request, t)
        if verb == "list":
            return self._list(t, params)
        if verb == "get":
            assert t.name is not None
            return _json(st.get(info, t.namespace, t.name))
        if verb == "create":
            body = await self._body(request)
            if t.name is None and info.ref.plural == "bindings" and t.namespace is not None:
                name = str(((body if isinstance(body, dict) else {}).get("metadata") or {}).get("name") or "")
                st.bind(t.namespace, name, body if isinstance(body, dict) else {})
                return _json(status_body(201, "", "", None), 201)
            if t.name is None:
                return _json(st.create(info, t.namespace, body), 201)
            if t.subresource == "binding" and t.namespace is not None:
                st.bind(t.namespace, t.name, body if isinstance(body, dict) else {})
                return _json(status_body(201, "", "", None), 201)
            if t.subresource == "eviction" and t.namespace is not None:
                st.evict(t.namespace, t.name, body if isinstance(body, dict) else {})
                return _json(status_body(201, "", "", None), 201)
            raise StatusError(405, "the server does not allow this method on the requested resource")
        assert t.name is not None or verb == "deletecollection"
        if verb == "update":
            body = await self._body(request)
            assert t.name is not None
            return _json(st.replace(info, t.namespace, t.name, body, t.subresource))
        if verb == "patch":
            ctype = request.content_type
            patch_type = _PATCH_TYPES.get(ctype)
            if patch_type is None:
                raise StatusError(415, f"the body of the request was in an unsupported media type: {ctype}")
            body = await self._body(request)
            assert t.name is not None
            return _json(st.patch(info, t.namespace, t.name, body, patch_type=patch_type, subresource=t.subresource))
        if verb == "delete":
            assert t.name is not None
            options = await self._body(request, required=False) or {}
            if "gracePeriodSeconds" in params:
                options["gracePeriodSeconds"] = int(params["gracePeriodSeconds"])
            return _json(st.delete(info, t.namespace, t.name, options))
        # deletecollection
        victims = st.select(info, t.namespace, params.get("labelSelector"), params.get("fieldSelector"))
        for obj in victims:
            meta = obj.get("metadata") or {}
            st.delete(info, meta.get("namespace"), str(meta.get("name")), {})
        return _json({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Success", "code": 200})

    def _list(self, t: _Target, params: Mapping[str, str]) -> web.Response:
        limit_text = params.get("limit")
        try:
            limit = int(limit_text) if limit_text else None
        except ValueError:
            raise StatusError(400, f"invalid limit {limit_text!r}", "BadRequest") from None
        items, list_rv, token, remaining = self.state.list_page(
            t.info,
            t.namespace,
            label_selector=params.get("labelSelector"),
            field_selector=params.get("fieldSelector"),
            limit=limit if limit and limit > 0 else None,
            continue_token=params.get("continue"),
        )
        meta: dict[str, Any] = {"resourceVersion": str(list_rv)}
        if token:
            meta["continue"] = token
            meta["remainingItemCount"] = remaining
        else:
            items = [*items, *self.extra_list_items.get(t.info.key, ())]
        return _json(
            {"apiVersion": t.info.ref.api_version, "kind": f"{t.info.ref.kind}List", "metadata": meta, "items": items}
        )

    # -- watch ------------------------------------------------------------------------------------

    async def _watch(self, request: web.Request, t: _Target) -> web.StreamResponse:
        params = request.query
        info = t.info
        labels = LabelSelector(params.get("labelSelector"))
        fields = FieldSelector(params.get("fieldSelector"), info.ref.kind)
        bookmarks = params.get("allowWatchBookmarks") in ("true", "1")
        timeout_text = params.get("timeoutSeconds")
        try:
            timeout = float(timeout_text) if timeout_text else None
        except ValueError:
            raise StatusError(400, f"invalid timeoutSeconds {timeout_text!r}", "BadRequest") from None
        rv_text = params.get("resourceVersion")

        def matches(obj: Mapping[str, Any] | None) -> bool:
            if obj is None:
                return False
            meta = obj.get("metadata") or {}
            if t.namespace and meta.get("namespace") != t.namespace:
                return False
            if t.name and meta.get("name") != t.name:
                return False
            return labels.matches(obj) and fields.matches(obj)

        def translate(ev: StoredEvent) -> tuple[str, dict[str, Any]] | None:
            if ev.type == RAW_EVENT:
                return (RAW_EVENT, ev.obj)
            now_ok, was_ok = matches(ev.obj), matches(ev.old)
            if ev.type == "ADDED":
                return ("ADDED", ev.obj) if now_ok else None
            if ev.type == "DELETED":
                return ("DELETED", ev.obj) if now_ok or was_ok else None
            if now_ok and was_ok:
                return ("MODIFIED", ev.obj)
            if now_ok:
                return ("ADDED", ev.obj)
            return ("DELETED", ev.obj) if was_ok else None

        if self._runner is None:  # stopping: a watch that arrived during stop() must not hold the shutdown
            raise StatusError(503, "the server is shutting down", "ServiceUnavailable")
        watcher = self.state.subscribe(info)
        try:
            initial: list[tuple[str, dict[str, Any]]] = []
            gone: StatusError | None = None
            if rv_text not in (None, "", "0"):
                try:
                    rv = int(str(rv_text))
                except ValueError:
                    raise StatusError(400, f"invalid resourceVersion {rv_text!r}", "BadRequest") from None
                try:
                    initial = [x for ev in self.state.events_since(info, rv) if (x := translate(ev)) is not None]
                except StatusError as err:
                    if self.watch_gone == "http":
                        raise
                    gone = err
            else:
                initial = [("ADDED", obj) for obj in self.state.select(info, None) if matches(obj)]

            resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
            await resp.prepare(request)

            async def send(etype: str, obj: Mapping[str, Any]) -> None:
                if etype == RAW_EVENT:  # a test-injected line, sent as given
                    raw = obj["event"]
                    await resp.write((raw if isinstance(raw, bytes) else orjson.dumps(raw)) + b"\n")
                    return
                await resp.write(orjson.dumps({"type": etype, "object": obj}) + b"\n")

            def bookmark() -> dict[str, Any]:
                return {
                    "apiVersion": info.ref.api_version,
                    "kind": info.ref.kind,
                    "metadata": {"resourceVersion": str(self.state.rv)},
                }

            try:
                if gone is not None:
                    await send("ERROR", gone.body)
                    return resp
                for etype, obj in initial:
                    await send(etype, obj)
                await self._pump(
                    watcher, translate=translate, send=send, bookmark=bookmark, bookmarks=bookmarks, timeout=timeout
                )
            except (ConnectionResetError, ConnectionError):
                pass
            return resp
        finally:
            self.state.unsubscribe(watcher)

    async def _pump(
        self,
        watcher: Watcher,
        *,
        translate: Callable[[StoredEvent], tuple[str, dict[str, Any]] | None],
        send: Callable[[str, Mapping[str, Any]], Awaitable[None]],
        bookmark: Callable[[], dict[str, Any]],
        bookmarks: bool,
        timeout: float | None,
    ) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout if timeout else None
        while True:
            waits = [self.bookmark_interval] if bookmarks else []
            if deadline is not None:
                waits.append(deadline - loop.time())
            wait = min(waits) if waits else None
            if wait is not None and wait <= 0:
                break
            try:
                ev = await asyncio.wait_for(watcher.queue.get(), wait)
            except TimeoutError:
                if bookmarks and watcher.queue.empty():
                    await send("BOOKMARK", bookmark())
                continue
            if ev is None:
                return  # the server is stopping: end the stream without a final bookmark
            out = translate(ev)
            if out is not None:
                await send(*out)
        while not watcher.queue.empty():  # flush what arrived at the deadline before the final bookmark
            ev = watcher.queue.get_nowait()
            if ev is None:
                return
            out = translate(ev)
            if out is not None:
                await send(*out)
        if bookmarks:
            await send("BOOKMARK", bookmark())

    # -- discovery --------------------------------------------------------------------------------

    def _discovery(self, parts: list[str]) -> dict[str, Any] | None:
        infos = list(self.state.infos.values())
        groups: dict[str, set[str]] = {}
        for i in infos:
            if i.ref.group:
                groups.setdefault(i.ref.group, set()).add(i.ref.version)
        if not parts:
            paths = {"/api", "/api/v1", "/apis", "/version", "/healthz", "/readyz", "/livez"}
            for g, versions in groups.items():
                paths.add(f"/apis/{g}")
                paths.update(f"/apis/{g}/{v}" for v in versions)
            return {"paths": sorted(paths)}
        if parts in (["healthz"], ["readyz"], ["livez"]):
            return {"status": "ok"}
        if parts == ["version"]:
            return {"major": "1", "minor": "31", "gitVersion": "v1.31.0-koordpy-emulator", "platform": "linux/amd64"}
        if parts[:2] == ["openapi", "v3"]:
            return self._openapi_v3(parts[2:], groups)
        if parts == ["api"]:
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        if parts == ["api", "v1"]:
            return self._resource_list("", "v1", infos)
        if parts == ["apis"]:
            return {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [self._group_doc(g, sorted(vs)) for g, vs in sorted(groups.items())],
            }
        if len(parts) == 2 and parts[0] == "apis":
            if parts[1] not in groups:
                raise StatusError(404, "the server could not find the requested resource", "NotFound")
            return {"kind": "APIGroup", "apiVersion": "v1", **self._group_doc(parts[1], sorted(groups[parts[1]]))}
        if len(parts) == 3 and parts[0] == "apis":
            if parts[2] not in groups.get(parts[1], set()):
                raise StatusError(404, "the server could not find the requested resource", "NotFound")
            return self._resource_list(parts[1], parts[2], infos)
        return None

    def _openapi_v3(self, rest: list[str], groups: dict[str, set[str]]) -> dict[str, Any]:
        """OpenAPI v3 for kubectl's client-side validation (``kubectl apply``/``create``): the index, and per
        group-version one permissive schema per kind (``x-kubernetes-preserve-unknown-fields``), so kubectl
        finds every kind and validates no fields. Not served: real field schemas."""
        gvs = [("api/v1", "", "v1")] + [(f"apis/{g}/{v}", g, v) for g, vs in sorted(groups.items()) for v in sorted(vs)]
        if not rest:
            return {"paths": {path: {"serverRelativeURL": f"/openapi/v3/{path}"} for path, _, _ in gvs}}
        wanted = "/".join(rest)
        for path, group, version in gvs:
            if path != wanted:
                continue
            schemas = {
                f"{group or 'core'}.{version}.{i.ref.kind}": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                    "x-kubernetes-group-version-kind": [{"group": group, "version": version, "kind": i.ref.kind}],
                }
                for i in self.state.infos.values()
                if i.ref.group == group and i.ref.version == version
            }
            # A PATCH operation per kind that accepts ``fieldValidation`` tells kubectl the server validates
            # fields itself, so it skips client-side validation (which would need OpenAPI v2).
            param = {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}
            paths = {
                f"{i.ref.prefix}{'/namespaces/{namespace}' if i.ref.namespaced else ''}/{i.ref.plural}/{{name}}": {
                    "patch": {
                        "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": i.ref.kind},
                        "parameters": [param],
                        "responses": {"200": {"description": "OK"}},
                    }
                }
                for i in self.state.infos.values()
                if i.ref.group == group and i.ref.version == version
            }
            info = {"title": "Kubernetes", "version": "v1.31.0-koordpy-emulator"}
            return {"openapi": "3.0.0", "info": info, "paths": paths, "components": {"schemas": schemas}}
        raise StatusError(404, "the server could not find the requested resource", "NotFound")

    @staticmethod
    def _group_doc(group: str, versions: list[str]) -> dict[str, Any]:
        docs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"name": group, "versions": docs, "preferredVersion": docs[0]}

    @staticmethod
    def _resource_list(group: str, version: str, infos: list[ResourceInfo]) -> dict[str, Any]:
        entries: list[dict[str, Any]] = []
        for i in infos:
            if i.ref.group != group or i.ref.version != version:
                continue
            entries.append(
                {
                    "name": i.ref.plural,
                    "singularName": i.ref.kind.lower(),
                    "namespaced": i.ref.namespaced,
                    "kind": i.ref.kind,
                    "verbs": list(i.verbs),
                    "shortNames": list(i.short_names),
                }
            )
            for sub in i.subresources:
                kind, verbs = {"binding": ("Binding", ["create"]), "eviction": ("Eviction", ["create"])}.get(
                    sub, (i.ref.kind, ["get", "patch", "update"])
                )
                entry: dict[str, Any] = {
                    "name": f"{i.ref.plural}/{sub}",
                    "singularName": "",
                    "namespaced": i.ref.namespaced,
                    "kind": kind,
                    "verbs": verbs,
                }
                if sub == "eviction":
                    entry.update(group="policy", version="v1")
                entries.append(entry)
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": entries,
        }
