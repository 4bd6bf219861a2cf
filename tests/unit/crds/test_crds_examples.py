"""examples/: one commented manifest per kind koordpy reads or writes, each one read by koordpy's own models
the way the page says (the real API server's verdict is tests/cluster/test_cluster_examples.py).

* every custom resource koordpy has a model of (and Volcano's PodGroup) has an example, and each example
  object validates with that model;
* the gang examples are gangs: their pods (the Jobs' templates, as many as ``parallelism``) form the gang
  or GangGroup the comments describe, and with every member held at the bind barrier it is allowed to bind;
* the QoS examples draw no object warning (nothing that would silently do nothing);
* names do not collide across files (so ``kubectl apply -f examples/`` works), each file opens with a
  comment, and examples/README.md indexes every file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordpy.agent.policy.objectcheck import qos_warnings
from koordpy.config.errors import validate
from koordpy.config.gang import CoschedulingArgs
from koordpy.crds import CLUSTER_KOPF_PEERING
from koordpy.crds.ensurance import AvoidanceAction, NodeQOS, NodeQOSEnsurancePolicy, PodQOS
from koordpy.scheduler.plugins.gang.offline import gang_report
from koordpy_testkit.manifests import EXAMPLES, example_files, gvk, known_models, kube_objects, values_files

VOLCANO_PODGROUP = ("scheduling.volcano.sh", "v1beta1", "PodGroup")
NOW = 1_800_000_000.0


def all_objects() -> list[tuple[Path, dict[str, Any]]]:
    return [(path, obj) for path in example_files(gated=None) for obj in kube_objects(path.read_text(encoding="utf-8"))]


def test_every_kind_koordpy_reads_has_an_example() -> None:
    shown = {gvk(obj) for _, obj in all_objects()}
    wanted = {kind for kind, model in known_models().items() if model is not CLUSTER_KOPF_PEERING}
    assert wanted | {VOLCANO_PODGROUP} <= shown, sorted(wanted | {VOLCANO_PODGROUP} - shown)
    # Pods opt in by naming the profile: at least one workload outside the gang examples does.
    workloads = [o for _, o in all_objects() if o["kind"] == "Deployment"]
    assert [w["spec"]["template"]["spec"]["schedulerName"] for w in workloads] == ["koordpy-scheduler"]


@pytest.mark.parametrize("path", example_files(gated=None), ids=lambda p: p.name)
def test_custom_resources_validate_with_koordpys_models(path: Path) -> None:
    models = known_models()
    for obj in kube_objects(path.read_text(encoding="utf-8")):
        model = models.get(gvk(obj))
        if model is None or model.spec is None:
            continue
        validate(model.spec, obj.get("spec") or {}, f"{path.name}: {obj['kind']} {obj['metadata']['name']}")


def test_names_do_not_collide_across_files() -> None:
    seen: dict[tuple[str, str, str, str], str] = {}
    for path, obj in all_objects():
        group, _, kind = gvk(obj)
        meta = obj["metadata"]
        key = (group, kind, meta.get("namespace", ""), meta["name"])
        if kind == "Namespace" or key not in seen:
            seen.setdefault(key, path.name)
            continue
        pytest.fail(f"{kind} {meta['name']} is in both {seen[key]} and {path.name}")


@pytest.mark.parametrize("path", [*example_files(gated=None), *values_files()], ids=lambda p: p.name)
def test_file_opens_with_a_comment_and_is_indexed(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# ") and lines[1].startswith("#"), f"{path.name}: no opening comment"
    index = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    link = path.relative_to(EXAMPLES).as_posix()
    assert f"]({link})" in index, f"examples/README.md does not link {link}"


def pods_of_job(job: dict[str, Any], namespace: str) -> list[dict[str, Any]]:
    """The pods the Job controller would create: its template, ``parallelism`` times."""
    template = job["spec"]["template"]
    name = job["metadata"]["name"]
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                **template["metadata"],
                "name": f"{name}-{i}",
                "namespace": namespace,
                "uid": f"{name}-{i}-uid",
                "creationTimestamp": "2026-01-01T00:00:00Z",
            },
            "spec": template["spec"],
        }
        for i in range(job["spec"]["parallelism"])
    ]


def gangs_of(path: str, namespace: str = "apps") -> dict[str, dict[str, Any]]:
    """``koordpy scheduler gangs``' report on the example, every member held at the bind barrier."""
    docs: list[tuple[str, Any]] = []
    for obj in kube_objects((EXAMPLES / path).read_text(encoding="utf-8")):
        ns = obj["metadata"].get("namespace", namespace)
        if obj["kind"] == "Job":
            docs += [(path, pod) for pod in pods_of_job(obj, ns)]
        elif obj["kind"] == "PodGroup":
            docs.append((path, {**obj, "metadata": {**obj["metadata"], "namespace": ns}}))
    waiting = {
        f"{pod['metadata']['namespace']}/{pod['metadata']['name']}": "node-1" for _, pod in docs if pod["kind"] == "Pod"
    }
    report, _ = gang_report(docs, CoschedulingArgs.model_validate({}), NOW, waiting=waiting)
    return {gang["id"]: gang for gang in report["gangs"]}


