"""Watch events -> ``ClusterState``: the only place the extender turns API objects into cluster changes.

Each resource has a handler ``(event_type, raw)`` matching what ``koordpy.kube.reflector.Reflector``
calls with ``ADDED``/``MODIFIED``/``DELETED``. A single object that cannot be converted is logged,
counted and handed to ``on_rejected`` (the extender turns that into a Warning Event about the object)
and the watch carries on; it never raises into the reflector.

Besides the cluster state this keeps the *pending* pods (no ``spec.nodeName``, not terminated), so a
bind can record the pod's estimate at once even when this process did not see the filter call.

Not guaranteed: thread safety (call from the event loop only); that ``DELETED`` of an object that
failed conversion is noticed (it was never added).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from koordpy.model.clock import Clock
from koordpy.model.objects import PodInfo, node_from_dict, nodemetric_from_dict, pod_from_dict
from koordpy.scheduler.framework.cluster import ClusterState

__all__ = ["RESOURCES", "ClusterCache", "EventHandler"]

EventHandler = Callable[[str, Mapping[str, Any]], None]
RESOURCES = ("nodes", "pods", "nodemetrics")
_APPLIED = frozenset({"ADDED", "MODIFIED", "DELETED"})


class ClusterCache:
    """Feeds a ``ClusterState`` from watch events, with an injected clock for assignment times."""

    def __init__(
        self,
        state: ClusterState,
        clock: Clock,
        log: Any = None,
        on_rejected: Callable[[str, str, Mapping[str, Any], Exception], None] | None = None,
    ) -> None:
        self.state = state
        self.clock = clock
        self.log = log
        self.on_rejected = on_rejected
        """Called with (resource, event type, raw, error) for each object that could not be converted."""
        self.pending: dict[str, PodInfo] = {}
        """uid -> pod without a node (and not terminated), as last seen by the watch."""
        self.conversion_errors: Counter[str] = Counter()
        """resource -> objects that could not be converted."""
        self.events: Counter[tuple[str, str]] = Counter()
        """(resource, event type) -> events applied."""

    def handler(self, resource: str) -> EventHandler:
        """The ``(event_type, raw)`` callback for one of ``RESOURCES``."""
        handlers: dict[str, EventHandler] = {
            "nodes": self.on_node,
            "pods": self.on_pod,
            "nodemetrics": self.on_nodemetric,
        }
        return handlers[resource]

    # ---- handlers ----------------------------------------------------------------------

    def on_node(self, event_type: str, raw: Mapping[str, Any]) -> None:
        if event_type not in _APPLIED:
            return
        try:
            node = node_from_dict(raw)
        except Exception as exc:
            self._conversion_error("nodes", event_type, raw, exc)
            return
        if event_type == "DELETED":
            self.state.remove_node(node.name)
        else:
            self.state.upsert_node(node)
        self.events["nodes", event_type] += 1

    def on_nodemetric(self, event_type: str, raw: Mapping[str, Any]) -> None:
        if event_type not in _APPLIED:
            return
        try:
            metric = nodemetric_from_dict(raw)
        except Exception as exc:
            self._conversion_error("nodemetrics", event_type, raw, exc)
            return
        if event_type == "DELETED":
            self.state.remove_metric(metric.name)
        else:
            self.state.upsert_metric(metric)
        self.events["nodemetrics", event_type] += 1

    def on_pod(self, event_type: str, raw: Mapping[str, Any]) -> None:
        if event_type not in _APPLIED:
            return
        try:
            pod = pod_from_dict(raw)
        except Exception as exc:
            self._conversion_error("pods", event_type, raw, exc)
            return
        self.apply_pod(event_type, pod)

    def apply_pod(self, event_type: str, pod: PodInfo) -> None:
        """Apply an already converted pod event."""
        if event_type == "DELETED":
            self.pending.pop(pod.uid, None)
            self.state.remove_pod(pod.uid)
        else:
            if pod.node_name or pod.terminated:
                self.pending.pop(pod.uid, None)
            else:
                self.pending[pod.uid] = pod
            self.state.upsert_pod(pod, self.clock.now())
        self.events["pods", event_type] += 1

    # ---- views -------------------------------------------------------------------------

    def sizes(self) -> dict[str, int]:
        return {
            "nodes": len(self.state.nodes),
            "assigned_pods": len(self.state.assigned),
            "pending_pods": len(self.pending),
            "nodemetrics": len(self.state.metrics),
        }

    def _conversion_error(self, resource: str, event_type: str, raw: Mapping[str, Any], exc: Exception) -> None:
        self.conversion_errors[resource] += 1
        if self.on_rejected is not None:
            self.on_rejected(resource, event_type, raw, exc)
        if self.log is not None:
            self.log.warning(
                "watch.object_skipped",
                resource=resource,
                object=_object_name(raw),
                error=f"{type(exc).__name__}: {exc}",
            )


def _object_name(raw: object) -> str:
    """``namespace/name`` for a log line, best effort on a malformed object."""
    meta = raw.get("metadata") if isinstance(raw, Mapping) else None
    if not isinstance(meta, Mapping):
        return "<unknown>"
    name = meta.get("name")
    namespace = meta.get("namespace")
    return f"{namespace}/{name}" if namespace else str(name)
