"""examples/values/*.yaml and docs/install.md against the chart, with the real helm: every values file
and every values block of the page lints clean (``helm lint --strict``) and renders, every ``helm install``
command the page shows renders with the same arguments (as ``helm template``), and what each set-up
claims to turn off is off in what renders (the real install over foreign CRDs is
tests/cluster/test_cluster_install.py)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from helm_render import CHART, NAMESPACE, RELEASE, ROOT, of_kind, run_helm

from koordpy.config.agent import AgentConfiguration
from koordpy.config.errors import validate
from koordpy.config.manager import ManagerConfiguration
from koordpy_testkit.manifests import INSTALL_DOC, VALUES, Block, doc_blocks, is_object, values_files

KOORDINATOR_CRDS = {
    "nodemetrics.slo.koordinator.sh",
    "podmigrationjobs.scheduling.koordinator.sh",
    "reservations.scheduling.koordinator.sh",
    "podgroups.scheduling.sigs.k8s.io",
}
CRANE_CRDS = {
    "nodeqosensurancepolicies.ensurance.crane.io",
    "avoidanceactions.ensurance.crane.io",
    "nodeqoss.ensurance.crane.io",
    "podqoss.ensurance.crane.io",
}


def template(*args: str) -> list[dict[str, Any]]:
    proc = run_helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE, *args)
    assert proc.returncode == 0, f"helm template {' '.join(args)}:\n{proc.stderr}"
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


def crd_names(objects: list[dict[str, Any]]) -> set[str]:
    return {o["metadata"]["name"] for o in of_kind(objects, "CustomResourceDefinition")}


def component_config(objects: list[dict[str, Any]], component: str) -> dict[str, Any] | None:
    for cm in of_kind(objects, "ConfigMap"):
        if cm["metadata"]["name"] == f"{RELEASE}-{component}":
            config: dict[str, Any] = yaml.safe_load(cm["data"]["config.yaml"])
            return config
    return None


def workloads(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] in ("Deployment", "DaemonSet")}


@pytest.mark.parametrize("path", values_files(), ids=lambda p: p.name)
def test_values_file_lints_clean(path: Path) -> None:
    proc = run_helm("lint", "--strict", str(CHART), "-f", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_beside_koordinator_leaves_koordinators_objects_to_it() -> None:
    objects = template("-f", str(VALUES / "beside-koordinator.yaml"))
    assert not crd_names(objects) & KOORDINATOR_CRDS
    assert crd_names(objects) >= CRANE_CRDS  # Koordinator does not install Crane's
    assert set(workloads(objects)) == {f"{RELEASE}-scheduler", f"{RELEASE}-agent"}  # no manager
    assert component_config(objects, "manager") is None
    agent = validate(AgentConfiguration, component_config(objects, "agent"), "agent ConfigMap")
    assert agent.node_metric.enabled is False
    assert agent.qos.enabled is True


def test_beside_crane_leaves_qos_to_crane_agent() -> None:
    objects = template("-f", str(VALUES / "beside-crane.yaml"))
    assert not crd_names(objects) & CRANE_CRDS
    assert crd_names(objects) >= KOORDINATOR_CRDS
    assert set(workloads(objects)) == {f"{RELEASE}-scheduler", f"{RELEASE}-manager", f"{RELEASE}-agent"}
    agent = validate(AgentConfiguration, component_config(objects, "agent"), "agent ConfigMap")
    assert agent.qos.enabled is False
    assert agent.node_metric.enabled is True


def test_ha_runs_replicas_with_budgets_and_leader_election() -> None:
    objects = template("-f", str(VALUES / "ha.yaml"))
    deployments = {o["metadata"]["name"]: o for o in of_kind(objects, "Deployment")}
    assert deployments[f"{RELEASE}-scheduler"]["spec"]["replicas"] == 3
    assert deployments[f"{RELEASE}-manager"]["spec"]["replicas"] == 2
    budgets = {o["metadata"]["name"]: o["spec"] for o in of_kind(objects, "PodDisruptionBudget")}
    assert set(budgets) == {f"{RELEASE}-scheduler", f"{RELEASE}-manager"}
    assert all(spec["maxUnavailable"] == 1 for spec in budgets.values())
    manager = validate(ManagerConfiguration, component_config(objects, "manager"), "manager ConfigMap")
    assert manager.leader_election.leader_elect is True  # one of the two acts: the Lease's holder
    for name in (f"{RELEASE}-scheduler", f"{RELEASE}-manager"):
        pod = deployments[name]["spec"]["template"]
        assert pod["spec"]["priorityClassName"] == "system-cluster-critical"
        (term,) = pod["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        # The anti-affinity selects this component's own pods (their labels), so replicas spread.
        selector = term["podAffinityTerm"]["labelSelector"]["matchLabels"]
        assert selector.items() <= pod["metadata"]["labels"].items(), (selector, pod["metadata"]["labels"])


# ---- docs/install.md --------------------------------------------------------------------------


def install_blocks() -> list[Block]:
    """The page's yaml, sh and console blocks, in page order."""
    blocks = [*doc_blocks(INSTALL_DOC, "yaml"), *doc_blocks(INSTALL_DOC, "sh"), *doc_blocks(INSTALL_DOC, "console")]
    return sorted(blocks, key=lambda b: b.line)


