"""Gang-aware disruption: who is in a gang, who of them runs, its minimum, and which disruptions keep it.

A disruption (a PodMigrationJob's eviction, a preemption's victims) must not take a running gang below its
minimum. The values here (:class:`DisruptionGang`, :class:`GangTable`) and the rule (:func:`keeps_gang`,
:func:`preemption_refusal`) are shared by the migration arbitration (:mod:`koordpy.descheduler.arbitration`,
which also moves a gang's members together) and the extender's preempt verb. Every gang API reads the
same way: the gang's
:class:`~koordpy.scheduler.plugins.gang.GangSpec` (from a PodGroup of ``scheduling.sigs.k8s.io``,
``scheduling.x-k8s.io``, ``scheduling.volcano.sh`` or ``scheduling.k8s.io``, or from the Koordinator
annotations) gives the minimum (``min_member``), the GangGroup (``group``) and how the gang may be
disrupted (``disruption``: ``minimum``, ``all`` or ``single``).

A member **runs** when its phase is ``Running``, it is bound to a node and it is not being deleted
(:func:`member_running`): the members a move takes away. Pending members, finished ones (Succeeded,
Failed) and members already terminating are not counted; a member with an active PodMigrationJob runs
but is counted as leaving (arbitration knows which).

A gang whose parameters are not known (:attr:`DisruptionGang.unknown`: its PodGroup not seen yet, or, for a
gang of Koordinator's annotations, no member with a valid ``min-available``) fails closed: no disruption
keeps it (:func:`keeps_gang`), arbitration holds its running members' jobs until it is known, and a
preemption of any of its running members is refused. Its minimum and disruption mode are unknown, so
neither "at least the minimum stays" nor "the whole gang goes" can be told apart from breaking it (a
PodGroup not seen yet may name more members than the caller has seen).

Not guaranteed: the members are those the caller's :class:`~koordpy.scheduler.plugins.gang.GangCache` has
seen (a pod it could not read is no member).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from koordpy.scheduler.plugins.gang import keys
from koordpy.scheduler.plugins.gang.spec import Disruption, GangSpec
from koordpy.scheduler.plugins.gang.state import GangCache

__all__ = [
    "DisruptionGang",
    "GangTable",
    "gang_table",
    "gang_table_from_specs",
    "keeps_gang",
    "member_running",
    "names_a_gang",
    "preemption_refusal",
    "running_in",
]


_GANG_LABELS = (keys.LABEL_POD_GROUP, keys.LABEL_X_K8S_POD_GROUP, keys.LABEL_POD_GROUP_NAME_DEPRECATED)
_GANG_ANNOTATIONS = (keys.ANNOTATION_VOLCANO_GROUP_NAME, keys.ANNOTATION_VOLCANO_GROUP_NAME_ALIAS, keys.ANNOTATION_NAME)


def names_a_gang(pod: Mapping[str, Any]) -> bool:
    """Whether a pod object carries a key its gang is resolved from (cheap: nothing is converted), so
    that callers convert only the pods that may be gang members."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    spec = pod.get("spec") or {}
    return (
        any(labels.get(k) for k in _GANG_LABELS)
        or any(annotations.get(k) for k in _GANG_ANNOTATIONS)
        or bool(isinstance(spec, Mapping) and spec.get("schedulingGroup"))
    )


def member_running(phase: str, node_name: str, deleting: bool) -> bool:
    """Whether a gang member counts as running: phase ``Running``, bound, not being deleted."""
    return phase == "Running" and bool(node_name) and not deleting


@dataclass(frozen=True, slots=True)
class DisruptionGang:
    """One gang as the disruption rule sees it."""

    id: str
    """``namespace/name``."""
    source: str
    """Where its parameters come from: a PodGroup API group, or ``annotations``."""
    mode: str
    """``Strict`` or ``NonStrict`` (shown in messages; the rule is the same for both)."""
    min_member: int
    disruption: Disruption
    group: tuple[str, ...]
    """The gangs of its GangGroup that exist and declare the same group (sorted, the gang itself included)."""
    running: frozenset[str]
    """Member pod keys (``namespace/name``) that run (:func:`member_running`)."""
    members: int
    """Members known, whatever their phase."""
    unknown: str = ""
    """Why the gang's parameters are not known (its spec is not initialised: the cache's problem, such as
    ``gang ns/a: PodGroup ns/a (scheduling.k8s.io) not found``); "" when they are. Such a gang is held
    (fail closed): see the module docstring."""

    @property
    def label(self) -> str:
        """How messages name it: ``gang ns/name`` or, in a GangGroup, ``GangGroup [a,b]``."""
        return f"gang {self.id}" if len(self.group) == 1 else f"GangGroup [{','.join(self.group)}]"


@dataclass(frozen=True)
class GangTable:
    """The gangs of the pods a round asks about, and their GangGroup mates."""

    gangs: Mapping[str, DisruptionGang] = field(default_factory=dict)
    """By gang id."""
    pod_gang: Mapping[str, str] = field(default_factory=dict)
    """Pod key -> gang id, for the pods in a gang."""

    def of(self, pod_key: str) -> DisruptionGang | None:
        gid = self.pod_gang.get(pod_key)
        return None if gid is None else self.gangs.get(gid)

    def unit(self, gang: DisruptionGang) -> tuple[DisruptionGang, ...]:
        """The gangs that move together with ``gang``: its GangGroup's gangs, except ``single`` ones (their
        members are disrupted one by one, never as part of a unit)."""
        found = [self.gangs[gid] for gid in gang.group if gid in self.gangs]
        return tuple(g for g in found if g.disruption != "single" or g.id == gang.id)


