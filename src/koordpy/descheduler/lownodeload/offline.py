"""``koordpy descheduler balance``: one balance round on a dump (or a cluster read once), as the report it prints.

Reads Nodes, Pods, NodeMetrics, PodMigrationJobs and the pods' controllers (Deployments, ReplicaSets,
StatefulSets, ReplicationControllers, Jobs, DaemonSets, CronJobs: the arbitration's ``ExpectedReplicas`` guard reads
their replica counts); other kinds are counted as ignored. Builds the descheduler's view and the extender's view of
them (as the manager keeps both), and runs :func:`.balance.plan_round` at ``now``.

The PodMigrationJobs that are not finished (Pending, Running) are the recent moves: their pods are already moving
(never moved again), and their usage leaves their node and, with ``status.nodeName`` (or the job's
``koordpy.io/expected-destination`` annotation), counts on the destination, until NodeMetrics newer than the job
show them (:mod:`.ledger`).

A single round has no history: unless ``fresh``, every node is taken to have been hot for its pool's
``consecutiveAbnormalities`` rounds already, so a hot node acts in this round (as it would in the round after that
many); ``fresh`` starts every detector empty (as a manager that just started: nothing acts until the condition
holds).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from koordpy.config.lownodeload import LowNodeLoadArgs
from koordpy.config.migration import MigrationControllerArgs
from koordpy.config.scheduler import SchedulerConfiguration
from koordpy.descheduler.lownodeload.anomaly import AnomalyState
from koordpy.descheduler.lownodeload.balance import plan_round
from koordpy.descheduler.lownodeload.budget import EvictionLimits
from koordpy.descheduler.lownodeload.ledger import RecentMove
from koordpy.descheduler.lownodeload.manifest import ANNOTATION_EXPECTED_DESTINATION, ANNOTATION_SOURCE_NODE
from koordpy.descheduler.lownodeload.result import AnomalyKey, BalanceRound, Kind
from koordpy.descheduler.lownodeload.state import BalancePod, BalanceState
from koordpy.descheduler.objects import MigrationObjectError, job_from_dict, workload_from_dict
from koordpy.model.dumps import DumpError, sort_dump
from koordpy.model.objects import ObjectError, node_from_dict, nodemetric_from_dict, pod_from_dict
from koordpy.scheduler.framework.cluster import ClusterState
from koordpy.scheduler.profile import build_plugins

__all__ = ["KINDS", "WORKLOAD_KINDS", "BalanceReportError", "balance_report", "history", "recent_move"]

WORKLOAD_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "ReplicationController", "Job", "DaemonSet", "CronJob")
KINDS = ("Node", "Pod", "NodeMetric", "PodMigrationJob", *WORKLOAD_KINDS)
_MALFORMED = (ValueError, TypeError, AttributeError, KeyError, ArithmeticError)


class BalanceReportError(ValueError):
    """Bad input: names the source and the field."""


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return "<unnamed>"
    name = str(meta.get("name") or "<unnamed>")
    namespace = meta.get("namespace")
    return f"{namespace}/{name}" if namespace else name


def history(state: BalanceState, args: LowNodeLoadArgs, now: float, interval: float) -> dict[AnomalyKey, AnomalyState]:
    """Anomaly states as if every node of a pool had been hot (node and Prod usage) for its pool's
    ``consecutiveAbnormalities`` rounds, ``interval`` seconds apart, the last one before ``now``."""
    out: dict[AnomalyKey, AnomalyState] = {}
    for name in state.nodes:
        row = state.row(name)
        index = int(state.pool[row]) if row is not None else -1
        if index < 0:
            continue
        rounds = args.pools[index].anomaly.consecutive_abnormalities
        kinds: tuple[Kind, ...] = ("node", "prod")
        for kind in kinds:
            out[(kind, name)] = AnomalyState(None, rounds, 0, now - interval)
    return out


def balance_report(
    documents: Iterable[tuple[str, Any]],
    *,
    args: LowNodeLoadArgs,
    migration: MigrationControllerArgs,
    scheduler: SchedulerConfiguration,
    now: float,
    interval: float = 10.0,
    limits: EvictionLimits | None = None,
    fresh: bool = False,
) -> tuple[BalanceRound, dict[str, int]]:
    """The round and the count of ignored objects by kind."""
    try:
        dump = sort_dump(documents, KINDS)
    except DumpError as exc:
        raise BalanceReportError(str(exc)) from None
    state = BalanceState(args)
    cluster = ClusterState(build_plugins(scheduler))

    def convert(kind: str, where: str, obj: Mapping[str, Any], conv: Any) -> Any:
        try:
            return conv(obj)
        except (ObjectError, MigrationObjectError) as exc:
            raise BalanceReportError(f"{where}: {kind} {_name(obj)}: {exc}") from None
        except _MALFORMED as exc:
            raise BalanceReportError(f"{where}: {kind} {_name(obj)}: {type(exc).__name__}: {exc}") from None

    for where, obj in dump.of("Node"):
        node = convert("Node", where, obj, node_from_dict)
        state.upsert_node(node)
        cluster.upsert_node(node)
    pods: dict[str, BalancePod] = {}
    for where, obj in dump.of("Pod"):
        info = convert("Pod", where, obj, pod_from_dict)
        pod = BalancePod(info, obj)
        pods[pod.key] = pod
        state.upsert_pod(pod)
        cluster.upsert_pod(info, now)
    for where, obj in dump.of("NodeMetric"):
        metric = convert("NodeMetric", where, obj, nodemetric_from_dict)
        state.upsert_metric(metric)
        cluster.upsert_metric(metric)
    for kind in WORKLOAD_KINDS:
        for where, obj in dump.of(kind):
            state.upsert_workload(convert(kind, where, obj, workload_from_dict))
    migrating: set[str] = set()
    ledger: list[RecentMove] = []
    for where, obj in dump.of("PodMigrationJob"):
        job = convert("PodMigrationJob", where, obj, job_from_dict)
        if job.phase not in ("", "Pending", "Running"):
            continue
        migrating.add(job.pod_key)
        moved = recent_move(job.pod_key, job.creation_time, obj, pods, state)
        if moved is not None:
            ledger.append(moved)
    anomalies = {} if fresh else history(state, args, now, interval)
    try:
        result = plan_round(
            state,
            cluster,
            args,
            migration,
            now=now,
            anomalies=anomalies,
            ledger=ledger,
            migrating=migrating,
            limits=limits,
        )
    except _MALFORMED as exc:  # a shape the converters let through
        raise BalanceReportError(f"cannot evaluate the dump: {type(exc).__name__}: {exc}") from None
    return result, dict(dump.ignored)


def recent_move(
    key: str, created: float, job: Mapping[str, Any], pods: Mapping[str, BalancePod], state: BalanceState
) -> RecentMove | None:
    """The ledger entry of an unfinished job (of pod ``key``, created at ``created``): its pod's node (or the node
    the job names, ``koordpy.io/source-node``), its destination (``status.nodeName``, else the job's
    ``koordpy.io/expected-destination``) and the pod's usage in its node's NodeMetric (0 when not reported). None
    when the source is not known. A manager that starts takes its ledger from these, as this tool does."""
    meta = job.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    if not isinstance(annotations, Mapping):
        annotations = {}
    status = job.get("status")
    if not isinstance(status, Mapping):
        status = {}
    pod = pods.get(key)
    source = pod.info.node_name if pod is not None else str(annotations.get(ANNOTATION_SOURCE_NODE) or "")
    if not source:
        return None
    destination = str(status.get("nodeName") or annotations.get(ANNOTATION_EXPECTED_DESTINATION) or "") or None
    usage = state.pod_usage(source, key) or (0, 0)
    return RecentMove(key, source, destination, created, usage[0], usage[1], pod.prod if pod is not None else False)