def values_blocks() -> list[Block]:
    return [b for b in install_blocks() if b.lang == "yaml" and not any(is_object(d) for d in b.documents())]


def helm_installs() -> list[tuple[Block, list[str], Block | None]]:
    """Each ``helm install`` command of the page, its arguments, and the values block shown before it."""
    out = []
    last_values: Block | None = None
    for block in install_blocks():
        if block.lang == "yaml":
            last_values = block if block in values_blocks() else last_values
            continue
        for command in block.text.replace("\\\n", " ").splitlines():
            argv = shlex.split(command.removeprefix("$ "))
            if argv[:2] == ["helm", "install"]:
                out.append((block, argv, last_values))
    return out


@pytest.mark.parametrize("block", values_blocks(), ids=lambda b: b.where)
def test_install_page_values_lint_and_render(block: Block, tmp_path: Path) -> None:
    path = tmp_path / "values.yaml"
    path.write_text(block.text, encoding="utf-8")
    proc = run_helm("lint", "--strict", str(CHART), "-f", str(path))
    assert proc.returncode == 0, f"{block.where}:\n{proc.stdout}{proc.stderr}"
    template("-f", str(path))


def test_install_page_shows_the_values_files_as_they_are() -> None:
    shown = [yaml.safe_load(b.text) for b in values_blocks()]
    for name in ("beside-koordinator.yaml", "beside-crane.yaml"):
        assert yaml.safe_load((VALUES / name).read_text(encoding="utf-8")) in shown, name


@pytest.mark.parametrize(
    ("block", "argv", "before"), helm_installs(), ids=lambda v: v.where if isinstance(v, Block) else ""
)
def test_install_page_commands_render(block: Block, argv: list[str], before: Block | None, tmp_path: Path) -> None:
    """``helm install NAME CHART ARGS`` as ``helm template NAME CHART ARGS``: the same chart, values and
    namespace; a values file the repository does not have is the page's values block shown before it."""
    release, chart, *rest = argv[2:]
    assert (release, chart) == (RELEASE, "charts/koordpy"), argv
    args = [a for a in rest if a != "--create-namespace"]
    for i, arg in enumerate(args):
        if i and args[i - 1] == "-f" and not (ROOT / arg).exists():
            assert before is not None, f"{block.where}: {arg} is neither in the repository nor shown above"
            (tmp_path / arg).write_text(before.text, encoding="utf-8")
            args[i] = str(tmp_path / arg)
    proc = run_helm("template", release, chart, *args)
    assert proc.returncode == 0, f"{block.where}: {' '.join(argv)}\n{proc.stderr}"
    objects = [doc for doc in yaml.safe_load_all(proc.stdout) if doc]
    if any("beside-koordinator-and-crane" in a for a in args):
        # Beside both: none of either project's CRDs, and only the scheduler runs.
        assert not crd_names(objects) & (KOORDINATOR_CRDS | CRANE_CRDS)
        assert set(workloads(objects)) == {f"{RELEASE}-scheduler"}


def test_install_page_shows_its_commands() -> None:
    """The collection itself finds the page's commands (a changed fence would otherwise test nothing)."""
    files = [a for _, argv, _ in helm_installs() for a in argv if a.endswith(".yaml")]
    assert {"examples/values/beside-koordinator.yaml", "examples/values/beside-crane.yaml"} <= set(files)
    assert "beside-koordinator-and-crane.yaml" in files
    assert len(values_blocks()) >= 5
