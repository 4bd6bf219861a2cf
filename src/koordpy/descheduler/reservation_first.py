"""The Reservation a ``ReservationFirst`` PodMigrationJob needs, and what the job reads back from it.

Follows Koordinator's descheduler (``pkg/descheduler/controllers/migration/reservation``), except where
a job could reach a Reservation that is not its own:

* **Name**: ``spec.reservationOptions.reservationRef.name`` when the job names an existing Reservation;
  else the job's UID (upstream), or ``pmj-<job name>`` for a job without a UID (dumps). The name depends
  only on the job, so a manager restarted between creating the Reservation and recording it finds it
  instead of creating another. A ``template.metadata.name`` is not a name koordpy uses: one other than
  the job's UID (which is what Koordinator's own controller writes back into the jobs it handles) makes
  the job invalid (:func:`template_problem`), because a name its creator chose is either someone else's
  Reservation or a name taken from someone else.
* **Whose it is** (:func:`is_ours`): a Reservation is the job's only when it carries the job's marker,
  the annotation :data:`ANNOTATION_MIGRATION_JOB` with the job's name and UID, written when the manager
  creates it. A Reservation of the job's name without that marker (:func:`foreign`) is never adopted,
  waited for, consumed or deleted by the job; a ``reservationRef`` the user chose is used, never deleted.
  Deletes name the Reservation's UID (:class:`OwnedReservation`), so one made again under the same name
  meanwhile is never deleted.
* **Template** (:func:`pod_template`): the pod's container and init-container *requests* (not limits),
  overhead, tolerations, nodeSelector, required node affinity, priority, priorityClassName and
  schedulerName, labels; ``nodeName`` is never copied. Every required node-selector term gets
  ``matchFields: metadata.name NotIn [current node]`` (one term with only that when there were none), so
  the room is reserved elsewhere (as Koordinator v1.8 builds it).
* **Owners** (:func:`owners_for`): the pod's controller (``controller`` with the pod's namespace), so the
  replacement its controller creates may use the room; a pod without a controller gets a
  ``labelSelector`` of its labels (upstream gives none and the Reservation is refused); a pod with
  neither cannot be migrated this way.
* ``spec.reservationOptions.template`` may set what the replacement needs and where it may go, and no
  more (:func:`template_problem`, the same rules the CRD schema enforces at admission): its
  ``spec.template`` (a pod template: requests, node selector, affinity, tolerations) replaces the pod's;
  its ``spec.ttl`` must be positive and at most the job's ttl (copied from the job when unset);
  ``metadata.labels`` and ``metadata.annotations`` are copied (koordpy's own keys win); ``allocateOnce``
  is forced true and the template's ``nodeName`` cleared, as upstream; the current-node exclusion is
  appended to its affinity. The fields of :data:`TEMPLATE_SPEC_REFUSED` (``owners``, ``expires``, ...)
  make the job invalid; any other field of the template is ignored. So whoever may create a job (the
  ``migrate`` role) cannot have the manager create a Reservation for other owners, under a name of
  their choosing, or for longer than the job.

Not guaranteed: volumes are not copied (the Reservation holds requests only); ``preemptionOptions`` is
ignored (upstream reserves it too); the size of a template's requests is not bounded by the pod's.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from koordpy.crds.podmigrationjob import TEMPLATE_SPEC_REFUSED
from koordpy.model.durations import DurationError, parse_duration
from koordpy.model.objects import ObjectError, PodInfo, pod_from_dict
from koordpy.scheduler.plugins.reservation.ledger import holdings_on_node
from koordpy.scheduler.plugins.reservation.spec import is_expired, reservation_from_dict

__all__ = [
    "ANNOTATION_MIGRATION_JOB",
    "LABEL_MANAGED_BY",
    "LABEL_MIGRATION_JOB",
    "RESERVATION_API_VERSION",
    "TEMPLATE_SPEC_REFUSED",
    "BoundPod",
    "OwnedReservation",
    "ReservationState",
    "bound_pod",
    "excluding_node",
    "foreign",
    "is_ours",
    "job_marker",
    "owned",
    "owners_for",
    "pod_template",
    "read_reservation",
    "reservation_manifest",
    "reservation_name",
    "reservation_ref",
    "stale_reservations",
    "template_problem",
]

RESERVATION_API_VERSION = "scheduling.koordinator.sh/v1alpha1"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_MIGRATION_JOB = "koordpy.io/migration-job"
"""Label on the Reservations a migration created: the job's name (hashed when not a valid label value)."""
ANNOTATION_MIGRATION_JOB = "koordpy.io/migration-job"
"""The manager's marker on the Reservations a migration created: ``<job name>/<job uid>``, written at
creation (a template's value for it is overwritten). :func:`is_ours` and :func:`stale_reservations` read it."""

