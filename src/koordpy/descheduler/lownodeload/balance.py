"""One LowNodeLoad round: classify, pick the moves, stop in time (Koordinator's ``LowNodeLoad.Balance`` and
``evictPodsFromSourceNodes``, low_node_load.go and utilization_util.go, v1.8).

Per pool (the default pool first, then ``nodePools`` in order), over its nodes whose NodeMetric is fresh:

1. usage per node (:mod:`.state`), with the ledger's recent moves (:mod:`.ledger`) and this round's moves so far;
2. classes (:mod:`.thresholds`); each node's anomaly state observes them (:mod:`.anomaly`);
3. nothing happens when no node is hot (node or Prod), none is hot long enough, none is idle, no more than
   ``numberOfNodes`` are idle, or every node is idle;
4. **node pass**: capacity = Σ over the idle nodes (``low`` and ``bothLow``) of ``high − usage`` per resource; the
   acted-on hot nodes hottest first (:func:`.ordering.node_scores`); per node its pods in order
   (:func:`.ordering.pod_order_key`), each one moved unless the filter refuses it (:mod:`.filters`), its usage is
   not reported, or (``nodeFit``) the scheduler's pick for it would not stay cool with it (:mod:`.destination`).
   A move takes the pod's usage off the node and off the capacity, and puts it on its destination. The node stops
   when it is no longer above any high threshold (its anomaly state is reset) or a resource's capacity is spent
   (``<= 0``);
5. **Prod pass**, the same on Prod usage and Prod thresholds, for the Prod-hot nodes: capacity = the ``prodLow``
   nodes' ``prodHigh − prodUsage`` plus, from the ``bothLow`` nodes, the smaller of their Prod headroom and of
   their node headroom, capped by what the node pass left of the node capacity (upstream's rule). The Prod
   headroom is taken after the node pass, so Prod pods it moved onto ``bothLow`` nodes count (upstream takes it
   before).

Differences from upstream, on purpose (each a known upstream bug or gap):

* a move's destination is the scheduler's own pick (see :mod:`.destination`), not "some idle node the pod fits",
  and it must stay at or below its high thresholds: upstream's check (``podFitsAnyNodeWithThreshold``) also adds
  the usage of every candidate pod to the first node it fits, moved or not, and never takes it back;
* the fit is checked against this round's state when the pod's turn comes (upstream checks every pod first);
* a Prod pod moved in the node pass also leaves the node's Prod usage (upstream subtracts it only in the Prod pass);
* a pod whose usage the NodeMetric does not report is never moved (upstream moves it without accounting for it);
* the reason names the effective threshold (with deviation thresholds, the mean plus the deviation; upstream
  prints the configured deviation) and reads ``cpu usage(...)`` for node usage (upstream: ``node cpu usage``);
* ties (equal node scores, equal pods) are broken by name, so a round is deterministic.

Not guaranteed: that the jobs filed pass arbitration (its limits are per round of its own) or that the pods land
where the round expects (the scheduler decides when the Reservation or the new pod is scheduled).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from koordpy.config.lownodeload import RESOURCES, LowNodeLoadArgs, NodePool
from koordpy.config.migration import MigrationControllerArgs
from koordpy.descheduler.lownodeload.anomaly import AnomalyState, Observation, acts, observe
from koordpy.descheduler.lownodeload.budget import EvictionLimits, RoundBudget
from koordpy.descheduler.lownodeload.destination import Destinations, Landing, placement_problem
from koordpy.descheduler.lownodeload.filters import PodFilter
from koordpy.descheduler.lownodeload.ledger import RecentMove, counts_in, counts_out
from koordpy.descheduler.lownodeload.ordering import node_scores, pod_order_key, usage_score
from koordpy.descheduler.lownodeload.result import (
    AnomalyKey,
    BalanceRound,
    KeptPod,
    Kind,
    NodeReport,
    NodeState,
    NodeStop,
    PlannedMove,
    PoolReport,
    ResourceLoad,
)
from koordpy.descheduler.lownodeload.state import CPU, MEMORY, PODS, BalanceState
from koordpy.descheduler.lownodeload.thresholds import Classes, PoolThresholds, classify, pool_thresholds
from koordpy.scheduler.framework.cluster import ClusterState

__all__ = ["overutilized_reason", "plan_round"]

I64 = npt.NDArray[np.int64]


def overutilized_reason(
    prefix: str,
    *,
    resources: Sequence[str],
    usage: Sequence[int],
    alloc: Sequence[int],
    high: Sequence[int],
    high_percent: Sequence[float],
) -> str:
    """``node is overutilized, cpu usage(83.20%)>threshold(70.00%)`` over the resources above their high amount,
    name-sorted (``prefix``: ``""`` for node usage, ``"prod "`` for Prod usage)."""
    parts = []
    for i in sorted(range(len(resources)), key=lambda i: resources[i]):
        if usage[i] > high[i]:
            percent = 100.0 * usage[i] / alloc[i] if alloc[i] else 0.0
            parts.append(f"{prefix}{resources[i]} usage({percent:.2f}%)>threshold({high_percent[i]:.2f}%)")
    return "node is overutilized, " + ", ".join(parts)


@dataclass
class _Pool:
    """One pool's rows and thresholds for the round."""

    index: int
    pool: NodePool
    rows: I64
    """All of the pool's nodes (name order)."""
    fresh: I64
    """Those with a fresh NodeMetric."""
    thresholds: PoolThresholds
    position: dict[int, int]
    """Row -> position in ``fresh`` (the thresholds' rows)."""


