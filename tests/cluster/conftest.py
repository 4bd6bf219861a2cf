"""Fixtures of the real-cluster tier: one real control plane per session with the chart installed, a
namespace and nodes per test, and the koordpy processes a test starts.

The control plane's files (certificates, kubeconfigs, every process's log, the audit log) stay in pytest's
temporary directory (the last three runs are kept); a failing test's report names them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_kit import Components, Kube, Release, Space, started_plane

from koordpy_testkit.controlplane import ControlPlane

LAST = "test_no_component_request_was_denied"
"""Runs after every other test of the session: it checks the requests they all made."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.name == LAST)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with started_plane(tmp_path_factory.mktemp("controlplane")) as plane:
        yield plane


@pytest.fixture(scope="session")
def kube(control_plane: ControlPlane) -> Iterator[Kube]:
    with control_plane.client() as client:
        yield Kube(client)


@pytest.fixture(scope="session")
def release(control_plane: ControlPlane, kube: Kube) -> Release:
    """The chart, installed with its defaults by the real helm."""
    installed = Release(control_plane, kube)
    installed.install()
    return installed


def _namespace_for(request: pytest.FixtureRequest) -> str:
    name = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")
    name = name.removeprefix("test-")[:40].strip("-")
    return f"t-{name}-{request.node.nodeid.__hash__() & 0xFFFF:04x}"


@pytest.fixture
def space(kube: Kube, request: pytest.FixtureRequest) -> Iterator[Space]:
    """A fresh namespace (and room for nodes) for one test; deleted afterwards, with its nodes."""
    namespace = _namespace_for(request)
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    test_space = Space(kube, namespace)
    try:
        yield test_space
    finally:
        test_space.close()


@pytest.fixture
def koordpy(control_plane: ControlPlane, release: Release, tmp_path: Path) -> Iterator[Components]:
    """The koordpy processes this test starts (none until it asks), stopped afterwards."""
    components = Components(control_plane, release, tmp_path)
    try:
        yield components
    finally:
        components.close()


@pytest.fixture(scope="module")
def module_space(kube: Kube, request: pytest.FixtureRequest) -> Iterator[Space]:
    """A namespace (and room for nodes) shared by the tests of one module; deleted after the last."""
    name = re.sub(r"[^a-z0-9]+", "-", Path(str(request.path)).stem.lower()).removeprefix("test-cluster-")[:40]
    namespace = f"m-{name.strip('-')}-{hash(request.path) & 0xFFFF:04x}"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    shared = Space(kube, namespace)
    try:
        yield shared
    finally:
        shared.close()


@pytest.fixture(scope="module")
def module_koordpy(
    control_plane: ControlPlane, release: Release, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Components]:
    """koordpy processes shared by the tests of one module (started by a module fixture), stopped after the last."""
    components = Components(control_plane, release, tmp_path_factory.mktemp("module-koordpy"))
    try:
        yield components
    finally:
        components.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    report = yield
    if getattr(report, "failed", False) and "control_plane" in getattr(item, "funcargs", {}):
        plane: ControlPlane = item.funcargs["control_plane"]  # type: ignore[attr-defined]
        lines = [f"{name}: {path}" for name, path in plane.logs().items()]
        lines.append(f"audit log: {plane.audit_log}")
        if "koordpy" in item.funcargs:  # type: ignore[attr-defined]
            lines.append(f"koordpy process logs: {item.funcargs['koordpy'].workdir}")  # type: ignore[attr-defined]
        report.sections.append(("real control plane files", "\n".join(lines)))  # type: ignore[attr-defined]
    return report