_CONTAINER_KEYS = ("containers", "initContainers")
_COPIED_SPEC_KEYS = ("tolerations", "nodeSelector", "priority", "priorityClassName", "schedulerName", "overhead")


def _spec(job: Mapping[str, Any]) -> Mapping[str, Any]:
    return job.get("spec") or {}


def _options(job: Mapping[str, Any]) -> Mapping[str, Any]:
    return _spec(job).get("reservationOptions") or {}


def reservation_ref(job: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``spec.reservationOptions.reservationRef`` when it names a Reservation."""
    ref = _options(job).get("reservationRef")
    return ref if isinstance(ref, Mapping) and ref.get("name") else None


def _default_name(job: Mapping[str, Any]) -> str:
    meta = job.get("metadata") or {}
    uid = meta.get("uid")
    return str(uid) if uid else f"pmj-{meta.get('name') or ''}"


def reservation_name(job: Mapping[str, Any]) -> str:
    """The Reservation the job uses: its reservationRef, else the name it would create (see module doc)."""
    ref = reservation_ref(job)
    return str(ref["name"]) if ref is not None else _default_name(job)


def job_marker(job: Mapping[str, Any]) -> str:
    """The value of :data:`ANNOTATION_MIGRATION_JOB` on the Reservation ``job`` creates."""
    meta = job.get("metadata") or {}
    return f"{meta.get('name') or ''}/{meta.get('uid') or ''}"


def _marker(reservation: Mapping[str, Any]) -> str | None:
    value = ((reservation.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_MIGRATION_JOB)
    return value if isinstance(value, str) else None


def is_ours(job: Mapping[str, Any], reservation: Mapping[str, Any] | None) -> bool:
    """Whether ``reservation`` (an object as read) is the one ``job`` created: it carries the job's
    marker, name and UID (:func:`job_marker`). Only such a Reservation is adopted after a restart and
    deleted when the job fails."""
    return reservation is not None and _marker(reservation) == job_marker(job)


def foreign(job: Mapping[str, Any], reservation: Mapping[str, Any] | None) -> bool:
    """Whether ``reservation`` sits under the name the job would create its own with (no reservationRef
    of the user's names it) without being the job's: someone else's, which the job must not touch."""
    if reservation is None or is_ours(job, reservation):
        return False
    return str((reservation.get("metadata") or {}).get("name") or "") == _default_name(job)


@dataclass(frozen=True)
class OwnedReservation:
    """A Reservation a job created, as the manager deletes it: by name, only while it has ``uid``."""

    name: str
    uid: str


def owned(job: Mapping[str, Any], reservation: Mapping[str, Any] | None) -> OwnedReservation | None:
    """``reservation`` as an :class:`OwnedReservation` when it is ``job``'s (:func:`is_ours`), else None."""
    if reservation is None or not is_ours(job, reservation):
        return None
    meta = reservation.get("metadata") or {}
    return OwnedReservation(str(meta.get("name") or ""), str(meta.get("uid") or ""))


def template_problem(job: Mapping[str, Any], job_ttl_seconds: float) -> str | None:
    """Why ``spec.reservationOptions.template`` of ``job`` is not one the manager creates a Reservation
    from (field path first), or None. ``job_ttl_seconds``: the job's ttl (its ``spec.ttl``, else
    ``defaultJobTTL``; 0 when it has none). See the module doc for what a template may set."""
    template = _options(job).get("template")
    if not isinstance(template, Mapping):
        return None
    where = "spec.reservationOptions.template"
    meta = template.get("metadata")
    if isinstance(meta, Mapping) and meta.get("name") not in (None, ""):
        uid = str((job.get("metadata") or {}).get("uid") or "")
        if str(meta["name"]) != uid:
            return (
                f"{where}.metadata.name: {str(meta['name'])[:63]!r} may not be set: the manager names the "
                f"Reservation after the job's UID; remove the name, or name a Reservation an admin created "
                f"in spec.reservationOptions.reservationRef"
            )
    spec = template.get("spec")
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        return f"{where}.spec: expected an object"
    for key, why in TEMPLATE_SPEC_REFUSED.items():
        if spec.get(key) is not None:
            return f"{where}.spec.{key}: may not be set: {why}"
    ttl = spec.get("ttl")
    if ttl is None:
        return None
    try:
        seconds = parse_duration(ttl) if isinstance(ttl, str) else -1.0
    except DurationError as exc:
        return f"{where}.spec.ttl: {exc}"
    if seconds <= 0:
        return f"{where}.spec.ttl: must be a positive duration such as 5m (0 never expires)"
    if job_ttl_seconds > 0 and seconds > job_ttl_seconds:
        return f"{where}.spec.ttl: {ttl} is longer than the job's ttl ({_format_ttl(job_ttl_seconds)})"
    return None


def _requests_only(containers: Any) -> list[dict[str, Any]]:
    out = []
    for container in containers or ():
        if not isinstance(container, Mapping):
            continue
        entry: dict[str, Any] = {"name": container.get("name") or ""}
        requests = (container.get("resources") or {}).get("requests")
        if requests:
            entry["resources"] = {"requests": dict(requests)}
        out.append(entry)
    return out


def excluding_node(pod_spec: Mapping[str, Any], node: str) -> dict[str, Any]:
    """``pod_spec`` with ``metadata.name NotIn [node]`` added to every required node-selector term."""
    spec = copy.deepcopy(dict(pod_spec))
    if not node:
        return spec
    skip = {"key": "metadata.name", "operator": "NotIn", "values": [node]}
    affinity = spec.setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        required["nodeSelectorTerms"] = [{"matchFields": [skip]}]
        return spec
    for term in terms:
        term.setdefault("matchFields", []).append(dict(skip, values=[node]))
    return spec


def pod_template(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The PodTemplateSpec a Reservation for ``pod`` holds (see the module doc), without the exclusion."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    out: dict[str, Any] = {key: _requests_only(spec.get(key)) for key in _CONTAINER_KEYS if spec.get(key)}
    for key in _COPIED_SPEC_KEYS:
        if spec.get(key) is not None:
            out[key] = copy.deepcopy(spec[key])
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required is not None:
        out["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": copy.deepcopy(required)}}
    template_meta: dict[str, Any] = {"namespace": str(meta.get("namespace") or "")}
    if meta.get("labels"):
        template_meta["labels"] = dict(meta["labels"])
    return {"metadata": template_meta, "spec": out}


def owners_for(pod: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The pod's controller (:attr:`PodInfo.controller`, with the pod's namespace); else a labelSelector
    of its labels; None with neither. A malformed pod raises :class:`ObjectError` (field path named)."""
    info = pod_from_dict(pod)
    if info.controller is not None:
        ctrl = info.controller
        controller: dict[str, Any] = {"apiVersion": ctrl.api_version, "kind": ctrl.kind, "name": ctrl.name}
        if ctrl.uid:
            controller["uid"] = ctrl.uid
        controller.update(controller=True, namespace=info.namespace)
        return [{"controller": controller}]
    if info.labels:
        return [{"labelSelector": {"matchLabels": dict(info.labels)}}]
    return None


def _label_value(name: str) -> str:
    if len(name) <= 63 and name.replace("-", "").replace(".", "").replace("_", "").isalnum():
        return name
    return "h-" + hashlib.sha256(name.encode()).hexdigest()[:40]


def _format_ttl(seconds: float) -> str:
    return f"{int(seconds)}s" if float(seconds).is_integer() else f"{seconds}s"


def reservation_manifest(job: Mapping[str, Any], pod: Mapping[str, Any], ttl_seconds: float) -> dict[str, Any] | str:
    """The Reservation to create for ``job`` whose pod is ``pod``; a message (str) when none can be made.

    ``ttl_seconds`` is the job's ttl (its ``spec.ttl``, else ``defaultJobTTL``). The job's template is
    assumed to have passed :func:`template_problem`: of it only ``spec.template``, ``spec.ttl``,
    ``metadata.labels`` and ``metadata.annotations`` are read.
    """
    meta = job.get("metadata") or {}
    job_name = str(meta.get("name") or "")
    node = str((pod.get("spec") or {}).get("nodeName") or "")
    user = _options(job).get("template") or {}
    user_meta = user.get("metadata") or {}
    user_spec = user.get("spec") or {}
    spec: dict[str, Any] = {}
    if user_spec.get("template"):
        spec["template"] = copy.deepcopy(dict(user_spec["template"]))
    else:
        spec["template"] = pod_template(pod)
    pod_meta = pod.get("metadata") or {}
    key = f"{pod_meta.get('namespace')}/{pod_meta.get('name')}"
    try:
        owners = owners_for(pod)
    except ObjectError as exc:
        return f'Pod "{key}" cannot be read: {exc}'
    if owners is None:
        return f'Pod "{key}" has no controller and no labels: no replacement could own a Reservation'
    spec["owners"] = owners
    spec["allocateOnce"] = True
    template = dict(spec["template"])
    pod_spec = dict(template.get("spec") or {})
    pod_spec.pop("nodeName", None)
    template["spec"] = excluding_node(pod_spec, node)
    spec["template"] = template
    if user_spec.get("ttl") is not None:
        spec["ttl"] = str(user_spec["ttl"])
    elif ttl_seconds > 0:
        spec["ttl"] = _format_ttl(ttl_seconds)
    labels = {str(k): str(v) for k, v in (user_meta.get("labels") or {}).items()}
    labels.update({LABEL_MANAGED_BY: "koordpy", LABEL_MIGRATION_JOB: _label_value(job_name)})
    annotations = {str(k): str(v) for k, v in (user_meta.get("annotations") or {}).items()}
    annotations[ANNOTATION_MIGRATION_JOB] = job_marker(job)
    metadata: dict[str, Any] = {"name": _default_name(job), "labels": labels, "annotations": annotations}
    if meta.get("uid"):
        metadata["ownerReferences"] = [
            {"apiVersion": RESERVATION_API_VERSION, "kind": "PodMigrationJob", "name": job_name, "uid": meta["uid"]}
        ]
    return {"apiVersion": RESERVATION_API_VERSION, "kind": "Reservation", "metadata": metadata, "spec": spec}


@dataclass(frozen=True)
class ReservationState:
    """What the migration reads of its Reservation."""

    name: str
    phase: str
    node_name: str
    expired: bool
    """Failed with condition Ready reason Expired, or past its ttl/expires while not finished."""
    unschedulable: str | None
    """The message of condition Scheduled False reason Unschedulable, when there is one."""
    current_owners: tuple[Mapping[str, Any], ...]
    invalid: str | None = None
    """Why the object could not be read (then nothing else is meaningful)."""

    @property
    def placed(self) -> bool:
        return bool(self.node_name) and self.phase in ("Available", "Waiting", "Succeeded")


def _condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    for cond in status.get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == kind:
            return cond
    return {}


def read_reservation(raw: Mapping[str, Any], now: float) -> ReservationState:
    """The migration's view of a Reservation object (a malformed one: ``invalid`` says why)."""
    name = str((raw.get("metadata") or {}).get("name") or "")
    status = raw.get("status") or {}
    try:
        info = reservation_from_dict(raw)
    except ObjectError as exc:
        return ReservationState(name, "", "", False, None, (), invalid=str(exc))
    ready = _condition(status, "Ready")
    scheduled = _condition(status, "Scheduled")
    expired = (info.phase == "Failed" and ready.get("reason") == "Expired") or (
        not info.is_terminal and is_expired(info, now)
    )
    unschedulable = None
    if scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
        unschedulable = str(scheduled.get("message") or "")
    owners = tuple(o for o in status.get("currentOwners") or () if isinstance(o, Mapping) and o.get("name"))
    return ReservationState(info.name, info.phase, info.node_name, expired, unschedulable, owners)


@dataclass(frozen=True)
class BoundPod:
    """The pod that took the Reservation (its ``status.currentOwners[0]``, or the first pod the ledger
    finds bound through it)."""

    namespace: str
    name: str
    uid: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def bound_pod(raw: Mapping[str, Any], node_pods: Sequence[PodInfo], now: float) -> BoundPod | None:
    """Who bound the Reservation ``raw``: ``status.currentOwners[0]`` (set by the manager when an
    allocateOnce Reservation is consumed), else the first pod among ``node_pods`` the ledger finds bound
    through it (its reservation-allocated annotation names it; the manager may not have written the
    status yet). None while nobody has: an owner that runs on the node without having been bound
    through the Reservation (a sibling of the same workload) never is."""
    status = raw.get("status") or {}
    for owner in status.get("currentOwners") or ():
        if isinstance(owner, Mapping) and owner.get("name"):
            return BoundPod(str(owner.get("namespace") or ""), str(owner["name"]), str(owner.get("uid") or ""))
    if not node_pods:
        return None
    try:
        info = reservation_from_dict(raw)
    except ObjectError:
        return None
    for holding in holdings_on_node([info], node_pods, now):
        if holding.consumed:
            key = holding.owners[0]
            pod = next(p for p in node_pods if p.key == key)
            return BoundPod(pod.namespace, pod.name, pod.uid)
    return None


def stale_reservations(
    jobs: Sequence[Mapping[str, Any]], reservations: Sequence[Mapping[str, Any]]
) -> list[OwnedReservation]:
    """Reservations a migration created whose job is gone (or replaced by one with another UID), Failed
    or Aborted: the manager deletes them (each only while it has the UID read here). Only Reservations
    that carry the manager's marker with a job name and UID (:data:`ANNOTATION_MIGRATION_JOB`, which
    the manager always writes so) are ever returned."""
    by_name = {str((j.get("metadata") or {}).get("name")): j for j in jobs}
    stale = []
    for res in reservations:
        meta = res.get("metadata") or {}
        marker = _marker(res)
        if not marker or meta.get("deletionTimestamp"):
            continue
        job_name, _, job_uid = marker.rpartition("/")
        if not job_name or not job_uid:
            continue  # not a marker the manager writes
        found = OwnedReservation(str(meta.get("name") or ""), str(meta.get("uid") or ""))
        job = by_name.get(job_name)
        if job is None or str((job.get("metadata") or {}).get("uid") or "") != job_uid:
            stale.append(found)
            continue
        if ((job.get("status") or {}).get("phase")) in ("Failed", "Aborted"):
            stale.append(found)
    return sorted(stale, key=lambda r: r.name)
