"""The chart's life on real control planes of its own: install on a stock kube-apiserver, upgrade,
uninstall (what is left is listed through API discovery), reinstall.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_kit import CHART, RELEASE, RELEASE_NAMESPACE, Components, Kube, Release, helm, wait_until

from koordpy_testkit.controlplane import ControlPlane, fake_node

pytestmark = pytest.mark.cluster

INSTANCE = f"app.kubernetes.io/instance={RELEASE}"
KEPT_CRDS = {
    "nodemetrics.slo.koordinator.sh",
    "podmigrationjobs.scheduling.koordinator.sh",
    "reservations.scheduling.koordinator.sh",
    "podgroups.scheduling.sigs.k8s.io",
    "nodeqosensurancepolicies.ensurance.crane.io",
    "avoidanceactions.ensurance.crane.io",
    "nodeqoss.ensurance.crane.io",
    "podqoss.ensurance.crane.io",
    "clusterkopfpeerings.kopf.dev",
}


def release_objects(kube: Kube, namespace: str) -> set[str]:
    """Every object labelled as the release's, in any listable API (found by discovery), plus everything in
    the release namespace that Kubernetes itself did not put there; as ``kind/namespace/name``."""
    found: set[str] = set()
    versions = ["/api/v1"]
    for group in kube.client.get("/apis").json()["groups"]:
        versions.append(f"/apis/{group['preferredVersion']['groupVersion']}")
    for base in versions:
        for resource in kube.client.get(base).json()["resources"]:
            if "/" in resource["name"] or "list" not in resource["verbs"]:
                continue
            path = f"{base}/{resource['name']}"
            selectors = [{"labelSelector": INSTANCE}]
            if resource["namespaced"]:
                path_ns = f"{base}/namespaces/{namespace}/{resource['name']}"
            for params in selectors:
                items = kube.client.get(path, params=params).json().get("items", [])
                found |= {
                    f"{resource['kind']}/{i['metadata'].get('namespace', '')}/{i['metadata']['name']}" for i in items
                }
            if resource["namespaced"]:
                for item in kube.client.get(path_ns).json().get("items", []):
                    meta = item["metadata"]
                    builtin = (resource["kind"], meta["name"]) in {
                        ("ServiceAccount", "default"),
                        ("ConfigMap", "kube-root-ca.crt"),
                    } or resource["kind"] in {"Event"}
                    if not builtin:
                        found.add(f"{resource['kind']}/{namespace}/{meta['name']}")
    if kube.get("Namespace", namespace) is not None:
        found.add(f"Namespace//{namespace}")
    return found


def crds(kube: Kube) -> set[str]:
    items = kube.client.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions").json()["items"]
    return {item["metadata"]["name"] for item in items}


@pytest.fixture(scope="module")
def lifecycle_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A control plane for the install/upgrade/uninstall sequence (the session's keeps its release)."""
    plane = ControlPlane(workdir=tmp_path_factory.mktemp("lifecycle"), default_scheduler=True)
    plane.start()
    try:
        with plane.client() as api:
            api.post("/api/v1/nodes", json=fake_node("node-0")).raise_for_status()
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="module")
def lifecycle_kube(lifecycle_plane: ControlPlane) -> Iterator[Kube]:
    with lifecycle_plane.client() as client:
        yield Kube(client)


def test_chart_installs_on_a_stock_apiserver(tmp_path: Path) -> None:
    with ControlPlane(workdir=tmp_path / "stock", default_scheduler=False) as plane, plane.client() as client:
        kube = Kube(client)
        kube.create(fake_node("node-0"))
        result = helm(
            plane, "install", RELEASE, "charts/koordpy", "-n", RELEASE_NAMESPACE, "--create-namespace", check=False
        )
        assert result.returncode == 0, result.stderr
        wait_until(
            "the agent DaemonSet's pod",
            lambda: [
                p for p in kube.list("Pod", RELEASE_NAMESPACE) if p["metadata"]["name"].startswith("koordpy-agent-")
            ],
        )


