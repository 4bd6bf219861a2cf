"""Custom resources with their upstream groups and field names, as pydantic models.

``RESOURCES`` lists every CRD the chart installs, in a stable order. Models read objects leniently
(unknown fields ignored); ``koordpy.crds.schema`` turns them into structural OpenAPI schemas.
"""

from koordpy.crds.ensurance import AVOIDANCE_ACTION, NODE_QOS, NODE_QOS_ENSURANCE_POLICY, POD_QOS
from koordpy.crds.nodemetric import NODE_METRIC
from koordpy.crds.peering import CLUSTER_KOPF_PEERING
from koordpy.crds.podgroup import POD_GROUP
from koordpy.crds.podmigrationjob import POD_MIGRATION_JOB
from koordpy.crds.reservation import RESERVATION
from koordpy.crds.schema import PrinterColumn, Resource, SchemaError, crd_manifest, structural_schema

__all__ = [
    "AVOIDANCE_ACTION",
    "CLUSTER_KOPF_PEERING",
    "NODE_METRIC",
    "NODE_QOS",
    "NODE_QOS_ENSURANCE_POLICY",
    "POD_GROUP",
    "POD_MIGRATION_JOB",
    "POD_QOS",
    "RESERVATION",
    "RESOURCES",
    "PrinterColumn",
    "Resource",
    "SchemaError",
    "crd_manifest",
    "structural_schema",
]

RESOURCES: tuple[Resource, ...] = (
    NODE_METRIC,
    POD_GROUP,
    POD_MIGRATION_JOB,
    RESERVATION,
    NODE_QOS_ENSURANCE_POLICY,
    NODE_QOS,
    POD_QOS,
    AVOIDANCE_ACTION,
    CLUSTER_KOPF_PEERING,
)
