"""``koordpy scheduler explain``: why would this pod go where, from a dump of real objects.

Runs the very ``ClusterState`` + plugins the extender runs. The named pod is the one being
placed (its own ``spec.nodeName`` is ignored); every other non-terminated pod with
``spec.nodeName`` is assigned to that node.

Output (``-o json``)::

    {"pod": "ns/name",
     "nodes": [{"name", "feasible", "failures": [{"plugin", "reason", "unresolvable"}],
                "scores": {"LoadAwareScheduling": 0..100}, "extenderScore": 0..10}],
     "selected": "node" | null}

Nodes are in input order; ``scores`` is empty for infeasible nodes; ``selected`` is the
feasible node with the highest summed plugin score (ties: first in input order).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from koordpy.config.scheduler import SchedulerConfiguration
from koordpy.model.dumps import DumpError, sort_dump
from koordpy.model.objects import ObjectError, node_from_dict, nodemetric_from_dict, pod_from_dict
from koordpy.scheduler.framework.cluster import ClusterState
from koordpy.scheduler.profile import build_plugins

__all__ = ["ExplainError", "explain"]

KINDS = ("Node", "Pod", "NodeMetric")
_MALFORMED = (ValueError, TypeError, AttributeError, KeyError, ArithmeticError)


class ExplainError(ValueError):
    """Bad input: names the source and the field."""


def explain(
    documents: Iterable[tuple[str, Any]],
    pod_key: str,
    config: SchedulerConfiguration,
    now: float,
) -> tuple[dict[str, Any], dict[str, int]]:
    """Return the explanation and the count of ignored objects by kind."""
    namespace, sep, name = pod_key.partition("/")
    if not sep or not namespace or not name:
        raise ExplainError(f"--pod: expected NAMESPACE/NAME, got {pod_key!r}")
    try:
        dump = sort_dump(documents, KINDS)
    except DumpError as exc:
        raise ExplainError(str(exc)) from None

    def convert(kind: str, conv: Any) -> list[Any]:
        out = []
        for where, obj in dump.of(kind):
            try:
                out.append(conv(obj))
            except ObjectError as exc:
                raise ExplainError(f"{where}: {kind} {_name(obj)}: {exc}") from None
            except _MALFORMED as exc:  # a shape the converter does not name a field for
                raise ExplainError(f"{where}: {kind} {_name(obj)}: {type(exc).__name__}: {exc}") from None
        return out

    nodes = convert("Node", node_from_dict)
    pods = convert("Pod", pod_from_dict)
    metrics = convert("NodeMetric", nodemetric_from_dict)
    target = next((p for p in pods if p.namespace == namespace and p.name == name), None)
    if target is None:
        raise ExplainError(f"--pod: pod {pod_key} is not in the input")
    target = dataclasses.replace(target, node_name="")

    state = ClusterState(build_plugins(config))
    for (where, _), node in zip(dump.of("Node"), nodes, strict=True):
        _apply(where, f"Node {node.name}", functools.partial(state.upsert_node, node))
    for (where, _), pod in zip(dump.of("Pod"), pods, strict=True):
        if pod.uid != target.uid and not (pod.namespace == namespace and pod.name == name):
            _apply(where, f"Pod {pod.name}", functools.partial(state.upsert_pod, pod, now))
    for (where, _), metric in zip(dump.of("NodeMetric"), metrics, strict=True):
        _apply(where, f"NodeMetric {metric.name}", functools.partial(state.upsert_metric, metric))

    names = [n.name for n in nodes]
    try:
        filtered = state.filter(target, names, now)
        feasible = [n for n in names if n not in filtered.statuses]
        scored = state.score(target, feasible, now) if feasible else None
    except _MALFORMED as exc:
        raise ExplainError(
            f"--pod {pod_key}: cannot be evaluated against the dump: {type(exc).__name__}: {exc}"
        ) from None
    by_name: dict[str, int] = {}
    if scored is not None:
        by_name = {n: i for i, n in enumerate(scored.names)}
    rows: list[dict[str, Any]] = []
    best: tuple[int, str] | None = None
    for node_name in names:
        status = filtered.statuses.get(node_name)
        row: dict[str, Any] = {
            "name": node_name,
            "feasible": status is None,
            "failures": [],
            "scores": {},
            "extenderScore": 0,
        }
        if status is not None:
            row["failures"].append(
                {"plugin": status.plugin, "reason": status.reason, "unresolvable": status.unresolvable}
            )
        elif scored is not None:
            pos = by_name[node_name]
            row["scores"] = {plugin: int(values[pos]) for plugin, values in scored.per_plugin.items()}
            row["extenderScore"] = int(scored.extender[pos])
            total = int(scored.total[pos])
            if best is None or total > best[0]:
                best = (total, node_name)
        rows.append(row)
    result = {"pod": f"{namespace}/{name}", "nodes": rows, "selected": best[1] if best else None}
    return result, dump.ignored


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
