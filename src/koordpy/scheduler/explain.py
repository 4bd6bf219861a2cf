"""``koordpy scheduler explain``: why would this pod go where, from a dump of real objects.

Models the kube-scheduler the extender sits behind: first the in-tree filters that decide most
pending pods (``koordpy.scheduler.framework.fit``: NodeUnschedulable, NodeName, TaintToleration,
NodeAffinity, NodeResourcesFit on the requests of the assigned, non-terminated pods), then, on
the nodes that pass, the very ``ClusterState`` + plugins the extender runs. The load-aware verdict
is also shown for nodes that fail the fit (``loadAware``), but ``failures`` lists only what
kube-scheduler would report (the in-tree failure, else the extender's), and only nodes that pass
both are feasible.

A pod kube-scheduler would not schedule (already bound, another ``schedulerName``, terminated,
being deleted) gets ``schedulable: false`` and a note; it is still evaluated as if it were pending
(its own ``spec.nodeName`` is ignored) and the result is in ``wouldSelect``, while ``selected`` is
null. Every other non-terminated pod with ``spec.nodeName`` is assigned to that node.

Output (``-o json``; keys beyond the first line are additions, the first keys never change)::

    {"pod": "ns/name",
     "nodes": [{"name", "feasible", "failures": [{"plugin", "reason", "unresolvable", "detail"}],
                "scores": {"LoadAwareScheduling": 0..100}, "extenderScore": 0..10,
                "fit": {"feasible", "plugin", "reason", "detail"},
                "loadAware": {"verdict": "pass"|"fail"|"no NodeMetric"|..., "detail", "resources": [...]}}],
     "selected": "node" | null,
     "schedulable": bool, "notes": [str], "boundTo": "node" | null, "wouldSelect": "node" | null,
     "now": RFC 3339, "nowFrom": "--now" | "dump",
     "gang": null | {"id", "groupId", "admit": {"ok", "reason"}, "permit": {"verdict", "reason"}}}

and per node ``"reservation": {"verdict": "none"|"pass"|"fail"|"owner", "detail", "preferred",
"holdings": [{"name", "phase", "owner", "allocatedTo", "requests", "allocated", "remaining"}]}``.

``reservation`` is the Reservations' verdict (``koordpy.scheduler.plugins.reservation.enforcement``, the
same code as the extender) from the dump's Reservations placed on the node and its assigned pods:
``none`` (nothing held there), ``owner`` (the pod owns every holding there), ``pass`` or ``fail`` with
the numbers in ``detail``. As in the extender it is a failure only on nodes that pass the fit and the
load-aware filter. ``preferred``: the pod owns an Available, not consumed reservation there, so its
``extenderScore`` is 10 (the maximum) and ``selected`` prefers it.

``gang`` is the pod's gang verdict from the gang model (``koordpy.scheduler.plugins.gang``, the same
code as ``koordpy scheduler gangs`` and the extender's barrier) on the dump's pods and PodGroups: null
for a pod in no gang; ``admit`` is the quorum check (a bound or held member is admitted).

Nodes are in input order; ``scores`` is empty for infeasible nodes; ``selected`` is the
feasible node with the highest extender score, then the highest summed plugin score (ties: first in
input order); without a preferred node that is the highest summed plugin score.

Not guaranteed: only the in-tree filters listed above are modelled (no ports, volumes, topology
spread, inter-pod affinity, preemption), and kube-scheduler's own score plugins are not added to
the extender's score. For a bound pod evaluated as if pending, its own measured usage stays in its
node's NodeMetric (its requests do not count there).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from koordpy.config.scheduler import SchedulerConfiguration
from koordpy.model.dumps import DumpError, newest_timestamp, sort_dump
from koordpy.model.durations import format_rfc3339, human_duration
from koordpy.model.objects import (
    NodeInfo,
    NodeMetricInfo,
    ObjectError,
    PodInfo,
    node_from_dict,
    nodemetric_from_dict,
    pod_from_dict,
)
from koordpy.model.placement import placement_from_dict
from koordpy.scheduler.framework.cluster import ClusterState
from koordpy.scheduler.framework.fit import RequestsTable, filter_node, format_amount
from koordpy.scheduler.framework.status import Status
from koordpy.scheduler.plugins.gang.offline import GangReportError, gang_report
from koordpy.scheduler.plugins.loadaware.plugin import LoadAwarePlugin, LoadDetail
from koordpy.scheduler.plugins.reservation.enforcement import (
    OWNER_SCORE,
    NodeReservations,
    node_reservations,
    node_verdict,
    owner_prefers,
)
from koordpy.scheduler.plugins.reservation.spec import ReservationInfo, is_owner, reservation_from_dict
from koordpy.scheduler.profile import build_plugins

__all__ = ["ExplainError", "NoInstantError", "explain"]

KINDS = ("Node", "Pod", "NodeMetric", "PodGroup", "Reservation")
_MALFORMED = (ValueError, TypeError, AttributeError, KeyError, ArithmeticError)


class ExplainError(ValueError):
    """Bad input: names the source and the field."""


class NoInstantError(ExplainError):
    """``now`` was None and the input carries no timestamp."""


def explain(
    documents: Iterable[tuple[str, Any]],
    pod_key: str,
    config: SchedulerConfiguration,
    now: float | None,
    *,
    in_tree: bool = True,
) -> tuple[dict[str, Any], dict[str, int]]:
    """Return the explanation and the count of ignored objects by kind.

    ``now`` None: the newest timestamp in the input (``koordpy.model.dumps.newest_timestamp``); ``nowFrom`` says which.
    ``in_tree`` False skips kube-scheduler's filters (the extender's plugins alone).
    """
    namespace, sep, name = pod_key.partition("/")
    if not sep or not namespace or not name:
        raise ExplainError(f"--pod: expected NAMESPACE/NAME, got {pod_key!r}")
    try:
        dump = sort_dump(documents, KINDS)
    except DumpError as exc:
        raise ExplainError(str(exc)) from None

    def convert(kind: str, conv: Any) -> list[tuple[Any, Mapping[str, Any]]]:
        out = []
        for where, obj in dump.of(kind):
            try:
                out.append((conv(obj), obj))
            except ObjectError as exc:
                raise ExplainError(f"{where}: {kind} {_name(obj)}: {exc}") from None
            except _MALFORMED as exc:  # a shape the converter does not name a field for
                raise ExplainError(f"{where}: {kind} {_name(obj)}: {type(exc).__name__}: {exc}") from None
        return out

    node_pairs = convert("Node", node_from_dict)
    nodes: list[NodeInfo] = [n for n, _ in node_pairs]
    pod_pairs: list[tuple[PodInfo, Mapping[str, Any]]] = convert("Pod", pod_from_dict)
    metrics: list[NodeMetricInfo] = [m for m, _ in convert("NodeMetric", nodemetric_from_dict)]
    reservations: list[ReservationInfo] = [r for r, _ in convert("Reservation", reservation_from_dict)]
    found = next(((p, raw) for p, raw in pod_pairs if p.namespace == namespace and p.name == name), None)
    if found is None:
        raise ExplainError(f"--pod: pod {pod_key} is not in the input")
    original, raw_target = found
    try:
        placement = dataclasses.replace(placement_from_dict(raw_target), node_name="")
    except ObjectError as exc:
        raise ExplainError(f"--pod: pod {pod_key}: {exc}") from None
    target = dataclasses.replace(original, node_name="")
    pods = [p for p, _ in pod_pairs]

    now_from = "--now"
    if now is None:
        now = newest_timestamp(pair for kind in KINDS for pair in dump.of(kind))
        now_from = "dump"
        if now is None:
            raise NoInstantError("--now: the input carries no timestamp to evaluate at; pass --now")

    plugins = build_plugins(config)
    state = ClusterState(plugins)
    for (where, _), node in zip(dump.of("Node"), nodes, strict=True):
        _apply(where, f"Node {node.name}", functools.partial(state.upsert_node, node))
    others: list[PodInfo] = []
    for (where, _), pod in zip(dump.of("Pod"), pods, strict=True):
        if pod.uid != target.uid and not (pod.namespace == namespace and pod.name == name):
            others.append(pod)
            _apply(where, f"Pod {pod.name}", functools.partial(state.upsert_pod, pod, now))
    for (where, _), metric in zip(dump.of("NodeMetric"), metrics, strict=True):
        _apply(where, f"NodeMetric {metric.name}", functools.partial(state.upsert_metric, metric))

    names = [n.name for n in nodes]
    accounts = _accounts(reservations, others, now)
    loadaware = next((p for p in plugins if isinstance(p, LoadAwarePlugin)), None)
    metric_names = {m.name for m in metrics}
    try:
        fit_status = _fit(nodes, others, target, placement) if in_tree else {}
        filtered = state.filter(target, names, now)
        reserved = {n.name: node_verdict(target, n.allocatable, accounts[n.name]) for n in nodes if n.name in accounts}
        feasible = [
            n
            for n in names
            if n not in filtered.statuses and fit_status.get(n, _OK).is_success and reserved.get(n, _OK).is_success
        ]
        scored = state.score(target, feasible, now) if feasible else None
    except _MALFORMED as exc:
        raise ExplainError(
            f"--pod {pod_key}: cannot be evaluated against the dump: {type(exc).__name__}: {exc}"
        ) from None
    by_name: dict[str, int] = {}
    if scored is not None:
        by_name = {n: i for i, n in enumerate(scored.names)}
    rows: list[dict[str, Any]] = []
    best: tuple[int, int, str] | None = None
    for node_name in names:
        status = filtered.statuses.get(node_name)
        fit = fit_status.get(node_name, _OK)
        row: dict[str, Any] = {
            "name": node_name,
            "feasible": node_name in by_name,
            "failures": [],
            "scores": {},
            "extenderScore": 0,
        }
        if not fit.is_success:
            row["failures"].append(_failure(fit))
        load = _load_aware(
            loadaware, state, target, node_name, now, status=status, has_metric=node_name in metric_names
        )
        if status is not None and fit.is_success:  # kube-scheduler asks the extender only about fitting nodes
            failure = _failure(status)
            if status.plugin == getattr(loadaware, "name", None) and load["detail"]:
                failure["detail"] = f"{status.reason}: {load['detail']}"
            row["failures"].append(failure)
        verdict = reserved.get(node_name, _OK)
        if status is None and fit.is_success and not verdict.is_success:  # the extender checks after its plugins
            row["failures"].append(_failure(verdict))
        row["fit"] = {
            "feasible": fit.is_success,
            "plugin": fit.plugin if not fit.is_success else "",
            "reason": fit.reason,
            "detail": fit.detail,
        }
        if not in_tree:
            row["fit"]["skipped"] = True
        row["loadAware"] = load
        row["reservation"] = _reservation_row(target, accounts.get(node_name), verdict)
        if scored is not None and node_name in by_name:
            pos = by_name[node_name]
            row["scores"] = {plugin: int(values[pos]) for plugin, values in scored.per_plugin.items()}
            row["extenderScore"] = OWNER_SCORE if row["reservation"]["preferred"] else int(scored.extender[pos])
            total = int(scored.total[pos])
            if best is None or (row["extenderScore"], total) > best[:2]:
                best = (row["extenderScore"], total, node_name)
        rows.append(row)
    notes = _pod_notes(original, config.extender.scheduler_name)
    schedulable = not notes
    would = best[2] if best else None
    result = {
        "pod": f"{namespace}/{name}",
        "nodes": rows,
        "selected": would if schedulable else None,
        "schedulable": schedulable,
        "notes": notes,
        "boundTo": original.node_name or None,
        "wouldSelect": would,
        "now": format_rfc3339(now),
        "nowFrom": now_from,
        "gang": _gang(dump, config, now, f"{namespace}/{name}"),
    }
    return result, dump.ignored


def _gang(dump: Any, config: SchedulerConfiguration, now: float, pod_key: str) -> dict[str, Any] | None:
    """The pod's gang verdict (see the module docstring), or None for a pod in no gang."""
    pairs = [pair for kind in ("PodGroup", "Pod") for pair in dump.of(kind)]
    try:
        report, _ = gang_report(pairs, config.gang, now)
    except GangReportError as exc:
        raise ExplainError(str(exc)) from None
    for gang in report["gangs"]:
        if pod_key in gang["children"]:
            admit = gang["admit"].get(pod_key) or {"ok": True, "reason": f"{pod_key} is bound or held"}
            return {"id": gang["id"], "groupId": gang["groupId"], "admit": admit, "permit": gang["permit"]}
    return None


