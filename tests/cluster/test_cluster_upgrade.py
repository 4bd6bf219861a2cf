"""``helm upgrade`` with a changed configuration, then ``helm rollback``, on the real control plane while
the manager has work in flight: six ReservationFirst PodMigrationJobs (a budget lets one pod go at a
time), the Reservations they create, and a gang of three whose two members' binds the extender holds (the third
has no room until a node is added at the end).

kwok runs no containers, so the processes stand in for the pods the real Deployment controller replaces:
after each helm command the test replaces the scheduler pod's (extender and kube-scheduler) and the
manager pod's processes in the order the installed Deployment's ``strategy`` gives
(:meth:`cluster_kit.Components.roll`): with a surge the new processes start before the old ones get
SIGTERM, so if the chart's strategy let two managers act at once, they would here. Each manager process has
a token of its own (a TokenRequest each), so the audit log tells their writes apart by the token's
credential id.

helm and the scheduler's rollout run while the budget refuses evictions (the jobs hold their Reservations
and wait); the manager's rollout while it lets pods go again (the jobs evict and move). What must hold: no two managers' writes
overlap in time; each pod is evicted once and never asked for again;
one Reservation per job, created once; the gang binds nothing until its third member has room, then all
of it, each member once; every job succeeds. Printed: the longest time a pod of the koordpy profile created
during the rollouts waited for its bind (the scheduling gap) and each manager handover.
"""

from __future__ import annotations

import datetime
import itertools
import json
import threading
import time
from typing import Any

import pytest
from cluster_kit import CHART, Components, Kube, Release, Space, bindings_by_pod, helm, wait_until
from test_cluster_gangs import GANG, POD_GROUP_LABEL, podgroup
from test_cluster_manager_failover import evicted_once_each, evictions, phases
from test_cluster_migrations import budget

from koordpy_testkit.controlplane import ControlPlane
from koordpy_testkit.processes import Proc

pytestmark = pytest.mark.cluster

MANAGER_SA = "system:serviceaccount:koordpy-system:koordpy-manager"
CREDENTIAL = "authentication.kubernetes.io/credential-id"
WRITES = ("create", "update", "patch", "delete", "deletecollection")
MANAGER = {
    "nodeMetric": {"enabled": False},  # the nodes carry no NodeMetric: only resources and Reservations decide
    "migrationController": {
        "arbitrationArgs": {"interval": "200ms"},
        "objectLimiters": {"workload": {"duration": "0s"}},
        "maxMigratingPerNode": 1,
        "maxMigratingPerWorkload": 4,
        "maxUnavailablePerWorkload": 4,
    },
}
"""ReservationFirst (the default mode), one job at a time: the jobs' Reservations all have the Deployment's
ReplicaSet as owner, so a replacement may bind through another job's Reservation when two are placed at
once, and a job whose Reservation nobody took then waits out its ttl (as in Koordinator)."""
UPGRADE = (
    "--set",
    "manager.config.podGroup.eventIntervalSeconds=59",
    "--set",
    "scheduler.config.loadAware.usageThresholds.cpu=64",
)
"""A configuration change of both components (each Deployment's pod template changes: both roll)."""


def batch(space: Space) -> dict[str, str]:
    """The bound pods of Deployment ``batch`` that are not being deleted, by name: their node."""
    return {
        name: pod["spec"]["nodeName"]
        for name, pod in space.pods().items()
        if pod["metadata"].get("labels", {}).get("app") == "batch"
        and pod["spec"].get("nodeName")
        and not pod["metadata"].get("deletionTimestamp")
    }


def gang_bound(space: Space) -> dict[str, str]:
    return {name: node for name, node in space.bound().items() if name.startswith("mpi-")}


def migration(space: Space, index: int, pod: str) -> dict[str, Any]:
    """A PodMigrationJob without a mode: the manager's default, ReservationFirst."""
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {"name": f"{space.namespace}-m{index}"},
        "spec": {"ttl": "10m", "podRef": {"namespace": space.namespace, "name": pod}},
    }


def pace(kube: Kube, space: Space, max_unavailable: int) -> None:
    """The budget over ``batch``: 0 refuses every eviction (429), 1 lets one pod go at a time."""
    kube.patch("PodDisruptionBudget", "batch", {"spec": {"maxUnavailable": max_unavailable}}, space.namespace)


def in_flight(space: Space, kube: Kube, names: list[str], pods: list[str]) -> bool:
    """A pod was evicted and at least two jobs have not ended."""
    ended = [p for p in phases(kube, names).values() if p in ("Succeeded", "Failed")]
    return any(pod not in space.pods() for pod in pods) and len(names) - len(ended) >= 2


def last_revision(plane: ControlPlane, release: Release) -> int:
    history = json.loads(helm(plane, "history", release.name, "-n", release.namespace, "-o", "json").stdout)
    return max(int(entry["revision"]) for entry in history)


