"""Resource references: where each API kind lives and how its URLs are built.

Not guaranteed: that the server actually serves a resource (CRDs may be missing); only the shape of
the URL is known here.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

__all__ = [
    "ALL",
    "AVOIDANCEACTIONS",
    "CONFIGMAPS",
    "CSISTORAGECAPACITIES",
    "CUSTOMRESOURCEDEFINITIONS",
    "DEPLOYMENTS",
    "EVENTS",
    "LEASES",
    "NAMESPACES",
    "NODEMETRICS",
    "NODEQOSENSURANCEPOLICIES",
    "NODEQOSS",
    "NODES",
    "PDBS",
    "PODGROUPS",
    "PODGROUPS_NATIVE",
    "PODGROUPS_VOLCANO",
    "PODGROUPS_X_K8S",
    "PODMIGRATIONJOBS",
    "PODQOSS",
    "PODS",
    "REPLICASETS",
    "RESERVATIONS",
    "STATEFULSETS",
    "ResourceRef",
    "by_plural",
]


@dataclass(frozen=True, slots=True)
class ResourceRef:
    """One API resource type: ``group`` is ``""`` for the core group."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        """The ``apiVersion`` field value of objects of this kind (``v1`` or ``group/version``)."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def prefix(self) -> str:
        """``/api/v1`` or ``/apis/{group}/{version}``."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    @property
    def qualified(self) -> str:
        """``plural.group`` (``pods`` for the core group), the RBAC/kubectl spelling."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """The URL path for a collection (no name) or an object (name), optionally a subresource.

        A namespaced resource without a namespace gives the all-namespaces collection path. A
        namespace on a cluster-scoped resource, a namespaced object without a namespace, or a
        subresource without a name raises ValueError.
        """
        if namespace is not None and not self.namespaced:
            raise ValueError(f"{self.qualified} is cluster-scoped; got namespace {namespace!r}")
        if name is not None and namespace is None and self.namespaced:
            raise ValueError(f"{self.qualified} is namespaced; {name!r} needs a namespace")
        if subresource is not None and name is None:
            raise ValueError(f"subresource {subresource!r} of {self.qualified} needs an object name")
        for segment in (namespace, name):
            if segment is not None and (segment in ("", ".", "..") or "/" in segment or "%" in segment):
                # the API server's IsValidPathSegmentName: "web-1/status" would address a subresource
                raise ValueError(f"{segment[:80]!r} cannot be a name in a request path (empty, '.', '..', '/' or '%')")
        parts = [self.prefix]
        if namespace is not None:
            parts.append(f"namespaces/{quote(namespace, safe='')}")
        parts.append(self.plural)
        if name is not None:
            parts.append(quote(name, safe=""))
        if subresource is not None:
            parts.append(subresource)
        return "/".join(parts)


NAMESPACES = ResourceRef("", "v1", "namespaces", "Namespace", namespaced=False)
NODES = ResourceRef("", "v1", "nodes", "Node", namespaced=False)
PODS = ResourceRef("", "v1", "pods", "Pod", namespaced=True)
CONFIGMAPS = ResourceRef("", "v1", "configmaps", "ConfigMap", namespaced=True)
"""Read by ``koordpy thresholds`` in live mode only (the components' configuration files); not in ``ALL``."""
DEPLOYMENTS = ResourceRef("apps", "v1", "deployments", "Deployment", namespaced=True)
REPLICASETS = ResourceRef("apps", "v1", "replicasets", "ReplicaSet", namespaced=True)
STATEFULSETS = ResourceRef("apps", "v1", "statefulsets", "StatefulSet", namespaced=True)
"""Workloads ``koordpy descheduler balance`` reads in live mode (replica counts); not in ``ALL``."""
EVENTS = ResourceRef("", "v1", "events", "Event", namespaced=True)
LEASES = ResourceRef("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
PDBS = ResourceRef("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", namespaced=True)
CSISTORAGECAPACITIES = ResourceRef(
    "storage.k8s.io", "v1", "csistoragecapacities", "CSIStorageCapacity", namespaced=True
)
"""The kind of the extender's gang requeue signal (``gang.requeueSignal``): one object it may update."""
CUSTOMRESOURCEDEFINITIONS = ResourceRef(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", namespaced=False
)
NODEMETRICS = ResourceRef("slo.koordinator.sh", "v1alpha1", "nodemetrics", "NodeMetric", namespaced=False)
PODGROUPS = ResourceRef("scheduling.sigs.k8s.io", "v1alpha1", "podgroups", "PodGroup", namespaced=True)
PODGROUPS_X_K8S = ResourceRef("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup", namespaced=True)
"""scheduler-plugins' PodGroup API; the chart does not install its CRD (watchers must tolerate a 404), so
it is not in ``ALL`` (the resources the API emulator serves)."""
PODGROUPS_VOLCANO = ResourceRef("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", namespaced=True)
"""Volcano's PodGroup API. Its CRD (Volcano's) has no status subresource: status is written on the object
itself. Not installed by the chart, not in ``ALL``."""
PODGROUPS_NATIVE = ResourceRef("scheduling.k8s.io", "v1beta1", "podgroups", "PodGroup", namespaced=True)
"""Kubernetes' own PodGroup API (v1.37: beta, served only with the ``GenericWorkload`` feature gate and
``--runtime-config=scheduling.k8s.io/v1beta1=true``): watchers must tolerate a 404. kube-scheduler owns its
status; koordpy only reads it. Not in ``ALL``."""
PODMIGRATIONJOBS = ResourceRef(
    "scheduling.koordinator.sh", "v1alpha1", "podmigrationjobs", "PodMigrationJob", namespaced=False
)
RESERVATIONS = ResourceRef("scheduling.koordinator.sh", "v1alpha1", "reservations", "Reservation", namespaced=False)
NODEQOSENSURANCEPOLICIES = ResourceRef(
    "ensurance.crane.io", "v1alpha1", "nodeqosensurancepolicies", "NodeQOSEnsurancePolicy", namespaced=False
)
AVOIDANCEACTIONS = ResourceRef(
    "ensurance.crane.io", "v1alpha1", "avoidanceactions", "AvoidanceAction", namespaced=False
)
NODEQOSS = ResourceRef("ensurance.crane.io", "v1alpha1", "nodeqoss", "NodeQOS", namespaced=False)
PODQOSS = ResourceRef("ensurance.crane.io", "v1alpha1", "podqoss", "PodQOS", namespaced=False)

ALL: tuple[ResourceRef, ...] = (
    NAMESPACES,
    NODES,
    PODS,
    EVENTS,
    LEASES,
    PDBS,
    CSISTORAGECAPACITIES,
    CUSTOMRESOURCEDEFINITIONS,
    NODEMETRICS,
    PODGROUPS,
    PODMIGRATIONJOBS,
    RESERVATIONS,
    NODEQOSENSURANCEPOLICIES,
    AVOIDANCEACTIONS,
    NODEQOSS,
    PODQOSS,
)

_BY_KEY = {(r.group, r.plural): r for r in ALL}


def by_plural(group: str, plural: str) -> ResourceRef | None:
    """The known resource with this group (``""`` for core) and plural, or None."""
    return _BY_KEY.get((group, plural))
