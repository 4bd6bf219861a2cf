"""The emulator's in-memory object store and its Kubernetes semantics (no HTTP here).

Every write bumps one global, monotonically increasing ``resourceVersion`` and is appended to a
bounded history that watches replay from. Stored objects are never mutated in place (each write
stores a new dict), so list snapshots and history entries stay valid.

Deliberate deviation: a Pod keeps the ``status`` given on create (a real API server resets it) so tests
can create running pods without a kubelet. Custom resources with a status subresource drop ``status``
on create, as the API server does; :meth:`ClusterState.seed` stores anything as given.

CustomResourceDefinitions are validated as kube-apiserver does (see
:mod:`koordpy_testkit.apiserver.crdvalidation`), on create, update and :meth:`ClusterState.seed` alike.

Not emulated: admission, defaulting beyond ``Pod.spec.schedulerName``/``status.phase`` and the CRD names,
validation of other objects beyond their names and label values, garbage collection of dependents
(ownerReferences), server-side apply, strategic merge (treated as a merge patch), a kubelet (graceful pod
deletion completes after ``min(gracePeriodSeconds, max_grace_seconds)`` of wall time instead).
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import itertools
import re
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from koordpy.kube import resources
from koordpy.kube.resources import ResourceRef
from koordpy_testkit.apiserver.crdvalidation import FieldError, apply_crd_defaults, crd_problems
from koordpy_testkit.apiserver.errors import StatusError
from koordpy_testkit.apiserver.patching import apply_json_patch, apply_merge_patch
from koordpy_testkit.apiserver.selectors import FieldSelector, LabelSelector, match_label_selector_object

__all__ = ["RAW_EVENT", "ClusterState", "ResourceInfo", "StoredEvent", "Watcher", "default_resources"]

ObjKey = tuple[str, str]  # (namespace or "", name)
_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True)
class ResourceInfo:
    """One served resource: its reference, whether it has a ``status`` subresource, discovery data."""

    ref: ResourceRef
    status_subresource: bool = False
    extra_subresources: tuple[str, ...] = ()
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")

    @property
    def key(self) -> tuple[str, str]:
        return (self.ref.group, self.ref.plural)

    @property
    def subresources(self) -> tuple[str, ...]:
        return (("status",) if self.status_subresource else ()) + self.extra_subresources


BINDINGS = ResourceRef("", "v1", "bindings", "Binding", namespaced=True)
KOPFPEERINGS = ResourceRef("kopf.dev", "v1", "kopfpeerings", "KopfPeering", namespaced=True)
CLUSTERKOPFPEERINGS = ResourceRef("kopf.dev", "v1", "clusterkopfpeerings", "ClusterKopfPeering", namespaced=False)


def default_resources() -> list[ResourceInfo]:
    """Every resource in :mod:`koordpy.kube.resources` plus ``bindings`` and kopf's peering resources."""
    r = resources
    return [
        ResourceInfo(r.NAMESPACES, status_subresource=True, short_names=("ns",)),
        ResourceInfo(r.NODES, status_subresource=True, short_names=("no",)),
        ResourceInfo(r.PODS, status_subresource=True, extra_subresources=("binding", "eviction"), short_names=("po",)),
        ResourceInfo(BINDINGS, verbs=("create",)),  # the legacy collection form of pods/binding
        ResourceInfo(r.EVENTS, short_names=("ev",)),
        ResourceInfo(r.CONFIGMAPS, short_names=("cm",)),
        ResourceInfo(r.LEASES),
        ResourceInfo(r.PDBS, status_subresource=True, short_names=("pdb",)),
        ResourceInfo(r.CSISTORAGECAPACITIES),
        ResourceInfo(r.CUSTOMRESOURCEDEFINITIONS, status_subresource=True, short_names=("crd", "crds")),
        ResourceInfo(r.NODEMETRICS, status_subresource=True),
        ResourceInfo(r.PODGROUPS, status_subresource=True, short_names=("pg",)),
        ResourceInfo(r.PODMIGRATIONJOBS, status_subresource=True, short_names=("pmj",)),
        ResourceInfo(r.RESERVATIONS, status_subresource=True, short_names=("rsv",)),
        ResourceInfo(r.NODEQOSENSURANCEPOLICIES, status_subresource=True, short_names=("nep",)),
        ResourceInfo(r.AVOIDANCEACTIONS, status_subresource=True, short_names=("avoid",)),
        ResourceInfo(r.NODEQOSS, short_names=("nq",)),
        ResourceInfo(r.PODQOSS, short_names=("pq",)),
        ResourceInfo(KOPFPEERINGS),
        ResourceInfo(CLUSTERKOPFPEERINGS),
    ]