class _Round:
    def __init__(
        self,
        state: BalanceState,
        cluster: ClusterState,
        args: LowNodeLoadArgs,
        migration: MigrationControllerArgs,
        *,
        now: float,
        anomalies: Mapping[AnomalyKey, AnomalyState],
        ledger: Iterable[RecentMove],
        migrating: Iterable[str],
        limits: EvictionLimits,
    ) -> None:
        self.state = state
        self.limits = RoundBudget(limits)
        self.args = args
        self.now = now
        state.refresh()
        self.usage: I64 = state.usage.copy()
        self.prod_usage: I64 = state.prod_usage.copy()
        expiration = args.node_metric_expiration_seconds
        with np.errstate(invalid="ignore"):
            age = now - state.update_time
            self.fresh_mask = state.present & state.has_status & (age < expiration)
        self.age = age
        self.anomalies: dict[AnomalyKey, AnomalyState] = dict(anomalies)
        self.moving: set[str] = set(migrating)
        self.destinations = Destinations(cluster, state, now)
        self.filter = PodFilter(args, migration, state)
        self.moves: list[PlannedMove] = []
        self.kept: list[KeptPod] = []
        self.stops: list[NodeStop] = []
        self._apply_ledger(ledger)
        self.pools = [self._pool(i, pool) for i, pool in enumerate(state.pools)]

    def _apply_ledger(self, ledger: Iterable[RecentMove]) -> None:
        state = self.state
        pods = {pod.key: pod for node in {m.source for m in ledger} for pod in state.pods_on(node)}
        for move in ledger:
            source = state.row(move.source)
            if source is not None and counts_out(
                move, float(state.update_time[source]), state.listed(move.source, move.pod)
            ):
                self._shift(source, move.usage, move.prod, -1, move.pod in pods)
                self.moving.add(move.pod)
            destination = state.row(move.destination) if move.destination is not None else None
            if destination is not None and counts_in(move, float(state.update_time[destination])):
                self._shift(destination, move.usage, move.prod, +1, True)
                pod = pods.get(move.pod)
                if pod is not None and move.destination is not None:
                    self.destinations.add(pod.info, move.destination)

    def _shift(self, row: int, usage: tuple[int, int], prod: bool, sign: int, count: bool) -> None:
        for target in (self.usage, self.prod_usage) if prod else (self.usage,):
            target[row, CPU] = max(0, int(target[row, CPU]) + sign * usage[0])
            target[row, MEMORY] = max(0, int(target[row, MEMORY]) + sign * usage[1])
            if count:
                target[row, PODS] = max(0, int(target[row, PODS]) + sign)

    def _pool(self, index: int, pool: NodePool) -> _Pool:
        state = self.state
        rows = np.flatnonzero(state.pool == index)
        rows = rows[np.argsort([state.name(int(r)) for r in rows], kind="stable")] if rows.size else rows
        fresh = rows[self.fresh_mask[rows]]
        thresholds = pool_thresholds(pool, state.alloc[fresh], self.usage[fresh], self.prod_usage[fresh])
        return _Pool(
            index,
            pool,
            rows.astype(np.int64),
            fresh.astype(np.int64),
            thresholds,
            {int(r): i for i, r in enumerate(fresh)},
        )

    # ---- per pool ------------------------------------------------------------------------------------------------

    def run(self) -> BalanceRound:
        reports = [self._balance(pool) for pool in self.pools]
        self.destinations.close()
        # forget the states of nodes that are gone, and of nodes not observed for detectorCacheTimeout
        timeout = self.args.detector_cache_timeout
        self.anomalies = {
            key: value
            for key, value in self.anomalies.items()
            if key[1] in self.state.nodes and (timeout <= 0 or self.now - value.seen <= timeout)
        }
        unpooled = tuple(
            sorted(self.state.name(int(r)) for r in np.flatnonzero(self.state.present & (self.state.pool < 0)))
        )
        return BalanceRound(
            now=self.now,
            dry_run=self.args.dry_run,
            pools=tuple(reports),
            moves=tuple(self.moves),
            kept=tuple(self.kept),
            stops=tuple(self.stops),
            anomalies=self.anomalies,
            unpooled=unpooled,
        )

    def _observe(self, kind: Kind, row: int, seen: Observation, pool: NodePool) -> AnomalyState | None:
        key: AnomalyKey = (kind, self.state.name(row))
        previous = self.anomalies.get(key)
        if previous is None and seen is not Observation.HOT:
            return None
        updated = observe(previous, seen, self.now, pool.anomaly, self.args.detector_cache_timeout)
        if updated is None:
            self.anomalies.pop(key, None)
        else:
            self.anomalies[key] = updated
        return updated

    def _balance(self, pool: _Pool) -> PoolReport:
        fresh = pool.fresh
        th = pool.thresholds
        usage, prod_usage = self.usage[fresh], self.prod_usage[fresh]
        classes = classify(th, usage, prod_usage, self.state.schedulable[fresh], pool.pool.has_prod)
        acted = np.zeros(fresh.size, np.bool_)
        prod_acted = np.zeros(fresh.size, np.bool_)
        condition = pool.pool.anomaly
        sources, prod_sources = classes.sources, classes.prod_sources
        tracked = np.zeros(fresh.size, np.bool_)  # nodes with an anomaly state: their observation may change it
        for _kind, name in self.anomalies:
            row = self.state.row(name)
            position = pool.position.get(row) if row is not None else None
            if position is not None:
                tracked[position] = True
        for i in np.flatnonzero(sources | prod_sources | tracked).tolist():
            row = int(fresh[i])
            seen = Observation.HOT if sources[i] else Observation.IDLE if classes.idle[i] else Observation.NORMAL
            acted[i] = acts(self._observe("node", row, seen, pool.pool), condition) and bool(sources[i])
            if pool.pool.has_prod:
                prod_seen = (
                    Observation.HOT
                    if prod_sources[i]
                    else Observation.IDLE
                    if classes.prod_idle[i]
                    else Observation.NORMAL
                )
                prod_acted[i] = acts(self._observe("prod", row, prod_seen, pool.pool), condition) and bool(
                    prod_sources[i]
                )
        idle_count = int((classes.low | classes.prod_low | classes.both_low).sum())
        capacity: dict[Kind, dict[str, tuple[int, int]]] = {}
        seen_usage, seen_prod = usage.copy(), prod_usage.copy()  # the reports show what the classes were made of
        if not sources.any() and not prod_sources.any():
            outcome = "no hot node"
        elif not acted.any() and not prod_acted.any():
            outcome = "no node hot long enough (anomalyCondition)"
        elif idle_count == 0:
            outcome = "no idle node to move pods to"
        elif idle_count <= self.args.number_of_nodes:
            outcome = f"{idle_count} idle node(s), not more than numberOfNodes ({self.args.number_of_nodes})"
        elif idle_count == pool.rows.size:
            outcome = "every node idle"
        else:
            outcome = "balanced"
            capacity = self._passes(pool, classes, acted, prod_acted)
        anomalies = dict(self.anomalies)  # the reports show the state as this pool's passes left it

        def nodes() -> tuple[NodeReport, ...]:
            return self._reports(
                pool,
                classes=classes,
                acted=acted,
                prod_acted=prod_acted,
                usage=seen_usage,
                prod_usage=seen_prod,
                anomalies=anomalies,
            )

        stale = int(pool.rows.size - fresh.size)
        unknown = int(np.count_nonzero(~self.state.has_status[pool.rows] | np.isnan(self.age[pool.rows])))
        counts = {
            "hot": int(classes.hot.sum()),
            "idle": int(classes.idle.sum()),
            "normal": int(fresh.size - classes.hot.sum() - classes.idle.sum()),
            "stale": stale - unknown,
            "unknown": unknown,
        }
        return PoolReport(
            pool.pool.name,
            outcome,
            th.resources,
            counts={k: v for k, v in counts.items() if v},
            nodes=nodes,
            capacity=capacity,
        )

    def _headroom(self, pool: _Pool, targets: npt.NDArray[np.bool_], prod: bool) -> I64:
        th = pool.thresholds
        rows = pool.fresh[targets]
        usage = (self.prod_usage if prod else self.usage)[rows][:, th.columns]
        high = (th.prod_high if prod else th.high)[targets]
        out: I64 = (high - usage).sum(axis=0).astype(np.int64)
        return out

    def _passes(
        self, pool: _Pool, classes: Classes, acted: npt.NDArray[np.bool_], prod_acted: npt.NDArray[np.bool_]
    ) -> dict[Kind, dict[str, tuple[int, int]]]:
        th = pool.thresholds
        node_capacity = self._headroom(pool, classes.low, False) + self._headroom(pool, classes.both_low, False)
        both = self._headroom(pool, classes.both_low, False)
        before = node_capacity.copy()
        self._pass(pool, classes, acted, node_capacity, "node")
        out: dict[Kind, dict[str, tuple[int, int]]] = {"node": _capacity(th.resources, before, node_capacity)}
        if pool.pool.has_prod:
            both = np.minimum(both, node_capacity)
            prod_both = self._headroom(pool, classes.both_low, True)
            prod_capacity = self._headroom(pool, classes.prod_low, True) + np.minimum(prod_both, both)
            prod_before = prod_capacity.copy()
            self._pass(pool, classes, prod_acted, prod_capacity, "prod")
            out["prod"] = _capacity(th.resources, prod_before, prod_capacity)
        return out

    def _pass(self, pool: _Pool, classes: Classes, acted: npt.NDArray[np.bool_], capacity: I64, kind: Kind) -> None:
        th = pool.thresholds
        prod = kind == "prod"
        positions = np.flatnonzero(acted)
        if positions.size == 0:
            return
        rows = pool.fresh[positions]
        usage = (self.prod_usage if prod else self.usage)[rows]
        columns = [*th.columns.tolist()]
        if PODS not in columns:
            columns.append(PODS)
        weights = np.array([pool.pool.resource_weights.get(RESOURCES[c], 0) for c in columns], np.int64)
        scores = node_scores(usage[:, columns], self.state.alloc[rows][:, columns], weights)
        names = [self.state.name(int(r)) for r in rows]
        order = sorted(range(positions.size), key=lambda i: (-int(scores[i]), names[i]))
        for i in order:
            self._drain(pool, int(positions[i]), capacity, kind)

    def _drain(self, pool: _Pool, position: int, capacity: I64, kind: Kind) -> None:
        """Move pods off one acted-on hot node until it is back under its thresholds or the capacity is spent."""
        th = pool.thresholds
        state = self.state
        prod = kind == "prod"
        row = int(pool.fresh[position])
        name = state.name(row)
        columns = th.columns.tolist()
        high = (th.prod_high if prod else th.high)[position].tolist()
        high_percent = (th.prod_high_percent if prod else th.high_percent).tolist()
        alloc = state.alloc[row, th.columns].tolist()
        working = self.prod_usage if prod else self.usage
        weights_by_resource = pool.pool.resource_weights
        used = working[row, th.columns].tolist()
        excess = {c: u - h for c, u, h in zip(columns, used, high, strict=True) if u > h}
        weights = {c: weights_by_resource.get(RESOURCES[c], 0) for c in excess}
        scored = []
        for pod in state.pods_on(name):
            if prod and not pod.prod:
                continue
            reported = state.pod_usage(name, pod.key)
            score = None if reported is None else usage_score(reported, excess, weights)
            scored.append((pod_order_key(pod.sort_prefix, score, pod.key), pod, reported))
        scored.sort(key=lambda item: item[0])
        moved = 0
        resources = th.resources
        for tried, (_key, pod, reported) in enumerate(scored):
            used = working[row, th.columns].tolist()
            if all(u <= h for u, h in zip(used, high, strict=True)):
                self.anomalies.pop((kind, name), None)
                self._stop(
                    name, pool, kind, "back at or below its high thresholds", moved=moved, untried=len(scored) - tried
                )
                return
            spent = [resources[i] for i, left in enumerate(capacity.tolist()) if left <= 0]
            if spent:
                stop = f"the idle nodes' capacity is spent ({', '.join(spent)})"
                self._stop(name, pool, kind, stop, moved=moved, untried=len(scored) - tried)
                return
            refused = self.filter.refuse(pod, pod.key in self.moving)
            if refused is None and reported is None:
                refused = "usageNotReported", f"its usage is not in NodeMetric {name}"
            if refused is None:
                unreadable = placement_problem(pod)
                if unreadable is not None:
                    refused = "unreadable", unreadable
            if refused is None:
                limited = self.limits.refuse(name, pod.info.namespace)
                if limited is not None:
                    refused = "evictionLimits", limited
            if refused is not None:
                self.kept.append(KeptPod(pod.key, name, pool.pool.name, kind, refused[1], cause=refused[0]))
                continue
            assert reported is not None
            landing = self.destinations.pick(pod, name)
            after, not_cool = self._after(landing, reported, pod.prod)
            if self.args.node_fit and not_cool is not None:
                cause, cool_why = not_cool
                self.kept.append(KeptPod(pod.key, name, pool.pool.name, kind, cool_why, landing, after, cause))
                continue
            reason = overutilized_reason(
                "prod " if prod else "",
                resources=resources,
                usage=used,
                alloc=alloc,
                high=high,
                high_percent=high_percent,
            )
            over = tuple(sorted(resources[i] for i, (u, h) in enumerate(zip(used, high, strict=True)) if u > h))
            self.moves.append(
                PlannedMove(
                    pod.key,
                    pod.info.uid,
                    name,
                    pool.pool.name,
                    kind,
                    reason,
                    reported,
                    pod.prod,
                    landing,
                    after,
                    self.args.node_fit,
                    over,
                )
            )
            moved += 1
            self.limits.count(name, pod.info.namespace)
            self.moving.add(pod.key)
            self._shift(row, reported, pod.prod, -1, True)
            for i, column in enumerate(columns):
                capacity[i] -= 1 if column == PODS else reported[column]
            if landing.node is not None:
                destination = state.row(landing.node)
                if destination is not None:
                    self._shift(destination, reported, pod.prod, +1, True)
                self.destinations.add(pod.info, landing.node)
        self._stop(name, pool, kind, "every pod tried" if scored else "no pod on the node", moved=moved, untried=0)

    def _stop(self, node: str, pool: _Pool, kind: Kind, why: str, *, moved: int, untried: int) -> None:
        self.stops.append(NodeStop(node, pool.pool.name, kind, why, moved, untried))

    def _after(
        self, landing: Landing, usage: tuple[int, int], prod: bool
    ) -> tuple[tuple[ResourceLoad, ...], tuple[str, str] | None]:
        """The pick's resources with the pod on it, and why it would not stay cool as (cause, reason) (None: it
        would)."""
        if landing.node is None:
            refused = ", ".join(f"{count} {reason}" for reason, count in sorted(landing.refusals.items()))
            unfit = "; ".join(f"{node}: {reason}" for node, reason in landing.unfit[:3])
            detail = "; ".join(part for part in (refused, unfit) if part)
            return (), ("noDestination", f"no node the scheduler would place it on ({detail or 'no other node'})")
        state = self.state
        row = state.row(landing.node)
        where = f"the scheduler would place it on {landing.node} (extender score {landing.extender_score})"
        if row is None:
            return (), ("destinationUnknown", f"{where}, a node the descheduler does not know")
        pool_index = int(state.pool[row])
        if pool_index < 0:
            return (), None  # no pool, no thresholds: the descheduler never finds it hot
        pool = self.pools[pool_index]
        position = pool.position.get(row)
        if position is None:
            age = self.age[row]
            what = "no NodeMetric" if math.isnan(age) else f"a NodeMetric {age:.0f}s old"
            return (), ("destinationUnknown", f"{where}, which has {what}: it cannot be judged cool")
        th = pool.thresholds
        checks = [(False, th.high[position], th.high_percent, th.low_percent, self.usage)]
        if prod and pool.pool.has_prod:
            checks.append((True, th.prod_high[position], th.prod_high_percent, th.prod_low_percent, self.prod_usage))
        loads: list[ResourceLoad] = []
        why: tuple[str, str] | None = None
        alloc = state.alloc[row, th.columns]
        for is_prod, high, high_percent, low_percent, working in checks:
            after = working[row, th.columns].copy()
            for i, column in enumerate(th.columns.tolist()):
                after[i] += 1 if column == PODS else usage[column]
            low = (th.prod_low if is_prod else th.low)[position]
            for i, resource in enumerate(th.resources):
                load = ResourceLoad(
                    ("prod " if is_prod else "") + resource,
                    int(after[i]),
                    int(alloc[i]),
                    100.0 * float(after[i]) / float(alloc[i]) if alloc[i] else None,
                    float(low_percent[i]),
                    float(high_percent[i]),
                    "hot" if after[i] > high[i] else "idle" if after[i] <= low[i] else "normal",
                )
                loads.append(load)
                if load.state == "hot" and why is None:
                    percent = "" if load.percent is None else f" ({load.percent:.2f}%)"
                    why = (
                        "destinationHot",
                        f"no destination that stays cool: {where}, where {load.resource} would reach "
                        f"{load.usage}{percent} > its high threshold {load.high:.2f}%",
                    )
        return tuple(loads), why

    def _reports(
        self,
        pool: _Pool,
        *,
        classes: Classes,
        acted: npt.NDArray[np.bool_],
        prod_acted: npt.NDArray[np.bool_],
        usage: I64,
        prod_usage: I64,
        anomalies: Mapping[AnomalyKey, AnomalyState],
    ) -> tuple[NodeReport, ...]:
        """Every node of the pool; ``usage``/``prod_usage``: the fresh nodes' rows as classified (before moves)."""
        state = self.state
        th = pool.thresholds
        out = []
        for row in pool.rows.tolist():
            name = state.name(row)
            position = pool.position.get(row)
            age = self.age[row]
            metric_age = None if math.isnan(age) else float(age)
            schedulable = bool(state.schedulable[row])
            if position is None:
                status: NodeState = "unknown" if metric_age is None or not state.has_status[row] else "stale"
                out.append(NodeReport(name, pool.pool.name, status, schedulable=schedulable, metric_age=metric_age))
                continue
            alloc = state.alloc[row, th.columns]
            resources = _loads(
                th.resources,
                usage=usage[position, th.columns],
                alloc=alloc,
                low=th.low_percent,
                high=th.high_percent,
                under=classes.under[position],
                over=classes.over[position],
            )
            node_state: NodeState = "hot" if classes.hot[position] else "idle" if classes.idle[position] else "normal"
            prod_state: NodeState | None = None
            prod_resources: tuple[ResourceLoad, ...] = ()
            if pool.pool.has_prod:
                prod_resources = _loads(
                    th.resources,
                    usage=prod_usage[position, th.columns],
                    alloc=alloc,
                    low=th.prod_low_percent,
                    high=th.prod_high_percent,
                    under=classes.prod_under[position],
                    over=classes.prod_over[position],
                )
                prod_state = (
                    "hot" if classes.prod_hot[position] else "idle" if classes.prod_idle[position] else "normal"
                )
            out.append(
                NodeReport(
                    name,
                    pool.pool.name,
                    node_state,
                    resources,
                    prod_state,
                    prod_resources,
                    schedulable,
                    metric_age,
                    bool(acted[position]),
                    bool(prod_acted[position]),
                    anomalies.get(("node", name)),
                    anomalies.get(("prod", name)),
                )
            )
        return tuple(out)


