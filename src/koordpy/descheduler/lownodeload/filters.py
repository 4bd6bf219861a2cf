"""Which pods of a hot node may move (Koordinator's LowNodeLoad pod filter, with the evictor's filters).

In order; the first that refuses is the pod's reason to stay:

1. ``evictableNamespaces``: an excluded namespace, or one not included (the pod still counts in the usage);
2. ``podSelectors``: none matches the pod's labels (no selector given: every pod passes);
3. being deleted, or already moving (a recent move in the ledger, or an active PodMigrationJob);
4. the arbitration's non-retryable filters, as ``migrationController`` configures them
   (:class:`koordpy.descheduler.arbitration.EvictionFilter`: eviction cost, namespaces, bare, DaemonSet and mirror
   pods, system-critical, local storage, PVCs, priority threshold, label and node selector, expected replicas), so
   the plugin never files a job arbitration would fail (a gap Koordinator users reported in its balance plugins);
5. with ``defaultJobMode: ReservationFirst``, the pod's ``spec.schedulerName`` must be one of
   ``migrationController.schedulerNames`` (the Reservation that holds its new place is scheduled by that scheduler;
   Koordinator checks it when a plugin evicts).

A pod whose usage the node's NodeMetric does not report never moves either (its usage cannot be taken off the
node; upstream skips the accounting and moves it, or refuses it under ``nodeFit``): the round checks that apart.
"""

from __future__ import annotations

from collections.abc import Mapping

from koordpy.config.lownodeload import LowNodeLoadArgs
from koordpy.config.migration import MigrationControllerArgs
from koordpy.descheduler.arbitration import EvictionFilter
from koordpy.descheduler.lownodeload.state import BalancePod, BalanceState
from koordpy.descheduler.objects import MigrationObjectError

__all__ = ["PodFilter"]


class _NodeLabels(Mapping[str, Mapping[str, str]]):
    """Node labels by node name, read from the state's nodes (the evictor's ``nodeSelector``)."""

    def __init__(self, state: BalanceState) -> None:
        self._nodes = state.nodes

    def __getitem__(self, name: str) -> Mapping[str, str]:
        return self._nodes[name].labels

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)


class PodFilter:
    """The filter of one round."""

    def __init__(self, args: LowNodeLoadArgs, migration: MigrationControllerArgs, state: BalanceState) -> None:
        self.args = args
        self.migration = migration
        self._evictor = EvictionFilter(migration, state.workloads, _NodeLabels(state))
        namespaces = args.evictable_namespaces
        self._include = frozenset(namespaces.include or ()) if namespaces is not None else frozenset()
        self._exclude = frozenset(namespaces.exclude or ()) if namespaces is not None else frozenset()
        self._selectors = tuple(s.selector for s in args.pod_selectors if s.selector is not None)
        self._scheduler_names = (
            frozenset(migration.scheduler_names) if migration.default_job_mode == "ReservationFirst" else None
        )

    def refuse(self, pod: BalancePod, moving: bool) -> tuple[str, str] | None:
        """Why ``pod`` may not move (``moving``: it already is) as (cause, reason), or None; the cause is one word
        (:attr:`..result.KeptPod.cause`)."""
        info = pod.info
        namespace = info.namespace
        if self._include and namespace not in self._include:
            return "evictableNamespaces", f"namespace {namespace} is not in lowNodeLoad.evictableNamespaces.include"
        if namespace in self._exclude:
            return "evictableNamespaces", f"namespace {namespace} is in lowNodeLoad.evictableNamespaces.exclude"
        if self._selectors and not any(selector.matches(info.labels) for selector in self._selectors):
            return "podSelectors", "no lowNodeLoad.podSelectors entry matches its labels"
        if info.deletion_time is not None:
            return "deleting", "it is being deleted"
        if moving:
            return "moving", "it is already moving (a recent move or an active PodMigrationJob)"
        try:
            verdict = self._evictor.refuse(pod.migration)
        except MigrationObjectError as exc:
            return "unreadable", f"it cannot be read: {exc}"
        if verdict is not None:
            return (
                verdict.filter or "migrationController",
                f"migrationController filter {verdict.filter}: {verdict.reason}",
            )
        names = self._scheduler_names
        if names is not None and info.scheduler_name not in names:
            return "schedulerNames", (
                f"schedulerName {info.scheduler_name} is not in migrationController.schedulerNames "
                f"({', '.join(sorted(names))}): a ReservationFirst migration needs it"
            )
        return None
