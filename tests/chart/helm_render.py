"""helm helpers for the chart tier: a real helm binary (scripts/install-helm.sh) renders charts/koordpy.

No helm means a loud failure, never a skip: run ``bash scripts/install-helm.sh .venv``.
"""

from __future__ import annotations

import functools
import subprocess
import sys
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


def scenario_args(scenario: str) -> tuple[str, ...]:
    return () if scenario == "default" else ("-f", str(CHART / "ci" / scenario))


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
