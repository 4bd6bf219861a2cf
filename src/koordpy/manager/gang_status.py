"""Pure PodGroup status and gang Event decisions for the manager, for the three PodGroup APIs.

The manager feeds a :class:`~koordpy.scheduler.plugins.gang.GangCache` with pods and PodGroups (the same
cache, and so the same membership, parameters and phase machines, as the extender and the offline tool)
and asks this module, per gang, what the PodGroup's ``status`` should be and which Events to post.

Status fields, per API (reference §2.7; ``koordpy.crds.podgroup``):

* ``scheduling.sigs.k8s.io``: ``phase`` (Koordinator's machine), ``scheduled`` (members with a node),
  ``running``, ``succeeded``, ``failed``, ``occupiedBy`` and ``scheduleStartTime``;
* ``scheduling.x-k8s.io``: ``phase`` (scheduler-plugins' machine), ``running``, ``succeeded``,
  ``failed``, ``occupiedBy``, ``scheduleStartTime``; no ``scheduled``;
* ``scheduling.volcano.sh``: ``phase`` (Volcano's: Pending, Inqueue, Running, Unknown, Completed),
  ``running``, ``succeeded``, ``failed``; Volcano's status has nothing else koordpy fills.

A native ``scheduling.k8s.io`` PodGroup gets neither: kube-scheduler owns its status (the
``PodGroupInitiallyScheduled`` condition) and reports on its pods.

``occupiedBy`` is written once, when the phase first leaves Pending: the oldest member's owner
references as sorted ``namespace/ownerName`` joined with ``,`` (as Koordinator fills it). ``scheduleStartTime``
is written once, when the phase is first Scheduling. No I/O, no clock: ``now`` is an argument.

Not guaranteed: Koordinator's 48-hour "stop reconciling" rule is not applied; the counters count the
members the manager has seen (a pod it could not read is not a member); "placed" in an Event means
bound to a node (the manager does not see binds held at the extender's barrier).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koordpy.scheduler.plugins.gang import API_NATIVE, API_SIGS, API_VERSIONS, API_VOLCANO, GangCache, GangView

__all__ = [
    "API_VERSIONS",
    "EventThrottle",
    "GangEvent",
    "StatusPatch",
    "desired_status",
    "occupied_by",
    "reconcile_gang",
    "waiting_message",
]

FINAL_PHASES = frozenset({"Finished", "Failed"})
REASON_WAITING = "GangWaiting"


@dataclass(frozen=True)
class StatusPatch:
    """JSON merge-patch ``status`` (the ``/status`` subresource) of the PodGroup ``namespace/name``."""

    api: str
    namespace: str
    name: str
    status: dict[str, Any]


@dataclass(frozen=True)
class GangEvent:
    """A core/v1 Event about ``kind`` ``namespace/name`` (a PodGroup or a member pod)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str
    reason: str
    message: str
    type: str = "Normal"

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"


def occupied_by(pod: Mapping[str, Any]) -> str | None:
    """``namespace/ownerName`` of each owner reference of ``pod``, sorted and joined with ``,``."""
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    refs = sorted(
        f"{namespace}/{ref['name']}"
        for ref in meta.get("ownerReferences") or []
        if isinstance(ref, Mapping) and ref.get("name")
    )
    return ",".join(refs) or None


def desired_status(
    cache: GangCache,
    api: str,
    namespace: str,
    name: str,
    *,
    stored: Mapping[str, Any],
    occupant: str | None,
    now: str,
) -> StatusPatch | None:
    """The merge-patch that brings the PodGroup's ``stored`` status to what its gang says; None when it is
    already there, or when the gang takes its parameters from elsewhere (the other API's PodGroup of the
    same name, or annotations). ``now`` is RFC 3339, written as ``scheduleStartTime`` when due."""
    gang_id = f"{namespace}/{name}"
    view = cache.view(gang_id)
    if api == API_NATIVE or view is None or view.spec.ref.source != api:
        return None  # a native PodGroup's status is kube-scheduler's: never written here
    stored_phase = str(stored.get("phase") or "")
    phase = cache.phase(gang_id, stored_phase) or stored_phase
    counts = view.counts
    want: dict[str, Any] = {
        "phase": phase,
        "running": counts.running,
        "succeeded": counts.succeeded,
        "failed": counts.failed,
    }
    if api == API_SIGS:
        want["scheduled"] = counts.scheduled
    if api != API_VOLCANO:
        if phase not in ("", "Pending") and not stored.get("occupiedBy") and occupant:
            want["occupiedBy"] = occupant
        if phase == "Scheduling" and not stored.get("scheduleStartTime"):
            want["scheduleStartTime"] = now
    patch = {k: v for k, v in want.items() if stored.get(k) != v}
    return StatusPatch(api, namespace, name, patch) if patch else None


