"""The chart's default image is the one ``make image`` builds and tags, and the chart runs it the way the
Dockerfile expects (``koordpy`` first, a read-only root file system).
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from typing import Any

import yaml
from helm_render import CHART, ROOT, render

KOORDPY_CONTAINERS = {"extender", "manager", "agent"}


def make_image_ref() -> str:
    """What ``make image`` tags (``make -s image-ref`` prints the same variable the recipe uses)."""
    result = subprocess.run(
        ["make", "-s", "--no-print-directory", "image-ref"], capture_output=True, text=True, check=False, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def koordpy_containers(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for obj in objects:
        spec = obj.get("spec", {}).get("template", {}).get("spec", {})
        out += [c for c in spec.get("containers", []) if c["name"] in KOORDPY_CONTAINERS]
    return out


def test_make_image_tags_the_pyproject_version() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert make_image_ref() == f"ghcr.io/koordpy/koordpy:{version}"
    dry_run = subprocess.run(["make", "-n", "image"], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert f"--tag {make_image_ref()} ." in dry_run


def test_chart_default_image_is_what_make_image_builds() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert f"{values['image']['repository']}:{values['image']['tag'] or chart['appVersion']}" == make_image_ref()
    containers = koordpy_containers(render())
    assert {c["name"] for c in containers} == KOORDPY_CONTAINERS
    for container in containers:
        assert container["image"] == make_image_ref(), container["name"]


def test_chart_runs_the_images_entrypoint_on_a_read_only_root() -> None:
    entrypoint = next(
        json.loads(line.split(" ", 1)[1])
        for line in (ROOT / "Dockerfile").read_text().splitlines()
        if line.startswith("ENTRYPOINT ")
    )
    assert entrypoint == ["koordpy"]
    for container in koordpy_containers(render()):
        assert container["command"][0] == "koordpy", container["name"]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True, container["name"]


def test_image_user_is_numeric_and_non_root() -> None:
    users = re.findall(r"^USER (\S+)$", (ROOT / "Dockerfile").read_text(), flags=re.M)
    assert len(users) == 1 and re.fullmatch(r"[1-9]\d*:[1-9]\d*", users[0]), users
