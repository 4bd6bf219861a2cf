"""Which gang a pod belongs to, and the gang's parameters, exactly as Koordinator resolves them.

Resolution order of the gang name (first non-empty wins; reference §2.2):

0. ``spec.schedulingGroup.podGroupName`` → a ``scheduling.k8s.io/v1beta1`` PodGroup, Kubernetes' own
   (koordpy's addition: kube-scheduler's ``GangScheduling`` plugin gates such a pod whatever its labels
   and annotations say, so they are not read for it);
1. label ``pod-group.scheduling.sigs.k8s.io`` → a ``scheduling.sigs.k8s.io`` PodGroup;
2. label ``scheduling.x-k8s.io/pod-group`` → a ``scheduling.x-k8s.io`` PodGroup (koordpy's addition:
   Koordinator does not read this label; it sits right after the other PodGroup label);
3. annotation ``scheduling.k8s.io/group-name`` (else ``scheduling.volcano.sh/group-name``) → a
   ``scheduling.volcano.sh/v1beta1`` PodGroup (koordpy's addition: Volcano's own keys);
4. deprecated label ``pod-group.scheduling.sigs.k8s.io/name`` → an annotation-way gang;
5. annotation ``gang.scheduling.koordinator.sh/name`` → an annotation-way gang.

The gang id is ``namespace/name`` (the pod's namespace). A PodGroup-way gang takes its parameters from
the PodGroup (``spec`` plus the Koordinator annotations on the PodGroup); an annotation-way gang from
the **first** pod whose ``min-available`` parses (first writer wins; later pods' annotations are
ignored). Defaults and clamping are listed on each helper below and in the package README.

Not guaranteed: Go's parsers are mirrored for the inputs Koordinator documents (decimal int32,
Go durations, a JSON array of strings); exotic inputs (``"0x10"``, ``"1e3"``) are refused the same
way Go refuses them, but error texts differ from Go's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from koordpy.config.gang import CoschedulingArgs, MatchPolicy
from koordpy.model.durations import DurationError, parse_duration, parse_rfc3339
from koordpy.model.objects import PodInfo
from koordpy.scheduler.plugins.gang import keys

__all__ = [
    "API_NATIVE",
    "API_SIGS",
    "API_VOLCANO",
    "API_X_K8S",
    "NATIVE_SCHEDULED_CONDITION",
    "Disruption",
    "GangRef",
    "GangSource",
    "GangSpec",
    "Mode",
    "PodGroupError",
    "PodGroupInfo",
    "gang_ref",
    "group_id",
    "ignored_gang_keys",
    "missing_spec",
    "podgroup_from_dict",
    "spec_from_pod",
    "spec_from_podgroup",
]

API_SIGS: Final = "scheduling.sigs.k8s.io"
API_X_K8S: Final = "scheduling.x-k8s.io"
API_VOLCANO: Final = "scheduling.volcano.sh"
API_NATIVE: Final = "scheduling.k8s.io"
"""Kubernetes' own PodGroup (``scheduling.k8s.io/v1beta1``, v1.37 beta behind the ``GenericWorkload`` gate).
kube-scheduler's ``GangScheduling`` plugin gates its members; koordpy reads it (see ``spec_from_podgroup``)."""
PodGroupApi = Literal["scheduling.sigs.k8s.io", "scheduling.x-k8s.io", "scheduling.volcano.sh", "scheduling.k8s.io"]
API_VERSIONS: Final[dict[str, str]] = {
    API_SIGS: f"{API_SIGS}/v1alpha1",
    API_X_K8S: f"{API_X_K8S}/v1alpha1",
    API_VOLCANO: f"{API_VOLCANO}/v1beta1",
    API_NATIVE: f"{API_NATIVE}/v1beta1",
}
"""The ``apiVersion`` of each PodGroup API koordpy reads."""

