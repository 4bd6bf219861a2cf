"""``GangCache``: gang membership, held binds and decisions, fed by events. Pure: no I/O, time is passed in.

Events: ``upsert_pod``/``delete_pod``, ``upsert_podgroup``/``delete_podgroup``, ``observe`` (a pod seen in a
``/filter`` or ``/bind`` request, perhaps before the watch), ``hold`` (a member's bind request parked on
a node), ``bound``, ``bind_failed``, ``abandon`` (the bind request's client went away) and
``scheduling_failed`` (the member's ``PodScheduled`` turned False). Decisions: ``admit`` and
``admit_request`` (PreEnqueue quorum; a refusal of a request *parks* the member), ``take_wakeups`` (parked
members whose group now passes: kube-scheduler must be asked to retry them), ``permit`` (the GangGroup
verdict), ``take_ready`` (holds allowed to bind together), ``take_releases`` (holds to answer with an error
now, and why), ``next_deadline`` (for the caller's timer) and ``resolve_deadlock`` (NonStrict deadlock).
Release decisions are queued by the events and drained by ``take_releases``; allowed groups and wakeups
are found by ``take_ready`` and ``take_wakeups`` among the gangs touched since. The caller answers/binds.

Semantics (Koordinator v1.8, reference §2.4–2.5), with koordpy's bind barrier standing in for Permit:

* a member's wait clock starts at its first hold and runs for its gang's wait time (Koordinator's
  per-pod Permit timer); a hold answered because kube-scheduler's binder timeout is near
  (``answer-deadline``) keeps that clock, so wait times of any length are honoured across retries;
* waiting = held + allowed-but-not-yet-bound members; bound = members with ``spec.nodeName`` or
  reported ``bound``; the GangGroup is *satisfied once* (Koordinator's ``OnceResourceSatisfied``) while
  a member of one of its gangs is bound. koordpy derives it from the members that exist, so it does not
  depend on the process's uptime, and a gang whose members are all gone starts from nothing again
  (Koordinator keeps the flag until the gang leaves its cache);
* a GangGroup is the set of gangs that declare exactly the same group (``GangSpec.group``, which holds
  the gang itself and, unless ``gang.crossNamespaceGroups``, only gangs of its namespace): a gang named
  by a group but declaring another one keeps the group waiting, and is never counted or released with it;
* a PodGroup's deletion ends its gang's history: held members are released (``deleted``), outstanding
  failures are forgotten; the members stay known (their gang is ``NotFound`` until the PodGroup is back);
* Strict: a member's scheduling failure, an expired/rejected/abandoned hold, a failed binding or the
  deletion of a held member releases every held member of the whole GangGroup — unless the gang's
  policy is once-satisfied and the group was satisfied once. A Strict member's failure stays
  outstanding (new holds of the group are rejected) until that member is held, bound or deleted.
  NonStrict: nothing else is released; holds accumulate until quorum or their wait time.

Not guaranteed: thread safety (call from one thread); persistence (a restarted extender rebuilds from
the watch and has no holds: kube-scheduler has failed the abandoned binds by then); that a pod seen only
in a request and deleted before the watch ever showed it is forgotten (it counts until its gang goes).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from koordpy.config.gang import CoschedulingArgs
from koordpy.model.objects import PodInfo
from koordpy.model.resources import ResourceList
from koordpy.scheduler.plugins.gang.deadlock import WaitingGroup, find_deadlock
from koordpy.scheduler.plugins.gang.decisions import (
    CASCADING_CAUSES,
    QUORUM_REFUSED,
    YIELD_REFUSED,
    Admission,
    BindBatch,
    Deadlock,
    Hold,
    Permit,
    Release,
    ReleaseCause,
    Wakeup,
    is_admission_refusal,
)
from koordpy.scheduler.plugins.gang.phase import MemberCounts, gang_phase
from koordpy.scheduler.plugins.gang.spec import (
    API_NATIVE,
    GangRef,
    GangSpec,
    PodGroupInfo,
    gang_ref,
    group_id,
    missing_spec,
    spec_from_pod,
    spec_from_podgroup,
)

__all__ = ["GangCache", "GangView"]

_TRIGGERS: dict[str, ReleaseCause] = {"expired": "expired", "rejected": "rejected", "deleted": "deleted"}
"""Causes a Strict cascade passes on as its ``Release.trigger`` (the PodGroup outcome names them)."""


@dataclass
class _Gang:
    ref: GangRef
    spec: GangSpec
    children: dict[str, PodInfo] = field(default_factory=dict)
    bound: set[str] = field(default_factory=set)
    failed: dict[str, str] = field(default_factory=dict)


class _HoldTable:
    """Holds by pod, indexed by gang (per-gang counts cost O(1)) and by deadline (a lazy heap: entries of
    holds no longer in the table are skipped when they surface)."""

    __slots__ = ("_by_gang", "_by_pod", "_heap")

    def __init__(self) -> None:
        self._by_pod: dict[str, Hold] = {}
        self._by_gang: dict[str, dict[str, Hold]] = {}
        self._heap: list[tuple[float, int, Hold]] = []

    def __contains__(self, pod: object) -> bool:
        return pod in self._by_pod

    def __len__(self) -> int:
        return len(self._by_pod)

    def get(self, pod: str) -> Hold | None:
        return self._by_pod.get(pod)

    def put(self, hold: Hold) -> None:
        self.pop(hold.pod)
        self._by_pod[hold.pod] = hold
        self._by_gang.setdefault(hold.gang_id, {})[hold.pod] = hold
        heapq.heappush(self._heap, (hold.deadline, hold.hold_id, hold))
        if len(self._heap) > 2 * len(self._by_pod) + 64:  # drop stale entries now and then
            self._heap = [(h.deadline, h.hold_id, h) for h in self._by_pod.values()]
            heapq.heapify(self._heap)

    def pop(self, pod: str) -> Hold | None:
        hold = self._by_pod.pop(pod, None)
        if hold is not None:
            members = self._by_gang[hold.gang_id]
            del members[pod]
            if not members:
                del self._by_gang[hold.gang_id]
        return hold

    def earliest(self) -> Hold | None:
        """The live hold with the earliest deadline."""
        while self._heap:
            hold = self._heap[0][2]
            if self._by_pod.get(hold.pod) is hold:
                return hold
            heapq.heappop(self._heap)
        return None

    def take_due(self, now: float) -> list[Hold]:
        """Live holds whose deadline is ``now`` or earlier, earliest first. Their heap entries are consumed:
        the caller must remove every one of them from the table."""
        out: list[Hold] = []
        while self._heap and self._heap[0][0] <= now:
            hold = heapq.heappop(self._heap)[2]
            if self._by_pod.get(hold.pod) is hold:
                out.append(hold)
        return out

    def values(self) -> list[Hold]:
        return list(self._by_pod.values())

    def of(self, gang_id: str) -> dict[str, Hold]:
        return self._by_gang.get(gang_id, {})

    def gangs(self) -> list[str]:
        return list(self._by_gang)


@dataclass(frozen=True, slots=True)
class _Yield:
    """A GangGroup released by deadlock resolution, yielding the freed room to the groups it helps."""

    gangs: frozenset[str]
    """The yielding group's gang ids."""
    helped: tuple[str, ...]
    """Group ids yielded to."""
    helped_gangs: frozenset[str]
    """Their gang ids: the yield lasts while one of them holds a member (held, or allowed and binding)."""
    until: float
    reason: str