def waiting_message(cache: GangCache, view: GangView, stored_phase: str = "") -> str | None:
    """What the gang waits for, or None when it waits for nothing (enough members placed, or final).

    ``gang ns/n: 3 of 5 members exist`` (quorum, or a group-mate's), the un-initialised gang's problem
    (``PodGroup ... not found``), else ``gang ns/n: 5 of 5 members exist, waiting for 2 more members to
    be placed`` (min 5, 3 bound: 5 − 3 = 2).
    """
    spec = view.spec
    if stored_phase in FINAL_PHASES:
        return None
    if not spec.initialised:
        return spec.problem or f"gang {spec.id}: not initialised"
    pods = view.counts.pods
    if pods < spec.min_member:
        return f"gang {spec.id}: {pods} of {spec.min_member} members exist"
    for child in view.children:
        admission = cache.admit(child)
        if not admission.ok:
            return admission.detail
        break
    missing = spec.min_member - view.counts.scheduled
    if missing <= 0:
        return None
    more = "member" if missing == 1 else "members"
    return f"gang {spec.id}: {pods} of {spec.min_member} members exist, waiting for {missing} more {more} to be placed"


class EventThrottle:
    """Per object: an Event only when its message changed since the last one posted, and at most one per
    ``interval`` seconds. A message held back is remembered in ``pending`` so a periodic pass can post it
    once the interval has run out. Bounded: ``forget`` drops a gang's objects when the gang goes away."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._last: dict[str, tuple[str, float]] = {}
        self.pending: set[str] = set()
        """Gang ids with a message held back."""

    def allow(self, gang_id: str, key: str, message: str, now: float) -> bool:
        last = self._last.get(key)
        if last is not None and last[0] == message:
            return False
        if last is not None and now - last[1] < self.interval:
            self.pending.add(gang_id)
            return False
        self._last[key] = (message, now)
        return True

    def forget(self, keys: list[str]) -> None:
        for key in keys:
            self._last.pop(key, None)

    def __len__(self) -> int:
        return len(self._last)


def reconcile_gang(
    cache: GangCache,
    gang_id: str,
    *,
    podgroups: Mapping[tuple[str, str], tuple[str, Mapping[str, Any]]],
    pod_uids: Mapping[str, str],
    occupant: str | None,
    throttle: EventThrottle,
    pod_events: int,
    now: float,
    now_text: str,
    with_events: bool = True,
) -> tuple[list[StatusPatch], list[GangEvent]]:
    """Status patches and Events for one gang. ``podgroups`` maps ``(api, gang id)`` to the stored PodGroup's
    ``(uid, status)``; ``pod_uids`` maps member pod keys to uids; ``occupant`` is :func:`occupied_by` of the
    gang's oldest member. Events go to the gang's PodGroup (when it exists) and to at most ``pod_events``
    members without a node (sorted by key), each through ``throttle``; none without ``with_events``."""
    view = cache.view(gang_id)
    if view is None or view.spec.native:
        return [], []  # a native gang: kube-scheduler writes its PodGroup's status and reports on its pods
    namespace, _, name = gang_id.partition("/")
    patches: list[StatusPatch] = []
    events: list[GangEvent] = []
    stored_phase = ""
    target: GangEvent | None = None
    source = view.spec.ref.source
    if (source, gang_id) in podgroups:
        uid, status = podgroups[(source, gang_id)]
        patch = desired_status(cache, source, namespace, name, stored=status, occupant=occupant, now=now_text)
        if patch is not None:
            patches.append(patch)
        stored_phase = str((patch.status if patch else {}).get("phase") or status.get("phase") or "")
        target = GangEvent(API_VERSIONS[source], "PodGroup", namespace, name, uid, REASON_WAITING, "")
    message = waiting_message(cache, view, stored_phase) if with_events else None
    if message is None:
        return patches, events
    if target is not None and throttle.allow(gang_id, target.key, message, now):
        events.append(GangEvent(**{**target.__dict__, "message": message}))
    unplaced = [p for p in view.children if p not in view.bound]
    for key in unplaced[:pod_events]:
        pod_ns, _, pod_name = key.partition("/")
        event = GangEvent("v1", "Pod", pod_ns, pod_name, pod_uids.get(key, ""), REASON_WAITING, message)
        if throttle.allow(gang_id, event.key, message, now):
            events.append(event)
    return patches, events
