"""kopf's ClusterKopfPeering (``kopf.dev/v1``, cluster-scoped): the manager replicas' peering record.

kopf writes each replica's priority and keep-alive into ``status``; the content is kopf's, kept verbatim.
"""

from __future__ import annotations

from koordpy.crds.schema import Resource

__all__ = ["CLUSTER_KOPF_PEERING"]

CLUSTER_KOPF_PEERING = Resource(
    group="kopf.dev",
    version="v1",
    kind="ClusterKopfPeering",
    plural="clusterkopfpeerings",
    namespaced=False,
    spec=None,
    status=None,
    description="kopf operator peering: which replica of the koordpy manager is active.",
    extra_properties={
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
    status_subresource=False,
)
