"""The manager's view of the cluster: one list+watch cache per kind its rounds read, so a round reads memory,
never the API server (a round over 10,000 PodMigrationJobs makes no request for a job that has nothing to
do, and none for a pod already evicted).

Each :class:`ObjectStore` is fed by a :class:`koordpy.kube.reflector.Reflector` (list, then watch; a relist
after a gap delivers the deletions it missed) and by the manager's own writes: the object an update
returns is stored at once (:meth:`ObjectStore.observe`), so the next round sees the manager's last
write even before its watch event arrives, and an older event arriving later does not undo it. Versions
are ordered as client-go's ``IntegerResourceVersionMutationCache`` orders them: as integers when both are
integers (the API server's are), else the newer arrival wins.

Optional kinds (PodGroups of each API, NodeMetrics, Reservations, PodMigrationJobs) are watched only
while the API server serves them: discovery is asked first and again every :data:`DISCOVERY_SECONDS`
while absent, so a cluster without ``scheduling.x-k8s.io`` sees no request for it (and logs no 404).

The caches run on every replica (a standby keeps them warm, as client-go informers do under leader
election); only the active replica's rounds act on them.

Not guaranteed: that a store is current (a watch lags the API server by the network's delay; a write of
someone else shows up with its event); memory: each object is kept as its API JSON without
``metadata.managedFields``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from koordpy.descheduler.objects import MigrationJob, MigrationObjectError, job_from_dict
from koordpy.kube import errors as kube_errors
from koordpy.kube import resources
from koordpy.kube.client import ApiClient
from koordpy.kube.reflector import Reflector, object_key
from koordpy.kube.resources import ResourceRef

__all__ = [
    "DISCOVERY_SECONDS",
    "JobViews",
    "ManagerCache",
    "ObjectStore",
    "Watched",
    "newer_or_equal",
    "slim_workload",
]

DISCOVERY_SECONDS = 60.0
"""How often an optional kind the API server does not serve is looked for again."""

Raw = dict[str, Any]
Listener = Callable[[str, Raw | None, Raw | None], None]
"""Called with (key, old object, new object) after every change; None for absent."""


def _rv(obj: Mapping[str, Any] | None) -> str:
    meta = (obj or {}).get("metadata") or {}
    value = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    return value if isinstance(value, str) else ""


def newer_or_equal(stored: str, incoming: str) -> bool:
    """Whether ``stored`` is at least as new as ``incoming`` (both integers: compared as such; otherwise
    False, so the incoming object replaces the stored one)."""
    if not (stored.isdigit() and incoming.isdigit()):
        return False
    return int(stored) >= int(incoming)


class ObjectStore:
    """Objects of one kind by key (``namespace/name`` or ``name``). ``index`` (optional) names a secondary
    key of an object (a pod's node), kept in :meth:`keys_by`.

    ``version`` counts changes, so a round can tell whether anything moved since it last looked. Listeners
    hear every change. Not thread-safe: one event loop.
    """

    def __init__(
        self,
        resource: ResourceRef,
        *,
        index: Callable[[Raw], str | None] | None = None,
        slim: Callable[[Raw], Raw] | None = None,
    ) -> None:
        self.resource = resource
        self.objects: dict[str, Raw] = {}
        self.version = 0
        self.synced = False
        self._index = index
        self._slim = slim
        """What of an object is kept (default: all of it but ``metadata.managedFields``); it must keep
        ``metadata.name``, ``namespace`` and ``resourceVersion``."""
        self._by_index: dict[str, set[str]] = {}
        self._listeners: list[Listener] = []

    def __len__(self) -> int:
        return len(self.objects)

    def __contains__(self, key: object) -> bool:
        return key in self.objects

    def get(self, key: str) -> Raw | None:
        return self.objects.get(key)

    def values(self) -> Iterator[Raw]:
        return iter(self.objects.values())

    def keys_by(self, value: str) -> frozenset[str]:
        """Keys whose ``index`` is ``value`` (pods on a node)."""
        return frozenset(self._by_index.get(value, ()))

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    # -- changes ----------------------------------------------------------------------------------

    def _set(self, key: str, new: Raw | None) -> None:
        old = self.objects.get(key)
        if new is None:
            if old is None:
                return
            del self.objects[key]
        else:
            self.objects[key] = new
        if self._index is not None:
            before = self._index(old) if old is not None else None
            after = self._index(new) if new is not None else None
            if before != after:
                if before is not None:
                    members = self._by_index.get(before)
                    if members is not None:
                        members.discard(key)
                        if not members:
                            del self._by_index[before]
                if after is not None:
                    self._by_index.setdefault(after, set()).add(key)
        self.version += 1
        for listener in self._listeners:
            listener(key, old, new)

    def _stripped(self, obj: Raw) -> Raw:
        if self._slim is not None:
            return self._slim(obj)
        meta = obj.get("metadata")
        if isinstance(meta, dict) and "managedFields" in meta:
            obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
        return obj

    def handle(self, etype: str, obj: Raw) -> None:
        """A watch (or relist) event from the reflector."""
        key = object_key(obj)
        if etype == "DELETED":
            self._set(key, None)
            return
        stored = self.objects.get(key)
        if stored is not None and newer_or_equal(_rv(stored), _rv(obj)):
            return  # a replay, or older than what the manager itself wrote
        self._set(key, self._stripped(obj))

    def observe(self, obj: Mapping[str, Any] | None) -> None:
        """The object a write of the manager's returned: stored unless the store holds a newer one."""
        if not obj or not isinstance(obj.get("metadata"), Mapping):
            return
        self.handle("MODIFIED", dict(obj))

    def discard(self, key: str) -> None:
        """The object is gone (a write to it answered 404); its DELETED event may follow."""
        self._set(key, None)

    def mark(self, key: str, update: Callable[[Raw], Raw]) -> None:
        """Change the stored copy in place of an answer the API did not give (an eviction returns no pod):
        ``update`` gets the stored object and returns the new one, with the same resourceVersion, so the
        next watch event of the object (a newer version) replaces it."""
        stored = self.objects.get(key)
        if stored is not None:
            self._set(key, update(stored))

    def replace_all(self, items: Iterable[Raw]) -> None:
        """A fresh list: store what is listed, drop what is not (as a reflector's relist)."""
        fresh = {object_key(item): item for item in items if isinstance(item.get("metadata"), Mapping)}
        for key in [k for k in self.objects if k not in fresh]:
            self._set(key, None)
        for key, item in fresh.items():
            stored = self.objects.get(key)
            if stored is None or not newer_or_equal(_rv(stored), _rv(item)):
                self._set(key, self._stripped(item))
        self.synced = True


JobListener = Callable[[str, MigrationJob | None, MigrationJob | None], None]
"""Called with (name, old view, new view) after every change of a PodMigrationJob; None for absent or unreadable."""


class JobViews:
    """The typed view (:class:`~koordpy.descheduler.objects.MigrationJob`) of every PodMigrationJob of ``store``,
    converted once per stored object and shared by every reader: the migration rounds and arbitration
    (:class:`koordpy.manager.job_index.JobIndex`) and the balance loop. None for a job
    :func:`~koordpy.descheduler.objects.job_from_dict` cannot read (the lifecycle fails it with the reason)."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._views: dict[str, tuple[Raw, MigrationJob | None]] = {}
        self._listeners: list[JobListener] = []
        store.add_listener(self._changed)

    def _convert(self, key: str, raw: Raw) -> MigrationJob | None:
        try:
            view: MigrationJob | None = job_from_dict(raw)
        except MigrationObjectError:
            view = None
        self._views[key] = (raw, view)
        return view

    def get(self, key: str) -> MigrationJob | None:
        """The view of the stored job ``key`` (None: absent or unreadable)."""
        raw = self.store.get(key)
        if raw is None:
            return None
        hit = self._views.get(key)
        if hit is not None and hit[0] is raw:
            return hit[1]
        return self._convert(key, raw)

    def add_listener(self, listener: JobListener) -> None:
        self._listeners.append(listener)

    def _changed(self, key: str, old: Raw | None, new: Raw | None) -> None:
        hit = self._views.pop(key, None)
        before = hit[1] if hit is not None and hit[0] is old else None
        if before is None and old is not None and self._listeners:
            before = self._convert(key, old)
            self._views.pop(key, None)
        after = self._convert(key, new) if new is not None else None
        for listener in self._listeners:
            listener(key, before, after)


def _node_of(pod: Raw) -> str | None:
    spec = pod.get("spec")
    node = spec.get("nodeName") if isinstance(spec, Mapping) else None
    return node if isinstance(node, str) and node else None


def slim_workload(kind: str) -> Callable[[Raw], Raw]:
    """What the manager keeps of a workload (a Deployment, ReplicaSet or StatefulSet): its name, namespace, UID,
    resourceVersion, controller reference and ``spec.replicas`` (``kind`` filled in: a list's items have none).
    A ReplicaSet's pod template is most of its size, and the balance round reads none of it."""

    def slim(obj: Raw) -> Raw:
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        kept: Raw = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in meta}
        refs = meta.get("ownerReferences")
        if isinstance(refs, list):
            controllers = [
                {k: ref[k] for k in ("apiVersion", "kind", "name", "uid", "controller") if k in ref}
                for ref in refs
                if isinstance(ref, Mapping) and ref.get("controller")
            ]
            if controllers:
                kept["ownerReferences"] = controllers
        spec = obj.get("spec")
        out: Raw = {"apiVersion": obj.get("apiVersion") or "apps/v1", "kind": kind, "metadata": kept, "spec": {}}
        if isinstance(spec, Mapping) and "replicas" in spec:
            out["spec"] = {"replicas": spec["replicas"]}
        return out

    return slim


@dataclass
class Watched:
    """One watched kind: its store, whether it may be absent (a CRD), and its reflector once started."""

    store: ObjectStore
    optional: bool
    served: bool | None = None
    """Whether discovery found the kind (None: not asked yet)."""
    reflector: Reflector | None = field(default=None, repr=False)


class ManagerCache:
    """The stores the manager's rounds read, each kept by its own reflector (see the module docstring).

    ``kinds`` selects what is watched: ``pods``, ``podmigrationjobs``, ``reservations``, ``nodes``,
    ``nodemetrics``, ``podgroups`` (the PodGroup APIs: ``scheduling.sigs.k8s.io``, ``scheduling.x-k8s.io``,
    ``scheduling.volcano.sh`` and Kubernetes' own ``scheduling.k8s.io/v1beta1``, read only), ``workloads``
    (Deployments, ReplicaSets and StatefulSets, kept slim: the balance round's replica counts). A store of a
    kind not watched stays empty.
    """

    OPTIONAL = frozenset(
        {
            "podmigrationjobs",
            "reservations",
            "nodemetrics",
            "podgroups_sigs",
            "podgroups_x_k8s",
            "podgroups_volcano",
            "podgroups_native",
        }
    )

    def __init__(
        self,
        client: ApiClient,
        kinds: Iterable[str] = ("pods", "podmigrationjobs", "reservations"),
        *,
        logger: logging.Logger | None = None,
        discovery_seconds: float = DISCOVERY_SECONDS,
    ) -> None:
        self.client = client
        self._logger = logger or logging.getLogger("koordpy.manager")
        self.discovery_seconds = discovery_seconds
        self.pods = ObjectStore(resources.PODS, index=_node_of)
        self.jobs = ObjectStore(resources.PODMIGRATIONJOBS)
        self.job_views = JobViews(self.jobs)
        """The jobs' typed views, converted once per stored version (listeners: :meth:`JobViews.add_listener`)."""
        self.reservations = ObjectStore(resources.RESERVATIONS)
        self.nodes = ObjectStore(resources.NODES)
        self.nodemetrics = ObjectStore(resources.NODEMETRICS)
        self.podgroups_sigs = ObjectStore(resources.PODGROUPS)
        self.podgroups_x_k8s = ObjectStore(resources.PODGROUPS_X_K8S)
        self.podgroups_volcano = ObjectStore(resources.PODGROUPS_VOLCANO)
        self.podgroups_native = ObjectStore(resources.PODGROUPS_NATIVE)
        self.deployments = ObjectStore(resources.DEPLOYMENTS, slim=slim_workload("Deployment"))
        self.replicasets = ObjectStore(resources.REPLICASETS, slim=slim_workload("ReplicaSet"))
        self.statefulsets = ObjectStore(resources.STATEFULSETS, slim=slim_workload("StatefulSet"))
        wanted = set(kinds)
        if "podgroups" in wanted:
            wanted |= {"podgroups_sigs", "podgroups_x_k8s", "podgroups_volcano", "podgroups_native"}
        if "workloads" in wanted:
            wanted |= {"deployments", "replicasets", "statefulsets"}
        self.watched: dict[str, Watched] = {
            name: Watched(store, name in self.OPTIONAL) for name, store in self._all().items() if name in wanted
        }

    def _all(self) -> dict[str, ObjectStore]:
        return {
            "pods": self.pods,
            "podmigrationjobs": self.jobs,
            "reservations": self.reservations,
            "nodes": self.nodes,
            "nodemetrics": self.nodemetrics,
            "podgroups_sigs": self.podgroups_sigs,
            "podgroups_x_k8s": self.podgroups_x_k8s,
            "podgroups_volcano": self.podgroups_volcano,
            "podgroups_native": self.podgroups_native,
            "deployments": self.deployments,
            "replicasets": self.replicasets,
            "statefulsets": self.statefulsets,
        }

    def workload_stores(self) -> tuple[ObjectStore, ...]:
        """The workload stores (Deployments, ReplicaSets, StatefulSets: kept slim, :func:`slim_workload`)."""
        return (self.deployments, self.replicasets, self.statefulsets)

    def podgroup_stores(self) -> tuple[tuple[str, ObjectStore], ...]:
        """Each PodGroup store (every ``podgroups_*`` kind) with the ``apiVersion`` of its objects (a watch
        event's object has it, a list item may not)."""
        return tuple(
            (store.resource.api_version, store) for name, store in self._all().items() if name.startswith("podgroups_")
        )

    def served(self, name: str) -> bool:
        """Whether kind ``name`` is watched and served (an absent CRD's store is empty and not waited for)."""
        watched = self.watched.get(name)
        return watched is not None and watched.served is True

    def sizes(self) -> dict[str, int]:
        """Objects per watched kind (``/healthz`` reports them; a fresh list of the kind counts the same once
        the watch caught up). Only reads values, so the health thread may call it."""
        return {name: len(watched.store.objects) for name, watched in list(self.watched.items())}

    def not_ready(self) -> str | None:
        """Why the stores cannot be trusted yet (a served kind not listed yet, or discovery not done), or None."""
        for name, watched in self.watched.items():
            if watched.served is None:
                return f"{name}: discovery not done"
            if watched.served and not watched.store.synced:
                if watched.reflector is not None and watched.reflector.synced.is_set():
                    watched.store.synced = True
                    continue
                return f"{name}: waiting for the first list"
        return None

    async def _is_served(self, resource: ResourceRef) -> bool | None:
        """Discovery: True or False, None when the answer was an error (asked again later)."""
        path = f"/apis/{resource.group}/{resource.version}" if resource.group else f"/api/{resource.version}"
        try:
            found = await self.client.request("GET", path)
        except kube_errors.NotFound:
            return False
        except (kube_errors.ApiError, kube_errors.ApiConnectionError) as exc:
            self._logger.debug("discovery of %s failed: %s", resource.qualified, exc)
            return None
        return any(
            isinstance(item, Mapping) and item.get("name") == resource.plural for item in found.get("resources") or ()
        )

    async def discover(self) -> None:
        """Ask discovery once for every optional kind not known to be served (required kinds are served)."""
        for watched in self.watched.values():
            if not watched.optional:
                watched.served = True
            elif watched.served is not True:
                found = await self._is_served(watched.store.resource)
                if found is not None:
                    watched.served = found

    async def resync(self) -> None:
        """List every served kind once and apply it as a relist (a fresh start; tests step with it)."""
        await self.discover()
        for watched in self.watched.values():
            if watched.served:
                result = await self.client.list(watched.store.resource)
                watched.store.replace_all(dict(item) for item in result.items)

    async def _watch(self, name: str, watched: Watched) -> None:
        while watched.optional and not watched.served:
            found = await self._is_served(watched.store.resource)
            if found is not None:
                watched.served = found
            if not watched.served:
                await asyncio.sleep(self.discovery_seconds)
        watched.served = True
        store = watched.store

        def handler(etype: str, obj: Raw) -> None:
            store.handle(etype, obj)

        watched.reflector = Reflector(self.client, store.resource, handler)
        # why: no task of its own waits for the first list (the operator framework cancels the tasks it did
        # not start when it stops, and a store would stay unsynced): :meth:`not_ready` asks the reflector.
        await watched.reflector.run()

    async def run(self) -> None:
        """Watch every selected kind until cancelled."""
        async with asyncio.TaskGroup() as group:
            for name, watched in self.watched.items():
                group.create_task(self._watch(name, watched), name=f"manager cache {name}")

    async def wait_ready(self, poll: float = 0.05) -> None:
        """Until :meth:`not_ready` is None."""
        while self.not_ready() is not None:
            await asyncio.sleep(poll)
