"""docs/install.md and docs/upgrading.md on real control planes: what they say a conflict looks like and how
to check is what the real helm, kube-apiserver and kubectl print.

* A cluster that already runs Koordinator and Crane (their eight CRDs created outside Helm, as their own
  charts leave them): a plain ``helm install`` fails with exactly the message the page shows; two values
  files with a ``crds.exclude`` each fail too (Helm replaces lists); the page's one-file values install,
  leave the foreign CRDs unowned, and the page's ownership command tells the two apart.
* On the session's cluster, with koordpy's manager and agent running for a kwok node: the page's
  managed-fields command prints the writers it shows for a NodeMetric (``koordpy-manager`` keeps the spec,
  ``koordpy`` reports the status), ``koordpy-manager Update status`` for a PodGroup and ``koordpy Update status`` for a
  Reservation the manager placed.
* The upgrade note on leader election: a manager stands by while a replica of an older version still
  keeps alive in the ClusterKopfPeering, and takes the Lease once it is gone; the page's command prints
  the Lease's holder (nothing while it stands by).
"""

from __future__ import annotations

import datetime
import os
import re
import shlex
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from cluster_kit import CHART, RELEASE, RELEASE_NAMESPACE, Components, Kube, Space, fake_node_files, helm, wait_until

from koordpy.crds import RESOURCES, crd_manifest
from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.controlplane import ControlPlane
from koordpy_testkit.manifests import INSTALL_DOC, ROOT, VALUES, doc_blocks, is_object

pytestmark = pytest.mark.cluster

FOREIGN_GROUPS = ("slo.koordinator.sh", "scheduling.koordinator.sh", "scheduling.sigs.k8s.io", "ensurance.crane.io")
"""The API groups whose CRDs Koordinator and Crane install."""


def kubectl(plane: ControlPlane, command: str) -> str:
    """A ``kubectl ...`` command line as the page shows it, run by the real kubectl as the plane's admin."""
    assert plane.bin_dir is not None
    argv = shlex.split(command)
    assert argv[0] == "kubectl", command
    env = {**os.environ, "KUBECONFIG": str(plane.admin_kubeconfig)}
    result = subprocess.run(
        [str(plane.bin_dir / "kubectl"), f"--cache-dir={plane.workdir / 'kubectl-cache'}", *argv[1:]],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, f"{command}\n{result.stderr}"
    return result.stdout


def page_command(marker: str, page: Path = INSTALL_DOC) -> tuple[str, list[str]]:
    """The first command of the page's console or sh block containing ``marker``, and the lines it shows
    as output (console blocks: the lines after the ``$`` line)."""
    for lang in ("console", "sh"):
        for block in doc_blocks(page, lang):
            lines = block.text.rstrip("\n").splitlines()
            for i, line in enumerate(lines):
                if marker in line:
                    return line.removeprefix("$ "), lines[i + 1 :] if lang == "console" else []
    raise AssertionError(f"{page.name} shows no command with {marker!r}")


def page_values(markers: tuple[str, ...], tmp: Path) -> Path:
    """The page's first values block that contains every one of ``markers``, as a file."""
    for block in doc_blocks(INSTALL_DOC, "yaml"):
        if all(m in block.text for m in markers) and not any(is_object(d) for d in block.documents()):
            path = tmp / "values.yaml"
            path.write_text(block.text, encoding="utf-8")
            return path
    raise AssertionError(f"docs/install.md shows no values block with {markers!r}")


# ---- a cluster that already runs Koordinator and Crane ---------------------------------------------


@pytest.fixture(scope="module")
def occupied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A control plane whose Koordinator and Crane CRDs exist without Helm's ownership metadata."""
    plane = ControlPlane(workdir=tmp_path_factory.mktemp("occupied"), default_scheduler=False)
    plane.start()
    try:
        with plane.client() as api:
            for resource in RESOURCES:
                if resource.group in FOREIGN_GROUPS:
                    api.post(
                        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd_manifest(resource)
                    ).raise_for_status()
        yield plane
    finally:
        plane.stop()


def foreign_crds() -> list[str]:
    return sorted(r.name for r in RESOURCES if r.group in FOREIGN_GROUPS)


def test_plain_install_fails_as_the_page_shows(occupied: ControlPlane) -> None:
    command, shown = page_command("helm install koordpy charts/koordpy -n koordpy-system --create-namespace")
    assert command.split() == [
        "helm",
        "install",
        RELEASE,
        "charts/koordpy",
        "-n",
        RELEASE_NAMESPACE,
        "--create-namespace",
    ]
    result = helm(occupied, *command.split()[1:3], str(CHART), *command.split()[4:], check=False)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == shown, result.stderr


def test_two_values_files_exclude_only_the_last_list(occupied: ControlPlane) -> None:
    """What the page warns about: ``crds.exclude`` of the second file replaces the first's."""
    result = helm(
        occupied,
        "install",
        RELEASE,
        str(CHART),
        "-n",
        RELEASE_NAMESPACE,
        "--create-namespace",
        "-f",
        str(VALUES / "beside-koordinator.yaml"),
        "-f",
        str(VALUES / "beside-crane.yaml"),
        check=False,
    )
    assert result.returncode != 0
    named = re.search(r'CustomResourceDefinition "([^"]+)" in namespace "" exists', result.stderr)
    assert named is not None, result.stderr
    assert named.group(1).endswith(("koordinator.sh", "sigs.k8s.io")), named.group(1)


def test_the_pages_values_for_both_install_and_leave_foreign_crds_alone(occupied: ControlPlane, tmp_path: Path) -> None:
    values = page_values(("nodemetrics.slo.koordinator.sh", "podqoss.ensurance.crane.io"), tmp_path)
    assert yaml.safe_load(values.read_text())["manager"] == {"enabled": False}
    helm(occupied, "install", RELEASE, str(CHART), "-n", RELEASE_NAMESPACE, "--create-namespace", "-f", str(values))
    with occupied.client() as api:
        kube = Kube(api)
        deployments = [d["metadata"]["name"] for d in kube.list("Deployment", RELEASE_NAMESPACE)]
        assert deployments == [f"{RELEASE}-scheduler"]
        assert kube.list("DaemonSet", RELEASE_NAMESPACE) == []
    # The page's ownership check: empty for the CRDs the other projects own, the release for the chart's own.
    command, _ = page_command("meta\\.helm\\.sh/release-name")
    for crd in foreign_crds():
        assert kubectl(occupied, command.replace("nodemetrics.slo.koordinator.sh", crd)) == "\n", crd
    own = command.replace("nodemetrics.slo.koordinator.sh", "clusterkopfpeerings.kopf.dev")
    assert kubectl(occupied, own) == f"{RELEASE}\n"


# ---- who writes: the managed-fields check on the session's cluster --------------------------------


def test_managed_fields_name_the_writers_the_page_shows(
    control_plane: ControlPlane, space: Space, koordpy: Components, kube: Kube, tmp_path: Path
) -> None:
    # ``space`` before ``koordpy``: the manager stops before the namespace goes (it posts Events there).
    node = space.node("writers", cpu="16", memory="64Gi")
    space.wait_nodes_ready()
    koordpy.start_manager({"nodeMetric": {"reportIntervalSeconds": 1, "aggregateDurationSeconds": 1}})
    wait_until("the manager's NodeMetric", lambda: kube.get("NodeMetric", node))

    with fake_node_files(tmp_path) as (cgroup_root, proc_root):
        koordpy.start_ready_agent(node, cgroup_root, proc_root, tmp_path / "agent-state")
        wait_until(
            "the agent's report", lambda: (kube.get("NodeMetric", node) or {}).get("status", {}).get("updateTime")
        )

    command, shown = page_command("--show-managed-fields")
    assert "NODE" in command
    printed = kubectl(control_plane, command.replace("NODE", node)).splitlines()
    assert [line.rstrip() for line in printed] == shown

    kube.create(
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "writers", "namespace": space.namespace},
            "spec": {"minMember": 2},
        }
    )
    space.create_pod("writers-0", labels={"pod-group.scheduling.sigs.k8s.io": "writers"})
    wait_until("the PodGroup's status", lambda: (kube.get("PodGroup", "writers", space.namespace) or {}).get("status"))
    on_podgroup = command.replace("nodemetric NODE", f"podgroups.scheduling.sigs.k8s.io writers -n {space.namespace}")
    assert "koordpy-manager Update status" in kubectl(control_plane, on_podgroup).splitlines()

    # A user Reservation the manager places (its reservation round runs every intervalSeconds).
    kube.create(
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "Reservation",
            "metadata": {"name": f"{space.namespace}-writers"},
            "spec": {
                "template": {
                    "spec": {
                        "nodeSelector": space.selector,
                        "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}],
                    }
                },
                "owners": [{"labelSelector": {"matchLabels": {"app": "writers"}}}],
            },
        }
    )
    try:
        wait_until(
            "the Reservation placed",
            lambda: (kube.get("Reservation", f"{space.namespace}-writers") or {}).get("status", {}).get("nodeName"),
        )
        on_reservation = command.replace(
            "nodemetric NODE", f"reservations.scheduling.koordinator.sh {space.namespace}-writers"
        )
        assert "koordpy Update status" in kubectl(control_plane, on_reservation).splitlines()
    finally:
        kube.delete("Reservation", f"{space.namespace}-writers")


