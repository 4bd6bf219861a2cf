"""The API emulator (``koordpy_testkit.apiserver``, kept for fault injection and fast adapter tests) answers
like the real kube-apiserver where those tests rely on it: the same request, sent to both, gets the same
status code.

The eviction subresource honours a PodDisruptionBudget through the ``status`` the disruption controller
writes (``disruptionsAllowed``, ``observedGeneration``): the real API server never computes a budget itself.
The emulator has no disruption controller, so a budget whose status nobody wrote must refuse evictions as
the real server does before its controller has processed the budget.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cluster_kit import Kube, Space, wait_until

from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.processes import LOOPBACK, Proc, free_port

pytestmark = pytest.mark.cluster


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[httpx.Client]:
    port = free_port()
    proc = Proc(
        "emulator",
        [sys.executable, "-m", "koordpy_testkit.apiserver", "--host", LOOPBACK, "--port", str(port)],
        tmp_path / "emulator.log",
    ).start()
    try:
        line = proc.wait_for_log("http://", 120)
        url = re.search(r"http://[0-9.]+:\d+", line)
        assert url, line
        with httpx.Client(
            base_url=url.group(0), timeout=HANG_BACKSTOP, headers={"Authorization": "Bearer admin"}
        ) as client:
            yield client
    finally:
        proc.stop()


def bare_pod(namespace: str, node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "registry.invalid/app:1"}],
        "terminationGracePeriodSeconds": 0,
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bare", "namespace": namespace, "labels": {"app": "bare"}},
        "spec": spec,
    }


def budget(namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "budget", "namespace": namespace},
        "spec": {"selector": {"matchLabels": {"app": "bare"}}, **spec},
    }


def eviction(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "bare", "namespace": namespace}}


def emulator_setup(client: httpx.Client, namespace: str, pdb: dict[str, Any], status: dict[str, Any] | None) -> None:
    client.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    pod = bare_pod(namespace, node="n0")
    pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    assert client.post(f"/api/v1/namespaces/{namespace}/pods", json=pod).status_code == 201
    created = client.post(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets", json=pdb)
    assert created.status_code == 201, created.text
    if status is not None:
        body = {**created.json(), "status": status}
        resp = client.put(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/budget/status", json=body)
        assert resp.status_code == 200, resp.text


def real_setup(space: Space, kube: Kube, pdb: dict[str, Any]) -> dict[str, Any]:
    """The bare pod Running on a kwok node and the budget as the real disruption controller leaves it."""
    node = space.node("n0")
    space.wait_nodes_ready()
    kube.create(bare_pod(space.namespace, node=node))
    wait_until(
        "pod Running",
        lambda: (kube.get("Pod", "bare", space.namespace) or {}).get("status", {}).get("phase") == "Running",
    )
    kube.create(pdb)

    def processed() -> dict[str, Any] | None:
        obj = kube.get("PodDisruptionBudget", "budget", space.namespace)
        status = (obj or {}).get("status") or {}
        if obj and status.get("observedGeneration") == obj["metadata"]["generation"]:
            return dict(status)
        return None

    status: dict[str, Any] = wait_until("budget processed by the disruption controller", processed)
    return status


@pytest.mark.parametrize(
    "spec",
    [{"maxUnavailable": 1}, {"minAvailable": 0}, {"minAvailable": 1}, {"maxUnavailable": "50%"}],
    ids=["maxUnavailable-1", "minAvailable-0", "minAvailable-1", "maxUnavailable-50pct"],
)
def test_eviction_under_a_budget_matches_the_real_server_given_the_same_budget_status(
    emulator: httpx.Client, space: Space, kube: Kube, spec: dict[str, Any]
) -> None:
    status = real_setup(space, kube, budget(space.namespace, **spec))
    real = kube.evict(space.namespace, "bare")
    emulator_setup(emulator, space.namespace, budget(space.namespace, **spec), status)
    emulated = emulator.post(f"/api/v1/namespaces/{space.namespace}/pods/bare/eviction", json=eviction(space.namespace))
    assert (emulated.status_code, status.get("disruptionsAllowed")) == (
        real.status_code,
        status.get("disruptionsAllowed"),
    )


def test_eviction_under_an_unprocessed_budget_is_refused_like_the_real_server(
    emulator: httpx.Client, space: Space, kube: Kube
) -> None:
    real_setup(space, kube, budget(space.namespace, maxUnavailable=1))
    real = kube.evict(space.namespace, "bare")
    emulator_setup(emulator, space.namespace, budget(space.namespace, maxUnavailable=1), status=None)
    emulated = emulator.post(f"/api/v1/namespaces/{space.namespace}/pods/bare/eviction", json=eviction(space.namespace))
    assert real.status_code == 429, real.text
    assert emulated.status_code == real.status_code, emulated.text