RAW_EVENT = "RAW"
"""``StoredEvent.type`` of a test-injected raw watch line (see :meth:`ClusterState.commit_raw_event`)."""


@dataclass(frozen=True)
class StoredEvent:
    """One committed write: ``old`` is the previous stored version (None for ADDED)."""

    rv: int
    resource: tuple[str, str]
    type: str
    obj: dict[str, Any]
    old: dict[str, Any] | None


@dataclass(eq=False)
class Watcher:
    """A live subscription; the server drains ``queue`` (None means: the server is closing)."""

    resource: tuple[str, str]
    queue: asyncio.Queue[StoredEvent | None] = field(default_factory=asyncio.Queue)


def _meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _now_rfc3339(now: float) -> str:
    return dt.datetime.fromtimestamp(now, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _not_found(info: ResourceInfo, name: str) -> StatusError:
    kind = info.ref.qualified
    return StatusError(404, f'{kind} "{name}" not found', "NotFound", {"name": name, "kind": info.ref.plural})


def _conflict(info: ResourceInfo, name: str, why: str) -> StatusError:
    return StatusError(
        409,
        f'Operation cannot be fulfilled on {info.ref.qualified} "{name}": {why}',
        "Conflict",
        {"name": name, "kind": info.ref.plural},
    )


def _invalid(info: ResourceInfo, name: str, field_path: str, message: str) -> StatusError:
    return StatusError(
        422,
        f'{info.ref.kind} "{name}" is invalid: {field_path}: {message}',
        "Invalid",
        {
            "name": name,
            "kind": info.ref.kind,
            "causes": [{"reason": "FieldValueInvalid", "message": message, "field": field_path}],
        },
    )


def _invalid_all(info: ResourceInfo, name: str, errors: list[FieldError]) -> StatusError:
    """422 Invalid naming every error, worded as kube-apiserver words it (``[a, b]`` for several)."""
    qualified = f"{info.ref.kind}.{info.ref.group}" if info.ref.group else info.ref.kind
    listed = str(errors[0]) if len(errors) == 1 else "[" + ", ".join(str(e) for e in errors) + "]"
    return StatusError(
        422,
        f'{qualified} "{name}" is invalid: {listed}',
        "Invalid",
        {"name": name, "group": info.ref.group, "kind": info.ref.kind, "causes": [e.cause() for e in errors]},
    )


class ClusterState:
    """The object store. Methods raise :class:`StatusError` exactly where the API server answers an error."""

    def __init__(
        self,
        *,
        history_size: int = 1000,
        max_grace_seconds: float = 0.2,
        clock: Callable[[], float] | None = None,
        infos: Iterable[ResourceInfo] | None = None,
        start_rv: int | None = None,
    ) -> None:
        import time

        self.history_size = history_size
        self.max_grace_seconds = max_grace_seconds
        self.clock = clock or time.time
        # Start from a clock-derived version so that a fresh emulator on the same port answers 410 to a
        # client resuming with a version from a previous incarnation (its versions are all older).
        self.rv = start_rv if start_rv is not None else int(self.clock() * 1000)
        self.compacted_rv = self.rv
        self.history: deque[StoredEvent] = deque()
        self.watchers: set[Watcher] = set()
        self.infos: dict[tuple[str, str], ResourceInfo] = {}
        self.objects: dict[tuple[str, str], dict[ObjKey, dict[str, Any]]] = {}
        self._snapshots: OrderedDict[str, tuple[int, list[dict[str, Any]]]] = OrderedDict()
        self._snapshot_ids = itertools.count(1)
        self._timers: set[asyncio.TimerHandle] = set()
        for info in infos if infos is not None else default_resources():
            self.register(info)

    # -- resources --------------------------------------------------------------------------------

    def register(self, info: ResourceInfo) -> None:
        self.infos[info.key] = info
        self.objects.setdefault(info.key, {})

    def lookup(self, group: str, version: str, plural: str) -> ResourceInfo:
        info = self.infos.get((group, plural))
        if info is None or info.ref.version != version:
            raise StatusError(404, "the server could not find the requested resource", "NotFound")
        return info

    def _register_crd(self, crd: Mapping[str, Any]) -> None:
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        group, plural, kind = spec.get("group"), names.get("plural"), names.get("kind")
        if not (group and plural and kind):
            return
        for version in spec.get("versions") or ():
            if not version.get("served", True):
                continue
            has_status = "status" in ((version.get("subresources") or {}) or {})
            ref = ResourceRef(group, version["name"], plural, kind, namespaced=spec.get("scope") == "Namespaced")
            self.register(
                ResourceInfo(ref, status_subresource=has_status, short_names=tuple(names.get("shortNames") or ()))
            )
            return

    # -- writes: the single commit point --------------------------------------------------------------

    def _commit(
        self, info: ResourceInfo, etype: str, key: ObjKey, new: dict[str, Any], old: dict[str, Any] | None
    ) -> dict[str, Any]:
        self.rv += 1
        meta = dict(_meta(new))
        meta["resourceVersion"] = str(self.rv)
        new = {**new, "metadata": meta}
        bucket = self.objects[info.key]
        if etype == "DELETED":
            bucket.pop(key, None)
        else:
            bucket[key] = new
        event = StoredEvent(self.rv, info.key, etype, new, old)
        self.history.append(event)
        while len(self.history) > self.history_size:
            self.compacted_rv = self.history.popleft().rv
        for watcher in self.watchers:
            if watcher.resource == info.key:
                watcher.queue.put_nowait(event)
        return new

    def commit_raw_event(self, info: ResourceInfo, event: Any) -> int:
        """Test hook: put a raw watch line (any JSON value, or ``event(rv)`` when callable) in the history.

        It takes the next resourceVersion and reaches live and resumed watches of ``info`` verbatim,
        whatever its shape (a real API server never sends a malformed event; tests need to). Stored
        objects are not changed. Returns the resourceVersion it took.
        """
        self.rv += 1
        raw = event(self.rv) if callable(event) else event
        stored = StoredEvent(self.rv, info.key, RAW_EVENT, {"event": raw}, None)
        self.history.append(stored)
        while len(self.history) > self.history_size:
            self.compacted_rv = self.history.popleft().rv
        for watcher in self.watchers:
            if watcher.resource == info.key:
                watcher.queue.put_nowait(stored)
        return self.rv

    # -- reads ------------------------------------------------------------------------------------

    def get(self, info: ResourceInfo, namespace: str | None, name: str) -> dict[str, Any]:
        obj = self.objects[info.key].get((namespace or "", name))
        if obj is None:
            raise _not_found(info, name)
        return obj

    def select(
        self,
        info: ResourceInfo,
        namespace: str | None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        """Objects in key order (namespace, name), filtered by namespace and selectors."""
        labels = LabelSelector(label_selector)
        fields = FieldSelector(field_selector, info.ref.kind)
        bucket = self.objects[info.key]
        out = []
        for key in sorted(bucket):
            if namespace and key[0] != namespace:
                continue
            obj = bucket[key]
            if labels.matches(obj) and fields.matches(obj):
                out.append(obj)
        return out

    def list_page(
        self,
        info: ResourceInfo,
        namespace: str | None,
        *,
        label_selector: str | None,
        field_selector: str | None,
        limit: int | None,
        continue_token: str | None,
    ) -> tuple[list[dict[str, Any]], int, str | None, int]:
        """Return ``(items, list_rv, next_token, remaining)``. Pages come from a snapshot taken at the first page.

        Snapshots are kept for the 64 most recent chunked lists; an evicted one answers 410 Expired.
        """
        if continue_token:
            snap_id, _, offset_text = continue_token.partition(":")
            snap = self._snapshots.get(snap_id)
            if snap is None or not offset_text.isdigit():
                raise StatusError(
                    410,
                    "The provided continue parameter is too old to display a consistent list result. "
                    "You can start a new list without the continue parameter.",
                    "Expired",
                )
            list_rv, items = snap
            offset = int(offset_text)
        else:
            items = self.select(info, namespace, label_selector, field_selector)
            list_rv, offset, snap_id = self.rv, 0, ""
            if limit and len(items) > limit:
                snap_id = str(next(self._snapshot_ids))
                self._snapshots[snap_id] = (list_rv, items)
                while len(self._snapshots) > 64:
                    self._snapshots.popitem(last=False)
        if not limit:
            return items[offset:], list_rv, None, 0
        page = items[offset : offset + limit]
        end = offset + len(page)
        if end < len(items):
            return page, list_rv, f"{snap_id}:{end}", len(items) - end
        self._snapshots.pop(snap_id, None)
        return page, list_rv, None, 0

    def expire_continue_tokens(self) -> None:
        """Forget every chunked-list snapshot (the next ``continue`` answers 410)."""
        self._snapshots.clear()

    def subscribe(self, info: ResourceInfo) -> Watcher:
        watcher = Watcher(info.key)
        self.watchers.add(watcher)
        return watcher

    def unsubscribe(self, watcher: Watcher) -> None:
        self.watchers.discard(watcher)

    def events_since(self, info: ResourceInfo, rv: int) -> list[StoredEvent]:
        """History entries of ``info`` newer than ``rv``; 410 when ``rv`` is compacted away or in the future."""
        if rv < self.compacted_rv or rv > self.rv:
            raise StatusError(410, f"too old resource version: {rv} ({self.compacted_rv + 1})", "Expired")
        return [e for e in self.history if e.rv > rv and e.resource == info.key]

    def end_watches(self) -> None:
        """Tell every open watch stream to finish (the server is stopping)."""
        for watcher in list(self.watchers):
            watcher.queue.put_nowait(None)

    def close(self) -> None:
        """End watches and cancel pending graceful deletions."""
        self.end_watches()
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()

    # -- create / update / delete -------------------------------------------------------------------

    def _check_name(self, info: ResourceInfo, name: str) -> None:
        if not name or len(name) > 253 or not _NAME_RE.match(name):
            raise _invalid(
                info,
                name,
                "metadata.name",
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'",
            )

    def _check_crd(self, info: ResourceInfo, crd: dict[str, Any], old: dict[str, Any] | None) -> None:
        """Default and validate a CustomResourceDefinition in place; 422 with every problem."""
        apply_crd_defaults(crd)
        problems = crd_problems(crd, old)
        if problems:
            raise _invalid_all(info, str(_meta(crd).get("name") or ""), problems)

    def _check_labels(self, info: ResourceInfo, name: str, obj: Mapping[str, Any]) -> None:
        for where in ("labels", "annotations"):
            values = _meta(obj).get(where)
            if values is None:
                continue
            if not isinstance(values, dict):
                raise _invalid(info, name, f"metadata.{where}", "must be a map of strings")
            for k, v in values.items():
                if not isinstance(v, str):
                    raise _invalid(info, name, f"metadata.{where}.{k}", "must be a string")

    def create(self, info: ResourceInfo, namespace: str | None, body: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(body, Mapping):
            raise StatusError(400, "the body of the request was not a JSON object", "BadRequest")
        obj = copy.deepcopy(dict(body))
        meta = dict(_meta(obj))
        ns = self._namespace_for(info, namespace, meta)
        name = str(meta.get("name") or "")
        if not name and meta.get("generateName"):
            name = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
        if not name:
            raise _invalid(info, "", "metadata.name", "name or generateName is required")
        self._check_name(info, name)
        self._check_labels(info, name, obj)
        key = (ns or "", name)
        if key in self.objects[info.key]:
            raise StatusError(
                409,
                f'{info.ref.qualified} "{name}" already exists',
                "AlreadyExists",
                {"name": name, "kind": info.ref.plural},
            )
        meta.update(name=name, uid=str(uuid.uuid4()), creationTimestamp=_now_rfc3339(self.clock()), generation=1)
        for transient in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(transient, None)
        if ns:
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        obj["metadata"] = meta
        obj["apiVersion"] = info.ref.api_version
        obj["kind"] = info.ref.kind
        if info.ref == resources.PODS:
            spec = obj.setdefault("spec", {})
            spec.setdefault("schedulerName", "default-scheduler")
            obj.setdefault("status", {}).setdefault("phase", "Pending")
        elif info.status_subresource and info.ref.group not in ("", "policy", "apiextensions.k8s.io"):
            obj.pop("status", None)  # custom resources with a status subresource drop status on create
        if info.ref == resources.CUSTOMRESOURCEDEFINITIONS:
            self._check_crd(info, obj, None)
            self._register_crd(obj)
        return self._commit(info, "ADDED", key, obj, None)

    def seed(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Store an object as given (status included), filling in identity fields; for test set-up only.

        The resource is found from ``apiVersion``/``kind``; an existing object with the same key is replaced.
        """
        api_version = str(obj.get("apiVersion") or "")
        group, _, version = api_version.rpartition("/")
        info = next(
            (i for i in self.infos.values() if i.ref.group == group and i.ref.kind == obj.get("kind")),
            None,
        )
        if info is None or info.ref.version != version:
            raise ValueError(f"seed: unknown apiVersion/kind {api_version}/{obj.get('kind')}")
        new = copy.deepcopy(dict(obj))
        meta = dict(_meta(new))
        ns = meta.get("namespace") or ("default" if info.ref.namespaced else None)
        if ns and info.ref.namespaced:
            meta["namespace"] = ns
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", _now_rfc3339(self.clock()))
        meta.setdefault("generation", 1)
        new["metadata"] = meta
        key = (ns or "", str(meta.get("name") or ""))
        old = self.objects[info.key].get(key)
        if info.ref == resources.CUSTOMRESOURCEDEFINITIONS:
            apply_crd_defaults(new)
            problems = crd_problems(new, old)
            if problems:
                raise ValueError(
                    f"seed: CustomResourceDefinition {key[1]!r} is invalid: {'; '.join(map(str, problems))}"
                )
            self._register_crd(new)
        return self._commit(info, "ADDED" if old is None else "MODIFIED", key, new, old)

    def _namespace_for(self, info: ResourceInfo, namespace: str | None, meta: Mapping[str, Any]) -> str | None:
        body_ns = meta.get("namespace")
        if not info.ref.namespaced:
            return None
        if namespace is None:
            raise StatusError(400, f"{info.ref.qualified} is namespaced: the request needs a namespace", "BadRequest")
        if body_ns and body_ns != namespace:
            raise StatusError(
                400,
                "the namespace of the provided object does not match the namespace sent on the request",
                "BadRequest",
            )
        return namespace

    def _finish_update(
        self, info: ResourceInfo, old: dict[str, Any], candidate: dict[str, Any], subresource: str | None
    ) -> dict[str, Any]:
        name = str(_meta(old).get("name"))
        cand_meta = _meta(candidate)
        wanted_rv = cand_meta.get("resourceVersion")
        if wanted_rv and str(wanted_rv) != str(_meta(old).get("resourceVersion")):
            raise _conflict(info, name, "the object has been modified; please apply your changes to the latest version")
        if cand_meta.get("uid") and cand_meta.get("uid") != _meta(old).get("uid"):
            raise _conflict(info, name, "Precondition failed: UID in object meta does not match the stored object")
        if cand_meta.get("name") and cand_meta.get("name") != name:
            raise StatusError(400, "the name of the object does not match the name on the URL", "BadRequest")
        if subresource == "status":
            new = {**old}
            if "status" in candidate:
                new["status"] = copy.deepcopy(candidate["status"])
            else:
                new.pop("status", None)
        elif subresource is None:
            new = copy.deepcopy(candidate)
            if info.status_subresource:
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
            self._check_labels(info, name, new)
        else:
            raise StatusError(405, f"subresource {subresource!r} does not support this verb", "MethodNotAllowed")
        meta = dict(_meta(new))
        old_meta = _meta(old)
        for fixed in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "generation"):
            if fixed in old_meta:
                meta[fixed] = old_meta[fixed]
            else:
                meta.pop(fixed, None)
        meta["resourceVersion"] = old_meta.get("resourceVersion")
        new["metadata"] = meta
        new["apiVersion"] = info.ref.api_version
        new["kind"] = info.ref.kind
        if info.ref == resources.CUSTOMRESOURCEDEFINITIONS and subresource is None:
            self._check_crd(info, new, old)
        if new == old:
            return old  # a no-op write does not bump the resourceVersion (as the API server does)
        strip = ("metadata", "status", "apiVersion", "kind")
        if {k: v for k, v in new.items() if k not in strip} != {k: v for k, v in old.items() if k not in strip}:
            meta["generation"] = int(old_meta.get("generation") or 1) + 1
        key = (str(old_meta.get("namespace") or ""), name)
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return self._commit(info, "DELETED", key, new, old)
        return self._commit(info, "MODIFIED", key, new, old)

    def replace(
        self,
        info: ResourceInfo,
        namespace: str | None,
        name: str,
        body: Mapping[str, Any],
        subresource: str | None = None,
    ) -> dict[str, Any]:
        if not isinstance(body, Mapping):
            raise StatusError(400, "the body of the request was not a JSON object", "BadRequest")
        old = self.get(info, namespace if info.ref.namespaced else None, name)
        body_ns = _meta(body).get("namespace")
        if info.ref.namespaced and body_ns and body_ns != namespace:
            raise StatusError(400, "the namespace of the provided object does not match the request", "BadRequest")
        return self._finish_update(info, old, dict(body), subresource)

    def patch(
        self,
        info: ResourceInfo,
        namespace: str | None,
        name: str,
        patch: Any,
        *,
        patch_type: str,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        old = self.get(info, namespace if info.ref.namespaced else None, name)
        if patch_type == "json":
            if not isinstance(patch, list):
                raise StatusError(400, "a JSON patch must be a list of operations", "BadRequest")
            candidate = apply_json_patch(old, patch)
        else:
            if not isinstance(patch, dict):
                raise StatusError(400, "a merge patch must be a JSON object", "BadRequest")
            candidate = apply_merge_patch(old, patch)
        if not isinstance(candidate, dict):
            raise StatusError(422, "the patch replaced the whole object with a non-object", "Invalid")
        return self._finish_update(info, old, candidate, subresource)

    def delete(
        self, info: ResourceInfo, namespace: str | None, name: str, options: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Delete now, or mark with ``deletionTimestamp`` (finalizers, or a bound pod's grace period)."""
        options = options or {}
        old = self.get(info, namespace if info.ref.namespaced else None, name)
        old_meta = _meta(old)
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != old_meta.get("uid"):
            raise _conflict(info, name, f"Precondition failed: UID in precondition: {pre['uid']}")
        if pre.get("resourceVersion") and str(pre["resourceVersion"]) != old_meta.get("resourceVersion"):
            raise _conflict(info, name, "Precondition failed: resourceVersion in precondition does not match")
        key = (str(old_meta.get("namespace") or ""), name)
        grace = 0
        if info.ref == resources.PODS and (old.get("spec") or {}).get("nodeName"):
            default = (old.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
            grace_opt = options.get("gracePeriodSeconds")
            grace = int(default if grace_opt is None else grace_opt)
            if (old.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                grace = 0
        if old_meta.get("deletionTimestamp"):
            if grace == 0 and not old_meta.get("finalizers"):
                return self._commit(info, "DELETED", key, old, old)
            return old
        if grace > 0 or old_meta.get("finalizers"):
            meta = {**old_meta, "deletionTimestamp": _now_rfc3339(self.clock() + grace)}
            if grace:
                meta["deletionGracePeriodSeconds"] = grace
            new = self._commit(info, "MODIFIED", key, {**old, "metadata": meta}, old)
            if grace > 0:
                self._schedule_kubelet_delete(info, key, str(old_meta.get("uid")), grace)
            return new
        return self._commit(info, "DELETED", key, old, old)

    def _schedule_kubelet_delete(self, info: ResourceInfo, key: ObjKey, uid: str, grace: int) -> None:
        """Play the kubelet: after the (capped) grace period, remove the pod unless finalizers hold it."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return

        def finish() -> None:
            self._timers.discard(handle)
            obj = self.objects[info.key].get(key)
            if obj is None or _meta(obj).get("uid") != uid or _meta(obj).get("finalizers"):
                return
            self._commit(info, "DELETED", key, obj, obj)

        handle = loop.call_later(min(float(grace), self.max_grace_seconds), finish)
        self._timers.add(handle)

    # -- pod subresources -------------------------------------------------------------------------

    def bind(self, namespace: str, name: str, binding: Mapping[str, Any]) -> None:
        info = self.infos[(resources.PODS.group, resources.PODS.plural)]
        pod = self.get(info, namespace, name)
        meta = _meta(pod)
        target = binding.get("target") or {}
        node = target.get("name") if isinstance(target, Mapping) else None
        if not node:
            raise _invalid(info, name, "target.name", "Required value")
        want_uid = _meta(binding).get("uid")
        if want_uid and want_uid != meta.get("uid"):
            raise _conflict(
                info,
                name,
                f"Precondition failed: UID in precondition: {want_uid}, UID in object meta: {meta.get('uid')}",
            )
        if meta.get("deletionTimestamp"):
            raise _conflict(info, name, "pod is being deleted, cannot be assigned to a host")
        bound = (pod.get("spec") or {}).get("nodeName")
        if bound:
            raise _conflict(info, name, f"pod {name} is already assigned to node {bound!r}")
        spec = {**(pod.get("spec") or {}), "nodeName": node}
        # setPodNodeAndMetadata: the Binding's annotations and labels are merged into the pod's, in the
        # same write as the node; nominatedNodeName is cleared (ClearingNominatedNodeNameAfterBinding).
        new_meta = dict(meta)
        for key in ("annotations", "labels"):
            extra = _meta(binding).get(key)
            if isinstance(extra, Mapping) and extra:
                new_meta[key] = {**(meta.get(key) or {}), **{str(k): str(v) for k, v in extra.items()}}
        status = dict(pod.get("status") or {})
        status.pop("nominatedNodeName", None)
        conditions = [c for c in status.get("conditions") or () if c.get("type") != "PodScheduled"]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": _now_rfc3339(self.clock()),
            }
        )
        status["conditions"] = conditions
        self._commit(
            info, "MODIFIED", (namespace, name), {**pod, "metadata": new_meta, "spec": spec, "status": status}, pod
        )

    def evict(self, namespace: str, name: str, eviction: Mapping[str, Any]) -> None:
        """policy/v1 eviction: refused with 429 when the matching PodDisruptionBudget's status allows no
        disruption or was never written (see :meth:`_charge_pdb`)."""
        pods = self.infos[(resources.PODS.group, resources.PODS.plural)]
        pdbs = self.infos[(resources.PDBS.group, resources.PDBS.plural)]
        pod = self.get(pods, namespace, name)
        options = eviction.get("deleteOptions") or {}
        phase = (pod.get("status") or {}).get("phase")
        can_ignore_pdb = phase in ("Succeeded", "Failed", "Pending") or bool(_meta(pod).get("deletionTimestamp"))
        if not can_ignore_pdb:
            labels = _meta(pod).get("labels") or {}
            matching = [
                pdb
                for (ns, _), pdb in sorted(self.objects[pdbs.key].items())
                if ns == namespace and match_label_selector_object((pdb.get("spec") or {}).get("selector"), labels)
            ]
            if len(matching) > 1:
                raise StatusError(
                    500,
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                    "InternalError",
                )
            if matching:
                self._charge_pdb(pdbs, matching[0], name)
            # addConditionAndDeletePod checks the UID precondition itself, with its own message
            want_uid = (options.get("preconditions") or {}).get("uid")
            if want_uid and want_uid != _meta(pod).get("uid"):
                raise StatusError(
                    409,
                    f'Operation cannot be fulfilled on Pod "{name}": the UID in the precondition ({want_uid}) does '
                    f"not match the UID in record ({_meta(pod).get('uid')}). The object might have been deleted "
                    "and then recreated",
                    "Conflict",
                    {"name": name, "kind": "Pod"},
                )
        self.delete(pods, namespace, name, options)

    def _charge_pdb(self, pdbs: ResourceInfo, pdb: dict[str, Any], pod_name: str) -> None:
        """Charge one disruption to ``pdb`` from its ``status``, as kube-apiserver's eviction does.

        The API server never computes a budget: the disruption controller writes ``disruptionsAllowed``
        and ``observedGeneration``, and until it has (this emulator runs no controller: a test writes the
        status it needs) every eviction of a covered pod is refused with 429.
        """
        meta = _meta(pdb)
        status = pdb.get("status") or {}
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name"))
        if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 1):
            raise StatusError(
                429, f"The disruption budget {name} is still being processed by the server.", "TooManyRequests"
            )
        allowed = int(status.get("disruptionsAllowed") or 0)
        if allowed < 0:
            raise StatusError(
                403,
                f"poddisruptionbudgets.policy {name!r} is forbidden: pdb disruptions allowed is negative",
                "Forbidden",
            )
        if allowed == 0:
            raise StatusError(
                429,
                "Cannot evict pod as it would violate the pod's disruption budget.",
                "TooManyRequests",
                {
                    "causes": [
                        {
                            "reason": "DisruptionBudget",
                            "message": f"The disruption budget {name} needs {status.get('desiredHealthy', 0)} healthy "
                            f"pods and has {status.get('currentHealthy', 0)} currently",
                        }
                    ]
                },
            )
        disrupted = {**(status.get("disruptedPods") or {}), pod_name: _now_rfc3339(self.clock())}
        new_status = {**status, "disruptionsAllowed": allowed - 1, "disruptedPods": disrupted}
        self._commit(pdbs, "MODIFIED", (ns, name), {**pdb, "status": new_status}, pdb)
