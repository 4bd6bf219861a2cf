"""The manager dying on the real control plane: SIGKILLed in the middle of a batch of PodMigrationJobs and
started again, and two replicas electing a leader on the manager's Lease: a restarted standby never takes
over from the leader, and the leader SIGKILLed is taken over once its Lease runs out. No pod is evicted
twice and every job ends.

The managers run on the chart's ServiceAccount token with the chart's configuration (for two replicas the
release is upgraded to ``manager.replicaCount=2``); the pods are real Deployments' on a kwok node.
Evictions are read from the API server's audit log: every ``pods/eviction`` create the manager's
ServiceAccount made, with the code the API server answered.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from cluster_kit import Components, Kube, Release, Space, wait_until
from test_cluster_migrations import budget, deployment, job, manager_audit, running_pods, status

from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.controlplane import ControlPlane
from koordpy_testkit.processes import Proc, wait_http

pytestmark = pytest.mark.cluster

LEASE = {"leaseDuration": "6s", "renewDeadline": "4s", "retryPeriod": "1s"}
"""``leaderElection`` timings of the two-replica test (shorter than the chart's 15 s, 10 s, 2 s)."""
QUICK_LEASE = {"leaderElection": LEASE}

BATCH = {
    "migrationController": {
        "defaultJobMode": "EvictDirectly",
        "arbitrationArgs": {"interval": "200ms"},
        "objectLimiters": {"workload": {"duration": "0s"}},
        "maxMigratingPerWorkload": 4,
        "maxUnavailablePerWorkload": 4,
    },
    **QUICK_LEASE,  # the process SIGKILLed holds the Lease: its restart takes it over once it runs out
}
"""Only ``maxMigratingPerNode`` (2, the default) limits a batch of six pods of one Deployment: the object
limiter is off and four of the six may migrate and be unavailable (all six would be refused: migrating
would leave none)."""

FAILOVER = {
    "migrationController": {
        "defaultJobMode": "EvictDirectly",
        "arbitrationArgs": {"interval": "200ms"},
        "objectLimiters": {"workload": {"duration": "0s"}},
    }
}


def evictions(plane: ControlPlane, namespace: str) -> dict[str, list[int]]:
    """Per pod of ``namespace``: the codes of the manager's eviction requests, oldest first."""
    out: dict[str, list[int]] = {}
    for event in manager_audit(plane, "pods", "eviction"):
        if event["objectRef"].get("namespace") == namespace:
            out.setdefault(event["objectRef"]["name"], []).append(event["responseStatus"]["code"])
    return out


def evicted_once_each(plane: ControlPlane, namespace: str, pods: list[str]) -> None:
    """Each of ``pods`` was evicted (2xx) exactly once and never asked for again afterwards; the manager
    asked to evict no other pod (a replacement) of the namespace."""
    codes = evictions(plane, namespace)
    assert sorted(codes) == sorted(pods), codes
    for pod, answered in codes.items():
        granted = [i for i, code in enumerate(answered) if 200 <= code < 300]
        assert len(granted) == 1 and granted[0] == len(answered) - 1, (pod, answered)


def phases(kube: Kube, names: list[str]) -> dict[str, str]:
    return {name: status(kube, name).get("phase") or "Pending" for name in names}


def test_a_manager_killed_mid_batch_evicts_no_pod_twice_and_every_job_ends(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube
) -> None:
    """Six jobs for the six pods of one Deployment on one node, a budget letting one pod go at a time (the
    disruption controller allows the next eviction once the ReplicaSet's replacement is Ready, and answers
    429 meanwhile). Once a pod was evicted and another job is Running, the manager is SIGKILLed and started
    again: the new process adopts the jobs where they are; every pod is evicted once and every job
    succeeds, and at no moment do more than two jobs (``maxMigratingPerNode``) migrate a pod that still
    exists."""
    node = space.node("n0", cpu="16", memory="64Gi")
    space.wait_nodes_ready()
    kube.create(deployment(space, "batch", 6, node))
    pods = running_pods(space, "batch", 6)
    budget(kube, space, "batch", 1, "disruptionsAllowed", 1)
    manager = koordpy.start_manager(BATCH)
    names = [kube.create(job(space, f"m{i}", pod))["metadata"]["name"] for i, pod in enumerate(pods)]
    peak = 0

    def migrating() -> int:
        """Jobs Running whose pod still exists (terminating counts)."""
        present = set(space.pods())
        found = {name: status(kube, name) for name in names}
        return sum(
            1 for name, pod in zip(names, pods, strict=True) if found[name].get("phase") == "Running" and pod in present
        )

    def mid_batch() -> bool:
        nonlocal peak
        peak = max(peak, migrating())
        found = phases(kube, names)
        assert "Failed" not in found.values(), {n: status(kube, n) for n in names}
        gone = [pod for pod in pods if pod not in space.pods()]
        return bool(gone) and "Running" in found.values()

    wait_until("one pod evicted and a job Running", mid_batch, interval=0.05)
    manager.kill()
    at_kill = phases(kube, names)
    print(f"at the kill: {sorted(at_kill.values())}, evictions {evictions(control_plane, space.namespace)}")
    assert sum(1 for p in at_kill.values() if p not in ("Succeeded", "Failed")) >= 1, at_kill
    koordpy.restart(manager, koordpy.manager_base + "/healthz")

    def all_ended() -> bool:
        nonlocal peak
        peak = max(peak, migrating())
        return all(p in ("Succeeded", "Failed") for p in phases(kube, names).values())

    wait_until("every job ended", all_ended, interval=0.05)
    final = phases(kube, names)
    assert set(final.values()) == {"Succeeded"}, {n: status(kube, n) for n in names}
    wait_until("six granted evictions in the audit log", lambda: len(evictions(control_plane, space.namespace)) == 6)
    evicted_once_each(control_plane, space.namespace, pods)
    print(f"peak of jobs migrating an existing pod: {peak}")
    assert 1 <= peak <= 2, peak
    running_pods(space, "batch", 6)  # the ReplicaSet replaced every one
    assert [e for e in manager_audit(control_plane, "pods") if e["verb"] == "delete"] == []


# ---- two replicas ---------------------------------------------------------------------------------


@pytest.fixture
def two_replicas(release: Release) -> Iterator[None]:
    """The release with two manager replicas and short leader-election timings, back to the defaults
    afterwards."""
    timings = [arg for key, value in LEASE.items() for arg in ("--set", f"manager.config.leaderElection.{key}={value}")]
    with release.changed("--set", "manager.replicaCount=2", *timings):
        yield


def rounds_running(proc: Proc) -> bool:
    """Whether the replica's migration rounds run now (its log's last start/stop line says started)."""
    lines = [
        line
        for line in proc.log.read_text(errors="replace").splitlines()
        if "migration rounds started" in line or "migration rounds stopped" in line
    ]
    return bool(lines) and "started" in lines[-1]


def lease(kube: Kube) -> dict[str, Any]:
    """The spec of the manager's Lease (holder, transitions, renewals)."""
    return dict((kube.get("Lease", "koordpy-manager", "koordpy-system") or {}).get("spec") or {})


@pytest.mark.usefixtures("two_replicas")
def test_two_replicas_one_leads_a_restarted_standby_never_takes_over_and_a_killed_leader_is_replaced(
    control_plane: ControlPlane, release: Release, koordpy: Components, space: Space, kube: Kube
) -> None:
    """Two ``koordpy manager`` processes with the chart's configuration for ``replicaCount: 2``: only the
    Lease's holder runs migration rounds. The standby is SIGKILLed and started again (a new identity):
    it stays a standby over two lease durations while the leader renews. The leader migrates a pod, is
    SIGKILLed (its Lease is not released), and the standby takes over once the Lease runs out and
    migrates the next pod. Each pod is evicted once. The failover time (kill to the standby's first
    round) is printed."""
    config = release.component_config("manager")
    assert config["leaderElection"] == {
        **LEASE,
        "resourceName": "koordpy-manager",
        "resourceNamespace": "koordpy-system",
    }
    node = space.node("n0", cpu="8", memory="32Gi")
    space.wait_nodes_ready()
    kube.create(deployment(space, "web", 2, node))
    pods = running_pods(space, "web", 2)
    first = koordpy.start_manager(FAILOVER, name="manager-a")
    wait_until("the lone replica runs rounds", lambda: rounds_running(first))
    second = koordpy.start_manager(FAILOVER, name="manager-b")
    held = wait_until("the leader holds the Lease", lambda: lease(kube).get("holderIdentity"))
    assert not rounds_running(second)
    transitions = lease(kube).get("leaseTransitions")
    # a restarted standby (a new identity) never takes the Lease from a leader that renews it
    second.kill()
    second.start()
    wait_http(f"{koordpy.manager_base}/healthz", HANG_BACKSTOP, second)
    renewed = lease(kube)["renewTime"]
    wait_until("the leader renewed since the standby's restart", lambda: lease(kube)["renewTime"] != renewed)
    time.sleep(2 * 6)  # two lease durations: a standby that could take over would have
    assert rounds_running(first) and not rounds_running(second)
    assert (lease(kube)["holderIdentity"], lease(kube).get("leaseTransitions")) == (held, transitions)
    before = kube.create(job(space, "m0", pods[0]))["metadata"]["name"]
    wait_until("the leader migrated", lambda: status(kube, before).get("phase") in ("Succeeded", "Failed"))
    assert status(kube, before)["phase"] == "Succeeded"
    assert not rounds_running(second)

    first.kill()  # no clean exit: its Lease stays until it runs out
    killed_at = time.monotonic()
    after = kube.create(job(space, "m1", pods[1]))["metadata"]["name"]
    wait_until("the standby takes over", lambda: rounds_running(second))
    takeover = time.monotonic() - killed_at
    wait_until("the new leader migrated", lambda: status(kube, after).get("phase") in ("Succeeded", "Failed"))
    done = time.monotonic() - killed_at
    assert status(kube, after)["phase"] == "Succeeded"
    assert lease(kube)["holderIdentity"] != held
    print(
        f"leaseDuration 6s: the standby ran rounds {takeover:.1f} s after the leader's SIGKILL; "
        f"the job created at the kill succeeded {done:.1f} s after it"
    )
    wait_until("two granted evictions in the audit log", lambda: len(evictions(control_plane, space.namespace)) == 2)
    evicted_once_each(control_plane, space.namespace, pods)
