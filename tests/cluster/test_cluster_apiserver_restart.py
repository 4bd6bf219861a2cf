"""kube-apiserver and etcd SIGKILLed and started again on the same data (same ports, same etcd directory)
after a 20 s outage, while every koordpy component runs: the extender and the koordpy-scheduler, the
manager (leading) and an agent on a kwok node. A control plane of this module's own, so the session's is
not disturbed.

Right after the API server is ready again, before any component has caught up, the cluster changes as it
would have during a longer outage: a pod deleted, a pod bound by someone else, a node added and another
deleted, the missing member of a held gang created and a PodMigrationJob created. Afterwards each
component is ready again in the same process (no restart), its caches equal a fresh list, and nothing it
owed is missing: the manager's NodeMetric for the new node (and none for the deleted one), the gang's
PodGroup status, the job's phase; the agent's NodeMetric reports again. How long each took after the API
server's readiness is printed (timing lives in ``bench/apiserver_restart.py``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cluster_kit import RELEASE_NAMESPACE, Components, Kube, Release, Space, wait_until
from test_cluster_gangs import GANG, POD_GROUP_LABEL, podgroup, refused

from koordpy.model.durations import parse_rfc3339
from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.cgroupfs import BusyProc, FakeCgroupTree
from koordpy_testkit.controlplane import ControlPlane, fake_node

pytestmark = pytest.mark.cluster

OUTAGE = 20.0
"""Seconds between the SIGKILL and the start of etcd again."""
MANAGER = {"nodeMetric": {"reportIntervalSeconds": 1, "aggregateDurationSeconds": 1}}


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    control = ControlPlane(
        workdir=tmp_path_factory.mktemp("restart"),
        audited_groups=(f"system:serviceaccounts:{RELEASE_NAMESPACE}",),
    )
    control.start()
    try:
        with control.client() as api:
            api.post("/api/v1/nodes", json=fake_node("system-0")).raise_for_status()
        yield control
    finally:
        control.stop()


def extender_view(koordpy: Components, node: str) -> list[str] | None:
    """The pods the extender counts on ``node`` (``/debug/nodes``), None when it does not know the node."""
    resp = httpx.get(f"{koordpy.extender_base}/debug/nodes/{node}", timeout=HANG_BACKSTOP)
    if resp.status_code == 404:
        return None
    resp.raise_for_status()
    pods: list[str] = resp.json()["assignedPods"]
    return pods


def listed_on(kube: Kube, node: str) -> list[str]:
    """A fresh list: the pods bound to ``node`` that have not ended, as ``namespace/name``."""
    pods = kube.list("Pod", fieldSelector=f"spec.nodeName={node}")
    return sorted(
        f"{p['metadata']['namespace']}/{p['metadata']['name']}"
        for p in pods
        if p.get("status", {}).get("phase") not in ("Succeeded", "Failed")
    )


def manager_checks(koordpy: Components) -> dict[str, Any]:
    checks: dict[str, Any] = httpx.get(koordpy.manager_base + "/healthz", timeout=HANG_BACKSTOP).json()["checks"]
    return checks


def ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=HANG_BACKSTOP).status_code == 200
    except httpx.HTTPError:
        return False


def test_every_component_recovers_in_place_after_apiserver_and_etcd_are_killed(
    plane: ControlPlane, tmp_path: Path
) -> None:
    with plane.client() as client:
        kube = Kube(client)
        release = Release(plane, kube)
        release.install()
        koordpy = Components(plane, release, tmp_path)
        space = Space(kube, "restart")
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": space.namespace}})
        stop = threading.Event()
        try:
            run(plane, kube, koordpy, space, tmp_path, stop)
        finally:
            stop.set()
            koordpy.close()


def run(
    plane: ControlPlane, kube: Kube, koordpy: Components, space: Space, tmp_path: Path, stop: threading.Event
) -> None:
    n0, n1 = space.node("n0"), space.node("n1")
    space.wait_nodes_ready()
    # the agent of n0 on a fabricated /proc and cgroup tree; n1 has no agent, so the koordpy profile's pods
    # go to n0 (a NodeMetric without a report counts as expired)
    busy = BusyProc(tmp_path / "proc", cpus=16, mem_total_kib=64 << 20, mem_avail_kib=48 << 20)
    busy.busy_fraction = 0.1
    tree = FakeCgroupTree(tmp_path / "cgroup", version=2, driver="systemd")

    def tick() -> None:
        while not stop.wait(0.2):
            busy.tick()

    threading.Thread(target=tick, daemon=True).start()
    manager = koordpy.start_manager(MANAGER)
    agent, agent_ready = koordpy.start_ready_agent(n0, tree.root, busy.root, tmp_path / "agent-state")
    extender = koordpy.start_extender()
    # kube-scheduler without leader election, as the stock default-scheduler runs here: with it, kube-scheduler
    # exits when it cannot renew its Lease for 10 s (client-go's rule) and its kubelet starts it again
    ks = koordpy.kube_scheduler_config()
    ks["leaderElection"] = {"leaderElect": False}
    scheduler = koordpy.start_scheduler(ks)
    processes = [manager, agent, extender, scheduler]
    wait_until(
        "the agent's first report", lambda: (kube.get("NodeMetric", n0) or {}).get("status", {}).get("updateTime")
    )

    template = space.pod("unused", labels={"app": "web"})
    kube.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": space.namespace},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": template["spec"]},
            },
        }
    )
    space.create_pod("solo")
    bound = wait_until("four pods bound", lambda: space.count_bound(4))
    victim = sorted(name for name in bound if name.startswith("web-"))[0]
    kube.create(podgroup(space.namespace, "g", 2, timeout_seconds=600, annotations={GANG + "mode": "NonStrict"}))
    space.create_pod("g-0", labels={POD_GROUP_LABEL: "g"})
    wait_until("the gang's first member refused (its quorum is 2)", lambda: refused(kube, space, "g-0"))

    plane.kill_apiserver_and_etcd()
    time.sleep(OUTAGE)
    ready_at = plane.restart_apiserver_and_etcd()

    # what changed "while the components were away": each one's watches have not resumed yet
    kube.delete("Pod", "solo", space.namespace, grace=0)
    bound_elsewhere = space.pod("bound-by-hand", extra_spec={"nodeName": n0})
    kube.create(bound_elsewhere)
    n2 = space.node("n2")
    kube.delete("Node", n1)
    space.create_pod("g-1", labels={POD_GROUP_LABEL: "g"})
    job = kube.create(
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "PodMigrationJob",
            "metadata": {"name": f"{space.namespace}-move-web"},
            "spec": {"mode": "EvictDirectly", "ttl": "5m", "podRef": {"namespace": space.namespace, "name": victim}},
        }
    )
    took: dict[str, float] = {}

    def done(what: str, check: Any) -> Any:
        found = wait_until(what, check)
        took[what] = time.monotonic() - ready_at
        return found

    done("extender ready", lambda: ok(koordpy.extender_base + "/readyz"))
    done("agent ready", lambda: ok(agent_ready))
    done("manager healthy and leading", lambda: manager_checks(koordpy)["leaderElection"]["leading"])
    done(
        "the extender sees the pod bound by hand",
        lambda: f"{space.namespace}/bound-by-hand" in (extender_view(koordpy, n0) or []),
    )
    done("the gang bound whole", lambda: {"g-0", "g-1"} <= set(space.bound()))
    done("the manager's NodeMetric of the new node", lambda: kube.get("NodeMetric", n2))
    done("the deleted node's NodeMetric gone", lambda: kube.get("NodeMetric", n1) is None)
    status = done(
        "the PodGroup's status",
        lambda: (
            (s := (kube.get("PodGroup", "g", space.namespace) or {}).get("status") or {}).get("scheduled") == 2 and s
        ),
    )
    done(
        "the job succeeded",
        lambda: (
            (kube.get("PodMigrationJob", job["metadata"]["name"]) or {}).get("status", {}).get("phase") == "Succeeded"
        ),
    )

    def reported_after_restart() -> bool:
        stamp = (kube.get("NodeMetric", n0) or {}).get("status", {}).get("updateTime")
        return bool(stamp) and parse_rfc3339(stamp) > time.time() - (time.monotonic() - ready_at) + 1

    done("the agent reports again", reported_after_restart)
    for what, seconds in took.items():
        print(f"{seconds:6.2f} s after the API server's readiness: {what}")

    # the same processes: none restarted
    assert all(proc.alive() and proc.starts == 1 for proc in processes), [(p.name, p.starts) for p in processes]
    assert status["phase"] in ("Scheduled", "Running"), status
    # caches equal a fresh list: the extender's pods per node, its nodes; the manager's objects per kind
    for node in (n0, n2, "system-0"):
        wait_until(
            f"the extender's pods on {node} equal a fresh list",
            lambda node=node: extender_view(koordpy, node) == listed_on(kube, node),
        )
    assert extender_view(koordpy, n1) is None  # the deleted node is gone from its cache

    def manager_equals_fresh() -> bool:
        caches = manager_checks(koordpy)["caches"]
        fresh = {
            "pods": len(kube.list("Pod")),
            "nodes": len(kube.list("Node")),
            "nodemetrics": len(kube.list("NodeMetric")),
            "podmigrationjobs": len(kube.list("PodMigrationJob")),
            "reservations": len(kube.list("Reservation")),
            "podgroups_sigs": len(kube.list("PodGroup")),
        }
        return all(caches.get(kind) == count for kind, count in fresh.items())

    wait_until("the manager's caches equal a fresh list", manager_equals_fresh)
    assert manager_checks(koordpy)["leaderElection"]["leading"]
