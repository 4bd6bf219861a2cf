"""The LowNodeLoad balance loop: every ``deschedulingInterval``, on the leader only, one round of
:func:`koordpy.descheduler.lownodeload.plan_round` over the manager's watch caches; each move is filed as a plain
PodMigrationJob (:func:`~koordpy.descheduler.lownodeload.migration_job`) that arbitration and the migration
lifecycle then carry out like any other.

**Views.** :class:`BalanceViews` keeps the descheduler's view (``BalanceState``) and the extender's
(``ClusterState`` with the profile's plugins, from the scheduler's configuration file) current from the stores of
:class:`~koordpy.manager.cache.ManagerCache` (nodes, NodeMetrics, pods, and Deployments, ReplicaSets and
StatefulSets for replica counts): one listener per store, each object converted once per change and given to
both views. No watch of its own: the manager's one watch per kind serves it, on every replica (a standby keeps
the views warm, as it keeps the caches).

**Between rounds** :class:`BalanceController` keeps what a round does not: the anomaly state (the previous
round's), the ledger of recent moves (one entry per job it filed, its destination taken from the job's
``status.nodeName`` once known, dropped when the job fails with its pod in place or once the NodeMetrics show the
move: :func:`~koordpy.descheduler.lownodeload.prune`), the pods with an unfinished PodMigrationJob of any origin (never
moved again), and the moves of the last ``repeatMoveWindowSeconds`` by workload
(:class:`~koordpy.descheduler.repeats.MoveHistory`). A manager that starts (or a standby that takes over) takes its
ledger from the unfinished PodMigrationJobs labelled ``koordpy.io/descheduler-plugin: LowNodeLoad``, as
``koordpy descheduler balance`` does; the anomaly state starts empty (a node acts after its
``consecutiveAbnormalities`` rounds on this replica).

**A round**: ``paused``: nothing (the anomaly state is kept). ``dryRun``: the same decisions, logged and counted
(``outcome="dry_run"``), no job filed and nothing added to the ledger (each round decides afresh, as
Koordinator's dry run). Otherwise each move is filed, added to the ledger and logged; a refused create is counted
(``outcome="refused"``) and logged at most once a minute per error. A move that repeats a recent one of its
workload is counted in ``koordpy_descheduler_repeat_moves_total{cause="moved_again"}`` with a Warning Event
``RepeatMove`` on the workload (the job is filed all the same: the count makes the loop visible, the threshold
contract is what prevents it).

The round runs on the event loop (it reads and changes the views the listeners change): watch events wait for it
(a steady round at 5,000 nodes and 100,000 pods is about 130 ms of CPU on a quiet machine, see
docs/descheduler.md); ``/healthz`` is answered from its own thread meanwhile.

Not guaranteed: that the views agree with the cluster beyond the events received; that a job filed passes
arbitration or lands where the round expected (the scheduler decides); the anomaly state across a restart.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Gauge, Histogram
from prometheus_client import Counter as PromCounter

from koordpy.config.lownodeload import LowNodeLoadArgs
from koordpy.config.manager import ManagerConfiguration
from koordpy.config.scheduler import SchedulerConfiguration
from koordpy.descheduler.lownodeload import (
    LABEL_PLUGIN,
    NAME,
    AnomalyState,
    BalancePod,
    BalanceRound,
    BalanceState,
    EvictionLimits,
    PlannedMove,
    RecentMove,
    migration_job,
    plan_round,
    prune,
)
from koordpy.descheduler.lownodeload.offline import recent_move
from koordpy.descheduler.lownodeload.result import AnomalyKey
from koordpy.descheduler.objects import MigrationObjectError, Workload, resolve_workload, workload_from_dict
from koordpy.descheduler.repeats import CAUSE_MOVED_AGAIN, EVENT_REASON, MoveHistory, WorkloadMove
from koordpy.kube import errors as kube_errors
from koordpy.manager.cache import ManagerCache
from koordpy.manager.rounds import RoundLoop
from koordpy.model.durations import parse_rfc3339
from koordpy.model.objects import NodeMetricInfo, ObjectError, node_from_dict, nodemetric_from_dict, pod_from_dict
from koordpy.runtime.logging import get_logger
from koordpy.scheduler.framework.cluster import ClusterState
from koordpy.scheduler.profile import build_plugins

__all__ = [
    "CREATED_BY",
    "BalanceApi",
    "BalanceController",
    "BalanceMetrics",
    "BalanceViews",
    "balance_from_config",
    "balance_loop",
    "move_reason",
]

Raw = dict[str, Any]
CREATED_BY = "koordpy-manager"
"""The jobs' ``koordinator.sh/job-created-by``."""
ERROR_LOG_SECONDS = 60.0
UNFINISHED = ("", "Pending", "Running")
FAILED = ("Failed", "Aborted")
_MALFORMED = (ObjectError, MigrationObjectError, ValueError, TypeError, KeyError, AttributeError, ArithmeticError)


