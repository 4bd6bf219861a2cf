"""The pinned Kubernetes binaries: built once per machine by ``tools/build.sh``, then reused.

``KOORDPY_K8S_BIN`` names a directory of prebuilt binaries instead (it must hold every one of
:data:`BINARIES`); otherwise ``tools/build.sh`` is run, which builds into a directory keyed by the
pinned versions under ``~/.cache/koordpy`` and prints it (instantly, when already built).
The kubelet of the guest tier is built the same way by ``tools/build-kubelet.sh`` into a directory of its
own (``KOORDPY_KUBELET_BIN`` names a prebuilt one): :func:`ensure_kubelet`.

Not guaranteed: that ``KOORDPY_K8S_BIN`` holds the pinned versions (only their presence is checked).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["BINARIES", "REPO_ROOT", "ensure_binaries", "ensure_kubelet"]

REPO_ROOT = Path(__file__).resolve().parents[4]
BUILD_SCRIPT = REPO_ROOT / "tools" / "build.sh"
KUBELET_BUILD_SCRIPT = REPO_ROOT / "tools" / "build-kubelet.sh"
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
    return _check(_build(BUILD_SCRIPT, quiet=quiet))


def ensure_kubelet(*, quiet: bool = False) -> Path:
    """The pinned kubelet binary, building it first when this machine has none (a failed build raises)."""
    given = os.environ.get("KOORDPY_KUBELET_BIN")
    directory = Path(given) if given else _build(KUBELET_BUILD_SCRIPT, quiet=quiet)
    if not (directory / "kubelet").is_file():
        raise RuntimeError(f"{directory} has no kubelet")
    return directory / "kubelet"


def _build(script: Path, *, quiet: bool) -> Path:
    """Run a build script of tools/ and return the directory it prints last."""
    name = f"tools/{script.name}"
    if not script.is_file():
        raise RuntimeError(f"{script} is missing: the real-cluster tier cannot build its binaries")
    result = subprocess.run(
        ["bash", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL if quiet else None,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"{name} failed with exit code {result.returncode}: the real-cluster tier needs the pinned "
            "Kubernetes binaries (Go >= 1.26 and the Go module proxy); its messages are above"
        )
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    if not lines:
        print(f"{name} printed no directory", file=sys.stderr)
        raise RuntimeError(f"{name} printed no directory")
    return Path(lines[-1])