_OK = Status()


def _accounts(reservations: list[ReservationInfo], assigned: list[PodInfo], now: float) -> dict[str, NodeReservations]:
    """Node name -> its reservation account, for the nodes some Reservation is placed on."""
    placed = {r.node_name for r in reservations if r.node_name}
    pods: dict[str, list[PodInfo]] = {}
    for pod in assigned:
        if pod.node_name in placed and not pod.terminated:
            pods.setdefault(pod.node_name, []).append(pod)
    return {node: node_reservations(node, reservations, pods.get(node, []), now) for node in sorted(placed)}


def _amounts(resources: Mapping[str, int]) -> dict[str, str]:
    return {name: format_amount(name, amount) for name, amount in sorted(resources.items())}


def _reservation_row(pod: PodInfo, account: NodeReservations | None, verdict: Status) -> dict[str, Any]:
    holdings = account.holdings if account is not None else ()
    owned = [is_owner(h.reservation, pod) for h in holdings]
    if not holdings:
        kind = "none"
    elif not verdict.is_success:
        kind = "fail"
    else:
        kind = "owner" if all(owned) else "pass"
    return {
        "verdict": kind,
        "detail": verdict.detail if not verdict.is_success else "",
        "preferred": owner_prefers(pod, holdings),
        "holdings": [
            {
                "name": h.reservation.name,
                "phase": h.reservation.phase,
                "owner": mine,
                "allocatedTo": list(h.owners),
                "requests": _amounts(h.reservation.requests),
                "allocated": _amounts(h.allocated),
                "remaining": _amounts(h.remaining),
            }
            for h, mine in zip(holdings, owned, strict=True)
        ],
    }