def _loads(
    resources: Sequence[str],
    *,
    usage: I64,
    alloc: I64,
    low: npt.NDArray[np.float64],
    high: npt.NDArray[np.float64],
    under: npt.NDArray[np.bool_],
    over: npt.NDArray[np.bool_],
) -> tuple[ResourceLoad, ...]:
    """Per resource, as the classification saw it (before this round's moves off the node)."""
    return tuple(
        ResourceLoad(
            resource,
            int(usage[i]),
            int(alloc[i]),
            100.0 * float(usage[i]) / float(alloc[i]) if alloc[i] else None,
            float(low[i]),
            float(high[i]),
            "hot" if over[i] else "idle" if under[i] else "normal",
        )
        for i, resource in enumerate(resources)
    )


def _capacity(resources: Sequence[str], before: I64, left: I64) -> dict[str, tuple[int, int]]:
    return {r: (int(before[i]), int(left[i])) for i, r in enumerate(resources)}


def plan_round(
    state: BalanceState,
    cluster: ClusterState,
    args: LowNodeLoadArgs,
    migration: MigrationControllerArgs,
    *,
    now: float,
    anomalies: Mapping[AnomalyKey, AnomalyState] | None = None,
    ledger: Iterable[RecentMove] = (),
    migrating: Iterable[str] = (),
    limits: EvictionLimits | None = None,
) -> BalanceRound:
    """One round at ``now`` over ``state`` (the descheduler's view) and ``cluster`` (the extender's view, the same
    objects; the round adds its moves to it and takes them back before it returns). ``anomalies``: the previous
    round's :attr:`BalanceRound.anomalies`; ``ledger``: recent moves (:mod:`.ledger`); ``migrating``: pods
    (``namespace/name``) with an active PodMigrationJob (none is moved again); ``limits``: the per-round limits
    (:mod:`.budget`). With ``paused`` nothing is decided and the anomaly state is kept as given."""
    if args.paused:
        return BalanceRound(now=now, paused=True, dry_run=args.dry_run, anomalies=dict(anomalies or {}))
    ledger = list(ledger)
    return _Round(
        state,
        cluster,
        args,
        migration,
        now=now,
        anomalies=anomalies or {},
        ledger=ledger,
        migrating=migrating,
        limits=limits or EvictionLimits(),
    ).run()
