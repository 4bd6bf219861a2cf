"""The pinned Kubernetes binaries: built once per machine by ``tools/build.sh``, then reused.

``KOORDPY_K8S_BIN`` names a directory of prebuilt binaries instead (it must hold every one of
:data:`BINARIES`); otherwise ``tools/build.sh`` is run, which builds into a directory keyed by the
pinned versions under ``~/.cache/koordpy`` and prints it (instantly, when already built).

Not guaranteed: that ``KOORDPY_K8S_BIN`` holds the pinned versions (only their presence is checked).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["BINARIES", "REPO_ROOT", "ensure_binaries"]

REPO_ROOT = Path(__file__).resolve().parents[4]
BUILD_SCRIPT = REPO_ROOT / "tools" / "build.sh"
BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kwok",
    "kwok-stages.yaml",
)


def _check(directory: Path) -> Path:
    missing = [name for name in BINARIES if not (directory / name).is_file()]
    if missing:
        raise RuntimeError(f"{directory} lacks {', '.join(missing)}")
    return directory


def ensure_binaries(*, quiet: bool = False) -> Path:
    """The directory of the pinned binaries, building them first when this machine has none.

    A failed build raises with the build's own last lines: the real-cluster tier never skips.
    """
    given = os.environ.get("KOORDPY_K8S_BIN")
    if given:
        return _check(Path(given))
    if not BUILD_SCRIPT.is_file():
        raise RuntimeError(f"{BUILD_SCRIPT} is missing: the real-cluster tier cannot build its binaries")
    result = subprocess.run(
        ["bash", str(BUILD_SCRIPT)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL if quiet else None,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"tools/build.sh failed with exit code {result.returncode}: the real-cluster tier needs the pinned "
            "Kubernetes binaries (Go >= 1.26 and the Go module proxy); its messages are above"
        )
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    if not lines:
        print("tools/build.sh printed no directory", file=sys.stderr)
        raise RuntimeError("tools/build.sh printed no directory")
    return _check(Path(lines[-1]))