def logged(proc: Proc, needle: str) -> float:
    """The time of the first JSON log line of ``proc`` whose event contains ``needle``."""
    for line in proc.log.read_text(errors="replace").splitlines():
        if line.startswith("{") and needle in line:
            return stamp(json.loads(line)["timestamp"])
    raise AssertionError(f"{proc.name}: no {needle!r} in its log")


def stamp(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def manager_writes(plane: ControlPlane, since: float) -> list[tuple[float, str, str]]:
    """(time received, credential id, what) of every write the manager's ServiceAccount made from ``since``
    on (the session's audit log holds the earlier tests' managers too), oldest first."""
    out = []
    for event in plane.audit_events():
        if event["user"]["username"] != MANAGER_SA or event["verb"] not in WRITES:
            continue
        if (at := stamp(event["requestReceivedTimestamp"])) < since:
            continue
        (credential,) = event["user"]["extra"][CREDENTIAL]
        ref = event.get("objectRef") or {}
        what = f"{event['verb']} {ref.get('resource')}/{ref.get('subresource', '')} {ref.get('name')}"
        out.append((at, credential, what))
    return sorted(out)


def spans(writes: list[tuple[float, str, str]]) -> list[tuple[str, float, float, int]]:
    """Per credential: (credential, first write, last write, writes), in the order they first wrote."""
    found: dict[str, list[float]] = {}
    for at, credential, _ in writes:
        found.setdefault(credential, []).append(at)
    return sorted(((c, min(t), max(t), len(t)) for c, t in found.items()), key=lambda span: span[1])


class Probes:
    """Pods of the koordpy profile created every half second from a thread, while the test rolls the
    components; afterwards each one's wait for its bind (creation answered to the binding's audit event)."""

    def __init__(self, kube: Kube, space: Space) -> None:
        self.kube, self.space = kube, space
        self.created: dict[str, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="probe pods", daemon=True)

    def _run(self) -> None:
        index = 0
        while not self.stop.wait(0.5):
            name = f"probe-{index}"
            self.kube.create(self.space.pod(name, cpu="10m", memory="16Mi"))
            self.created[name] = time.time()
            index += 1

    def __enter__(self) -> Probes:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def waits(self, plane: ControlPlane) -> dict[str, float]:
        bindings = wait_until(
            "every probe pod's binding in the audit log",
            lambda: (
                (found := bindings_by_pod(plane, self.space.namespace))
                and all(n in found for n in self.created)
                and found
            ),
        )
        return {name: stamp(bindings[name][0]["requestReceivedTimestamp"]) - at for name, at in self.created.items()}


def test_upgrade_and_rollback_mid_flight_never_run_two_managers(
    control_plane: ControlPlane, release: Release, koordpy: Components, space: Space, kube: Kube
) -> None:
    n0 = space.node("n0", cpu="16", memory="64Gi")
    n1 = space.node("n1", cpu="16", memory="64Gi", pods="1000")  # room for every probe pod
    space.wait_nodes_ready()
    extender = koordpy.start_extender()
    scheduler = koordpy.start_scheduler()
    started = time.time()
    manager = koordpy.start_manager(MANAGER, name="manager-0")

    # six pods of one Deployment on n0 (n1 cordoned meanwhile), then n0 cordoned: the jobs' Reservations
    # and the replacements go to n1, the gang too
    kube.patch("Node", n1, {"spec": {"unschedulable": True}})
    template = space.pod("unused", labels={"app": "batch"})
    kube.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "batch", "namespace": space.namespace},
            "spec": {
                "replicas": 6,
                "selector": {"matchLabels": {"app": "batch"}},
                "template": {"metadata": {"labels": {"app": "batch"}}, "spec": template["spec"]},
            },
        }
    )
    pods = sorted(wait_until("six batch pods bound", lambda: len(bound := batch(space)) == 6 and bound))
    kube.patch("Node", n1, {"spec": {"unschedulable": False}})
    kube.patch("Node", n0, {"spec": {"unschedulable": True}})
    budget(kube, space, "batch", 1, "disruptionsAllowed", 1)

    kube.create(podgroup(space.namespace, "mpi", 3, timeout_seconds=600, annotations={GANG + "mode": "NonStrict"}))
    for index, cpu in enumerate(("1", "1", "20")):  # no node has 20 cpu: two members are held at their bind
        space.create_pod(f"mpi-{index}", cpu=cpu, memory="1Gi", labels={POD_GROUP_LABEL: "mpi"})
    wait_until("two gang binds held", lambda: "koordpy_extender_gang_held_binds 2.0" in koordpy.extender_metrics())

    names = [kube.create(migration(space, i, pod))["metadata"]["name"] for i, pod in enumerate(pods)]
    wait_until("a pod evicted and jobs still running", lambda: in_flight(space, kube, names, pods))
    gang_early: list[dict[str, str]] = []
    orders: list[str] = []
    handovers: list[float] = []
    revision = last_revision(control_plane, release)
    interval = release.component_config("manager").get("podGroup", {}).get("eventIntervalSeconds")

    with Probes(kube, space) as probes:
        for step, command in enumerate(
            (
                ("upgrade", release.name, str(CHART), "-n", release.namespace, "--reuse-values", *UPGRADE),
                ("rollback", release.name, str(revision), "-n", release.namespace),
            )
        ):
            # helm and the scheduler's rollout run while the budget refuses every eviction (the jobs hold
            # their Reservations and wait); the budget lets pods go again while the manager's pod is
            # replaced (the jobs evict and move across the handover).
            pace(kube, space, 0)
            at_step = phases(kube, names)
            assert len([n for n in names if at_step[n] not in ("Succeeded", "Failed")]) >= 2, at_step
            helm(control_plane, *command)
            installed = release.component_config("manager").get("podGroup", {}).get("eventIntervalSeconds")
            assert installed == (59 if step == 0 else interval), installed
            extender, scheduler, order = koordpy.roll_scheduler((extender, scheduler))
            orders.append(order)
            pace(kube, space, 1)  # the jobs move while the manager's pod is replaced
            old = manager
            manager, order = koordpy.roll_manager(manager, f"manager-{step + 1}", MANAGER)
            orders.append(order)
            wait_until("the new manager leads", lambda new=manager: "acquired as" in new.log.read_text())
            handovers.append(logged(manager, "acquired as") - logged(old, "SIGTERM received: stopping"))
            gang_early.append(gang_bound(space))
            print(f"{command[0]}: jobs {sorted(at_step.values())} before, {sorted(phases(kube, names).values())} after")
        time.sleep(2)
    assert orders == ["surge"] * 4  # the chart's strategy: a new pod beside the old one, every time
    assert all(not bound for bound in gang_early), gang_early  # without room for all, nothing of the gang binds

    # the audit log: the managers' writes never overlap (each rollout is over: the last manager acts alone)
    acted = wait_until(
        "a write of each of the three managers in the audit log",
        lambda: len(found := spans(manager_writes(control_plane, started))) >= 3 and found,
    )
    print("managers' writes (first, last, count):", [(round(a, 2), round(b, 2), n) for _, a, b, n in acted])
    assert len(acted) == 3, acted  # each of the three managers acted in turn: there was work across both
    for (before, _, last, _), (after, first, _, _) in itertools.pairwise(acted):
        assert last < first, f"{before} wrote until {last}, {after} from {first}"
        print(f"{first - last:.2f} s between the last write of one manager and the first of the next")
    print("handovers (the old manager's SIGTERM to the new one holding the Lease):", [f"{h:.2f} s" for h in handovers])
    wait_until("every job ended", lambda: all(p in ("Succeeded", "Failed") for p in phases(kube, names).values()))
    assert set(phases(kube, names).values()) == {"Succeeded"}, phases(kube, names)
    assert not gang_bound(space)
    # room for the third member (after the jobs: a replacement could take it instead of its Reservation)
    space.node("big", cpu="32", memory="64Gi")
    wait_until("the gang bound whole", lambda: len(gang_bound(space)) == 3)

    # each pod evicted once, each Reservation created once
    wait_until("six granted evictions in the audit log", lambda: len(evictions(control_plane, space.namespace)) == 6)
    evicted_once_each(control_plane, space.namespace, pods)
    created: dict[str, list[int]] = {}
    for event in control_plane.audit_events():
        ref = event.get("objectRef") or {}
        if (
            event["user"]["username"] == MANAGER_SA
            and event["verb"] == "create"
            and ref.get("resource") == "reservations"
            and stamp(event["requestReceivedTimestamp"]) >= started  # not the earlier tests' managers
        ):
            created.setdefault(ref["name"], []).append(event["responseStatus"]["code"])
    uids = {(kube.get("PodMigrationJob", name) or {})["metadata"]["uid"] for name in names}
    assert created == {key: [201] for key in uids}, created  # a job's Reservation is named after its uid
    bindings = bindings_by_pod(control_plane, space.namespace)
    assert {name: len(bindings[name]) for name in ("mpi-0", "mpi-1", "mpi-2")} == dict.fromkeys(
        ("mpi-0", "mpi-1", "mpi-2"), 1
    )

    waits = probes.waits(control_plane)
    print(
        f"scheduling gap: the longest wait for a bind of {len(waits)} probe pods created during the rollouts was {max(waits.values()):.2f} s (median {sorted(waits.values())[len(waits) // 2]:.2f} s)"
    )