def test_podgroup_examples_form_their_gangs() -> None:
    # scheduling.sigs.k8s.io: minMember 3 of 3 workers held -> allow.
    (trainer,) = gangs_of("podgroup-scheduling-sigs.yaml").values()
    assert (trainer["id"], trainer["minMember"], trainer["waitSeconds"], len(trainer["waiting"])) == (
        "apps/trainer",
        3,
        600,
        3,
    )
    assert trainer["permit"]["verdict"] == "allow", trainer["permit"]
    # scheduling.x-k8s.io: minMember 2 of 2 held -> allow; its own timeout.
    (mpi,) = gangs_of("podgroup-scheduling-x-k8s.yaml").values()
    assert (mpi["id"], mpi["minMember"], mpi["waitSeconds"]) == ("apps/mpi", 2, 300)
    assert mpi["permit"]["verdict"] == "allow", mpi["permit"]


def test_the_native_podgroup_example_forms_its_gang() -> None:
    # scheduling.k8s.io: gang minCount 4 of 4 workers held -> allow (4 waiting + 0 bound ≥ 4).
    (simulation,) = gangs_of("podgroup-native.yaml").values()
    assert (simulation["id"], simulation["minMember"], simulation["matchPolicy"], len(simulation["waiting"])) == (
        "apps/simulation",
        4,
        "waiting-and-running",
        4,
    )
    assert simulation["permit"]["verdict"] == "allow", simulation["permit"]


def test_annotation_examples_form_their_gang_and_ganggroup() -> None:
    (etl,) = gangs_of("gang-annotations.yaml").values()
    # min-available 3, total-number 4, waiting-time 3600s; 4 workers held >= 3 -> allow.
    assert (etl["minMember"], etl["totalNumber"], etl["waitSeconds"], etl["mode"], etl["matchPolicy"]) == (
        3,
        4,
        3600,
        "Strict",
        "once-satisfied",
    )
    assert etl["permit"]["verdict"] == "allow", etl["permit"]
    group = gangs_of("ganggroup-annotations.yaml")
    assert set(group) == {"team-a/ps", "team-a/worker"}
    for gang in group.values():
        assert gang["groupId"] == "team-a/ps,team-a/worker"
        assert gang["mode"] == "NonStrict"
        assert gang["permit"]["verdict"] == "allow", gang["permit"]
    assert (group["team-a/ps"]["minMember"], group["team-a/worker"]["minMember"]) == (1, 2)


def test_ganggroup_waits_for_its_mate() -> None:
    """The group binds together: with the worker gang one member short, the parameter server waits too."""
    text = (EXAMPLES / "ganggroup-annotations.yaml").read_text(encoding="utf-8")
    docs: list[tuple[str, Any]] = []
    for obj in kube_objects(text):
        if obj["kind"] == "Job":
            docs += [("x", pod) for pod in pods_of_job(obj, obj["metadata"]["namespace"])]
    waiting = {"team-a/ps-0": "node-1", "team-a/worker-0": "node-1"}
    report, _ = gang_report(docs, CoschedulingArgs.model_validate({}), NOW, waiting=waiting)
    verdicts = {g["id"]: g["permit"]["verdict"] for g in report["gangs"]}
    assert verdicts == {"team-a/ps": "wait", "team-a/worker": "wait"}


@pytest.mark.parametrize("path", ["crane-nodeqosensurancepolicy.yaml", "crane-nodeqos-podqos.yaml"])
def test_qos_examples_draw_no_warning(path: str) -> None:
    objects = kube_objects((EXAMPLES / path).read_text(encoding="utf-8"))
    models = {
        "NodeQOSEnsurancePolicy": NodeQOSEnsurancePolicy,
        "NodeQOS": NodeQOS,
        "PodQOS": PodQOS,
        "AvoidanceAction": AvoidanceAction,
    }
    parsed: dict[str, list[Any]] = {kind: [] for kind in models}
    for obj in objects:
        parsed[obj["kind"]].append(validate(models[obj["kind"]], obj, path))
    policies = [*parsed["NodeQOSEnsurancePolicy"], *parsed["NodeQOS"]]
    assert policies and parsed["AvoidanceAction"]
    node = {"node-role.example.com/colocation": "true"}
    assert qos_warnings(policies, parsed["AvoidanceAction"], parsed["PodQOS"], node_labels=[node]) == []


def test_examples_readme_names_only_existing_files() -> None:
    index = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    for link in re.findall(r"\]\(([^)#]+)\)", index):
        if "://" in link:
            continue
        assert (EXAMPLES / link).resolve().exists(), f"examples/README.md links {link}, which does not exist"


def test_values_files_are_yaml_mappings() -> None:
    for path in values_files():
        assert isinstance(yaml.safe_load(path.read_text(encoding="utf-8")), dict), path.name