def _failure(status: Status) -> dict[str, Any]:
    return {
        "plugin": status.plugin,
        "reason": status.reason,
        "unresolvable": status.unresolvable,
        "detail": status.detail or status.reason,
    }


def _fit(nodes: list[NodeInfo], others: list[PodInfo], target: PodInfo, placement: Any) -> dict[str, Status]:
    """kube-scheduler's in-tree verdict per node name."""
    table = RequestsTable.of_nodes(nodes, target.requests)
    row_of = {n.name: i for i, n in enumerate(nodes)}
    for pod in others:
        row = row_of.get(pod.node_name)
        if row is None or pod.terminated:
            continue
        known = {r: v for r, v in pod.requests.items() if r in table.position}
        table.bind(row, table.vector(known))
    vec = table.vector(target.requests)
    return {node.name: filter_node(placement, node, table, row_of[node.name], vec) for node in nodes}


def _pod_notes(pod: PodInfo, scheduler_name: str) -> list[str]:
    """Why kube-scheduler (with the extender) would not schedule this pod at all."""
    notes = []
    if pod.terminated:
        notes.append(f"pod is terminated (phase {pod.phase}): kube-scheduler does not schedule it")
    if pod.deletion_time is not None:
        notes.append(
            f"pod is being deleted (deletionTimestamp {format_rfc3339(pod.deletion_time)}): "
            "kube-scheduler does not schedule it"
        )
    if pod.node_name:
        notes.append(
            f"pod is already bound to {pod.node_name} (phase {pod.phase}): kube-scheduler does not schedule it again"
        )
    if pod.scheduler_name != scheduler_name:
        notes.append(
            f"pod has spec.schedulerName {pod.scheduler_name}, not {scheduler_name}: "
            "another scheduler places it and the extender is never asked"
        )
    return notes


