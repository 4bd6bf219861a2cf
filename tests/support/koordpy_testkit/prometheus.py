"""Prometheus' own tools for the monitoring tests: ``promtool`` and ``monitoringcheck``, built from the
pinned Go module in ``tools/prometheus`` by ``tools/build-prometheus.sh`` (once per machine, cached).

``KOORDPY_PROMETHEUS_BIN`` (``scripts/run-tests.sh`` sets it) points at a built directory; without it the
build script is run here (it returns at once when the binaries are built). A build that fails raises with
its output: never a skip.
"""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

__all__ = ["prometheus_bin", "promtool"]

ROOT = Path(__file__).resolve().parents[3]
BUILD = ROOT / "tools" / "build-prometheus.sh"


@functools.cache
def prometheus_bin() -> Path:
    """The directory holding ``promtool`` and ``monitoringcheck``."""
    given = os.environ.get("KOORDPY_PROMETHEUS_BIN")
    if given:
        path = Path(given)
    else:
        built = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True, timeout=3600, check=False)
        if built.returncode != 0:
            raise AssertionError(f"{BUILD} failed ({built.returncode}):\n{built.stderr[-3000:]}")
        path = Path(built.stdout.strip())
    for name in ("promtool", "monitoringcheck"):
        if not (path / name).is_file():
            raise AssertionError(f"{path / name} missing: run bash {BUILD}")
    return path


def promtool(*args: str, cwd: Path | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run promtool with ``args`` (not checked: the caller asserts on the result)."""
    return subprocess.run(
        [str(prometheus_bin() / "promtool"), *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=cwd,
        input=stdin,
    )
