"""Each make target installs what it needs and no more: on a platform where helm cannot be installed
(played with ``KOORDPY_PLATFORM=Darwin/arm64``), ``make demo`` still works in a fresh copy of the
repository, and the one step that needs helm (``make test``'s) says so loudly and names who needs it.

The copy holds the repository's files as ``git ls-files`` lists them (committed or not); its ``.venv`` is
created by the Makefile as in a fresh clone (pip fetches from the configured index, or its cache), from
the lock: it then holds exactly requirements/run.lock's packages.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.lockfile import installed_differences, read_lock

ROOT = Path(__file__).resolve().parents[2]
PLATFORM = "Darwin/arm64"


def fresh_copy(target: Path) -> Path:
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=HANG_BACKSTOP,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def make(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH"))}
    env["KOORDPY_PLATFORM"] = PLATFORM
    python = getattr(sys, "_base_executable", sys.executable)
    return subprocess.run(
        ["make", *args, f"PYTHON={python}"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=3 * HANG_BACKSTOP,  # a fresh virtualenv: pip installs koordpy's dependencies
        check=False,
    )


@pytest.mark.system
def test_make_demo_needs_no_helm_and_make_test_says_it_does(tmp_path: Path) -> None:
    repo = fresh_copy(tmp_path / "clone")
    demo = make(repo, "demo")
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    assert "wrote sim-out/report.html, sim-out/summary.json and sim-out/heatmap.png" in demo.stdout
    assert (repo / "sim-out" / "summary.json").is_file() and (repo / "sim-out" / "heatmap.png").is_file()
    installed = {p.name for p in (repo / ".venv" / "bin").iterdir()}
    assert "koordpy" in installed
    # no more than the demo needs: neither helm nor kubectl, nor the dev tools
    assert not installed & {"helm", "kubectl", "pytest", "ruff", "mypy"}, sorted(installed)
    assert "install-helm" not in demo.stdout + demo.stderr
    # from the lock, and nothing but the lock: every runtime package at its locked version
    assert "bootstrap.sh: installing the locked versions of requirements/run.lock" in demo.stdout
    listed = subprocess.run(
        [str(repo / ".venv" / "bin" / "python"), "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        timeout=HANG_BACKSTOP,
        check=True,
    ).stdout.split()
    installed = {canonicalize_name(n): v for n, _, v in (line.partition("==") for line in listed)}
    lock = read_lock(repo / "requirements" / "run.lock")
    assert len(lock) > 40 and installed_differences(lock, installed, ignore={"koordpy"}) == []

    # `make test` runs the helm step, which refuses this platform loudly, naming what needs it.
    plan = make(repo, "-n", "test")
    assert "bash scripts/install-helm.sh .venv" in plan.stdout
    refused = subprocess.run(
        ["bash", "scripts/install-helm.sh", ".venv"],
        cwd=repo,
        env={**os.environ, "KOORDPY_PLATFORM": PLATFORM},
        capture_output=True,
        text=True,
        timeout=HANG_BACKSTOP,
        check=False,
    )
    assert refused.returncode == 1
    assert refused.stderr.startswith(f"install-helm.sh: ERROR: cannot install helm and kubectl on {PLATFORM}.")
    assert "Needed by: make test" in refused.stderr and "Not needed by: make demo, make lint" in refused.stderr
    assert not (repo / ".venv" / "bin" / "helm").exists()


def test_helm_brought_by_hand_is_accepted_on_any_platform(tmp_path: Path) -> None:
    """Where the wheel cannot serve, a helm (v4) and kubectl put into the venv by hand let make test go on."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, script in (("helm", "echo v4.1.0"), ("kubectl", "echo kubectl")):
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{script}\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "install-helm.sh"), str(tmp_path / "venv")],
        env={**os.environ, "KOORDPY_PLATFORM": PLATFORM},
        capture_output=True,
        text=True,
        timeout=HANG_BACKSTOP,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
