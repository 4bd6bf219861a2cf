"""The guest tier's set-up fails loudly: no kernel package in the cache is an error naming the fix."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from koordpy_testkit.guest import GuestUnavailableError, guest_dir


def test_a_missing_kernel_package_is_an_error_naming_the_set_up(tmp_path, monkeypatch):
    monkeypatch.delenv("KOORDPY_GUEST_DIR", raising=False)
    monkeypatch.setenv("KOORDPY_CACHE", str(tmp_path))
    (tmp_path / "guest-6.1.0-99").mkdir()  # an interrupted unpack: no .complete stamp
    with pytest.raises(GuestUnavailableError, match=r"no guest kernel in .*scripts/install-guest.sh"):
        guest_dir()


def test_a_configured_directory_without_its_stamp_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("KOORDPY_GUEST_DIR", str(tmp_path))
    with pytest.raises(GuestUnavailableError, match="not a complete guest directory"):
        guest_dir()


def test_the_newest_complete_kernel_is_used(tmp_path, monkeypatch):
    monkeypatch.delenv("KOORDPY_GUEST_DIR", raising=False)
    monkeypatch.setenv("KOORDPY_CACHE", str(tmp_path))
    for version in ("6.1.0-9", "6.1.0-57", "6.1.0-60"):
        (tmp_path / f"guest-{version}").mkdir()
    for version in ("6.1.0-9", "6.1.0-57"):
        (tmp_path / f"guest-{version}" / ".complete").touch()
    assert guest_dir() == tmp_path / "guest-6.1.0-57"


def _pins(go_mod: str) -> dict[str, str]:
    """Every ``k8s.io/*`` module version a go.mod names (requires and replacements alike)."""
    return dict(re.findall(r"(?m)^\s*(k8s\.io/[\w./-]+) (v[0-9][^\s]*)\s*$", go_mod)) | dict(
        re.findall(r"(?m)=>\s*(k8s\.io/[\w./-]+) (v[0-9][^\s]*)\s*$", go_mod)
    )


def test_the_guests_kubelet_is_the_control_planes_kubernetes_release():
    # tools/kubelet is a module of its own (its build does not disturb the control plane's cached
    # binaries), so nothing but this check keeps its Kubernetes release equal to tools/kubernetes'.
    root = Path(__file__).resolve().parents[3]
    kubelet = _pins((root / "tools/kubelet/go.mod").read_text())
    plane = _pins((root / "tools/kubernetes/go.mod").read_text())
    assert kubelet["k8s.io/kubernetes"] == plane["k8s.io/kubernetes"]
    shared = sorted(set(kubelet) & set(plane))
    assert len(shared) > 10, shared  # the staging modules both replace
    assert {m: kubelet[m] for m in shared} == {m: plane[m] for m in shared}