@dataclass(frozen=True, slots=True)
class GangView:
    """A gang as it stands: for ``/debug/gangs``, PodGroup status and the offline tool. Lists sorted."""

    spec: GangSpec
    children: tuple[str, ...]
    waiting: tuple[str, ...]
    """Held or allowed-but-not-yet-bound members."""
    bound: tuple[str, ...]
    failed: tuple[str, ...]
    """Members whose last scheduling attempt failed (outstanding)."""
    once_satisfied: bool
    holds: tuple[Hold, ...]
    counts: MemberCounts


class GangCache:
    """All gangs, their members and the held binds. See the module docstring for the semantics."""

    def __init__(self, args: CoschedulingArgs) -> None:
        self.args = args
        self._gangs: dict[str, _Gang] = {}
        self._pod_gang: dict[str, str] = {}
        self._podgroups: dict[tuple[str, str], PodGroupInfo] = {}
        self._held = _HoldTable()
        """Holds waiting for their GangGroup's verdict."""
        self._binding = _HoldTable()
        """Holds handed out by ``take_ready`` and not yet reported bound or failed."""
        self._wait_started: dict[str, float] = {}
        self._outbox: list[Release] = []
        self._next_id = 1
        self._dirty: set[str] = set()
        """Gang ids changed since the last ``take_ready``: only groups touching them are re-evaluated."""
        self._wake_dirty: set[str] = set()
        """Gang ids changed since the last ``take_wakeups``."""
        self._parked: dict[str, dict[str, None]] = {}
        """Gang id → members refused at quorum by ``admit_request`` and not retried since (in refusal order)."""
        self._parked_gang: dict[str, str] = {}
        self._in_groups: dict[str, set[str]] = {}
        """Gang id → ids of the gangs whose GangGroup lists it (groups may be asymmetric)."""
        self._yielding: dict[str, _Yield] = {}
        """Group id → the yield of a group released by deadlock resolution (``deadlockYieldSeconds``)."""
        self.native_unserved = False
        """Set by the caller: the API server does not serve ``scheduling.k8s.io/v1beta1`` PodGroups (v1.35 and
        v1.36 serve alpha versions koordpy does not read). A native member whose PodGroup is not known is then
        allowed to bind alone (kube-scheduler's GangScheduling admitted it; koordpy cannot count its gang);
        otherwise (the PodGroup not seen yet) its hold is released at once and kube-scheduler retries it."""

    # ------------------------------------------------------------------ events: objects

    def upsert_pod(self, pod: PodInfo) -> None:
        """A pod was added or changed. Pods in no gang are ignored (and leave a gang they left)."""
        ref = gang_ref(pod)
        if ref is None and not self._pod_gang:
            return  # in no gang, and no pod is in one it could have left (most pod events)
        key = pod.key
        old = self._pod_gang.get(key)
        if old is not None and (ref is None or ref.id != old):
            self._forget_pod(key, cause="deleted", why="left the gang (labels or annotations changed)")
        if ref is None:
            return
        gang = self._gangs.get(ref.id)
        if gang is None:
            gang = _Gang(ref=ref, spec=missing_spec(ref, ""))
            self._gangs[ref.id] = gang
            self._set_spec(gang, self._initial_spec(ref))
        if gang.ref.source == "annotations" and not gang.spec.initialised:
            self._set_spec(gang, spec_from_pod(gang.ref, pod, self.args))  # first writer wins: until initialised
        gang.children[key] = pod
        self._pod_gang[key] = ref.id
        self._touch(ref.id)
        if pod.node_name:
            self._mark_bound(gang, key, pod.node_name)

    def observe(self, pod: PodInfo) -> str | None:
        """A pod seen in a ``/filter`` or ``/bind`` request: its gang is decided from the pod itself, and a
        member the watch has not shown yet (or shows in another gang) is counted now. Returns its gang id.

        A member the watch already knows in the same gang is left as the watch shows it (the watch is newer
        than a request's copy, or as new)."""
        ref = gang_ref(pod)
        if ref is None and not self._pod_gang:
            return None  # in no gang, and no pod is in one it could have left (most requests)
        current = self._pod_gang.get(pod.key)
        if (None if ref is None else ref.id) != current:
            self.upsert_pod(pod)
        return None if ref is None else ref.id

    def delete_pod(self, namespace: str, name: str) -> None:
        """A pod was deleted. A held member is released (cause ``deleted``, cascading for Strict)."""
        self._forget_pod(f"{namespace}/{name}", cause="deleted", why="was deleted")

    def upsert_podgroup(self, pg: PodGroupInfo) -> None:
        """A PodGroup of any API was added or changed; its gang's parameters are re-read from it."""
        self._podgroups[(pg.api, pg.id)] = pg
        self._touch(pg.id)
        gang = self._gangs.get(pg.id)
        if gang is None:
            ref = GangRef(pg.namespace, pg.name, pg.api)
            gang = _Gang(ref=ref, spec=missing_spec(ref, ""))
            self._gangs[pg.id] = gang
            self._set_spec(gang, spec_from_podgroup(ref, pg, self.args))
        elif gang.ref.source == pg.api:
            self._set_spec(gang, spec_from_podgroup(gang.ref, pg, self.args))

    def delete_podgroup(self, api: str, namespace: str, name: str) -> None:
        """A PodGroup was deleted: its gang's history ends. Held members are released (``deleted``, which
        cascades for Strict), outstanding failures are forgotten, and the gang becomes un-initialised
        (``NotFound``) while members remain; a gang with no member left is dropped.

        (Koordinator drops the gang and forgets its members until their next event; koordpy keeps the
        members, which are facts about pods, and drops the rest.)
        """
        gang_id = f"{namespace}/{name}"
        self._podgroups.pop((api, gang_id), None)
        gang = self._gangs.get(gang_id)
        if gang is None or gang.ref.source != api:
            return
        why = f"gang {gang_id}: PodGroup {gang_id} ({api}) was deleted"
        for key in sorted(self._held.of(gang_id)):
            hold = self._held.get(key)
            if hold is not None:
                self._release(hold, "deleted", why)
        gang.failed.clear()
        if not gang.children:
            self._drop_gang(gang_id)
        else:
            self._set_spec(gang, self._initial_spec(gang.ref))

    # ------------------------------------------------------------------ events: the bind barrier

    def hold(self, pod_key: str, uid: str, node: str, now: float) -> tuple[Hold | None, Permit]:
        """Park a member's bind request on ``node``. Returns the hold (None for a pod in no gang, which
        may bind at once) and the GangGroup's permit after adding it. On ``allow`` call ``take_ready``;
        a hold rejected at once is also in ``take_releases``."""
        gang_id = self._pod_gang.get(pod_key)
        if gang_id is None:
            return None, Permit("allow", f"pod {pod_key} is in no gang", None)
        gang = self._gangs[gang_id]
        previous = self._held.pop(pod_key)
        if previous is not None:
            self._outbox.append(Release(previous, "superseded", f"a newer bind request for {pod_key} arrived"))
        # A request already handed out by take_ready is the caller's to finish: it is dropped here, so
        # is_current() turns False and its binding must not be created.
        self._binding.pop(pod_key)
        started = self._wait_started.setdefault(pod_key, now)
        hold = Hold(
            hold_id=self._next_id,
            pod=pod_key,
            uid=uid,
            gang_id=gang_id,
            node=node,
            held_at=now,
            wait_started_at=started,
            wait_deadline=started + gang.spec.wait_seconds,
            answer_deadline=now + self.args.longest_hold_seconds,
        )
        self._next_id += 1
        gang.failed.pop(pod_key, None)
        self._unpark(pod_key)
        self._held.put(hold)
        self._touch(gang_id)
        permit = self.permit(gang_id, now)
        if permit.verdict == "reject":
            self._release(hold, "rejected", permit.reason)
        return hold, permit

    def bound(self, pod_key: str, node: str) -> None:
        """The member's binding was created (by the caller, or seen with ``spec.nodeName``)."""
        gang_id = self._pod_gang.get(pod_key)
        if gang_id is not None:
            self._mark_bound(self._gangs[gang_id], pod_key, node)

    def bind_failed(self, pod_key: str, reason: str) -> None:
        """Creating the member's binding failed (the caller answers that request itself). Strict:
        every other held member of the GangGroup is released."""
        hold = self._held.pop(pod_key) or self._binding.pop(pod_key)
        self._wait_started.pop(pod_key, None)
        if hold is not None:
            self._cascade(hold, "bind-failed", f"binding failed: {reason}")

    def abandon(self, pod_key: str, hold_id: int) -> bool:
        """The client of bind request ``hold_id`` went away (kube-scheduler timed out): the member must
        never be bound from that request. Returns False when the hold was already handed out by
        ``take_ready`` (the caller must then check ``is_current`` before creating the binding). Strict:
        every other held member of the GangGroup is released."""
        for table in (self._held, self._binding):
            hold = table.get(pod_key)
            if hold is not None and hold.hold_id == hold_id:
                table.pop(pod_key)
                self._wait_started.pop(pod_key, None)
                self._cascade(hold, "abandoned", "its bind request was abandoned by kube-scheduler")
                return table is self._held
        return True

    def is_current(self, hold: Hold) -> bool:
        """Whether ``hold`` is still the live request for its pod (not released, abandoned or superseded)."""
        current = self._held.get(hold.pod) or self._binding.get(hold.pod)
        return current is not None and current.hold_id == hold.hold_id

    def scheduling_failed(self, pod_key: str, reason: str) -> None:
        """The member's scheduling attempt failed (``PodScheduled=False``). Strict, not (once-satisfied ∧
        satisfied): every held member of the GangGroup is released and later holds of the group are
        rejected until this member is held, bound or deleted. NonStrict: recorded only.

        A quorum refusal (``reason`` carries :data:`~koordpy.scheduler.plugins.gang.QUORUM_REFUSED`, as
        kube-scheduler copies it from ``/filter``) is not a failure: the gang is incomplete, not failing.
        The member is parked instead, as if this process had refused it: a restarted extender then still
        wakes the members its predecessor refused once their gang passes."""
        gang_id = self._pod_gang.get(pod_key)
        if gang_id is None:
            return
        if is_admission_refusal(reason):
            if pod_key not in self._held and pod_key not in self._binding:
                self._park(pod_key, gang_id)
                self._wake_dirty.add(gang_id)
            return
        gang = self._gangs[gang_id]
        gang.failed[pod_key] = reason
        hold = self._held.pop(pod_key)
        if hold is not None:
            self._outbox.append(Release(hold, "superseded", f"{pod_key} failed scheduling: {reason}"))
        if self._strict_applies(gang):
            why = f"gang {gang_id} (Strict): member {pod_key} failed scheduling ({reason})"
            self._release_group(self._members(gang.spec), "strict", why, exclude=pod_key)

    # ------------------------------------------------------------------ decisions

    def admit(self, pod_key: str) -> Admission:
        """Koordinator's PreEnqueue: the member's own gang must be initialised; if its policy is
        once-satisfied and its group is satisfied once, it passes; otherwise every gang of its GangGroup
        must exist, be initialised, declare the same group and have at least ``minMember`` members (any
        pod phase). A refusal names the first gang (by id) that falls short (see ``Admission``)."""
        gang_id = self._pod_gang.get(pod_key)
        if gang_id is None:
            return Admission(True, f"pod {pod_key} is in no gang", "", f"pod {pod_key} is in no gang")
        return self._admit_gang(gang_id)

    def admit_request(self, pod: PodInfo) -> Admission | None:
        """The quorum test of a ``/filter`` request; None for a pod in no gang. Membership comes from the pod
        in the request (``observe``), never only from the watch, which may not have shown the pod yet. A
        refused member is *parked*: ``take_wakeups`` hands it out once its group passes. A member that
        passes is unparked."""
        gang_id = self.observe(pod)
        if gang_id is None:
            return None
        if self._gangs[gang_id].spec.ref.source == API_NATIVE:
            # kube-scheduler's GangScheduling gated this pod at PreEnqueue before asking: a second quorum
            # here could only disagree (this process's watch may lag), never add anything.
            why = f"gang {gang_id}: a native PodGroup's members are admitted by kube-scheduler (GangScheduling)"
            return Admission(True, why, gang_id, why)
        admission = self._admit_gang(gang_id)
        if admission.ok:
            self._unpark(pod.key)
        else:
            self._park(pod.key, gang_id)
        return admission

    def take_wakeups(self) -> list[Wakeup]:
        """Parked members whose GangGroup passes admission now, oldest refusal first per gang, gangs by id.
        They are unparked: each is handed out once per refusal. Only gangs touched since the last call (and
        the gangs whose group names them) are evaluated, once per gang whatever its number of members."""
        if not self._wake_dirty:
            return []
        dirty, self._wake_dirty = self._wake_dirty, set()
        candidates = {g for d in dirty for g in (d, *self._in_groups.get(d, ()))}
        out: list[Wakeup] = []
        for gang_id in sorted(candidates):
            parked = self._parked.get(gang_id)
            if not parked:
                continue
            admission = self._admit_gang(gang_id)
            if not admission.ok:
                continue
            del self._parked[gang_id]
            for key in parked:
                self._parked_gang.pop(key, None)
                out.append(Wakeup(key, gang_id, admission.detail))
        return out

    def parked(self, gang_id: str | None = None) -> list[str]:
        """Members refused at quorum and not retried since (of one gang, or all), in refusal order."""
        if gang_id is not None:
            return list(self._parked.get(gang_id, ()))
        return [key for members in self._parked.values() for key in members]

    def permit(self, gang_id: str, now: float) -> Permit:
        """The verdict for ``gang_id``'s GangGroup, for every gang of it (reference §2.4): ``reject`` when a
        Strict gang has an outstanding member failure; else ``allow`` when every gang is initialised,
        declares the same group and is valid under its match policy; else ``wait`` naming the first gang
        (by id) that is not."""
        gang = self._gangs.get(gang_id)
        if gang is None:
            return Permit("wait", f"gang {gang_id}: no member exists yet", 0.0)
        group = gang.spec.group
        remaining = self._remaining(group, now)
        if not gang.spec.initialised:
            if gang.spec.native and self.native_unserved:
                why = f"{gang.spec.problem}; the API is not served: kube-scheduler admitted the member, it binds alone"
                return Permit("allow", why, remaining)
            return Permit("wait", gang.spec.problem, 0.0)
        waits: list[str] = []
        for gid in group:
            other = self._gangs.get(gid)
            if other is None:
                waits.append(f"gang {gid}: no member exists yet")
                continue
            if not other.spec.initialised:
                waits.append(other.spec.problem)
                continue
            if other.spec.group != group:
                waits.append(_disagreement(other.spec, gang.spec))
                continue
            # A native gang's failures release held binds when they happen, and no later: a member at /bind
            # has passed kube-scheduler's pod group cycle, which decided the gang fits now.
            if other.failed and not other.spec.native and self._strict_applies(other):
                pod, reason = sorted(other.failed.items())[0]
                return Permit("reject", f"gang {gid} (Strict): member {pod} failed scheduling ({reason})", remaining)
            problem = self._invalid(other)
            if problem:
                waits.append(problem)
        if waits:
            return Permit("wait", waits[0], remaining)
        if len(group) == 1:
            return Permit("allow", self._valid_reason(gang), remaining)
        return Permit("allow", f"gang group {group_id(group)}: every gang is satisfied", remaining)

    def take_ready(self, now: float) -> list[BindBatch]:
        """Holds now allowed to bind together: for each gang with holds whose GangGroup permit is ``allow``,
        the holds of every gang of that group (the gang itself is one of them). Batches sorted by group id.
        The holds move to the allowed-but-not-bound state: report each with ``bound`` or ``bind_failed``.
        Only groups touched by an event since the last call are evaluated."""
        if not self._dirty:
            return []  # nothing touched since the last call (most pod events: pods of no gang)
        batches: list[BindBatch] = []
        dirty, self._dirty = self._dirty, set()
        candidates = dirty | {g for d in dirty for g in self._in_groups.get(d, ())}
        for gang_id in sorted(candidates):
            if not self._held.of(gang_id):
                continue  # nothing held, or handed out with an earlier gang of this call
            spec = self._gangs[gang_id].spec
            permit = self.permit(gang_id, now)
            if permit.verdict != "allow":
                continue
            members = sorted((h for g in spec.group for h in self._held.of(g).values()), key=lambda h: h.pod)
            for h in members:
                self._held.pop(h.pod)
                self._binding.put(h)
            batches.append(BindBatch(spec.group_id, tuple(members), permit.reason))
        return sorted(batches, key=lambda b: b.group_id)

    def take_releases(self, now: float) -> list[Release]:
        """Holds to answer with an error now: queued decisions (Strict cascades, rejections, deletions),
        then every held member whose wait time ran out (``expired``, cascading for Strict) or whose
        bind request must be answered before kube-scheduler's binder timeout (``answer-deadline``).
        Yields after a deadlock that are over (see ``resolve_deadlock``) end here: their members are woken
        by ``take_wakeups``."""
        self._end_yields(now)
        for hold in self._held.take_due(now):
            if self._held.get(hold.pod) is not hold:
                continue  # released by a cascade earlier in this loop
            if now >= hold.wait_deadline:
                spec = self._gangs[hold.gang_id].spec
                if spec.problem:
                    why = f"{spec.problem}; {hold.pod} is not held for an un-initialised gang"
                else:
                    why = (
                        f"gang {hold.gang_id}: {hold.pod} waited {spec.wait_seconds:g}s, the gang's wait time, "
                        "without its GangGroup completing"
                    )
                self._release(hold, "expired", why)
            elif now >= hold.answer_deadline:
                self._release(
                    hold,
                    "answer-deadline",
                    f"gang {hold.gang_id}: bind of {hold.pod} held {self.args.longest_hold_seconds:g}s, "
                    "answering before kube-scheduler's binder timeout; the pod is retried and keeps its gang wait",
                )
        out, self._outbox = self._outbox, []
        return out

    def next_deadline(self) -> float | None:
        """The earliest moment ``take_releases`` has something new to say (None when nothing is held and
        no group yields)."""
        earliest = self._held.earliest()
        moments = [y.until for y in self._yielding.values()]
        if earliest is not None:
            moments.append(earliest.deadline)
        return min(moments) if moments else None

    def yielding(self) -> dict[str, tuple[str, ...]]:
        """Group id → the group ids it yields to, for the groups yielding after a deadlock now."""
        return {group: y.helped for group, y in sorted(self._yielding.items())}

    def _end_yields(self, now: float) -> None:
        for group in list(self._yielding):
            y = self._yielding[group]
            if now >= y.until or not any(self._held.of(g) or self._binding.of(g) for g in y.helped_gangs):
                del self._yielding[group]
                self._wake_dirty.update(y.gangs)

    def resolve_deadlock(self, free: Mapping[str, ResourceList], now: float) -> Deadlock | None:
        """Detect a NonStrict deadlock among waiting GangGroups (see ``deadlock.find_deadlock``) given each
        node's free resources *after* every hold, and release the victim group's holds (cause
        ``deadlock``, in ``take_releases``). None when there is no deadlock.

        The victim then *yields* (``deadlockYieldSeconds`` > 0): its members are refused at admission
        (:data:`YIELD_REFUSED`, parked) until none of the groups its release helps holds a member any
        more (bound, or given up), or for at most ``deadlockYieldSeconds``; then they are woken like
        members refused at quorum. Without the yield, kube-scheduler's queue decides who takes the freed
        room, and the victim's own members, which failed before the other group's, are often first.
        Not guaranteed: a yield outlives a restart (it does not)."""
        waiting: list[WaitingGroup] = []
        seen: dict[str, GangSpec] = {}
        for hold in self._held.values():
            spec = self._gangs[hold.gang_id].spec
            if spec.group_id in seen or self.permit(hold.gang_id, now).verdict != "wait":
                continue
            seen[spec.group_id] = spec
            waiting.append(self._waiting_group(spec))
        found = find_deadlock(waiting, free)
        if found is None:
            return None
        victim = next(g for g in waiting if g.group_id == found.victim)
        released = tuple(sorted((h for p in victim.held_pods if (h := self._held.get(p))), key=lambda h: h.pod))
        for hold in released:
            self._release(hold, "deadlock", found.reason)
        if self.args.deadlock_yield_seconds > 0:
            gangs = {group: frozenset(self._members(spec)) for group, spec in seen.items()}
            helped_gangs = frozenset(gang for group in found.helped for gang in gangs[group])
            until = now + self.args.deadlock_yield_seconds
            why = (
                f"gang group {found.victim} was released to resolve a NonStrict deadlock and yields the room to "
                f"{', '.join(found.helped)} until they bind or give up (at most "
                f"{self.args.deadlock_yield_seconds:g}s)"
            )
            self._yielding[found.victim] = _Yield(gangs[found.victim], found.helped, helped_gangs, until, why)
        return Deadlock(found.groups, found.victim, released, found.reason, found.helped)

    # ------------------------------------------------------------------ views

    def gang_of(self, pod_key: str) -> str | None:
        return self._pod_gang.get(pod_key)

    def member(self, pod_key: str) -> PodInfo | None:
        """The member pod as last seen (None: in no gang)."""
        gang_id = self._pod_gang.get(pod_key)
        return None if gang_id is None else self._gangs[gang_id].children.get(pod_key)

    def podgroup(self, gang_id: str) -> PodGroupInfo | None:
        """The PodGroup the gang takes its parameters from (None for an annotation-way gang, or while it
        does not exist)."""
        gang = self._gangs.get(gang_id)
        if gang is None or gang.ref.source == "annotations":
            return None
        return self._podgroups.get((gang.ref.source, gang_id))

    def view(self, gang_id: str) -> GangView | None:
        gang = self._gangs.get(gang_id)
        if gang is None:
            return None
        holds = tuple(
            sorted([*self._held.of(gang_id).values(), *self._binding.of(gang_id).values()], key=lambda h: h.pod)
        )
        waiting = sorted(h.pod for h in holds)
        return GangView(
            spec=gang.spec,
            children=tuple(sorted(gang.children)),
            waiting=tuple(waiting),
            bound=tuple(sorted(gang.bound)),
            failed=tuple(sorted(gang.failed)),
            once_satisfied=self._satisfied_once(gang.spec),
            holds=holds,
            counts=self._counts(gang),
        )

    def phase(self, gang_id: str, stored: str) -> str | None:
        """The phase the gang's PodGroup status settles on from ``stored`` (see ``phase.gang_phase``);
        None for an unknown gang."""
        view = self.view(gang_id)
        if view is None:
            return None
        spec = view.spec
        return gang_phase(spec.ref.source, spec.initialised, stored, spec.min_member, view.counts)

    def views(self) -> list[GangView]:
        """Every gang, sorted by id."""
        return [v for gid in sorted(self._gangs) if (v := self.view(gid)) is not None]

    def holds(self) -> list[Hold]:
        """Every live hold (held or allowed-not-bound), sorted by pod."""
        return sorted([*self._held.values(), *self._binding.values()], key=lambda h: h.pod)

    # ------------------------------------------------------------------ internals

    def _set_spec(self, gang: _Gang, spec: GangSpec) -> None:
        for gid in gang.spec.group:
            members = self._in_groups.get(gid)
            if members is not None:
                members.discard(gang.spec.id)
                if not members:
                    del self._in_groups[gid]
        gang.spec = spec
        for gid in spec.group:
            self._in_groups.setdefault(gid, set()).add(spec.id)
        self._touch(spec.id)

    def _touch(self, gang_id: str) -> None:
        self._dirty.add(gang_id)
        self._wake_dirty.add(gang_id)

    def _members(self, spec: GangSpec) -> list[str]:
        """The gangs that make up ``spec``'s GangGroup: those of its group that exist and declare the same
        group (always the gang itself). Only they are counted together and released together."""
        out: list[str] = []
        for gid in spec.group:
            other = self._gangs.get(gid)
            if other is not None and (gid == spec.id or other.spec.group == spec.group):
                out.append(gid)
        return out

    def _satisfied_once(self, spec: GangSpec) -> bool:
        """Koordinator's ``OnceResourceSatisfied``: a member of a gang of the GangGroup is bound now."""
        return any(self._gangs[g].bound for g in self._members(spec))

    def _admit_gang(self, gang_id: str) -> Admission:
        own = self._gangs[gang_id].spec
        if not own.initialised:
            return Admission(False, QUORUM_REFUSED + own.problem, gang_id, own.problem)
        if own.native:  # kube-scheduler's PreEnqueue: the PodGroup exists and minCount pods do
            have = len(self._gangs[gang_id].children)
            why = f"gang {gang_id}: {have} of {own.min_member} members exist (kube-scheduler's GangScheduling)"
            if have < own.min_member:
                short = f"{QUORUM_REFUSED}gang {gang_id}: fewer than {own.min_member} members exist"
                return Admission(False, short, gang_id, why)
            return Admission(True, why, gang_id, why)
        yielding = self._yielding.get(own.group_id)
        if yielding is not None:
            return Admission(False, YIELD_REFUSED + yielding.reason, gang_id, yielding.reason)
        if own.match_policy == "once-satisfied" and self._satisfied_once(own):
            why = f"gang {gang_id}: satisfied once (once-satisfied)"
            return Admission(True, why, gang_id, why)
        for gid in own.group:
            other = self._gangs.get(gid)
            if other is None:
                why = f"gang {gid}: no member exists yet"
                return Admission(False, QUORUM_REFUSED + why, gid, why)
            spec = other.spec
            if not spec.initialised:
                return Admission(False, QUORUM_REFUSED + spec.problem, gid, spec.problem)
            if spec.group != own.group:
                why = _disagreement(spec, own)
                return Admission(False, QUORUM_REFUSED + why, gid, why)
            have = len(other.children)
            if have < spec.min_member:
                return Admission(
                    False,
                    f"{QUORUM_REFUSED}gang {gid}: fewer than {spec.min_member} members exist",
                    gid,
                    f"gang {gid}: {have} of {spec.min_member} members exist",
                )
        have = len(self._gangs[gang_id].children)
        why = f"gang {gang_id}: {have} of {own.min_member} members exist"
        return Admission(True, why, gang_id, why)

    def _park(self, key: str, gang_id: str) -> None:
        if self._parked_gang.get(key) == gang_id:
            return
        self._unpark(key)
        self._parked.setdefault(gang_id, {})[key] = None
        self._parked_gang[key] = gang_id

    def _unpark(self, key: str) -> None:
        gang_id = self._parked_gang.pop(key, None)
        if gang_id is None:
            return
        members = self._parked[gang_id]
        del members[key]
        if not members:
            del self._parked[gang_id]

    def _drop_gang(self, gang_id: str) -> None:
        gang = self._gangs.pop(gang_id)
        self._set_spec(gang, missing_spec(gang.ref, ""))
        self._in_groups.get(gang_id, set()).discard(gang_id)
        if not self._in_groups.get(gang_id, True):
            del self._in_groups[gang_id]

    def _initial_spec(self, ref: GangRef) -> GangSpec:
        if ref.source == "annotations":
            return missing_spec(ref, f"gang {ref.id}: no member with a valid min-available yet")
        pg = self._podgroups.get((ref.source, ref.id))
        if pg is None:
            return missing_spec(ref, f"gang {ref.id}: PodGroup {ref.id} ({ref.source}) not found")
        return spec_from_podgroup(ref, pg, self.args)

    def _mark_bound(self, gang: _Gang, key: str, node: str) -> None:
        self._touch(gang.spec.id)
        gang.bound.add(key)
        gang.failed.pop(key, None)
        self._unpark(key)
        self._binding.pop(key)
        self._wait_started.pop(key, None)
        hold = self._held.pop(key)
        if hold is not None:
            self._outbox.append(Release(hold, "superseded", f"{key} is already bound to {node}"))

    def _forget_pod(self, key: str, cause: ReleaseCause, why: str) -> None:
        gang_id = self._pod_gang.pop(key, None)
        if gang_id is None:
            return
        gang = self._gangs[gang_id]
        self._touch(gang_id)
        self._unpark(key)
        gang.children.pop(key, None)
        gang.bound.discard(key)
        gang.failed.pop(key, None)
        self._binding.pop(key)
        hold = self._held.get(key)
        if hold is not None:
            self._release(hold, cause, f"gang {gang_id}: {key} {why}")
        self._wait_started.pop(key, None)
        if not gang.children and gang.ref.source == "annotations":
            self._drop_gang(gang_id)

    def _strict_applies(self, gang: _Gang) -> bool:
        spec = gang.spec
        if spec.native:
            # kube-scheduler's rule (GangScheduling's PlacementFeasible): the gang fails only when the members
            # not failing can no longer make its minimum; a member beyond it that fits nowhere releases nothing.
            return len(gang.children) - len(gang.failed) < spec.min_member
        if spec.mode != "Strict":
            return False
        return not (spec.match_policy == "once-satisfied" and self._satisfied_once(spec))

    def _release(self, hold: Hold, cause: ReleaseCause, reason: str) -> None:
        self._held.pop(hold.pod)
        if cause != "answer-deadline":
            self._wait_started.pop(hold.pod, None)
        self._outbox.append(Release(hold, cause, reason))
        self._cascade(hold, cause, reason)

    def _cascade(self, hold: Hold, cause: str, reason: str) -> None:
        gang = self._gangs.get(hold.gang_id)
        if cause not in CASCADING_CAUSES or gang is None or not self._strict_applies(gang):
            return
        why = f"gang {hold.gang_id} (Strict): member {hold.pod} was released ({reason})"
        trigger = _TRIGGERS.get(cause)
        self._release_group(self._members(gang.spec), "strict", why, exclude=hold.pod, trigger=trigger)

    def _release_group(
        self,
        group: Iterable[str],
        cause: ReleaseCause,
        reason: str,
        exclude: str,
        trigger: ReleaseCause | None = None,
    ) -> None:
        held = [h for g in set(group) for h in self._held.of(g).values()]
        for other in sorted(held, key=lambda h: h.pod):
            if other.pod != exclude:
                self._held.pop(other.pod)
                self._wait_started.pop(other.pod, None)
                self._outbox.append(Release(other, cause, reason, trigger))

    def _waiting_count(self, gang: _Gang) -> int:
        return len(self._held.of(gang.spec.id)) + len(self._binding.of(gang.spec.id))

    def _invalid(self, gang: _Gang) -> str:
        """Why the gang is not valid for Permit under its match policy ("" when valid)."""
        spec = gang.spec
        waiting = self._waiting_count(gang)
        if spec.match_policy == "only-waiting":
            if waiting >= spec.min_member:
                return ""
            return f"gang {spec.id}: {waiting} of {spec.min_member} members waiting at the bind barrier (only-waiting)"
        if spec.match_policy == "waiting-and-running":
            bound = len(gang.bound)
            if waiting + bound >= spec.min_member:
                return ""
            return (
                f"gang {spec.id}: {waiting} waiting + {bound} bound of {spec.min_member} members (waiting-and-running)"
            )
        if waiting >= spec.min_member or self._satisfied_once(spec):
            return ""
        return f"gang {spec.id}: {waiting} of {spec.min_member} members waiting at the bind barrier"

    def _valid_reason(self, gang: _Gang) -> str:
        spec = gang.spec
        waiting = self._waiting_count(gang)
        if spec.match_policy == "once-satisfied" and self._satisfied_once(spec) and waiting < spec.min_member:
            return f"gang {spec.id}: satisfied once (once-satisfied)"
        if spec.match_policy == "waiting-and-running":
            return f"gang {spec.id}: {waiting} waiting + {len(gang.bound)} bound of {spec.min_member} members"
        return f"gang {spec.id}: {waiting} of {spec.min_member} members waiting at the bind barrier"

    def _remaining(self, group: Iterable[str], now: float) -> float | None:
        deadlines = [h.wait_deadline for g in set(group) for h in self._held.of(g).values()]
        if not deadlines:
            return None
        return max(0.0, min(deadlines) - now)

    def _counts(self, gang: _Gang) -> MemberCounts:
        phases = [p.phase for p in gang.children.values()]
        return MemberCounts(
            pods=len(gang.children),
            scheduled=len(gang.bound),
            running=phases.count("Running"),
            succeeded=phases.count("Succeeded"),
            failed=phases.count("Failed"),
        )

    def _waiting_group(self, spec: GangSpec) -> WaitingGroup:
        members = [self._gangs[g] for g in self._members(spec)]
        held: list[str] = []
        holds: list[tuple[str, ResourceList]] = []
        pending: list[ResourceList] = []
        pending_failed: list[bool] = []
        priority: int | None = None
        created: float | None = None
        for gang in members:
            if gang.spec.create_time is not None:
                created = gang.spec.create_time if created is None else max(created, gang.spec.create_time)
            for key, pod in sorted(gang.children.items()):
                if pod.priority is not None:
                    priority = pod.priority if priority is None else max(priority, pod.priority)
                if key in self._held:
                    held.append(key)
                    holds.append((self._held.of(gang.spec.id)[key].node, pod.requests))
                elif key in self._binding or key in gang.bound or pod.terminated:
                    continue
                else:
                    pending.append(pod.requests)
                    pending_failed.append(key in gang.failed)
        return WaitingGroup(
            group_id=spec.group_id,
            priority=priority or 0,
            create_time=created or 0.0,
            held_pods=tuple(held),
            holds=tuple(holds),
            pending=tuple(pending),
            pending_failed=tuple(pending_failed),
        )


def _disagreement(other: GangSpec, own: GangSpec) -> str:
    return f"gang {other.id} declares GangGroup [{other.group_id}], not [{own.group_id}]"
