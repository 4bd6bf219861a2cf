"""helm helpers for the chart tier: a real helm binary (scripts/install-helm.sh) renders charts/koordpy.

No helm means a loud failure, never a skip: run ``bash scripts/install-helm.sh .venv``.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "koordpy"
HELM = Path(sys.executable).parent / "helm"
NAMESPACE = "koordpy-system"
RELEASE = "koordpy"
SCENARIOS = ["default", *sorted(p.name for p in (CHART / "ci").glob("*-values.yaml"))]


def helm_binary() -> Path:
    if not HELM.is_file():
        pytest.fail(f"helm not found at {HELM}: run `bash scripts/install-helm.sh {HELM.parent.parent}`", pytrace=False)
    return HELM


def run_helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(helm_binary()), *args], capture_output=True, text=True, check=False, cwd=ROOT)


MONITORING_API = ("--api-versions", "monitoring.coreos.com/v1")
"""As for a cluster that runs the Prometheus Operator: ServiceMonitors and the PrometheusRule render."""


def scenario_args(scenario: str) -> tuple[str, ...]:
    """The defaults as ``helm template`` renders them (no cluster APIs beyond the built-in ones); each ci
    file as for a cluster with the Prometheus Operator."""
    return () if scenario == "default" else ("-f", str(CHART / "ci" / scenario), *MONITORING_API)


@functools.lru_cache(maxsize=64)
def _render(args: tuple[str, ...]) -> tuple[dict[str, Any], ...]:
    proc = run_helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE, *args)
    if proc.returncode != 0:
        raise AssertionError(f"helm template {' '.join(args)} failed:\n{proc.stderr}")
    return tuple(doc for doc in yaml.safe_load_all(proc.stdout) if doc)


def render(*args: str) -> list[dict[str, Any]]:
    """Objects rendered by ``helm template`` with extra args (``-f``, ``--set``)."""
    return [dict(doc) for doc in _render(tuple(args))]


def render_scenario(scenario: str) -> list[dict[str, Any]]:
    return render(*scenario_args(scenario))


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o.get("kind") == kind]


def named(objects: list[dict[str, Any]], kind: str, suffix: str) -> dict[str, Any]:
    matches = [o for o in of_kind(objects, kind) if o["metadata"]["name"].endswith(suffix)]
    assert len(matches) == 1, f"expected one {kind} named *{suffix}, found {[m['metadata']['name'] for m in matches]}"
    return matches[0]


@dataclass(frozen=True)
class Rule:
    """One PolicyRule; ``namespace`` is None for ClusterRole rules (cluster-wide)."""

    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    resource_names: tuple[str, ...]
    namespace: str | None


@dataclass
class Grants:
    """What one ServiceAccount may do: rendered rules, plus the names of bound roles the chart does not render."""

    rules: list[Rule] = field(default_factory=list)
    builtin: set[str] = field(default_factory=set)


def grants(objects: list[dict[str, Any]]) -> dict[str, Grants]:
    """``namespace/serviceaccount`` -> its grants, resolved through (Cluster)RoleBindings."""
    roles = {("ClusterRole", None, o["metadata"]["name"]): o for o in of_kind(objects, "ClusterRole")}
    roles.update({("Role", o["metadata"]["namespace"], o["metadata"]["name"]): o for o in of_kind(objects, "Role")})
    out: dict[str, Grants] = {}
    for binding in of_kind(objects, "ClusterRoleBinding") + of_kind(objects, "RoleBinding"):
        scope = binding["metadata"].get("namespace") if binding["kind"] == "RoleBinding" else None
        ref = binding["roleRef"]
        key = (ref["kind"], scope if ref["kind"] == "Role" else None, ref["name"])
        for subject in binding["subjects"]:
            if subject["kind"] != "ServiceAccount":
                continue
            entry = out.setdefault(f"{subject['namespace']}/{subject['name']}", Grants())
            role = roles.get(key)
            if role is None:
                entry.builtin.add(ref["name"])
                continue
            for rule in role.get("rules", []):
                entry.rules.append(
                    Rule(
                        api_groups=tuple(rule.get("apiGroups", [])),
                        resources=tuple(rule.get("resources", [])),
                        verbs=tuple(rule.get("verbs", [])),
                        resource_names=tuple(rule.get("resourceNames", [])),
                        namespace=scope,
                    )
                )
    return out


def allowed(rules: list[Rule], group: str, resource: str, verb: str, name: str | None = None) -> bool:
    """Whether any rule allows ``verb`` on ``group/resource`` (``pods/eviction`` style for subresources)."""
    return any(
        group in rule.api_groups
        and resource in rule.resources
        and verb in rule.verbs
        and (not rule.resource_names or (name is not None and name in rule.resource_names))
        for rule in rules
    )
