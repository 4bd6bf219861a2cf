"""The gangs a migration round protects: a ``GangCache`` kept from the manager cache's pods and PodGroups.

:class:`GangFeed` listens to the manager's watch caches (:mod:`koordpy.manager.cache`): every pod that
names a gang, and every PodGroup of the APIs the cache watches, is fed to a
:class:`~koordpy.scheduler.plugins.gang.GangCache` (the membership and parameters the extender and the
offline tools use). :meth:`GangFeed.table` gives arbitration the gangs of the pods with a job
(:func:`koordpy.scheduler.plugins.gang.disruption.gang_table`), reading whether each member runs from the
pod as cached now.

A gang whose PodGroup the cache has not seen (not created yet, the watch lagging, or an API the cache does
not watch) is held: its members' jobs wait as ``GangUnknown`` until it is seen
(:mod:`koordpy.scheduler.plugins.gang.disruption`).

Not guaranteed: a pod the model cannot read is no member (logged at debug).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

from koordpy.config.gang import CoschedulingArgs
from koordpy.manager.cache import ManagerCache
from koordpy.model.objects import ObjectError, pod_from_dict
from koordpy.scheduler.plugins.gang import GangCache, PodGroupError, podgroup_from_dict
from koordpy.scheduler.plugins.gang.disruption import GangTable, gang_table, member_running, names_a_gang

__all__ = ["GangFeed"]

Raw = dict[str, Any]


def _runs(pod: Mapping[str, Any] | None) -> bool:
    if pod is None:
        return False
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    return member_running(
        str(status.get("phase") or ""), str(spec.get("nodeName") or ""), bool(meta.get("deletionTimestamp"))
    )


class GangFeed:
    """A ``GangCache`` fed by the listeners of ``cache``'s pod and PodGroup stores (one event loop)."""

    def __init__(
        self, cache: ManagerCache, args: CoschedulingArgs | None = None, logger: logging.Logger | None = None
    ) -> None:
        self.cache = cache
        self.gangs = GangCache(args or CoschedulingArgs.model_validate({}))
        self._logger = logger or logging.getLogger("koordpy.manager")
        for api_version, store in cache.podgroup_stores():
            listener = partial(self._podgroup, api_version)
            store.add_listener(listener)
            for key, obj in list(store.objects.items()):
                listener(key, None, obj)
        cache.pods.add_listener(self._pod)
        for key, obj in list(cache.pods.objects.items()):
            self._pod(key, None, obj)

    def _pod(self, key: str, old: Raw | None, new: Raw | None) -> None:
        if new is None:
            namespace, _, name = key.partition("/")
            self.gangs.delete_pod(namespace, name)
            return
        if self.gangs.gang_of(key) is None and not names_a_gang(new):
            return  # most pods: in no gang, and never were
        try:
            pod = pod_from_dict(new)
        except ObjectError as exc:
            self._logger.debug("pod %s is no gang member: %s", key, exc)
            return
        self.gangs.upsert_pod(pod)

    def _podgroup(self, api_version: str, key: str, old: Raw | None, new: Raw | None) -> None:
        namespace, _, name = key.partition("/")
        if new is None:
            self.gangs.delete_podgroup(api_version.partition("/")[0], namespace, name)
            return
        try:
            info = podgroup_from_dict({**new, "apiVersion": api_version})
        except PodGroupError as exc:
            self._logger.debug("PodGroup %s (%s) skipped: %s", key, api_version, exc)
            return
        self.gangs.upsert_podgroup(info)

    def table(self, pod_keys: Iterable[str]) -> GangTable:
        """The gangs of ``pod_keys`` and their GangGroups, with the members that run now."""
        pods = self.cache.pods
        return gang_table(self.gangs, pod_keys, lambda key: _runs(pods.get(key)))