_Lookup = Callable[[str], "tuple[GangSpec, Iterable[str]] | None"]
"""A gang's spec and member pod keys by gang id (None: no such gang)."""


def gang_table(cache: GangCache, pod_keys: Iterable[str], running: Callable[[str], bool]) -> GangTable:
    """The gangs of ``pod_keys`` (the pods with a PodMigrationJob) and of their GangGroups, from ``cache``;
    ``running(pod_key)`` tells whether a member runs (the caller reads the pod and calls
    :func:`member_running`)."""

    def lookup(gid: str) -> tuple[GangSpec, Iterable[str]] | None:
        view = cache.view(gid)
        return None if view is None else (view.spec, view.children)

    pod_gang = {key: gid for key in pod_keys if (gid := cache.gang_of(key)) is not None}
    return _table(pod_gang, lookup, running)


def gang_table_from_specs(gangs: Iterable[tuple[GangSpec, Iterable[str]]], running: Callable[[str], bool]) -> GangTable:
    """The same table from gang specs and their member pod keys (every member of every gang given)."""
    found = {spec.id: (spec, tuple(members)) for spec, members in gangs}
    pod_gang = {key: gid for gid, (_, members) in found.items() for key in members}
    return _table(pod_gang, found.get, running)


def _table(pod_gang: Mapping[str, str], lookup: _Lookup, running: Callable[[str], bool]) -> GangTable:
    gangs: dict[str, DisruptionGang] = {}
    for gid in dict.fromkeys(pod_gang.values()):
        if gid in gangs:
            continue
        own = lookup(gid)
        if own is None:
            continue
        spec = own[0]
        mates: dict[str, tuple[GangSpec, Iterable[str]]] = {}
        for mate in spec.group:  # the GangGroup: its gangs that exist and declare the same group
            other = own if mate == gid else lookup(mate)
            if other is not None and (mate == gid or other[0].group == spec.group):
                mates[mate] = other
        group = tuple(sorted(mates))
        for mate, (mate_spec, children) in mates.items():
            if mate in gangs:
                continue
            members = tuple(children)
            gangs[mate] = DisruptionGang(
                id=mate,
                source=mate_spec.ref.source,
                mode=mate_spec.mode,
                min_member=mate_spec.min_member,
                disruption=mate_spec.disruption,
                group=group,
                running=frozenset(k for k in members if running(k)),
                members=len(members),
                unknown="" if mate_spec.initialised else _unknown(mate_spec),
            )
    return GangTable(gangs, dict(pod_gang))


def _unknown(spec: GangSpec) -> str:
    """Why an un-initialised gang's parameters are not known (the cache's problem, else a generic one)."""
    if spec.problem:
        return spec.problem
    if spec.ref.source == "annotations":
        return f"gang {spec.id}: no member with a valid min-available seen yet"
    return f"gang {spec.id}: PodGroup {spec.id} ({spec.ref.source}) not seen yet"


def running_in(pods: Mapping[str, tuple[str, str, bool]]) -> Callable[[str], bool]:
    """``running`` for :func:`gang_table` from (phase, node name, deleting) by pod key."""

    def check(key: str) -> bool:
        found = pods.get(key)
        return found is not None and member_running(*found)

    return check


def keeps_gang(gang: DisruptionGang, taken: int) -> bool:
    """Whether taking ``taken`` of the gang's running members keeps the rule by itself: a ``single`` gang
    always; a ``minimum`` gang while at least its minimum keep running; an ``all`` gang never (unless
    ``taken`` is 0); a gang whose parameters are unknown never (unless ``taken`` is 0). Taking every running
    member (none left) is the gang moving whole: see the callers, which then check its GangGroup."""
    if taken <= 0:
        return True
    if gang.unknown:
        return False
    if gang.disruption == "single":
        return True
    stays = len(gang.running) - taken
    return gang.disruption == "minimum" and stays >= gang.min_member


def preemption_refusal(victims: Iterable[str], gangs: GangTable) -> str | None:
    """Why preempting ``victims`` (pod keys, on one node) would break a running gang, or None.

    Allowed: victims that keep every gang they touch (:func:`keeps_gang`), or that take every running
    member of a gang's unit (the gang, or its whole GangGroup: it is disrupted whole, and its
    replacements are gang-scheduled again). Refused: anything in between, such as one member of a gang of
    four with minimum 4, or a whole gang whose GangGroup mates keep running; and any running member of a
    gang whose parameters are unknown (:attr:`DisruptionGang.unknown`)."""
    taken = frozenset(victims)
    for gid in sorted({gid for key in taken if (gid := gangs.pod_gang.get(key)) is not None}):
        gang = gangs.gangs.get(gid)
        if gang is None:
            continue
        hit = len(gang.running & taken)
        if hit and gang.unknown:
            return f"preempting would break gang {gang.id} ({gang.unknown}: its minimum is unknown)"
        if keeps_gang(gang, hit) and (hit < len(gang.running) or len(gangs.unit(gang)) == 1):
            continue
        unit = gangs.unit(gang)
        running = frozenset(k for g in unit for k in g.running)
        if running <= taken:
            continue  # the whole unit goes
        stays = len(gang.running) - hit
        if gang.disruption == "all":
            why = f"disruptionMode all: {hit} of its {len(gang.running)} running members would go"
        elif stays == 0:
            why = f"its {hit} running members would go while {len(running - taken)} of {gang.label} keep running"
        else:
            why = f"{gang.mode}, minimum {gang.min_member}: {stays} of {len(gang.running)} would keep running"
        return f"preempting would break gang {gang.id} ({why})"
    return None
