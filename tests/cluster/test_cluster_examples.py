"""Every manifest the project shows its users, sent to the real control plane with the chart installed,
by the real kubectl:

* each file under ``examples/`` and each Kubernetes object in a YAML block of ``docs/*.md`` and
  ``charts/koordpy/README.md`` (those of an API served only with a feature gate are checked the same way
  on a plane that has it, in ``test_cluster_native_gangs.py``) passes ``kubectl apply --server-side --dry-run=server``: kube-apiserver
  decodes it, validates it against its own schemas and the installed CRDs' (unknown and duplicate fields
  refused: ``--validate=strict``), and runs admission, without storing anything;
* each ``examples/`` file is then applied for real, its objects are read back, the Jobs and the
  Deployment get their pods from the real controllers (admission accepted the pod templates), and
  ``kubectl delete -f`` removes everything again.

Namespaced objects that name no namespace go into this module's namespace; namespaces a manifest names
are created first (and deleted afterwards). Kinds the chart does not install are served from koordpy's
own model of the upstream CRD (``koordpy.crds``: the schema koordpy reads those objects with), installed
for this module only; a kind for which koordpy has neither fails its manifests.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cluster_kit import Kube, Release, wait_until

from koordpy.crds import crd_manifest
from koordpy_testkit.controlplane import ControlPlane
from koordpy_testkit.manifests import ROOT, Block, doc_objects, example_files, gvk, known_models, kube_objects

pytestmark = pytest.mark.cluster

POD_OWNERS = frozenset({"Job", "Deployment"})
"""Kinds whose controller creates pods (a Job's carry the ``job-name`` label)."""


@dataclass
class Kubectl:
    """The real kubectl of the control plane's build, as its admin."""

    plane: ControlPlane

    def __call__(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        assert self.plane.bin_dir is not None
        env = {**os.environ, "KUBECONFIG": str(self.plane.admin_kubeconfig)}
        cache = self.plane.workdir / "kubectl-cache"
        command = [str(self.plane.bin_dir / "kubectl"), f"--cache-dir={cache}", *args]
        result = subprocess.run(command, input=stdin, capture_output=True, text=True, env=env, timeout=600, check=False)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
        return result


@dataclass
class ExampleCluster:
    """The session's control plane with the chart installed, one namespace for this module's objects,
    and the CRDs the chart does not install served from koordpy's models."""

    kube: Kube
    kubectl: Kubectl
    namespace: str
    installed_crds: list[str] = field(default_factory=list)
    created_namespaces: list[str] = field(default_factory=list)
    served: set[tuple[str, str, str]] = field(default_factory=set)

    def serves(self, kind: tuple[str, str, str]) -> bool:
        group, version, name = kind
        if kind in self.served:
            return True
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        resp = self.kube.client.get(path)
        if resp.status_code == 200 and any(r["kind"] == name for r in resp.json()["resources"]):
            self.served.add(kind)
            return True
        return False

    def ensure_kinds(self, objects: Sequence[dict[str, Any]]) -> list[str]:
        """Serve every kind of ``objects``; the ones that cannot be served, as ``group/version kind``."""
        models = known_models()
        missing = []
        for kind in sorted({gvk(o) for o in objects}):
            if self.serves(kind):
                continue
            model = models.get(kind)
            if model is None:
                missing.append(f"{kind[0]}/{kind[1]} {kind[2]}")
                continue
            self.kube.client.post(
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd_manifest(model)
            ).raise_for_status()
            self.installed_crds.append(model.name)
            wait_until(f"{model.name} served", lambda kind=kind: self.serves(kind))
        return missing

    def ensure_namespaces(self, objects: Sequence[dict[str, Any]]) -> None:
        for obj in objects:
            name = (obj.get("metadata") or {}).get("namespace")
            if name and self.kube.get("Namespace", name) is None:
                self.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
                self.created_namespaces.append(name)

    def prepare(self, objects: Sequence[dict[str, Any]], where: str) -> None:
        missing = self.ensure_kinds(objects)
        assert not missing, (
            f"{where}: {', '.join(missing)} is not served: the chart does not install its CRD and koordpy has "
            "no model of it in koordpy.crds"
        )
        self.ensure_namespaces(objects)

    def namespace_args(self, objects: Sequence[dict[str, Any]]) -> list[str]:
        """``-n`` this module's namespace, unless the manifest names its namespaces itself (kubectl refuses
        an object whose namespace differs from ``-n``)."""
        if any((o.get("metadata") or {}).get("namespace") for o in objects):
            return []
        return ["-n", self.namespace]

    def dry_run(self, text: str, where: str) -> str:
        ns = self.namespace_args(kube_objects(text))
        args = ["apply", "--server-side", "--dry-run=server", "--validate=strict", "--field-manager=koordpy-examples"]
        result = self.kubectl(*args, *ns, "-f", "-", stdin=text, check=False)
        assert result.returncode == 0, f"{where}: the API server refused it:\n{result.stderr}"
        return result.stdout


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane, release: Release, kube: Kube) -> Iterator[ExampleCluster]:
    namespace = f"examples-{uuid.uuid4().hex[:6]}"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    state = ExampleCluster(kube, Kubectl(control_plane), namespace)
    try:
        yield state
    finally:
        gone = [namespace, *state.created_namespaces]
        for name in gone:
            kube.delete("Namespace", name)
        for crd in state.installed_crds:
            kube.client.delete(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}")
        wait_until(
            "this module's namespaces and CRDs deleted",
            lambda: (
                all(kube.get("Namespace", n) is None for n in gone)
                and all(
                    kube.client.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{c}").status_code == 404
                    for c in state.installed_crds
                )
            ),
        )


def _example_params() -> list[Any]:
    return [pytest.param(path, id=path.name) for path in example_files()]


def _doc_params() -> list[Any]:
    return [pytest.param(block, id=block.where) for block, _ in doc_objects()]


def test_the_documentation_has_manifests_to_check() -> None:
    """The collection itself: a broken fence pattern would otherwise check nothing and pass."""
    pages = {block.path.name for block, _ in doc_objects()}
    assert {"agent.md", "descheduler.md", "reservations.md"} <= pages, sorted(pages)
    assert len(example_files()) >= 12, example_files()


@pytest.mark.parametrize("block", _doc_params())
def test_doc_block_passes_server_side_dry_run(cluster: ExampleCluster, block: Block) -> None:
    objects = kube_objects(block.text)
    cluster.prepare(objects, block.where)
    out = cluster.dry_run(block.text, block.where)
    for obj in objects:
        name = obj["metadata"]["name"]
        assert f"/{name} serverside-applied (server dry run)" in out, f"{block.where}: {name} not in:\n{out}"


def _pods_of(cluster: ExampleCluster, obj: dict[str, Any], namespace: str) -> list[dict[str, Any]]:
    if obj["kind"] == "Job":
        return cluster.kube.list("Pod", namespace, labelSelector=f"job-name={obj['metadata']['name']}")
    selector = ",".join(f"{k}={v}" for k, v in obj["spec"]["selector"]["matchLabels"].items())
    return cluster.kube.list("Pod", namespace, labelSelector=selector)


@pytest.mark.parametrize("path", _example_params())
def test_example_applies_for_real_and_deletes(cluster: ExampleCluster, path: Path) -> None:
    where = str(path.relative_to(ROOT))
    text = path.read_text(encoding="utf-8")
    objects = kube_objects(text)
    assert objects, f"{where}: no Kubernetes object"
    cluster.prepare(objects, where)
    cluster.dry_run(text, where)

    kubectl = cluster.kubectl
    ns = cluster.namespace_args(objects)
    kubectl("apply", "--server-side", "--validate=strict", "--field-manager=koordpy-examples", *ns, "-f", str(path))
    stored = json.loads(kubectl("get", *ns, "-f", str(path), "-o", "json").stdout)
    items = stored["items"] if stored.get("kind") == "List" else [stored]
    assert sorted((i["kind"], i["metadata"]["name"]) for i in items) == sorted(
        (o["kind"], o["metadata"]["name"]) for o in objects
    )
    for obj, item in zip(objects, items, strict=True):
        # What was written is what was sent: the server kept every spec field (no pruning by a CRD schema).
        for key in ("spec", "data"):
            if key in obj:
                assert _subset(obj[key], item[key]), f"{where}: {obj['kind']} {key} changed when stored:\n{item[key]}"

    for obj in objects:
        if obj["kind"] not in POD_OWNERS:
            continue
        namespace = obj["metadata"].get("namespace", cluster.namespace)
        expected = obj["spec"].get("parallelism", obj["spec"].get("replicas", 1))
        pods = wait_until(
            f"{where}: {obj['kind']} {obj['metadata']['name']} creates {expected} pods",
            lambda obj=obj, namespace=namespace, expected=expected: (
                found if len(found := _pods_of(cluster, obj, namespace)) == expected else None
            ),
        )
        template = obj["spec"]["template"]
        for pod in pods:
            assert pod["spec"]["schedulerName"] == template["spec"]["schedulerName"]
            assert _subset(template["metadata"].get("labels", {}), pod["metadata"].get("labels", {}))
            assert _subset(template["metadata"].get("annotations", {}), pod["metadata"].get("annotations", {}))

    kubectl("delete", *ns, "-f", str(path), "--wait=true")
    left = kubectl("get", *ns, "-f", str(path), "--ignore-not-found", "-o", "name").stdout.split()
    assert left == [], f"{where}: still there after kubectl delete: {left}"


def _subset(expected: Any, actual: Any) -> bool:
    """Whether every field of ``expected`` is in ``actual`` with the same value (defaults may be added)."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and _subset(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(expected) == len(actual)
            and all(_subset(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return bool(expected == actual or str(expected) == str(actual))
