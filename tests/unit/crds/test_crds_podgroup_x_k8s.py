"""The scheduling.x-k8s.io PodGroup model: its own phases, minMember ≥ 1, no status.scheduled."""

from __future__ import annotations

from koordpy.crds import RESOURCES, crd_manifest, structural_schema
from koordpy.crds.podgroup import POD_GROUP_X_K8S, XK8sPodGroupSpec, XK8sPodGroupStatus


def test_manifest_names_the_upstream_group() -> None:
    crd = crd_manifest(POD_GROUP_X_K8S)
    assert crd["metadata"]["name"] == "podgroups.scheduling.x-k8s.io"
    assert crd["spec"]["group"] == "scheduling.x-k8s.io"


def test_schema_has_its_own_phase_set_and_no_scheduled_count() -> None:
    status = structural_schema(XK8sPodGroupStatus)
    assert "scheduled" not in status["properties"]
    assert set(status["properties"]["phase"]["enum"]) == {
        "",
        "Pending",
        "Scheduling",
        "Running",
        "Unknown",
        "Finished",
        "Failed",
    }
    assert structural_schema(XK8sPodGroupSpec)["properties"]["minMember"]["minimum"] == 1


def test_chart_does_not_install_it_yet() -> None:
    assert POD_GROUP_X_K8S not in RESOURCES