def _load_aware(
    plugin: LoadAwarePlugin | None,
    state: ClusterState,
    pod: PodInfo,
    node: str,
    now: float,
    *,
    status: Status | None,
    has_metric: bool,
) -> dict[str, Any]:
    verdict = "pass" if status is None else "fail"
    out: dict[str, Any] = {"verdict": verdict, "detail": ""}
    if status is not None and plugin is None:
        out["detail"] = status.detail or status.reason
    if plugin is None:
        return out
    index = int(state.index.lookup([node])[0])
    detail = plugin.detail(pod, index, now)
    out["detail"] = _describe_load(detail, status, plugin.args.node_metric_expiration_seconds, has_metric)
    out["resources"] = [
        {
            "resource": r.resource,
            "usage": r.usage,
            "estimate": r.estimate,
            "allocatable": r.allocatable,
            "percent": r.percent,
            "threshold": r.threshold,
        }
        for r in detail.resources
    ]
    if not has_metric:
        out["verdict"] = "no NodeMetric" if status is None else verdict
    elif detail.expired and status is None:
        out["verdict"] = "pass (metric expired)"
    return out


def _describe_load(detail: LoadDetail, status: Status | None, expiration: float, has_metric: bool) -> str:
    if not has_metric or not detail.has_metric:
        return "no NodeMetric for this node: load-aware filtering passes and its score is 0"
    age = "updateTime unset" if detail.age is None else f"updated {_seconds(detail.age)} ago"
    if detail.expired:
        text = f"NodeMetric expired ({age}, expiration {_seconds(expiration)})"
        return text if status is not None else text + ": not checked, score 0"
    if not detail.has_status:
        return f"NodeMetric has no status.nodeMetric ({age}): passes, score 0"
    kind = "prod usage" if detail.prod else "aggregated usage" if detail.aggregated else "usage"
    checked = [r for r in detail.resources if r.threshold > 0 and r.percent is not None]
    over = [r for r in checked if r.over]
    if status is not None and over:
        return "; ".join(
            f"{r.resource} {kind} {r.percent}% ({kind} {format_amount(r.resource, r.usage)} + estimate "
            f"{format_amount(r.resource, r.estimate)} of {format_amount(r.resource, r.allocatable)}) "
            f"> threshold {r.threshold}%"
            for r in over
        )
    return ", ".join(f"{r.resource} {r.percent}% <= {r.threshold}%" for r in checked) or "no threshold set"


def _seconds(value: float) -> str:
    """As kubectl prints ages (``40m``, ``6d1h``; see :func:`koordpy.model.durations.human_duration`)."""
    return human_duration(value)


def _apply(where: str, what: str, step: Callable[[], object]) -> None:
    """Run one cluster-state update; a value the state cannot hold names its object."""
    try:
        step()
    except _MALFORMED as exc:
        raise ExplainError(f"{where}: {what}: cannot be used: {type(exc).__name__}: {exc}") from None


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    if isinstance(meta, Mapping):
        return str(meta.get("name") or "<unnamed>")
    return "<unnamed>"
