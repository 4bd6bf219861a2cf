"""``GET /debug/nodes/{name}``: what the load-aware plugin (and, for a node with placed Reservations, the
reservation tracker) sees for one node, for operators.

Not guaranteed: a stable schema. It reads the plugin's arrays and per-node bookkeeping directly and
changes when they do; use it to debug, not to integrate.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from koordpy.scheduler.extender.reservations import ReservationTracker
from koordpy.scheduler.framework.cluster import ClusterState
from koordpy.scheduler.plugins.loadaware.plugin import LoadAwarePlugin

__all__ = ["describe_node"]


def _vector(resources: tuple[str, ...], vec: npt.NDArray[np.int64] | None) -> dict[str, int] | None:
    if vec is None:
        return None
    return {name: int(v) for name, v in zip(resources, vec.tolist(), strict=True)}


def _load_aware(state: ClusterState) -> LoadAwarePlugin | None:
    for plugin in state.plugins:
        if isinstance(plugin, LoadAwarePlugin):
            return plugin
    return None


def describe_node(state: ClusterState, name: str, now: float) -> dict[str, Any] | None:
    """The node's view as a JSON-able dict, or None when the node is unknown."""
    node = state.nodes.get(name)
    index = state.index.get(name)
    if node is None or index is None:
        return None
    out: dict[str, Any] = {
        "name": name,
        "index": index,
        "allocatable": dict(node.allocatable),
        "hasNodeMetric": name in state.metrics,
        "assignedPods": sorted(p.key for p in state.assigned.values() if p.node_name == name),
    }
    tracker = next((p for p in state.plugins if isinstance(p, ReservationTracker)), None)
    if tracker is not None and name in tracker.by_node:
        account = tracker.account(name, now)
        out["reservations"] = {
            "placed": sorted(tracker.by_node[name]),
            "requested": dict(account.requested),
            "validUntil": None if math.isinf(account.valid_until) else account.valid_until,
            "holdings": [
                {
                    "name": h.reservation.name,
                    "phase": h.reservation.phase,
                    "allocatedTo": list(h.owners),
                    "requests": dict(h.reservation.requests),
                    "allocated": dict(h.allocated),
                    "remaining": dict(h.remaining),
                    "consumed": h.consumed,
                }
                for h in account.holdings
            ],
        }
    plugin = _load_aware(state)
    if plugin is None:
        return out
    res = plugin.resources
    load = plugin.loads.get(name)
    profile = plugin.profiles.get(name)
    update = float(plugin.update_time[index])
    metric_seen = bool(plugin.has_metric[index])
    expired = metric_seen and (math.isnan(update) or now - update >= plugin.args.node_metric_expiration_seconds)
    view: dict[str, Any] = {
        "resources": list(res),
        "estimatorAllocatable": _vector(res, plugin.alloc[index]),
        "metric": {
            "present": metric_seen,
            "hasNodeUsage": bool(plugin.has_status[index]),
            "updateTime": None if math.isnan(update) else update,
            "ageSeconds": None if math.isnan(update) else now - update,
            "expired": expired,
            "expirationSeconds": plugin.args.node_metric_expiration_seconds,
        },
        "filter": {
            "base": _vector(res, plugin.np_base[index]),
            "thresholds": _vector(res, plugin.np_thr[index]),
            "aggregated": bool(plugin.np_aggregated[index]),
            "prodBase": _vector(res, plugin.prod_base[index]),
            "prodThresholds": _vector(res, plugin.prod_thr[index]),
            "prodThresholdsEnabled": bool(plugin.prod_enabled[index]),
        },
        "score": {
            "base": _vector(res, plugin.score_np_base[index]),
            "prodBase": _vector(res, plugin.score_prod_base[index]),
        },
        "profile": None
        if profile is None
        else {
            "usageThresholds": dict(profile.usage),
            "prodUsageThresholds": dict(profile.prod),
            "aggregated": None
            if profile.aggregated is None
            else {
                "thresholds": dict(profile.aggregated.thresholds),
                "type": profile.aggregated.aggregation_type,
                "durationSeconds": profile.aggregated.duration,
            },
        },
    }
    if load is not None:
        view["usage"] = {
            "nodeUsage": _vector(res, load.node_usage),
            "nodeDelta": _vector(res, load.node_delta),
            "prodDelta": _vector(res, load.prod_delta),
            "nodeEstimated": _vector(res, load.node_estimated),
            "prodUsage": _vector(res, load.prod_usage),
            "reportIntervalSeconds": load.report_interval,
        }
        view["pods"] = [_pod_view(res, a.pod.key, a, load.reported_usage(a.key)) for a in load.pods.values()]
    out["loadAware"] = view
    return out


def _pod_view(res: tuple[str, ...], key: str, assigned: Any, usage: Any) -> dict[str, Any]:
    return {
        "pod": key,
        "uid": assigned.pod.uid,
        "assignedAt": assigned.timestamp,
        "estimated": _vector(res, assigned.estimated),
        "estimateDeadline": assigned.deadline,
        "reportedUsage": _vector(res, usage),
        "prod": assigned.prod,
    }
