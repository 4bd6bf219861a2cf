"""CRD models -> structural schemas and CustomResourceDefinitions (koordpy.crds)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel, ValidationError

from koordpy.crds import RESOURCES, SchemaError, crd_manifest, structural_schema
from koordpy.crds.nodemetric import NodeMetricStatus, ResourceMap
from koordpy.crds.podmigrationjob import TEMPLATE_SPEC_REFUSED, PodMigrationJobSpec
from koordpy.crds.schema import FreeForm, Quantity, Time, WireModel
from koordpy.crds.structural import structural_problems
from koordpy.model.objects import nodemetric_from_dict

ROOT = Path(__file__).resolve().parents[3]

# Upstream identity of every kind: (group, version, kind, plural, scope, short names).
UPSTREAM = {
    "nodemetrics.slo.koordinator.sh": ("slo.koordinator.sh", "v1alpha1", "NodeMetric", "Cluster", []),
    "podgroups.scheduling.sigs.k8s.io": ("scheduling.sigs.k8s.io", "v1alpha1", "PodGroup", "Namespaced", ["pg", "pgs"]),
    "podmigrationjobs.scheduling.koordinator.sh": (
        "scheduling.koordinator.sh",
        "v1alpha1",
        "PodMigrationJob",
        "Cluster",
        ["pmj"],
    ),
    "reservations.scheduling.koordinator.sh": (
        "scheduling.koordinator.sh",
        "v1alpha1",
        "Reservation",
        "Cluster",
        ["rsv"],
    ),
    "nodeqosensurancepolicies.ensurance.crane.io": (
        "ensurance.crane.io",
        "v1alpha1",
        "NodeQOSEnsurancePolicy",
        "Cluster",
        ["nep"],
    ),
    # Crane v0.8+ (gocrane/api ensurance/v1alpha1: kubebuilder path=nodeqoss shortName=nq, path=podqoss shortName=pq).
    "nodeqoss.ensurance.crane.io": ("ensurance.crane.io", "v1alpha1", "NodeQOS", "Cluster", ["nq"]),
    "podqoss.ensurance.crane.io": ("ensurance.crane.io", "v1alpha1", "PodQOS", "Cluster", ["pq"]),
    "avoidanceactions.ensurance.crane.io": ("ensurance.crane.io", "v1alpha1", "AvoidanceAction", "Cluster", ["avoid"]),
    "clusterkopfpeerings.kopf.dev": ("kopf.dev", "v1", "ClusterKopfPeering", "Cluster", []),
}


def openapi(res_name: str) -> dict[str, Any]:
    res = next(r for r in RESOURCES if r.name == res_name)
    schema: dict[str, Any] = crd_manifest(res)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def at(schema: dict[str, Any], dotted: str) -> dict[str, Any]:
    node = schema
    for part in dotted.split("."):
        node = node["items"] if part == "[]" else node["properties"][part]
    return node


def test_every_upstream_kind_is_registered_with_its_identity() -> None:
    seen = {}
    for res in RESOURCES:
        spec = crd_manifest(res)["spec"]
        seen[res.name] = (
            spec["group"],
            spec["versions"][0]["name"],
            spec["names"]["kind"],
            spec["scope"],
            spec["names"].get("shortNames", []),
        )
    assert seen == UPSTREAM


@pytest.mark.parametrize("name", sorted(UPSTREAM))
def test_generated_schemas_are_structural(name: str) -> None:
    assert structural_problems(openapi(name)) == []


@pytest.mark.parametrize("name", sorted(UPSTREAM))
def test_printer_columns_point_at_schema_fields(name: str) -> None:
    schema = openapi(name)
    res = next(r for r in RESOURCES if r.name == name)
    for column in crd_manifest(res)["spec"]["versions"][0]["additionalPrinterColumns"]:
        path = column["jsonPath"].lstrip(".")
        if path.startswith("metadata."):
            continue
        at(schema, path)  # KeyError names the missing field


def test_status_subresource_where_a_status_model_exists() -> None:
    with_status = {r.name for r in RESOURCES if "subresources" in crd_manifest(r)["spec"]["versions"][0]}
    assert with_status == {
        "nodemetrics.slo.koordinator.sh",
        "podgroups.scheduling.sigs.k8s.io",
        "podmigrationjobs.scheduling.koordinator.sh",
        "reservations.scheduling.koordinator.sh",
    }


def test_upstream_field_names_and_special_types() -> None:
    nm = openapi("nodemetrics.slo.koordinator.sh")
    policy = at(nm, "spec.metricCollectPolicy")
    assert set(policy["properties"]) == {
        "aggregateDurationSeconds",
        "reportIntervalSeconds",
        "nodeAggregatePolicy",
        "nodeMemoryCollectPolicy",
    }
    cpu = at(nm, "status.nodeMetric.nodeUsage.resources")["additionalProperties"]
    assert cpu["x-kubernetes-int-or-string"] is True and "type" not in cpu
    assert at(nm, "status.updateTime") == {
        "type": "string",
        "format": "date-time",
        "description": "When the agent last reported.",
    }
    assert at(nm, "status.podsMetric.[].extensions")["x-kubernetes-preserve-unknown-fields"] is True
    assert "numaNodeID" in at(nm, "status.nodeMetric.numaUsages.[]")["properties"]
    pmj = openapi("podmigrationjobs.scheduling.koordinator.sh")
    assert pmj["required"] == ["spec"]
    assert at(pmj, "spec")["required"] == ["podRef"]
    assert at(pmj, "spec.mode")["enum"] == ["ReservationFirst", "EvictDirectly"]
    # the template's fields are declared (a migrate-role user's template is checked at admission); its
    # pod template stays schemaless, as a Reservation's
    template = at(pmj, "spec.reservationOptions.template")
    assert "x-kubernetes-preserve-unknown-fields" not in template
    assert at(pmj, "spec.reservationOptions.template.spec.template")["x-kubernetes-preserve-unknown-fields"] is True
    refused = at(pmj, "spec.reservationOptions.template.spec")["x-kubernetes-validations"]
    assert [(r["rule"], r["fieldPath"]) for r in refused] == [
        (f"!has(self.{key})", f".{key}") for key in TEMPLATE_SPEC_REFUSED
    ]
    (ttl_rule,) = at(pmj, "spec")["x-kubernetes-validations"]
    assert ttl_rule["fieldPath"] == ".reservationOptions.template.spec.ttl"
    pg = openapi("podgroups.scheduling.sigs.k8s.io")
    assert at(pg, "spec.minMember") == {
        "minimum": 0,
        "type": "integer",
        "description": "Members that must be schedulable together before any of them is bound.",
    }


def test_no_defaults_refs_or_titles_leak_into_schemas() -> None:
    def walk(node: Any) -> None:
        if isinstance(node, dict):
            assert not {"default", "$ref", "$defs", "title", "additionalProperties"} & {
                k for k, v in node.items() if k != "additionalProperties" or v is False
            }, node
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for name in UPSTREAM:
        walk(openapi(name))


class _Union(WireModel):
    value: int | str


class _Nested(WireModel):
    inner: _Union | None = None


def test_unions_without_structural_form_are_refused_with_a_path() -> None:
    with pytest.raises(SchemaError, match=r"_Nested\.inner\.value: union of 2 types"):
        structural_schema(_Nested)


class _Special(WireModel):
    quantity: Quantity
    when: Time | None = None
    blob: FreeForm | None = None
    tags: dict[str, str] = {}
    items: list[int] = []


def test_special_types_render_as_kubernetes_expects() -> None:
    schema = structural_schema(_Special)
    assert schema["required"] == ["quantity"]
    assert schema["properties"]["quantity"]["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    assert schema["properties"]["when"] == {"type": "string", "format": "date-time"}
    assert schema["properties"]["blob"] == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    assert schema["properties"]["tags"] == {"type": "object", "additionalProperties": {"type": "string"}}
    assert schema["properties"]["items"] == {"type": "array", "items": {"type": "integer"}}
    assert structural_problems({"type": "object", "properties": schema["properties"]}) == []


def test_models_read_upstream_objects_and_agree_with_the_model_view() -> None:
    raw = {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric",
        "metadata": {"name": "n1"},
        "spec": {"metricCollectPolicy": {"aggregateDurationSeconds": 300, "reportIntervalSeconds": 60}},
        "status": {
            "updateTime": "2026-11-21T10:00:00Z",
            "nodeMetric": {
                "nodeUsage": {"resources": {"cpu": "2500m", "memory": "4Gi"}, "devices": [{"type": "gpu"}]},
                "aggregatedNodeUsages": [{"duration": "5m0s", "usage": {"p95": {"resources": {"cpu": 3}}}}],
                "futureField": {"kept": "by the API server only if preserved; ignored here"},
            },
            "podsMetric": [{"namespace": "a", "name": "p", "podUsage": {"resources": {"cpu": "1"}}, "qos": "LS"}],
        },
    }
    status = NodeMetricStatus.model_validate(raw["status"])
    view = nodemetric_from_dict(raw)
    assert status.node_metric is not None and status.node_metric.node_usage is not None
    assert status.node_metric.node_usage.resources == {"cpu": "2500m", "memory": "4Gi"}
    assert view.update_time is not None and status.update_time == "2026-11-21T10:00:00Z"
    assert status.pods_metric is not None and status.pods_metric[0].qos == view.pods[0].qos == "LS"


def test_podmigrationjob_requires_pod_ref() -> None:
    with pytest.raises(ValidationError, match="podRef"):
        PodMigrationJobSpec.model_validate({"mode": "EvictDirectly"})
    spec = PodMigrationJobSpec.model_validate({"podRef": {"namespace": "a", "name": "p"}, "ttl": "5m"})
    assert spec.pod_ref.name == "p"


@pytest.mark.parametrize(
    ("pod_ref", "accepted"),
    [
        ({"namespace": "shop", "name": "web-1"}, True),
        ({"namespace": "shop", "name": "web-1.canary"}, True),
        ({"namespace": "shop", "name": "web-1/status"}, False),  # would address the status subresource
        ({"namespace": "shop", "name": "a" * 9000}, False),
        ({"namespace": "shop", "name": "a" * 254}, False),
        ({"namespace": "Shop", "name": "web-1"}, False),
        ({"namespace": "s" * 64, "name": "web-1"}, False),
        ({"namespace": "shop", "name": "web-1", "uid": "u" * 129}, False),
    ],
)
def test_podmigrationjob_pod_ref_is_bounded_as_the_api_server_bounds_names(
    pod_ref: dict[str, Any], accepted: bool
) -> None:
    # the CRD schema (what kube-apiserver enforces) and the model (what koordpy reads) agree
    schema = at(openapi("podmigrationjobs.scheduling.koordinator.sh"), "spec")
    body = {"podRef": pod_ref, "ttl": "5m"}
    errors = list(jsonschema.Draft7Validator(schema).iter_errors(body))
    assert (errors == []) is accepted, errors
    if accepted:
        PodMigrationJobSpec.model_validate(body)
    else:
        with pytest.raises(ValidationError):
            PodMigrationJobSpec.model_validate(body)


@pytest.mark.parametrize(
    ("ttl", "accepted"), [("5m", True), ("1h30m", True), ("0", True), ("1e99h", False), ("5 minutes", False)]
)
def test_podmigrationjob_ttl_is_a_go_duration(ttl: str, accepted: bool) -> None:
    schema = at(openapi("podmigrationjobs.scheduling.koordinator.sh"), "spec")
    body = {"podRef": {"namespace": "shop", "name": "web-1"}, "ttl": ttl}
    assert (list(jsonschema.Draft7Validator(schema).iter_errors(body)) == []) is accepted


def _render_crds_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("render_crds", ROOT / "scripts" / "render-crds.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_crd_templates_equal_freshly_generated_ones() -> None:
    files: dict[Path, str] = _render_crds_script().render()
    directory = ROOT / "charts" / "koordpy" / "templates" / "crds"
    assert {p.name for p in files} == {p.name for p in directory.glob("*.yaml")}, "run scripts/render-crds.py"
    for path, text in files.items():
        assert path.read_text(encoding="utf-8") == text, f"{path.name} is stale: run scripts/render-crds.py"


def test_models_are_base_models() -> None:
    for res in RESOURCES:
        for model in (res.spec, res.status):
            assert model is None or issubclass(model, BaseModel)


@pytest.mark.parametrize("bad", ["1e99999999", "1e400", "\uff11", "\u0663Gi", 2**64])
def test_resource_map_quantities_are_bounded_when_validated(bad: object) -> None:
    # Hostile quantities: the CRD pattern admits 1e99999999; validation through the model refuses it by the
    # same bounds as every reader (koordpy.model.quantity), and keeps good values as written.
    assert ResourceMap.model_validate({"resources": {"cpu": "1500m"}}).resources == {"cpu": "1500m"}
    with pytest.raises(ValidationError, match="out of range|not a quantity"):
        ResourceMap.model_validate({"resources": {"cpu": bad}})


def test_reservation_has_koordinators_fields_columns_and_owner_bounds() -> None:
    res = next(r for r in RESOURCES if r.name == "reservations.scheduling.koordinator.sh")
    version = crd_manifest(res)["spec"]["versions"][0]
    # Upstream's column order: Age second, not appended last.
    assert [(c["name"], c["jsonPath"]) for c in version["additionalPrinterColumns"]] == [
        ("Phase", ".status.phase"),
        ("Age", ".metadata.creationTimestamp"),
        ("Node", ".status.nodeName"),
        ("TTL", ".spec.ttl"),
        ("Expires", ".spec.expires"),
    ]
    rsv = openapi("reservations.scheduling.koordinator.sh")
    assert "required" not in rsv
    spec = at(rsv, "spec")
    assert sorted(spec["required"]) == ["owners", "template"]
    assert set(spec["properties"]) == {
        "template",
        "owners",
        "ttl",
        "expires",
        "preAllocation",
        "preAllocationPolicy",
        "allocateOnce",
        "unschedulable",
        "taints",
        "allocatePolicy",
    }
    assert at(rsv, "spec.template") == {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        "description": at(rsv, "spec.template")["description"],
    }
    assert spec["properties"]["owners"]["minItems"] == 1
    owner = at(rsv, "spec.owners.[]")
    assert owner["minProperties"] == 1
    assert set(owner["properties"]) == {"object", "controller", "labelSelector"}
    assert at(rsv, "spec.allocatePolicy")["enum"] == ["Aligned", "Restricted"]
    assert at(rsv, "status.phase")["enum"] == ["Pending", "Available", "Waiting", "Succeeded", "Failed"]
    assert at(rsv, "status.conditions.[].type")["enum"] == ["Scheduled", "Ready"]
    assert set(at(rsv, "status")["properties"]) == {
        "phase",
        "conditions",
        "currentOwners",
        "nodeName",
        "allocatable",
        "allocated",
    }
    assert at(rsv, "status.allocatable")["additionalProperties"]["x-kubernetes-int-or-string"] is True
