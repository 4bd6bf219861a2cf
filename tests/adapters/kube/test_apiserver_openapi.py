"""The emulator's OpenAPI v3 index: what kubectl apply needs to validate server-side (fieldValidation)."""

from __future__ import annotations

from koordpy.kube.client import ApiClient
from koordpy.kube.errors import NotFound


async def test_index_lists_every_group_version(api_client: ApiClient) -> None:
    index = await api_client.request("GET", "/openapi/v3")
    assert index["paths"]["api/v1"] == {"serverRelativeURL": "/openapi/v3/api/v1"}
    assert "apis/scheduling.koordinator.sh/v1alpha1" in index["paths"]


async def test_group_version_doc_has_kinds_and_a_field_validating_patch(api_client: ApiClient) -> None:
    doc = await api_client.request("GET", "/openapi/v3/apis/scheduling.koordinator.sh/v1alpha1")
    gvks = [s["x-kubernetes-group-version-kind"][0]["kind"] for s in doc["components"]["schemas"].values()]
    assert "PodMigrationJob" in gvks
    patch = doc["paths"]["/apis/scheduling.koordinator.sh/v1alpha1/podmigrationjobs/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"]["kind"] == "PodMigrationJob"
    assert [p["name"] for p in patch["parameters"]] == ["fieldValidation"]
    core = await api_client.request("GET", "/openapi/v3/api/v1")
    assert "/api/v1/namespaces/{namespace}/pods/{name}" in core["paths"]


async def test_unknown_group_version_is_404(api_client: ApiClient) -> None:
    try:
        await api_client.request("GET", "/openapi/v3/apis/nope.example/v1")
    except NotFound:
        return
    raise AssertionError("expected 404")