# ---- the upgrade note on leader election ---------------------------------------------------------------

UPGRADING = ROOT / "docs" / "upgrading.md"


def test_a_new_manager_waits_out_an_older_replica_that_peers(
    control_plane: ControlPlane, koordpy: Components, kube: Kube
) -> None:
    """An older version's replica keeps alive in the ClusterKopfPeering (kopf's status record, written
    here): the new manager stands by and the page's command prints no holder; the record goes (the old
    replica exits, kopf removes its keep-alive) and the manager takes the Lease."""
    check, _ = page_command("holderIdentity", UPGRADING)
    now = datetime.datetime.now(datetime.UTC).isoformat()
    kube.create(
        {
            "apiVersion": "kopf.dev/v1",
            "kind": "ClusterKopfPeering",
            "metadata": {"name": "koordpy-manager"},
            "status": {"old-replica": {"priority": 7, "lifetime": 600, "lastseen": now}},
        }
    )
    try:
        manager = koordpy.start_manager(name="manager-after-peering")

        def checks() -> dict[str, Any]:
            found: dict[str, Any] = httpx.get(koordpy.manager_base + "/healthz", timeout=HANG_BACKSTOP).json()["checks"]
            return found

        manager.wait_for_log("waiting for older replicas peering in ClusterKopfPeering koordpy-manager", HANG_BACKSTOP)
        time.sleep(5)  # two more tries at least (retryPeriod 2 s): still waiting for the old replica
        assert checks()["operator"] == "standby" and not checks()["leaderElection"]["leading"], checks()
        assert kubectl(control_plane, check) == "\n"
        kube.patch("ClusterKopfPeering", "koordpy-manager", {"status": {"old-replica": None}})
        wait_until("the manager leads", lambda: checks()["leaderElection"]["leading"])
        holder = kubectl(control_plane, check).strip()
        assert holder and holder == checks()["leaderElection"]["holder"]
    finally:
        kube.delete("ClusterKopfPeering", "koordpy-manager")