class BalanceApi(Protocol):
    """The calls the loop makes: create a PodMigrationJob (returns it as stored), post an Event."""

    async def create_job(self, body: Mapping[str, Any]) -> Raw: ...

    async def post_event(self, involved: Mapping[str, Any], reason: str, message: str) -> None: ...


def _meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    meta = (obj or {}).get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _status(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    status = (obj or {}).get("status")
    return status if isinstance(status, Mapping) else {}


class BalanceViews:
    """The descheduler's and the extender's views, fed by the cache's stores (see the module docstring).
    ``clock`` (epoch seconds) dates a pod's assignment for the extender's estimator when it has no
    ``PodScheduled`` time."""

    def __init__(
        self,
        cache: ManagerCache,
        args: LowNodeLoadArgs,
        scheduler: SchedulerConfiguration,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.state = BalanceState(args)
        self.cluster = ClusterState(build_plugins(scheduler))
        self.clock = clock
        self.pods: dict[str, BalancePod] = {}
        """Bound, unfinished pods by ``namespace/name`` (what the ledger of a job it adopts reads)."""
        self.unreadable: Counter[str] = Counter()
        """Objects that could not be read, by kind (they count as absent; a node or NodeMetric as unknown)."""
        self.events = 0
        """Store changes applied."""
        self._workload_uids: dict[str, str] = {}
        stores = (
            (cache.nodes, self._node),
            (cache.nodemetrics, self._metric),
            (cache.pods, self._pod),
            *((store, self._workload) for store in cache.workload_stores()),
        )
        for store, listener in stores:
            store.add_listener(listener)
            for key, obj in list(store.objects.items()):
                listener(key, None, obj)

    def _node(self, key: str, old: Raw | None, new: Raw | None) -> None:
        self.events += 1
        if new is None:
            self.state.remove_node(key)
            self.cluster.remove_node(key)
            return
        try:
            node = node_from_dict(new)
        except _MALFORMED as exc:
            self.unreadable["Node"] += 1
            self.state.remove_node(key)
            self.cluster.invalidate_node(key, str(exc))
            return
        self.state.upsert_node(node)
        self.cluster.upsert_node(node)

    def _metric(self, key: str, old: Raw | None, new: Raw | None) -> None:
        self.events += 1
        if new is None:
            self.state.remove_metric(key)
            self.cluster.remove_metric(key)
            return
        try:
            metric = nodemetric_from_dict(new)
        except _MALFORMED as exc:
            self.unreadable["NodeMetric"] += 1
            metric = NodeMetricInfo.unreadable(key, str(exc))
        self.state.upsert_metric(metric)
        self.cluster.upsert_metric(metric)

    def _forget_pod(self, key: str, uid: str | None) -> None:
        known = self.pods.pop(key, None)
        for gone in {uid, known.info.uid if known is not None else None}:
            if gone:
                self.state.remove_pod(gone)
                self.cluster.remove_pod(gone)

    def _pod(self, key: str, old: Raw | None, new: Raw | None) -> None:
        self.events += 1
        if new is None:
            self._forget_pod(key, str(_meta(old).get("uid") or "") or None)
            return
        spec = new.get("spec")
        if key not in self.pods and not (isinstance(spec, Mapping) and spec.get("nodeName")):
            return  # pending, and never seen bound: neither view keeps it
        try:
            info = pod_from_dict(new)
        except _MALFORMED:
            self.unreadable["Pod"] += 1
            self._forget_pod(key, None)
            return
        known = self.pods.get(key)
        if known is not None and known.info.uid != info.uid:
            self._forget_pod(key, None)  # the name was taken by a new pod
        pod = BalancePod(info, new)
        self.state.upsert_pod(pod)
        self.cluster.upsert_pod(info, self.clock())
        if info.node_name and not info.terminated:
            self.pods[key] = pod
        else:
            self.pods.pop(key, None)

    def _workload(self, key: str, old: Raw | None, new: Raw | None) -> None:
        self.events += 1
        before = self._workload_uids.pop(key, None)
        if before is not None:
            self.state.remove_workload(before)
        if new is None:
            return
        try:
            workload = workload_from_dict(new)
        except _MALFORMED:
            self.unreadable[str(new.get("kind") or "workload")] += 1
            return
        self.state.upsert_workload(workload)
        self._workload_uids[key] = workload.uid


class BalanceMetrics:
    """Prometheus metrics of the balance rounds, on ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.rounds = PromCounter(
            "koordpy_descheduler_rounds",
            "LowNodeLoad rounds by outcome: done, paused (lowNodeLoad.paused), error (the round stopped on an error).",
            ["outcome"],
            registry=registry,
        )
        self.moves = PromCounter(
            "koordpy_descheduler_moves",
            "Moves a LowNodeLoad round decided, by kind (node or prod usage), reason (the resources above their "
            "high threshold) and outcome: filed (a PodMigrationJob created), dry_run (lowNodeLoad.dryRun: not "
            "filed), refused (the API server refused the job).",
            ["kind", "reason", "outcome"],
            registry=registry,
        )
        self.kept = PromCounter(
            "koordpy_descheduler_kept_pods",
            "Pods of acted-on hot nodes a round tried and left in place, by cause.",
            ["cause"],
            registry=registry,
        )
        self.nodes = Gauge(
            "koordpy_descheduler_nodes",
            "Nodes by pool and state (hot, normal, idle, stale, unknown) in the last round that was not paused.",
            ["pool", "state"],
            registry=registry,
        )
        self.abnormal = Gauge(
            "koordpy_descheduler_abnormal_nodes",
            "Nodes hot for more than consecutiveAbnormalities rounds (acted on while hot), by kind (node, prod).",
            ["kind"],
            registry=registry,
        )
        self.recent = Gauge(
            "koordpy_descheduler_recent_moves",
            "Moves in the ledger: counted on their nodes until NodeMetrics newer than the move show them.",
            registry=registry,
        )
        self.round_seconds = Histogram(
            "koordpy_descheduler_round_seconds",
            "Time of one LowNodeLoad round (planning and filing its jobs).",
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
            registry=registry,
        )
        self.last_round = Gauge(
            "koordpy_descheduler_last_round_seconds", "Time of the last LowNodeLoad round.", registry=registry
        )
        self.repeats = PromCounter(
            "koordpy_descheduler_repeat_moves",
            "Repeat moves: a workload's pod moved again within repeatMoveWindowSeconds of a move of the same "
            "workload (cause moved_again, the manager), or evicted by the agent soon after it was placed "
            "(cause agent_eviction, the agent's own metric).",
            ["cause"],
            registry=registry,
        )
        # zero series from the start: the first error or repeat counts in increase() (one born at 1 would not)
        for outcome in ("done", "paused", "error"):
            self.rounds.labels(outcome=outcome)
        self.repeats.labels(cause=CAUSE_MOVED_AGAIN)


def move_reason(move: PlannedMove) -> str:
    """The metric label of a move's reason: ``cpu``, ``cpu,memory``, ``prod cpu``."""
    over = ",".join(move.over) or "none"
    return f"prod {over}" if move.kind == "prod" else over


class BalanceController:
    """One LowNodeLoad round at a time over ``views``; files jobs through ``api``. See the module docstring."""

    def __init__(
        self,
        views: BalanceViews,
        cache: ManagerCache,
        api: BalanceApi,
        config: ManagerConfiguration,
        *,
        clock: Callable[[], float] = time.time,
        metrics: BalanceMetrics | None = None,
        new_name: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        assert config.low_node_load is not None, "lowNodeLoad is not configured"
        self.views = views
        self.cache = cache
        self.api = api
        self.args: LowNodeLoadArgs = config.low_node_load
        self.migration = config.migration_controller
        self.limits = EvictionLimits(
            config.max_no_of_pods_to_evict_per_node,
            config.max_no_of_pods_to_evict_per_namespace,
            config.max_no_of_pods_to_evict_total,
        )
        ttl = self.migration.default_job_ttl
        self.horizon = (ttl if ttl > 0 else 1800.0) + self.args.node_metric_expiration_seconds
        """How long a ledger entry may count at most (a job's ttl, then a NodeMetric that may be that old)."""
        self.clock = clock
        self.metrics = metrics
        self.new_name = new_name
        self.anomalies: dict[AnomalyKey, AnomalyState] = {}
        self.ledger: dict[str, RecentMove] = {}
        """Job name -> the move it carries, while the move counts (:mod:`koordpy.descheduler.lownodeload.ledger`)."""
        self.history = MoveHistory(float(config.repeat_move_window_seconds))
        self.unfinished: dict[str, str] = {}
        """Unfinished PodMigrationJobs of any origin: job name -> ``namespace/name`` of its pod."""
        self.to_adopt: set[str] = set()
        """Unfinished jobs of this plugin not in the ledger (filed before this process led): adopted next round."""
        self.last: BalanceRound | None = None
        self.filed = 0
        self.repeats = 0
        self._log = get_logger("koordpy.manager.balance")
        self._logged: dict[str, float] = {}
        self._acting: set[tuple[str, str]] = set()
        cache.jobs.add_listener(self._job)
        for name, job in list(cache.jobs.objects.items()):
            self._job(name, None, job)

    # -- jobs -------------------------------------------------------------------------------------------

    def _job(self, name: str, old: Raw | None, new: Raw | None) -> None:
        if new is None:
            self.unfinished.pop(name, None)
            self.to_adopt.discard(name)
            if str(_status(old).get("phase") or "") != "Succeeded":
                self.ledger.pop(name, None)  # it moved nothing (deleted before it evicted)
                self.history.forget(name)
            return
        phase = str(_status(new).get("phase") or "")
        spec = new.get("spec")
        ref = spec.get("podRef") if isinstance(spec, Mapping) else None
        if phase in UNFINISHED and isinstance(ref, Mapping):
            self.unfinished[name] = f"{ref.get('namespace') or ''}/{ref.get('name') or ''}"
        else:
            self.unfinished.pop(name, None)
        if phase in FAILED:
            self.to_adopt.discard(name)
            if not self._moved(ref):
                self.ledger.pop(name, None)  # the pod is where it was: nothing to count
                self.history.forget(name)
            return
        landed = str(_status(new).get("nodeName") or "")
        entry = self.ledger.get(name)
        if landed:
            self.history.landed(name, landed)
            if entry is not None and entry.destination != landed:
                self.ledger[name] = dataclasses.replace(entry, destination=landed)
        labels = _meta(new).get("labels")
        ours = isinstance(labels, Mapping) and labels.get(LABEL_PLUGIN) == NAME
        if ours and entry is None and phase in UNFINISHED:
            self.to_adopt.add(name)

    def _moved(self, ref: object) -> bool:
        """Whether the pod a failed job named has left (gone, or its name taken by another pod): a job that fails
        after its eviction (a ReservationFirst replacement bound outside its Reservation waits until its ttl)
        moved it all the same."""
        if not isinstance(ref, Mapping):
            return False
        pod = self.views.pods.get(f"{ref.get('namespace') or ''}/{ref.get('name') or ''}")
        uid = ref.get("uid")
        return pod is None or (bool(uid) and pod.info.uid != uid)

    def _adopt(self, now: float) -> None:
        """The ledger entries of this plugin's unfinished jobs filed before this process led."""
        for name in sorted(self.to_adopt):
            job = self.cache.jobs.get(name)
            self.to_adopt.discard(name)
            if job is None or name in self.ledger:
                continue
            pod_key = self.unfinished.get(name)
            if pod_key is None:
                continue
            created_text = _meta(job).get("creationTimestamp")
            try:
                created = parse_rfc3339(str(created_text)) if created_text else now
            except ValueError:
                created = now
            entry = recent_move(pod_key, created, job, self.views.pods, self.views.state)
            if entry is not None:
                self.ledger[name] = entry
                pod = self.views.pods.get(pod_key)
                workload = self._workload_of(pod) if pod is not None else None
                if workload is not None:
                    destination = str(_status(job).get("nodeName") or "") or None
                    move = WorkloadMove(workload[0].uid, name, pod_key, entry.source, destination, created)
                    self.history.record(move)

    def _prune(self, now: float) -> None:
        state = self.views.state
        state.refresh()  # the rows of the nodes whose NodeMetric changed (their updateTime)
        moves = list(self.ledger.values())
        nodes = {m.source for m in moves} | {m.destination for m in moves if m.destination is not None}
        update_time: dict[str, float] = {}
        for node in nodes:
            row = state.row(node)
            if row is not None:
                update_time[node] = float(state.update_time[row])
        listed = {(m.source, m.pod) for m in moves if state.listed(m.source, m.pod)}
        kept = set(map(id, prune(moves, update_time, listed, now, self.horizon)))
        self.ledger = {name: move for name, move in self.ledger.items() if id(move) in kept}
        self.history.prune(now)

    # -- workloads and events ---------------------------------------------------------------------------

    def _workload_of(self, pod: BalancePod) -> tuple[Workload, Raw] | None:
        """The pod's workload (its controller followed up the chain through the watched workloads) and the
        object an Event about it names; None for a pod without a controller."""
        try:
            found = resolve_workload(pod.migration, self.views.state.workloads)
        except MigrationObjectError:
            found = None
        if found is not None:
            version = "apps/v1" if found.kind in ("Deployment", "ReplicaSet", "StatefulSet") else "v1"
            involved = {
                "apiVersion": version,
                "kind": found.kind,
                "metadata": {"name": found.name, "namespace": found.namespace, "uid": found.uid},
            }
            return found, involved
        ref = pod.info.controller
        if ref is None:
            return None
        workload = Workload(ref.kind, pod.info.namespace, ref.name, ref.uid, None)
        involved = {
            "apiVersion": ref.api_version,
            "kind": ref.kind,
            "metadata": {"name": ref.name, "namespace": pod.info.namespace, "uid": ref.uid},
        }
        return workload, involved

    async def _repeat(self, move: PlannedMove, job: str, now: float) -> None:
        """Record the move in the history; a repeat of an earlier one is counted and told."""
        pod = self.views.pods.get(move.pod)
        found = self._workload_of(pod) if pod is not None else None
        if pod is None or found is None:
            return
        workload, involved = found
        earlier = self.history.repeat_of(workload.uid, pod.info.creation_time, move.node, now)
        self.history.record(WorkloadMove(workload.uid, job, move.pod, move.node, None, now))
        if earlier is None:
            return
        self.repeats += 1
        if self.metrics is not None:
            self.metrics.repeats.labels(cause=CAUSE_MOVED_AGAIN).inc()
        ago = now - earlier.at
        message = (
            f"pod {move.pod} moved off {move.node} by PodMigrationJob {job} {ago:.0f}s after PodMigrationJob "
            f"{earlier.job} moved pod {earlier.pod} of this workload off {earlier.source}"
            + (f" onto {earlier.destination}" if earlier.destination else "")
            + f" (repeatMoveWindowSeconds {self.history.window:.0f}): {move.reason}"
        )
        self._log.warning(
            "balance.repeat_move",
            workload=workload.key,
            pod=move.pod,
            node=move.node,
            job=job,
            earlier_job=earlier.job,
            seconds_since=round(ago, 1),
        )
        try:
            await self.api.post_event(involved, EVENT_REASON, message)
        except Exception as exc:  # why: an Event is best effort, never holds up the round
            self._once(f"event:{type(exc).__name__}", "balance.event_failed", error=f"{type(exc).__name__}: {exc}")

    def _once(self, key: str, event: str, **fields: Any) -> None:
        """Log ``event`` at most once a minute for ``key``."""
        now = time.monotonic()
        if now - self._logged.get(key, -ERROR_LOG_SECONDS) < ERROR_LOG_SECONDS:
            return
        self._logged[key] = now
        self._log.warning(event, **fields)

    # -- the round --------------------------------------------------------------------------------------

    async def _file(self, move: PlannedMove, now: float) -> None:
        name = self.new_name()
        body = migration_job(move, name, self.migration, created_by=CREATED_BY)
        reason = move_reason(move)
        try:
            created = await self.api.create_job(body)
        except (kube_errors.ApiError, kube_errors.ApiConnectionError) as exc:
            if self.metrics is not None:
                self.metrics.moves.labels(kind=move.kind, reason=reason, outcome="refused").inc()
            kind = type(exc).__name__
            self._once(f"file:{kind}", "balance.job_refused", pod=move.pod, node=move.node, error=f"{kind}: {exc}")
            return
        self.cache.jobs.observe(created)
        self.ledger[name] = move.recent(now)
        self.filed += 1
        if self.metrics is not None:
            self.metrics.moves.labels(kind=move.kind, reason=reason, outcome="filed").inc()
        self._log.info(
            "balance.job_filed",
            job=name,
            pod=move.pod,
            node=move.node,
            destination=move.landing.node,
            reason=move.reason,
        )
        await self._repeat(move, name, now)

    async def run_round(self) -> BalanceRound:
        """One round now: plan, then file the moves (or, with ``dryRun``, log and count them)."""
        started = time.perf_counter()
        now = self.clock()
        self._adopt(now)
        self._prune(now)
        result = plan_round(
            self.views.state,
            self.views.cluster,
            self.args,
            self.migration,
            now=now,
            anomalies=self.anomalies,
            ledger=list(self.ledger.values()),
            migrating=set(self.unfinished.values()),
            limits=self.limits,
        )
        self.anomalies = dict(result.anomalies)
        self.last = result
        if not result.paused:
            self._observe(result)
            for move in result.moves:
                if self.args.dry_run:
                    if self.metrics is not None:
                        self.metrics.moves.labels(kind=move.kind, reason=move_reason(move), outcome="dry_run").inc()
                    self._log.info(
                        "balance.dry_run_move",
                        pod=move.pod,
                        node=move.node,
                        destination=move.landing.node,
                        reason=move.reason,
                    )
                else:
                    await self._file(move, now)
        took = time.perf_counter() - started
        if self.metrics is not None:
            self.metrics.recent.set(len(self.ledger))
            self.metrics.round_seconds.observe(took)
            self.metrics.last_round.set(took)
        return result

    def _observe(self, result: BalanceRound) -> None:
        """Metrics and logs of what a round saw: nodes by state, abnormal nodes, kept pods, nodes acted on."""
        abnormal = Counter(kind for (kind, _), state in result.anomalies.items() if state.is_abnormal)
        if self.metrics is not None:
            for pool in result.pools:
                for state_name in ("hot", "normal", "idle", "stale", "unknown"):
                    self.metrics.nodes.labels(pool=pool.name, state=state_name).set(pool.counts.get(state_name, 0))
            for kind in ("node", "prod"):
                self.metrics.abnormal.labels(kind=kind).set(abnormal.get(kind, 0))
            for kept in result.kept:
                self.metrics.kept.labels(cause=kept.cause or "other").inc()
        acting: dict[tuple[str, str], Any] = {(stop.kind, stop.node): stop for stop in result.stops}
        for key in sorted(acting.keys() - self._acting):
            stop = acting[key]
            self._log.info(
                "balance.node_acted",
                node=stop.node,
                kind=stop.kind,
                pool=stop.pool,
                moved=stop.moved,
                stopped=stop.why,
            )
        self._acting = set(acting)
        summary = self._log.info if result.moves else self._log.debug
        summary(
            "balance.round",
            dry_run=result.dry_run,
            moves=len(result.moves),
            kept=len(result.kept),
            outcomes={pool.name: pool.outcome for pool in result.pools},
            stops=[f"{stop.node} ({stop.kind}): {stop.why}" for stop in result.stops],
        )
        for kept in result.kept:
            self._log.debug("balance.pod_kept", pod=kept.pod, node=kept.node, cause=kept.cause, why=kept.why)


def balance_loop(controller: BalanceController, interval: float, cache: ManagerCache) -> RoundLoop:
    """The loop of balance rounds: one per ``interval`` (``deschedulingInterval``) once the caches hold their first
    lists, counted in ``koordpy_descheduler_rounds_total`` (``paused`` for a round ``lowNodeLoad.paused`` skipped)."""
    metrics = controller.metrics

    def outcome(name: str) -> None:
        if metrics is not None:
            paused = name == "done" and controller.last is not None and controller.last.paused
            metrics.rounds.labels(outcome="paused" if paused else name).inc()

    return RoundLoop(
        "balance",
        controller.run_round,
        interval,
        due=lambda: cache.not_ready() is None,
        outcome=outcome,
        logger=logging.getLogger("koordpy.manager"),
    )


def balance_from_config(
    config: ManagerConfiguration,
    scheduler: SchedulerConfiguration,
    cache: ManagerCache,
    api: BalanceApi,
    registry: CollectorRegistry,
) -> RoundLoop:
    """The balance loop of ``config.lowNodeLoad`` over ``cache`` (which must watch ``nodes``, ``nodemetrics``,
    ``pods``, ``podmigrationjobs`` and ``workloads``), the extender's view built from ``scheduler``."""
    assert config.low_node_load is not None, "lowNodeLoad is not configured"
    views = BalanceViews(cache, config.low_node_load, scheduler)
    controller = BalanceController(views, cache, api, config, metrics=BalanceMetrics(registry))
    return balance_loop(controller, config.descheduling_interval_seconds, cache)
