"""Watch events -> ``ClusterState``: the only place the extender turns API objects into cluster changes.

Each resource has a handler ``(event_type, raw)`` matching what ``koordpy.kube.reflector.Reflector``
calls with ``ADDED``/``MODIFIED``/``DELETED``. A single object that cannot be converted is logged
and counted and the watch carries on; it never raises into the reflector. A Node or NodeMetric that
cannot be converted but names its node is not ignored: the node is marked invalid in the cluster
state (filtered, score 0: its allocatable or usage is unknown), listed in ``invalid`` and handed to
``report`` (the server turns that into a Warning Event on the Node) once each time it turns unreadable
(alternating bad contents do not flood the Events; the log line has every one). Any other object that
cannot be converted (a pod, a nameless node) is handed to ``on_rejected`` (the extender turns that into
a Warning Event about the object).

Reservations (``scheduling.koordinator.sh/v1alpha1``) go to ``reservations`` (a
:class:`koordpy.scheduler.extender.reservations.ReservationTracker`, when one is attached). One that
cannot be converted is handed to ``on_rejected`` like a pod and holds nothing from then on (its last
readable version is dropped: what it holds is unknown); ``reservations.unreadable`` lists it.

Besides the cluster state this keeps the *pending* pods (no ``spec.nodeName``, not terminated), so a
bind can record the pod's estimate at once even when this process did not see the filter call. A pending
event for a pod the state holds assigned predates the bind that placed it (a bound pod never shows unbound
again): the placement is kept, as kube-scheduler's cache keeps an assumed pod until its informer shows it
bound.

Not guaranteed: thread safety (call from the event loop only); that ``DELETED`` of an object that
failed conversion is noticed (it was never added).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from koordpy.model.clock import Clock
from koordpy.model.objects import NodeMetricInfo, PodInfo, node_from_dict, nodemetric_from_dict, pod_from_dict
from koordpy.scheduler.extender.reservations import ReservationTracker
from koordpy.scheduler.framework.cluster import ClusterState
from koordpy.scheduler.plugins.reservation.spec import reservation_from_dict

__all__ = ["RESOURCES", "ClusterCache", "EventHandler", "InvalidReport", "PodListener"]

EventHandler = Callable[[str, Mapping[str, Any]], None]
PodListener = Callable[[str, PodInfo, Mapping[str, Any] | None], None]
InvalidReport = Callable[[str, str, str], None]
"""``(resource, node name, error)``: a Node or NodeMetric of that node could not be read."""
RESOURCES = ("nodes", "pods", "nodemetrics", "reservations")
_APPLIED = frozenset({"ADDED", "MODIFIED", "DELETED"})


class ClusterCache:
    """Feeds a ``ClusterState`` from watch events, with an injected clock for assignment times."""

    def __init__(
        self,
        state: ClusterState,
        clock: Clock,
        log: Any = None,
        report: InvalidReport | None = None,
        on_rejected: Callable[[str, str, Mapping[str, Any], Exception], None] | None = None,
    ) -> None:
        self.state = state
        self.clock = clock
        self.log = log
        self.report = report
        self.on_rejected = on_rejected
        """Called with (resource, event type, raw, error) for each object that could not be converted and
        was not handed to ``report``."""
        self.invalid: dict[str, dict[str, str]] = {"nodes": {}, "nodemetrics": {}}
        """resource -> node name -> why its current object could not be read."""
        self.pending: dict[str, PodInfo] = {}
        """uid -> pod without a node (and not terminated), as last seen by the watch."""
        self.pending_versions: dict[str, str] = {}
        """uid -> the resourceVersion of ``pending[uid]`` (when the watch gave one): a verb whose pod has the
        same uid and version takes the converted pod from here instead of converting it again."""
        self.conversion_errors: Counter[str] = Counter()
        """resource -> objects that could not be converted."""
        self.events: Counter[tuple[str, str]] = Counter()
        """(resource, event type) -> events applied."""
        self.pod_listener: PodListener | None = None
        """Called after each applied pod event with (event type, pod, raw object or None): the gang barrier."""
        self.node_listener: Callable[[str], None] | None = None
        """Called with a node's name once its deletion was applied (state kept per node elsewhere is dropped)."""
        self.held_node: Callable[[str], str | None] | None = None
        """``namespace/name`` → the node a held (not yet bound) bind placed the pod on: a watch update of
        that still-pending pod keeps the placement counted instead of dropping it."""
        self.reservations: ReservationTracker | None = None
        """Where Reservation events go (also registered in the state's plugin list); None: ignored."""

    def handler(self, resource: str) -> EventHandler:
        """The ``(event_type, raw)`` callback for one of ``RESOURCES``."""
        handlers: dict[str, EventHandler] = {
            "nodes": self.on_node,
            "pods": self.on_pod,
            "nodemetrics": self.on_nodemetric,
            "reservations": self.on_reservation,
        }
        return handlers[resource]

    # ---- handlers ----------------------------------------------------------------------

    def on_node(self, event_type: str, raw: Mapping[str, Any]) -> None:
        if event_type not in _APPLIED:
            return
        name = _cluster_name(raw)
        if event_type == "DELETED" and name is not None:  # the name is all a deletion needs
            self.invalid["nodes"].pop(name, None)
            self.state.remove_node(name)
            self.events["nodes", event_type] += 1
            if self.node_listener is not None:
                self.node_listener(name)
            return
        try:
            node = node_from_dict(raw)
        except Exception as exc:
            self._conversion_error("nodes", event_type, raw, exc, reported=name is not None)
            if name is not None:
                self._invalidate("nodes", name, exc)
                self.state.invalidate_node(name, str(exc))
            return
        self.invalid["nodes"].pop(node.name, None)
        self.state.upsert_node(node)
        self.events["nodes", event_type] += 1

    def on_nodemetric(self, event_type: str, raw: Mapping[str, Any]) -> None:
        if event_type not in _APPLIED:
            return
        if event_type == "DELETED":
            name = _cluster_name(raw)
            if name is not None:
                self.invalid["nodemetrics"].pop(name, None)
                self.state.remove_metric(name)
                self.events["nodemetrics", event_type] += 1
                return
        try:
            metric = nodemetric_from_dict(raw)
        except Exception as exc:
            name = _cluster_name(raw)
            self._conversion_error("nodemetrics", event_type, raw, exc, reported=name is not None)
            if name is not None:
                self._invalidate("nodemetrics", name, exc)
                self.state.upsert_metric(NodeMetricInfo.unreadable(name, str(exc)))
            return
        invalid = self.invalid["nodemetrics"]
        if invalid:
            invalid.pop(metric.name, None)
        self.state.upsert_metric(metric)
        self.events["nodemetrics", event_type] += 1

    def on_reservation(self, event_type: str, raw: Mapping[str, Any]) -> None:
        tracker = self.reservations
        if event_type not in _APPLIED or tracker is None:
            return
        name = _cluster_name(raw)
        if event_type == "DELETED" and name is not None:
            tracker.remove(name)
            self.events["reservations", event_type] += 1
            return
        try:
            res = reservation_from_dict(raw)
        except Exception as exc:
            self._conversion_error("reservations", event_type, raw, exc)
            if name is not None:
                tracker.remove(name, unreadable=str(exc))
            return
        tracker.upsert(res)
        self.events["reservations", event_type] += 1

    def on_pod(self, event_type: str, raw: Mapping[str, Any]) -> None:
        if event_type not in _APPLIED:
            return
        if event_type == "DELETED" and (known := self._known(raw)) is not None:
            self.apply_pod(event_type, known, raw)  # a deletion needs only who it was: no conversion
            return
        try:
            pod = pod_from_dict(raw)
        except Exception as exc:
            self._conversion_error("pods", event_type, raw, exc)
            return
        self.apply_pod(event_type, pod, raw)

    def _known(self, raw: Mapping[str, Any]) -> PodInfo | None:
        """The cached pod (assigned or pending) with ``raw``'s uid, namespace and name, if any."""
        meta = raw.get("metadata")
        uid = meta.get("uid") if type(meta) is dict else None
        if type(uid) is not str:
            return None
        pod = self.state.assigned.get(uid) or self.pending.get(uid)
        if pod is None or pod.name != meta.get("name") or pod.namespace != meta.get("namespace"):  # type: ignore[union-attr]
            return None
        return pod

    def apply_pod(self, event_type: str, pod: PodInfo, raw: Mapping[str, Any] | None = None) -> None:
        """Apply an already converted pod event (``raw``, when given, goes to ``pod_listener``)."""
        if event_type == "DELETED":
            self.pending.pop(pod.uid, None)
            self.pending_versions.pop(pod.uid, None)
            self.state.remove_pod(pod.uid)
        else:
            if pod.node_name or pod.terminated:
                self.pending.pop(pod.uid, None)
                self.pending_versions.pop(pod.uid, None)
            else:
                self.pending[pod.uid] = pod
                meta = raw.get("metadata") if raw is not None else None
                version = meta.get("resourceVersion") if type(meta) is dict else None
                if type(version) is str and version:
                    self.pending_versions[pod.uid] = version
                else:
                    self.pending_versions.pop(pod.uid, None)
            held = self.held_node(pod.key) if self.held_node is not None and not pod.node_name else None
            if held is not None and not pod.terminated:
                self.state.assume(pod, held, self.clock.now())
            elif not pod.node_name and not pod.terminated and pod.uid in self.state.assigned:
                # A pod once bound never shows unbound again: this event predates the bind that placed it
                # (the watch lags behind kube-scheduler). The assumed placement stays as it is, the very
                # object, so a bind that then fails still takes it back.
                pass
            else:
                self.state.upsert_pod(pod, self.clock.now())
        self.events["pods", event_type] += 1
        if self.pod_listener is not None:
            self.pod_listener(event_type, pod, raw)

    # ---- views -------------------------------------------------------------------------

    def sizes(self) -> dict[str, int]:
        sizes = {
            "nodes": len(self.state.nodes),
            "assigned_pods": len(self.state.assigned),
            "pending_pods": len(self.pending),
            "nodemetrics": len(self.state.metrics),
        }
        if self.reservations is not None:
            sizes["reservations"] = len(self.reservations.reservations)
        return sizes

    def _invalidate(self, resource: str, name: str, exc: Exception) -> None:
        error = str(exc)
        previous = self.invalid[resource].get(name)
        self.invalid[resource][name] = error
        if previous is None and self.report is not None:  # once per readable -> unreadable transition
            self.report(resource, name, error)

    def _conversion_error(
        self, resource: str, event_type: str, raw: Mapping[str, Any], exc: Exception, *, reported: bool = False
    ) -> None:
        self.conversion_errors[resource] += 1
        if self.on_rejected is not None and not reported:
            self.on_rejected(resource, event_type, raw, exc)
        if self.log is not None:
            self.log.warning(
                "watch.object_skipped",
                resource=resource,
                object=_object_name(raw),
                error=f"{type(exc).__name__}: {exc}",
            )


def _cluster_name(raw: object) -> str | None:
    """``metadata.name`` of a cluster-scoped object when it is a usable name, else None."""
    if type(raw) is dict:  # what the watch decodes, without the ABC instance checks
        meta = raw.get("metadata")
        name = meta.get("name") if type(meta) is dict else None
        if type(name) is str:
            return name or None
    meta = raw.get("metadata") if isinstance(raw, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) and name else None


def _object_name(raw: object) -> str:
    """``namespace/name`` for a log line, best effort on a malformed object."""
    meta = raw.get("metadata") if isinstance(raw, Mapping) else None
    if not isinstance(meta, Mapping):
        return "<unknown>"
    name = meta.get("name")
    namespace = meta.get("namespace")
    # Never str() anything but a string or None: a 5,000-digit int raises ValueError in Python.
    name = name[:253] if isinstance(name, str) else "None" if name is None else f"<{type(name).__name__}>"
    if isinstance(namespace, str) and namespace:
        return f"{namespace[:63]}/{name}"
    return name