def test_upgrade_rolls_the_scheduler_with_the_new_configuration(
    lifecycle_plane: ControlPlane, lifecycle_kube: Kube
) -> None:
    release = Release(lifecycle_plane, lifecycle_kube)
    # The HA values: two manager replicas, one the holder of the manager's Lease.
    release.install("-f", str(CHART / "ci" / "ha-values.yaml"))
    before = release.component_config("scheduler")
    deployment = lifecycle_kube.get("Deployment", f"{RELEASE}-scheduler", RELEASE_NAMESPACE)
    assert deployment is not None
    checksum = deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"]

    release.install("--reuse-values", "--set", "scheduler.config.loadAware.usageThresholds.cpu=55", upgrade=True)
    after = release.component_config("scheduler")
    assert after["loadAware"]["usageThresholds"]["cpu"] == 55
    assert after != before
    deployment = lifecycle_kube.get("Deployment", f"{RELEASE}-scheduler", RELEASE_NAMESPACE)
    assert deployment is not None
    assert deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"] != checksum
    # The real Deployment controller rolls a new ReplicaSet for the changed template.
    wait_until(
        "a second scheduler ReplicaSet",
        lambda: (
            len(
                [
                    r
                    for r in lifecycle_kube.list("ReplicaSet", RELEASE_NAMESPACE)
                    if "scheduler" in r["metadata"]["name"]
                ]
            )
            == 2
        ),
    )


def test_manager_lease_goes_with_the_release(
    lifecycle_plane: ControlPlane, lifecycle_kube: Kube, tmp_path: Path
) -> None:
    """The HA manager takes the release's Lease (a chart object), and stopped (SIGTERM, 5 s of grace) the
    moment it holds it, releases it; uninstall leaves only the CRDs kept on purpose: the Lease goes with the
    release although a manager held it. Run alone, the test installs the HA release the test before leaves."""
    release = Release(lifecycle_plane, lifecycle_kube)
    if helm(lifecycle_plane, "status", RELEASE, "-n", RELEASE_NAMESPACE, check=False).returncode != 0:
        release.install("-f", str(CHART / "ci" / "ha-values.yaml"))
    assert release_objects(lifecycle_kube, RELEASE_NAMESPACE)
    components = Components(lifecycle_plane, release, tmp_path)
    try:
        components.start_manager()
        held = wait_until(
            "the manager holds its Lease",
            lambda: ((lifecycle_kube.get("Lease", "koordpy-manager", RELEASE_NAMESPACE) or {}).get("spec") or {}).get(
                "holderIdentity"
            ),
        )
        assert lifecycle_kube.get("ClusterKopfPeering", "koordpy-manager") is None  # no kopf peering any more
    finally:
        components.close()
    released = (lifecycle_kube.get("Lease", "koordpy-manager", RELEASE_NAMESPACE) or {}).get("spec") or {}
    assert (released.get("holderIdentity"), released.get("leaseDurationSeconds")) == ("", 1), (held, released)
    release.uninstall()
    lifecycle_kube.delete("Namespace", RELEASE_NAMESPACE)  # helm does not delete a namespace it created
    wait_until("namespace gone", lambda: lifecycle_kube.get("Namespace", RELEASE_NAMESPACE) is None)
    left = release_objects(lifecycle_kube, RELEASE_NAMESPACE)
    assert {name.split("/", 1)[0] for name in left} <= {"CustomResourceDefinition"}, sorted(left)
    assert crds(lifecycle_kube) >= KEPT_CRDS


def test_reinstall_after_uninstall_adopts_the_kept_crds(lifecycle_plane: ControlPlane, lifecycle_kube: Kube) -> None:
    release = Release(lifecycle_plane, lifecycle_kube)
    if helm(lifecycle_plane, "status", RELEASE, "-n", RELEASE_NAMESPACE, check=False).returncode == 0:
        release.uninstall()
    assert crds(lifecycle_kube) >= KEPT_CRDS
    release.install()
    assert helm(lifecycle_plane, "status", RELEASE, "-n", RELEASE_NAMESPACE).returncode == 0
    assert release.component_config("scheduler")["kind"] == "SchedulerConfiguration"
