"""The chart as installed in the session's real control plane: every object the real helm created is
there and healthy in the real API, the CRDs are established and the components' identities exist."""

from __future__ import annotations

import pytest
from cluster_kit import Kube, Release, wait_until

pytestmark = pytest.mark.cluster

CRDS = (
    "nodemetrics.slo.koordinator.sh",
    "podmigrationjobs.scheduling.koordinator.sh",
    "reservations.scheduling.koordinator.sh",
    "podgroups.scheduling.sigs.k8s.io",
    "nodeqosensurancepolicies.ensurance.crane.io",
    "avoidanceactions.ensurance.crane.io",
    "nodeqoss.ensurance.crane.io",
    "podqoss.ensurance.crane.io",
    "clusterkopfpeerings.kopf.dev",
)


def test_every_crd_is_established(release: Release, kube: Kube) -> None:
    def established() -> list[str]:
        missing = []
        for name in CRDS:
            resp = kube.client.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            conditions = {c["type"]: c["status"] for c in resp.json().get("status", {}).get("conditions", [])}
            if resp.status_code != 200 or conditions.get("Established") != "True":
                missing.append(name)
        return missing

    wait_until("CRDs established", lambda: not established())


def test_workloads_are_created_by_the_real_controllers(release: Release, kube: Kube) -> None:
    """The Deployments' ReplicaSets and the DaemonSet's pods exist: the real controllers accepted the pod
    templates (admission included), and kwok reports them Running."""
    namespace = release.namespace

    def running() -> dict[str, str]:
        return {
            p["metadata"]["name"]: p["status"].get("phase", "")
            for p in kube.list("Pod", namespace)
            if p["status"].get("phase") == "Running"
        }

    wait_until("chart pods Running", lambda: len(running()) >= 3)
    pods = running()
    prefixes = {name.rsplit("-", 2)[0] if "-agent-" not in name else "koordpy-agent" for name in pods}
    assert {"koordpy-scheduler", "koordpy-manager", "koordpy-agent"} <= prefixes, sorted(pods)
    for component in ("scheduler", "manager", "agent"):
        assert kube.get("ServiceAccount", release.service_account(component), namespace) is not None