GangSource = Literal[
    "scheduling.sigs.k8s.io", "scheduling.x-k8s.io", "scheduling.volcano.sh", "scheduling.k8s.io", "annotations"
]
Mode = Literal["Strict", "NonStrict"]
Disruption = Literal["minimum", "all", "single"]
"""How a running gang may be disrupted: ``minimum`` (CRD and annotation gangs: never below ``minMember``),
``all`` (a native PodGroup's ``disruptionMode: {all: {}}``: all members or none) or ``single`` (its
``disruptionMode: {single: {}}``, the API's default: members one by one)."""
MATCH_POLICIES: tuple[MatchPolicy, ...] = ("once-satisfied", "only-waiting", "waiting-and-running")

_INT32 = re.compile(r"^[+-]?[0-9]+$")


class PodGroupError(ValueError):
    """A PodGroup object that cannot be read; the message names the field path."""


@dataclass(frozen=True, slots=True)
class GangRef:
    """A pod's gang: id ``namespace/name`` and where its parameters come from."""

    namespace: str
    name: str
    source: GangSource

    @property
    def id(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class PodGroupInfo:
    """Read-only view of a PodGroup of any of the four APIs."""

    api: PodGroupApi
    namespace: str
    name: str
    min_member: int
    schedule_timeout_seconds: int | None
    annotations: Mapping[str, str]
    creation_time: float | None
    phase: str
    """``status.phase`` as stored ("" when unset)."""
    uid: str = ""
    conditions: tuple[Mapping[str, Any], ...] = ()
    """``status.conditions`` as stored (objects only; anything else in the list is left out)."""
    ignored: tuple[str, ...] = ()
    """Fields set on the PodGroup that koordpy does not honour (Volcano's ``spec.queue``,
    ``spec.minTaskMember``, ...), as ``path=value`` for a warning."""
    policy: Literal["gang", "basic", ""] = ""
    """A native PodGroup's ``spec.schedulingPolicy`` (``gang``: all-or-nothing at ``minCount``; ``basic``:
    none); "" for the CRD APIs."""
    disruption: Disruption = "minimum"
    """A native PodGroup's ``spec.disruptionMode`` (``all`` or ``single``); ``minimum`` for the CRD APIs."""

    @property
    def id(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class GangSpec:
    """A gang's resolved parameters.

    ``initialised`` is Koordinator's ``HasGangInit``: false while the PodGroup a label names does not
    exist (``problem`` says so) or no member's ``min-available`` parsed yet. An un-initialised gang
    never passes admit nor permit, and its wait time is 0 (Koordinator returns Wait(0)).
    """

    ref: GangRef
    initialised: bool
    min_member: int
    total_number: int
    mode: Mode
    match_policy: MatchPolicy
    wait_seconds: float
    group: tuple[str, ...]
    """Gang ids of the GangGroup this gang declares, sorted, always including the gang itself. The group
    counts only the gangs that declare exactly this group (``GangCache`` checks that)."""
    create_time: float | None
    problem: str = ""
    """Why the gang is not initialised ("" when it is)."""
    left_out: tuple[str, ...] = ()
    """``groups`` entries not in the group: other namespaces, while ``gang.crossNamespaceGroups`` is off."""
    disruption: Disruption = "minimum"
    """How the running gang may be disrupted (see ``Disruption``)."""

    @property
    def id(self) -> str:
        return self.ref.id

    @property
    def native(self) -> bool:
        """A ``scheduling.k8s.io`` PodGroup's gang: kube-scheduler's ``GangScheduling`` admits its members."""
        return self.ref.source == API_NATIVE

    @property
    def group_id(self) -> str:
        return group_id(self.group)


def group_id(gang_ids: tuple[str, ...] | list[str]) -> str:
    """Koordinator's GangGroup id: the gang ids sorted and joined with ``,``."""
    return ",".join(sorted(gang_ids))


def gang_ref(pod: PodInfo) -> GangRef | None:
    """The pod's gang by the resolution order above; None for a pod in no gang."""
    if pod.scheduling_group:
        return GangRef(pod.namespace, pod.scheduling_group, API_NATIVE)
    labels = pod.labels
    name = labels.get(keys.LABEL_POD_GROUP, "")
    if name:
        return GangRef(pod.namespace, name, API_SIGS)
    name = labels.get(keys.LABEL_X_K8S_POD_GROUP, "")
    if name:
        return GangRef(pod.namespace, name, API_X_K8S)
    annotations = pod.annotations
    if annotations:
        name = annotations.get(keys.ANNOTATION_VOLCANO_GROUP_NAME, "") or annotations.get(
            keys.ANNOTATION_VOLCANO_GROUP_NAME_ALIAS, ""
        )
        if name:
            return GangRef(pod.namespace, name, API_VOLCANO)
    name = labels.get(keys.LABEL_POD_GROUP_NAME_DEPRECATED, "") or pod.annotations.get(keys.ANNOTATION_NAME, "")
    if name:
        return GangRef(pod.namespace, name, "annotations")
    return None


_GANG_LABELS = (keys.LABEL_POD_GROUP, keys.LABEL_X_K8S_POD_GROUP, keys.LABEL_POD_GROUP_NAME_DEPRECATED)
_GANG_ANNOTATIONS = (
    keys.ANNOTATION_VOLCANO_GROUP_NAME,
    keys.ANNOTATION_VOLCANO_GROUP_NAME_ALIAS,
    keys.ANNOTATION_NAME,
)


def ignored_gang_keys(pod: PodInfo) -> tuple[str, ...]:
    """The gang labels and annotations (steps 1–5) a pod with ``spec.schedulingGroup`` also carries: koordpy
    does not read them for it (the native PodGroup decides), sorted; () for any other pod."""
    if not pod.scheduling_group:
        return ()
    found = [f"label {k}" for k in _GANG_LABELS if pod.labels.get(k)]
    found += [f"annotation {k}" for k in _GANG_ANNOTATIONS if pod.annotations.get(k)]
    return tuple(sorted(found))


def _parse_int32(text: str) -> int | None:
    """Go ``strconv.ParseInt(text, 10, 32)``; None where Go returns an error."""
    if not _INT32.match(text):
        return None
    value = int(text)
    if not -(2**31) <= value < 2**31:
        return None
    return value


def _total_number(raw: str, min_member: int) -> int:
    """``total-number``: unparseable (including unset) → min; a non-zero value below min → min.

    An explicit ``"0"`` stays 0, as in Koordinator (``totalChildrenNum != 0 && < min``).
    """
    total = _parse_int32(raw)
    if total is None:
        return min_member
    if total != 0 and total < min_member:
        return min_member
    return total


def _mode(raw: str) -> Mode:
    """``mode``: exactly ``Strict`` or ``NonStrict``; anything else (including unset) → Strict."""
    return "NonStrict" if raw == keys.MODE_NON_STRICT else "Strict"


def _match_policy(annotations: Mapping[str, str], default: MatchPolicy) -> MatchPolicy:
    """``match-policy`` (else its alias key); unset or unknown → the args' ``defaultMatchPolicy``."""
    raw = annotations.get(keys.ANNOTATION_MATCH_POLICY, "") or annotations.get(keys.ANNOTATION_MATCH_POLICY_ALIAS, "")
    for policy in MATCH_POLICIES:
        if raw == policy:
            return policy
    return default


def _group(raw: str, gang_id: str, cross_namespace: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``groups``: a JSON array of ``ns/name`` strings; invalid JSON, a non-array or an empty array → just
    the gang itself. The gang itself is always part of its group (koordpy; Koordinator keeps an array
    that omits it as given). Entries in another namespace are left out unless ``cross_namespace``.
    Returns the group (sorted) and the entries left out (sorted)."""
    try:
        parsed: Any = json.loads(raw) if raw else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, list) or not parsed or not all(isinstance(x, str) for x in parsed):
        return (gang_id,), ()
    namespace = gang_id.partition("/")[0]
    kept = {gang_id}
    left_out: set[str] = set()
    for entry in parsed:
        if cross_namespace or entry.partition("/")[0] == namespace:
            kept.add(entry)
        else:
            left_out.add(entry)
    return tuple(sorted(kept)), tuple(sorted(left_out))


def _pod_wait_seconds(raw: str, default: float) -> float:
    """``waiting-time``: a Go duration; unset, unparseable, 0 or negative → ``defaultTimeout``."""
    try:
        seconds = parse_duration(raw) if raw else 0.0
    except DurationError:
        return default
    return seconds if seconds > 0 else default


def spec_from_pod(ref: GangRef, pod: PodInfo, args: CoschedulingArgs) -> GangSpec:
    """An annotation-way gang's parameters from one member (Koordinator ``tryInitByPodConfig``).

    ``min-available``: the deprecated label wins when non-empty; else the annotation; missing or not a
    decimal int32 → the gang stays un-initialised (the next member is tried). 0 and negative values are
    accepted as Koordinator accepts them.
    """
    deprecated = pod.labels.get(keys.LABEL_MIN_AVAILABLE_DEPRECATED, "")
    if deprecated:
        min_member = _parse_int32(deprecated)
        where = f"label {keys.LABEL_MIN_AVAILABLE_DEPRECATED}"
    elif keys.ANNOTATION_MIN_AVAILABLE in pod.annotations:
        min_member = _parse_int32(pod.annotations[keys.ANNOTATION_MIN_AVAILABLE])
        where = f"annotation {keys.ANNOTATION_MIN_AVAILABLE}"
    else:
        return missing_spec(ref, f"gang {ref.id}: member {pod.key} has no {keys.ANNOTATION_MIN_AVAILABLE} annotation")
    if min_member is None:
        return missing_spec(ref, f"gang {ref.id}: member {pod.key}: {where} is not an integer")
    annotations = pod.annotations
    group, left_out = _group(annotations.get(keys.ANNOTATION_GROUPS, ""), ref.id, args.cross_namespace_groups)
    return GangSpec(
        ref=ref,
        initialised=True,
        min_member=min_member,
        total_number=_total_number(annotations.get(keys.ANNOTATION_TOTAL_NUMBER, ""), min_member),
        mode=_mode(annotations.get(keys.ANNOTATION_MODE, "")),
        match_policy=_match_policy(annotations, args.default_match_policy),
        wait_seconds=_pod_wait_seconds(annotations.get(keys.ANNOTATION_WAITING_TIME, ""), args.default_timeout),
        group=group,
        create_time=pod.creation_time,
        left_out=left_out,
    )


def spec_from_podgroup(ref: GangRef, pg: PodGroupInfo, args: CoschedulingArgs) -> GangSpec:
    """A PodGroup-way gang's parameters (Koordinator ``tryInitByPodGroup``), re-read on every update.

    ``minMember`` from the spec (unset → 0); wait time ``scheduleTimeoutSeconds`` when > 0, else
    ``defaultTimeout``; ``total-number``, ``mode``, ``match-policy`` and ``groups`` from the PodGroup's
    annotations with the same defaults as the annotation way, except that a Volcano PodGroup's match
    policy defaults to ``waiting-and-running`` (Volcano's gang counts the members already running).

    A native PodGroup (``scheduling.k8s.io``) has kube-scheduler's semantics and nothing of Koordinator's
    (its annotations are not read): minimum ``schedulingPolicy.gang.minCount`` (``basic``: 1, what
    kube-scheduler's ``GangScheduling`` counts for it), Strict, ``waiting-and-running`` (kube-scheduler's
    Permit counts assumed and bound members), the gang alone in its group, wait ``defaultTimeout`` (the API
    has no wait time), and its ``disruptionMode``.
    """
    if pg.api == API_NATIVE:
        return GangSpec(
            ref=ref,
            initialised=True,
            min_member=pg.min_member,
            total_number=pg.min_member,
            mode="Strict",
            match_policy="waiting-and-running",
            wait_seconds=args.default_timeout,
            group=(ref.id,),
            create_time=pg.creation_time,
            disruption=pg.disruption,
        )
    annotations = pg.annotations
    timeout = pg.schedule_timeout_seconds
    group, left_out = _group(annotations.get(keys.ANNOTATION_GROUPS, ""), ref.id, args.cross_namespace_groups)
    return GangSpec(
        ref=ref,
        initialised=True,
        min_member=pg.min_member,
        total_number=_total_number(annotations.get(keys.ANNOTATION_TOTAL_NUMBER, ""), pg.min_member),
        mode=_mode(annotations.get(keys.ANNOTATION_MODE, "")),
        match_policy=_match_policy(
            annotations, "waiting-and-running" if pg.api == API_VOLCANO else args.default_match_policy
        ),
        wait_seconds=float(timeout) if timeout is not None and timeout > 0 else args.default_timeout,
        group=group,
        create_time=pg.creation_time,
        left_out=left_out,
    )


def missing_spec(ref: GangRef, problem: str) -> GangSpec:
    """An un-initialised gang (PodGroup not found, or no parseable ``min-available`` yet)."""
    return GangSpec(
        ref=ref,
        initialised=False,
        min_member=0,
        total_number=0,
        mode="Strict",
        match_policy="once-satisfied",
        wait_seconds=0.0,
        group=(ref.id,),
        create_time=None,
        problem=problem,
    )


def _field_int(raw: Any, path: str, *, minimum: int | None) -> int | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise PodGroupError(f"{path}: expected an integer")
    if minimum is not None and raw < minimum:
        raise PodGroupError(f"{path}: must be at least {minimum}, got {raw}")
    return raw


def podgroup_from_dict(raw: Mapping[str, Any]) -> PodGroupInfo:
    """Read a PodGroup of any of the four APIs (told apart by ``apiVersion``).

    Raises :class:`PodGroupError` naming the field. Not checked: ``minResources`` (not read). Volcano's
    ``queue``, ``minTaskMember``, ``networkTopology`` and ``preemptable`` are read only to be listed in
    ``ignored`` (``queue: default``, Volcano's default, is not listed). A native PodGroup: see
    :func:`_native_podgroup`; its ``phase`` is kube-scheduler's ``PodGroupInitiallyScheduled`` condition.
    """
    api_version = raw.get("apiVersion")
    group = str(api_version).partition("/")[0] if isinstance(api_version, str) else ""
    if group not in API_VERSIONS:
        expected = ", ".join(API_VERSIONS.values())
        raise PodGroupError(f"apiVersion: expected one of {expected}, got {api_version!r}")
    meta = raw.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise PodGroupError("metadata: expected an object")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise PodGroupError("metadata.name: required")
    spec = raw.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise PodGroupError("spec: expected an object")
    status = raw.get("status") or {}
    if not isinstance(status, Mapping):
        raise PodGroupError("status: expected an object")
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, Mapping):
        raise PodGroupError("metadata.annotations: expected an object")
    created = meta.get("creationTimestamp")
    creation_time: float | None = None
    if created not in (None, ""):
        if not isinstance(created, str):
            raise PodGroupError("metadata.creationTimestamp: expected an RFC 3339 string")
        try:
            creation_time = parse_rfc3339(created)
        except DurationError as exc:
            raise PodGroupError(f"metadata.creationTimestamp: {exc}") from None
    phase = status.get("phase") or ""
    if not isinstance(phase, str):
        raise PodGroupError("status.phase: expected a string")
    conditions = status.get("conditions") or ()
    if not isinstance(conditions, list | tuple):
        raise PodGroupError("status.conditions: expected a list")
    uid = meta.get("uid")
    ignored: list[str] = []
    if group == API_VOLCANO:
        queue = spec.get("queue")
        if queue not in (None, "", "default"):
            ignored.append(f"spec.queue={queue}")
        for field in ("minTaskMember", "networkTopology", "preemptable"):
            if spec.get(field) not in (None, {}, ""):
                ignored.append(f"spec.{field}={json.dumps(spec.get(field), sort_keys=True)[:120]}")
    if group == API_NATIVE:
        return _native_podgroup(
            meta, spec, name, annotations=annotations, creation_time=creation_time, conditions=conditions
        )
    api: PodGroupApi = API_SIGS if group == API_SIGS else API_X_K8S if group == API_X_K8S else API_VOLCANO
    return PodGroupInfo(
        api=api,
        namespace=str(meta.get("namespace") or "default"),
        name=name,
        min_member=_field_int(spec.get("minMember"), "spec.minMember", minimum=0) or 0,
        schedule_timeout_seconds=_field_int(
            spec.get("scheduleTimeoutSeconds"), "spec.scheduleTimeoutSeconds", minimum=None
        ),
        annotations={str(k): str(v) for k, v in annotations.items()},
        creation_time=creation_time,
        phase=phase,
        uid=uid if isinstance(uid, str) else "",
        conditions=tuple(dict(c) for c in conditions if isinstance(c, Mapping)),
        ignored=tuple(ignored),
    )


NATIVE_SCHEDULED_CONDITION: Final = "PodGroupInitiallyScheduled"
"""kube-scheduler's condition on a native PodGroup (True once its gang was first scheduled, and for good)."""


def _native_podgroup(
    meta: Mapping[str, Any],
    spec: Mapping[str, Any],
    name: str,
    *,
    annotations: Mapping[str, Any],
    creation_time: float | None,
    conditions: Any,
) -> PodGroupInfo:
    """A ``scheduling.k8s.io/v1beta1`` PodGroup: ``spec.schedulingPolicy`` is ``{gang: {minCount: N}}`` or
    ``{basic: {}}`` (exactly one), ``spec.disruptionMode`` ``{all: {}}`` or ``{single: {}}`` (unset: single,
    the API's default). Its ``phase`` is read from kube-scheduler's ``PodGroupInitiallyScheduled``
    condition: ``Scheduled`` (True), else its reason (``Unschedulable``, ``SchedulerError``), else ""."""
    policy_raw = spec.get("schedulingPolicy")
    if not isinstance(policy_raw, Mapping):
        raise PodGroupError("spec.schedulingPolicy: required (gang or basic)")
    gang = policy_raw.get("gang")
    policy: Literal["gang", "basic"]
    if gang is not None:
        if not isinstance(gang, Mapping):
            raise PodGroupError("spec.schedulingPolicy.gang: expected an object")
        min_count = _field_int(gang.get("minCount"), "spec.schedulingPolicy.gang.minCount", minimum=1)
        if min_count is None:
            raise PodGroupError("spec.schedulingPolicy.gang.minCount: required")
        policy = "gang"
    elif isinstance(policy_raw.get("basic"), Mapping):
        min_count, policy = 1, "basic"
    else:
        raise PodGroupError("spec.schedulingPolicy: expected gang or basic")
    mode_raw = spec.get("disruptionMode")
    disruption: Disruption = "single"
    if mode_raw is not None:
        if not isinstance(mode_raw, Mapping):
            raise PodGroupError("spec.disruptionMode: expected an object")
        if mode_raw.get("all") is not None:
            disruption = "all"
        elif mode_raw.get("single") is None:
            raise PodGroupError("spec.disruptionMode: expected all or single")
    kept = tuple(dict(c) for c in conditions if isinstance(c, Mapping))
    phase = ""
    for cond in kept:
        if cond.get("type") == NATIVE_SCHEDULED_CONDITION:
            phase = "Scheduled" if cond.get("status") == "True" else str(cond.get("reason") or "NotScheduled")
    uid = meta.get("uid")
    return PodGroupInfo(
        api=API_NATIVE,
        namespace=str(meta.get("namespace") or "default"),
        name=name,
        min_member=min_count,
        schedule_timeout_seconds=None,
        annotations={str(k): str(v) for k, v in annotations.items()},
        creation_time=creation_time,
        phase=phase,
        uid=uid if isinstance(uid, str) else "",
        conditions=kept,
        policy=policy,
        disruption=disruption,
    )
