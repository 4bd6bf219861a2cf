"""Reservations on the real control plane: who allocates a Reservation, and holding one against the stock
default scheduler.

* A ReservationFirst migration of a Deployment's pod (the real ReplicaSet controller makes the
  replacement) whose Reservation lands next to a sibling: the sibling never completes the job; only the
  replacement, bound through the Reservation (the extender's Binding carries Koordinator's
  ``scheduling.koordinator.sh/reservation-allocated``), does.
* A user Reservation placed next to a sibling keeps holding its room against other pods until an owner is
  bound through it.
* A starving job while the default scheduler keeps placing small pods on the same nodes: with
  ``reservation.taintNodes`` the job's node is tainted, drains and the job binds; kube-scheduler's own
  metrics count the preemptions.
* A pending pod of another scheduler never starves (the chart's ``reservation.schedulerNames``); a pod of
  the koordpy profile beside it does.

The nodes have no NodeMetric and the manager runs with ``nodeMetric.enabled: false``: the load-aware filter
passes a node without a NodeMetric, so only resources and Reservations decide.
"""

from __future__ import annotations

import datetime
import json
import random
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import yaml
from cluster_kit import PROFILE, Components, Kube, Release, Space, poll, wait_until

from koordpy.scheduler.plugins.reservation.starving import reservation_name
from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.controlplane import ControlPlane
from koordpy_testkit.controlplane.cluster import ADMIN_USER

pytestmark = pytest.mark.cluster

ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"
HOLD_TAINT = "koordpy.io/reserved"
RESERVED = "node(s) resource was(were) reserved"
FAST_MIGRATION = {"migrationController": {"arbitrationArgs": {"interval": "200ms"}}}
NO_NODEMETRICS = {"nodeMetric": {"enabled": False}}


def deployment(space: Space, name: str, replicas: int, cpu: str = "1") -> dict[str, Any]:
    template = space.pod("unused", cpu=cpu, memory="1Gi", labels={"app": name})
    template["spec"]["terminationGracePeriodSeconds"] = 1
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": space.namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": template["spec"]},
        },
    }


def running(space: Space, app: str) -> dict[str, dict[str, Any]]:
    """Bound pods of ``app`` that are not being deleted, by name."""
    return {
        name: pod
        for name, pod in space.pods().items()
        if pod["metadata"].get("labels", {}).get("app") == app
        and pod["spec"].get("nodeName")
        and not pod["metadata"].get("deletionTimestamp")
    }


def migration_rounds(koordpy: Components) -> int:
    """The migration rounds the manager ran (its ``koordpy_migration_rounds_total``, both outcomes)."""
    text = httpx.get(koordpy.manager_base + "/metrics", timeout=HANG_BACKSTOP).text
    prefix = "koordpy_migration_rounds_total{"
    return int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix)))


MANAGER_SA = "system:serviceaccount:koordpy-system:koordpy-manager"


def manager_writes(plane: ControlPlane, resource: str, verb: str, subresource: str = "") -> list[dict[str, Any]]:
    """The manager ServiceAccount's ``verb`` requests on ``resource`` (``subresource``), from the audit log."""
    return [
        e
        for e in plane.audit_events()
        if e["user"]["username"] == MANAGER_SA
        and e["verb"] == verb
        and (e.get("objectRef") or {}).get("resource") == resource
        and (e.get("objectRef") or {}).get("subresource", "") == subresource
    ]


def audit_time(stamp: str) -> datetime.datetime:
    """An audit event's ``requestReceivedTimestamp`` or ``stageTimestamp`` (RFC 3339, microseconds)."""
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def cordon(kube: Kube, node: str, on: bool) -> None:
    kube.patch("Node", node, {"spec": {"unschedulable": on}})


def scale(kube: Kube, space: Space, name: str, replicas: int) -> None:
    kube.patch("Deployment", name, {"spec": {"replicas": replicas}}, space.namespace)


def record_of(pod: dict[str, Any]) -> dict[str, str] | None:
    raw = pod["metadata"].get("annotations", {}).get(ALLOCATED)
    return json.loads(raw) if raw else None


def two_replicas_on_two_nodes(kube: Kube, space: Space) -> tuple[str, str, str, str]:
    """Deployment ``web`` (1 cpu per pod) with one pod on each 3-cpu node: (sibling, its node, the other
    pod, its node), placed by the koordpy profile with the other node cordoned in turn. Each node also
    runs the chart's agent DaemonSet pod (50m cpu): 3 − 1 − 0.05 = 1.95 cpu free beside a web pod."""
    n0, n1 = space.node("n0", cpu="3", memory="8Gi"), space.node("n1", cpu="3", memory="8Gi")
    space.wait_nodes_ready()
    cordon(kube, n1, True)
    kube.create(deployment(space, "web", 1))
    (sibling,) = wait_until("the first replica bound", lambda: running(space, "web") or None)
    cordon(kube, n1, False)
    cordon(kube, n0, True)
    scale(kube, space, "web", 2)
    pods = wait_until("the second replica bound", lambda: len(running(space, "web")) == 2 and running(space, "web"))
    cordon(kube, n0, False)
    other = next(name for name in pods if name != sibling)
    assert (pods[sibling]["spec"]["nodeName"], pods[other]["spec"]["nodeName"]) == (n0, n1)
    return sibling, n0, other, n1


def test_a_reservation_first_job_completes_only_with_the_pod_bound_through_its_reservation(
    control_plane: ControlPlane, kube: Kube, space: Space, koordpy: Components
) -> None:
    """The reproduction: web of 2, the Reservation for the migrated pod lands next to its Ready sibling;
    the replacement stays Pending (no koordpy-scheduler running) for five migration rounds: the job must
    wait, not succeed with the sibling; once the scheduler is back the replacement binds through the
    Reservation and only then the job succeeds, with it."""
    koordpy.start_scheduling()
    manager = koordpy.start_manager({**FAST_MIGRATION, **NO_NODEMETRICS})
    sibling, n0, victim, n1 = two_replicas_on_two_nodes(kube, space)
    cordon(kube, n1, True)  # the replacement may only take the reserved room on n0
    assert koordpy.scheduler_proc is not None
    koordpy.scheduler_proc.stop()  # no koordpy-scheduler: the replacement stays Pending
    job = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {"name": f"move-{space.namespace}"},
        "spec": {"ttl": "5m", "podRef": {"namespace": space.namespace, "name": victim}},
    }
    kube.create(job)
    name = job["metadata"]["name"]

    def job_status() -> dict[str, Any]:
        found = kube.get("PodMigrationJob", name)
        return dict((found or {}).get("status") or {})

    def reservation() -> dict[str, Any] | None:
        ref = ((kube.get("PodMigrationJob", name) or {}).get("spec") or {}).get("reservationOptions") or {}
        found = kube.get("Reservation", (ref.get("reservationRef") or {}).get("name") or "-")
        return found if found and found.get("status", {}).get("nodeName") else None

    placed = poll("the Reservation is placed", reservation)
    assert placed, json.dumps([r.get("status") for r in kube.list("Reservation")])[:3000]
    assert placed["status"]["nodeName"] == n0
    uid = (kube.get("PodMigrationJob", name) or {})["metadata"]["uid"]
    assert placed["metadata"]["name"] == uid  # the job's Reservation is named after the job
    # SIGKILL mid-migration (the Reservation placed, the eviction just before or after): the new process
    # adopts the job and its Reservation
    manager.kill()
    koordpy.restart(manager, koordpy.manager_base + "/healthz")
    wait_until("the migrated pod is gone", lambda: victim not in space.pods())
    replacement = wait_until(
        "the ReplicaSet's replacement exists",
        lambda: next((n for n in space.pods() if n not in (sibling, victim)), None),
    )
    wait_until(
        "the job waits for a pod to bind its Reservation",
        lambda: any(c.get("reason") == "WaitForPodBindReservation" for c in job_status().get("conditions") or []),
    )
    stored = kube.get("PodMigrationJob", name)
    assert stored is not None
    res_name = stored["spec"]["reservationOptions"]["reservationRef"]["name"]
    # five more migration rounds with the Ready sibling on the Reservation's node
    ran = migration_rounds(koordpy)
    wait_until("five more migration rounds", lambda: migration_rounds(koordpy) >= ran + 5)
    still = job_status()
    res = kube.get("Reservation", res_name)
    assert res is not None
    assert (still["phase"], still.get("podRef")) == ("Running", None), still
    assert (res["status"]["phase"], res["status"]["nodeName"]) == ("Available", n0), res["status"]
    assert not res["status"].get("currentOwners"), res["status"]
    assert space.pods()[replacement]["spec"].get("nodeName") is None  # Pending meanwhile

    koordpy.start_scheduler()
    done = wait_until("the job finished", lambda: job_status().get("phase") in ("Succeeded", "Failed") and job_status())
    pod = space.pods()[replacement]
    assert (done["phase"], done["podRef"]["name"]) == ("Succeeded", replacement), done
    assert pod["spec"]["nodeName"] == n0
    assert record_of(pod) == {"name": res_name, "uid": res["metadata"]["uid"]}
    assert record_of(space.pods()[sibling]) is None
    consumed = wait_until(
        "the manager writes the Reservation consumed",
        lambda: (r := kube.get("Reservation", res_name)) and r["status"].get("phase") == "Succeeded" and r,
    )
    assert [o["name"] for o in consumed["status"]["currentOwners"]] == [replacement]
    assert done["message"] == f'Bind Pod "{space.namespace}/{replacement}" in Reservation "{res_name}"'
    # across the kill: one Reservation created, the pod evicted once
    created = [e for e in manager_writes(control_plane, "reservations", "create") if e["objectRef"]["name"] == res_name]
    assert [e["responseStatus"]["code"] for e in created] == [201]
    evicted = [
        e["responseStatus"]["code"]
        for e in manager_writes(control_plane, "pods", "create", "eviction")
        if e["objectRef"].get("namespace") == space.namespace and e["objectRef"]["name"] == victim
    ]
    assert evicted == [201], evicted


def test_a_reservation_next_to_a_sibling_holds_until_an_owner_binds_through_it(
    control_plane: ControlPlane, kube: Kube, space: Space, koordpy: Components
) -> None:
    """A user Reservation (owners: web's ReplicaSet, 1 cpu) placed on the node where a web pod already
    runs: a 1-cpu stranger is refused there (3 − 1.05 − 1 = 0.95 < 1: node(s) resource was(were)
    reserved), a new web replica binds through it (Succeeded, currentOwners that replica), and the
    stranger still finds no room."""
    koordpy.start_scheduling()
    koordpy.start_manager({**NO_NODEMETRICS, "reservation": {"intervalSeconds": 1}})
    sibling, n0, _, n1 = two_replicas_on_two_nodes(kube, space)
    rs = space.pods()[sibling]["metadata"]["ownerReferences"][0]
    cordon(kube, n1, True)
    hold = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": f"hold-{space.namespace}"},
        "spec": {
            "template": {
                "spec": {
                    "nodeSelector": {"kubernetes.io/hostname": n0},
                    "containers": [{"name": "main", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
                }
            },
            "owners": [
                {
                    "controller": {
                        "kind": "ReplicaSet",
                        "name": rs["name"],
                        "uid": rs["uid"],
                        "namespace": space.namespace,
                    }
                }
            ],
            "ttl": "10m",
        },
    }
    kube.create(hold)
    name = hold["metadata"]["name"]
    placed = wait_until(
        "the Reservation is placed next to the sibling",
        lambda: (r := kube.get("Reservation", name)) and r.get("status", {}).get("phase") == "Available" and r,
    )
    assert placed["status"]["nodeName"] == n0
    try:
        space.create_pod("stranger", cpu="1", memory="1Gi")

        def refused() -> str | None:
            pod = space.pods()["stranger"]
            cond = next((c for c in pod["status"].get("conditions") or [] if c["type"] == "PodScheduled"), {})
            return cond.get("message") if RESERVED in (cond.get("message") or "") else None

        message = wait_until("the stranger is refused the reserved room", refused)
        assert space.pods()["stranger"]["spec"].get("nodeName") is None, message
        held = kube.get("Reservation", name)
        assert held is not None and not held["status"].get("currentOwners")

        scale(kube, space, "web", 3)
        consumed = wait_until(
            "a new replica consumes the Reservation",
            lambda: (r := kube.get("Reservation", name)) and r["status"].get("phase") == "Succeeded" and r,
        )
        (owner,) = consumed["status"]["currentOwners"]
        pod = space.pods()[owner["name"]]
        assert owner["name"] != sibling and pod["spec"]["nodeName"] == n0
        assert record_of(pod) == {"name": name, "uid": placed["metadata"]["uid"]}
        assert space.pods()["stranger"]["spec"].get("nodeName") is None
        # the user's Reservation: its status is the manager's, the object is not
        writes = [
            e
            for e in control_plane.audit_events()
            if (e.get("objectRef") or {}).get("resource") == "reservations"
            and (e.get("objectRef") or {}).get("name") == name
            and e["verb"] not in ("get", "list", "watch")
        ]
        by_writer = {
            (e["user"]["username"], e["verb"], e["objectRef"].get("subresource", ""))
            for e in writes
            if e["user"]["username"] != ADMIN_USER  # the test created it
        }
        assert by_writer == {(MANAGER_SA, "patch", "status")}, by_writer
    finally:
        kube.delete("Reservation", name)


# ---- a starving job next to the default scheduler -----------------------------------------------


@pytest.fixture
def taint_nodes(release: Release) -> Iterator[None]:
    """The release with ``manager.config.reservation.taintNodes`` (its RBAC grants node and pod patch),
    back to the defaults afterwards."""
    with release.changed("--set", "manager.config.reservation.taintNodes=true"):
        yield


def metric(text: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.split("{")[0].split(" ")[0] == name)


@pytest.mark.usefixtures("taint_nodes")
def test_a_starving_job_binds_when_its_node_drains_while_the_default_scheduler_runs(
    control_plane: ControlPlane, kube: Kube, space: Space, koordpy: Components
) -> None:
    """Three 4-cpu nodes (each also runs the chart's agent pod, 50m); the default scheduler places a stream
    of 1-cpu pods (2 a second, 6 to 12 s each, so some always wait); a 3.5-cpu pod of priority 1000
    arrives on the koordpy profile. The manager reserves a node for it (threshold 1 s) and taints it; the
    node drains (no small pod lands there any more) and the big pod binds there; its Reservation is
    released and the taint removed. kube-scheduler's own preemptions (``scheduler_preemption_victims``
    count and sum) stay within three of at most 3 victims each (three small pods fill a node): one lost
    before the Reservation exists (the extender's back-off then refuses more), one lost in the instant
    between the Reservation and its taint, one on the held node. Without the hold and the preempt verb,
    ``bench/reservation_hold.py`` measured 15 to 111 preemptions and 42 to 303 victims per run (in one of
    three runs the big pod never bound). The manager is SIGKILLed once it holds a node and started again:
    the new process adopts the hold (no second Reservation) and releases it."""
    koordpy.start_scheduling()
    reservation = {
        "enabled": True,
        "starvingJobTimeThreshold": 1,
        "intervalSeconds": 1,
        "reservedNodePercent": 100,
        "priorityThreshold": 1000,
    }
    manager = koordpy.start_manager({**NO_NODEMETRICS, "reservation": reservation})
    nodes = [space.node(f"n{i}", cpu="4", memory="16Gi") for i in range(3)]
    space.wait_nodes_ready()
    big_class = f"{space.namespace}-big"
    kube.create(
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": big_class}, "value": 1000}
    )
    began = datetime.datetime.now(datetime.UTC)  # the audit log is the whole control plane's: read from here
    rng = random.Random(7)
    due: dict[str, float] = {}  # small pod -> when this test deletes it (inf until it is bound)
    start = time.monotonic()
    next_arrival, index = start, 0
    big_created = False
    held_node = ""
    before_hold: set[str] = set()
    onto_held: list[str] = []
    restarted = False
    try:
        deadline = start + HANG_BACKSTOP
        while time.monotonic() < deadline:
            now = time.monotonic()
            while next_arrival <= now:
                space.create_pod(f"small-{index}", cpu="1", memory="1Gi", scheduler="default-scheduler")
                due[f"small-{index}"] = float("inf")
                index += 1
                next_arrival += rng.expovariate(2.0)
            if not big_created and now - start > 8:
                space.create_pod("big", cpu="3500m", memory="1Gi", priority_class=big_class)
                big_created = True
            pods = space.pods()
            for name, pod in pods.items():
                if due.get(name) == float("inf") and pod["spec"].get("nodeName"):
                    due[name] = now + rng.uniform(6, 12)
                    if held_node and pod["spec"]["nodeName"] == held_node and name not in before_hold:
                        onto_held.append(name)
            for name, at in list(due.items()):
                if at <= now:
                    kube.delete("Pod", name, space.namespace, grace=0)
                    del due[name]
            if not restarted:
                for node in nodes:
                    taints = (kube.get("Node", node) or {}).get("spec", {}).get("taints") or []
                    if any(t["key"] == HOLD_TAINT for t in taints):
                        held_node = node
                        before_hold = {n for n, p in pods.items() if p["spec"].get("nodeName") == node}
                if held_node:  # SIGKILL the manager once it holds a node: the new process adopts the hold
                    manager.kill()
                    koordpy.restart(manager, koordpy.manager_base + "/healthz")
                    restarted = True
            if pods.get("big", {}).get("spec", {}).get("nodeName"):
                break
            time.sleep(0.3)
        big = space.pods()["big"]
        assert big["spec"].get("nodeName"), f"big never bound: {big['status']}"
        assert held_node, "no node was ever tainted for the starving job"
        assert big["spec"]["nodeName"] == held_node
        # A pod whose binding request reached the API server before the taint was written was placed by a
        # scheduling cycle that could not have seen the taint (the scheduler's cache lags the API server):
        # only a bind requested after the taint was stored breaks the hold.
        tainted = min(
            audit_time(e["stageTimestamp"])
            for e in manager_writes(control_plane, "nodes", "patch")
            if e["objectRef"]["name"] == held_node and e["responseStatus"]["code"] == 200
        )

        def binding_requests() -> dict[str, datetime.datetime]:
            return {
                e["objectRef"]["name"]: audit_time(e["requestReceivedTimestamp"])
                for e in control_plane.audit_events()
                if (e.get("objectRef") or {}).get("subresource") == "binding"
                and e["objectRef"].get("namespace") == space.namespace
                and e["verb"] == "create"
            }

        # the API server writes a request's ResponseComplete audit event after it answers: a pod seen bound
        # a moment ago may not have its binding in the log yet
        (requested,) = wait_until(
            "a binding audit event for every pod seen on the held node",
            lambda: [found] if (found := binding_requests()).keys() >= set(onto_held) else None,
        )
        late = [name for name in onto_held if requested[name] > tainted]
        assert late == [], f"pods the default scheduler put on the held node after its taint: {late} of {onto_held}"
        record = record_of(big)
        assert record is not None and record["name"].startswith("starving-")
        assert any(t.get("key") == HOLD_TAINT for t in big["spec"].get("tolerations") or [])
        text = koordpy.scheduler_metrics()
        preemptions = metric(text, "scheduler_preemption_victims_count")
        victims = metric(text, "scheduler_preemption_victims_sum")
        print(f"koordpy-scheduler preemptions {preemptions:.0f}, victims {victims:.0f}")
        assert preemptions <= 3 and victims <= 9, (preemptions, victims)
        # released: the Reservation goes (the job is Ready) and so does the taint
        wait_until(
            "the hold released",
            lambda: (
                not any(
                    t["key"] == HOLD_TAINT
                    for n in nodes
                    for t in (kube.get("Node", n) or {}).get("spec", {}).get("taints") or []
                )
                and kube.get("Reservation", record["name"]) is None
            ),
        )

        # across the kill: one Reservation created and one deleted, by the manager; the Events say which
        # node was held for which pod, and the release
        def starving_writes() -> list[tuple[str, str]]:
            return [
                (e["verb"], e["objectRef"]["name"])
                for verb in ("create", "delete")
                for e in manager_writes(control_plane, "reservations", verb)
                if e["objectRef"]["name"].startswith("starving-") and audit_time(e["requestReceivedTimestamp"]) >= began
            ]

        # the delete's audit event is written after its answer, which the wait above may have seen first
        starving = wait_until(
            "the Reservation's delete in the audit log", lambda: ("delete" in dict(w := starving_writes())) and w
        )
        assert starving == [("create", record["name"]), ("delete", record["name"])], starving

        def released() -> set[tuple[str, str, str]] | None:
            """The manager's Events on the Reservation (cluster-scoped: they go to ``default``) and the pod."""
            got = {
                (e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"])
                for e in [*kube.events("default", involved=record["name"]), *kube.events(space.namespace)]
            }
            return got if ("Reservation", record["name"], "StarvingJobReleased") in got else None

        reasons = wait_until("the StarvingJobReleased Event", released)
        assert ("Reservation", record["name"], "StarvingJobReserved") in reasons, reasons
        assert ("Pod", "big", "Reserved") in reasons, reasons
    finally:
        kube.delete("PriorityClass", big_class)


def test_a_pod_of_another_scheduler_never_starves(
    control_plane: ControlPlane, kube: Kube, space: Space, koordpy: Components
) -> None:
    """The chart renders ``reservation.schedulerNames`` as its ``koordpy-scheduler`` profile: only that
    profile's pods bind through the extender, so only they can allocate a Reservation. Two pending pods of
    the same priority and size, one for a scheduler nobody runs and one for the koordpy profile (no
    kube-scheduler runs it here either, so both stay pending): the manager reserves for the koordpy pod
    and, in the rounds after, never for the other (a Reservation for it would only hold the node; the
    chart's agent pods, waiting a moment for the default scheduler on a new node, were such pods)."""
    began = datetime.datetime.now(datetime.UTC)
    settings = {"enabled": True, "starvingJobTimeThreshold": 1, "intervalSeconds": 1, "reservedNodePercent": 100}
    koordpy.start_manager({**NO_NODEMETRICS, "reservation": {**settings, "priorityThreshold": 1000}})
    config = yaml.safe_load((koordpy.workdir / "manager-config.yaml").read_text(encoding="utf-8"))
    assert config["reservation"]["schedulerNames"] == [PROFILE]  # rendered by the chart, not by this test
    space.node("n0", cpu="4", memory="16Gi")
    space.wait_nodes_ready()
    high = f"{space.namespace}-high"
    kube.create(
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": high}, "value": 1000}
    )
    ours, theirs = (reservation_name(f"{space.namespace}/{pod}", 0) for pod in ("ours", "theirs"))
    try:
        space.create_pod("theirs", cpu="1", memory="1Gi", priority_class=high, scheduler="no-such-scheduler")
        space.create_pod("ours", cpu="1", memory="1Gi", priority_class=high)

        def created() -> list[str]:
            return [
                e["objectRef"]["name"]
                for e in manager_writes(control_plane, "reservations", "create")
                if audit_time(e["requestReceivedTimestamp"]) >= began and e["responseStatus"]["code"] == 201
            ]

        def rounds() -> float:
            text = httpx.get(koordpy.manager_base + "/metrics", timeout=HANG_BACKSTOP).text
            return metric(text, "koordpy_reservation_rounds_total")

        wait_until("a Reservation for the koordpy pod", lambda: ours in created())
        after = rounds()
        # each of three more rounds would have reserved for the other pod, were it a starving job
        wait_until("three more reservation rounds", lambda: rounds() >= after + 3)
        assert created() == [ours]
        assert kube.get("Reservation", theirs) is None
        assert (kube.get("Reservation", ours) or {}).get("status", {}).get("nodeName") == space.nodes[0]
    finally:
        kube.delete("Reservation", ours)  # cluster-scoped: not deleted with the namespace
        kube.delete("PriorityClass", high)
        wait_until("the Reservation deleted", lambda: kube.get("Reservation", ours) is None)


def test_a_reservation_placed_on_the_pods_own_node_fails_the_job_and_is_deleted(
    control_plane: ControlPlane, kube: Kube, space: Space, koordpy: Components
) -> None:
    """A ReservationFirst job's Reservation excludes the pod's node, and the space has no other node, so the
    manager's placement finds none. A placement written by someone else onto the pod's own node (here the
    test, through the status subresource) must not make the job evict: it fails with ForbiddenMigratePod,
    the manager deletes its Reservation, and the pod stays."""
    koordpy.start_scheduling()
    koordpy.start_manager({**FAST_MIGRATION, **NO_NODEMETRICS, "reservation": {"intervalSeconds": 1}})
    n0 = space.node("n0", cpu="8", memory="16Gi")
    space.wait_nodes_ready()
    kube.create(deployment(space, "web", 2))
    pods = wait_until("two replicas bound", lambda: len(running(space, "web")) == 2 and running(space, "web"))
    victim = sorted(pods)[0]
    assert pods[victim]["spec"]["nodeName"] == n0
    name = f"own-{space.namespace}"
    kube.create(
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "PodMigrationJob",
            "metadata": {"name": name},
            "spec": {"ttl": "5m", "podRef": {"namespace": space.namespace, "name": victim}},
        }
    )

    def reservation_name() -> str | None:
        spec = (kube.get("PodMigrationJob", name) or {}).get("spec") or {}
        ref = (spec.get("reservationOptions") or {}).get("reservationRef") or {}
        return ref.get("name") if ref.get("name") and kube.get("Reservation", ref["name"]) else None

    res_name = wait_until("the manager created the Reservation", reservation_name)
    placement = {
        "phase": "Available",
        "nodeName": n0,
        "conditions": [{"type": "Scheduled", "status": "True", "reason": "Scheduled"}],
    }
    kube.patch("Reservation", res_name, {"status": placement}, subresource="status")

    def failed() -> dict[str, Any] | None:
        found = ((kube.get("PodMigrationJob", name) or {}).get("status")) or {}
        return found if found.get("phase") in ("Failed", "Succeeded") else None

    final = wait_until("the job ended", failed)
    assert (final["phase"], final["reason"]) == ("Failed", "ForbiddenMigratePod"), final
    assert final["message"] == f'Scheduler assigned the Reservation "{res_name}" on the same node as the Pod'
    wait_until("the Reservation deleted", lambda: kube.get("Reservation", res_name) is None)
    assert victim in running(space, "web")
    evictions = manager_writes(control_plane, "pods", "create", "eviction")
    assert [e for e in evictions if e["objectRef"].get("namespace") == space.namespace] == []
    deletes = wait_until(  # its audit event is written after the answer the wait above saw
        "the Reservation's delete in the audit log",
        lambda: [
            e for e in manager_writes(control_plane, "reservations", "delete") if e["objectRef"]["name"] == res_name
        ],
    )
    assert len(deletes) == 1, deletes


def team_b_reservation(name: str, space: Space, owners_app: str) -> dict[str, Any]:
    """A Reservation of another team: 1 cpu on this space's nodes for the pods labelled ``app: owners_app``."""
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": name, "labels": {"team": "b"}},
        "spec": {
            "template": {
                "spec": {
                    "schedulerName": PROFILE,
                    "nodeSelector": space.selector,
                    "containers": [{"name": "db", "resources": {"requests": {"cpu": "1"}}}],
                }
            },
            "owners": [{"labelSelector": {"matchLabels": {"app": owners_app}}}],
            "ttl": "1h",
        },
    }


def as_left(res: dict[str, Any] | None) -> dict[str, Any] | None:
    """What must not change of a Reservation: who it is, what it holds and for whom, where, and whether it
    was consumed (the manager's placement refreshes other status fields)."""
    if res is None:
        return None
    meta, status = res["metadata"], res.get("status") or {}
    return {
        "uid": meta["uid"],
        "labels": meta.get("labels"),
        "annotations": meta.get("annotations"),
        "ownerReferences": meta.get("ownerReferences"),
        "deleting": meta.get("deletionTimestamp") is not None,
        "spec": res["spec"],
        "phase": status.get("phase"),
        "nodeName": status.get("nodeName"),
        "currentOwners": status.get("currentOwners"),
    }


def test_a_migration_never_takes_another_teams_reservation(
    control_plane: ControlPlane, kube: Kube, space: Space, koordpy: Components
) -> None:
    """The hijack. Team B holds two Reservations on this space's nodes: ``db`` for its own pods, ``web`` for
    pods labelled like the intruder's. The intruder may migrate its own pods (koordpy's migrate role and
    ``edit`` in its namespace) and names team B's Reservations in its jobs' templates. A manager that
    trusted the name would adopt the Reservation: with ``db`` the job would evict its pod and, no
    replacement binding it, delete ``db`` at its ttl (the job failing); with ``web`` its replacement would
    consume it (the job succeeding). Both jobs fail at once (``InvalidSpec``), and a third job whose own name (its UID) team B took while the job was paused fails
    with ``FailedCreateReservation``. Team B's Reservations stay as they were, through five more migration
    rounds and a stale-reservation sweep: not deleted, not adopted, not consumed; no pod is evicted."""
    koordpy.start_scheduling()
    koordpy.start_manager({**FAST_MIGRATION, **NO_NODEMETRICS, "reservation": {"intervalSeconds": 1}})
    space.node("n0", cpu="8", memory="16Gi")
    space.node("n1", cpu="8", memory="16Gi")
    space.wait_nodes_ready()
    kube.create(deployment(space, "web", 2))
    pods = wait_until("two replicas bound", lambda: len(running(space, "web")) == 2 and running(space, "web"))
    web_a, web_b = sorted(pods)
    ns = space.namespace
    theirs = {"db": f"team-b-db-{ns}", "web": f"team-b-web-{ns}"}
    intruder = "intruder"
    kube.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": intruder, "namespace": ns}})
    subject = [{"kind": "ServiceAccount", "name": intruder, "namespace": ns}]
    kube.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": f"{intruder}-edit", "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
            "subjects": subject,
        }
    )
    migrate = f"{intruder}-{ns}-migrate"
    kube.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": migrate},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "koordpy-migrate"},
            "subjects": subject,
        }
    )
    paused = f"paused-{ns}"
    made: list[str] = []
    try:
        for key, owners_app in (("db", "team-b-db"), ("web", "web")):
            kube.create(team_b_reservation(theirs[key], space, owners_app))
            made.append(theirs[key])
        # a job paused by an admin: its own Reservation's name (its UID) is then taken by team B
        kube.create(
            {
                "apiVersion": "scheduling.koordinator.sh/v1alpha1",
                "kind": "PodMigrationJob",
                "metadata": {"name": paused},
                "spec": {"ttl": "5m", "paused": True, "podRef": {"namespace": ns, "name": web_b}},
            }
        )
        taken = (kube.get("PodMigrationJob", paused) or {})["metadata"]["uid"]
        kube.create(team_b_reservation(taken, space, "team-b-db"))
        made.append(taken)
        theirs["taken"] = taken

        def placed() -> dict[str, dict[str, Any]] | None:
            found = {key: kube.get("Reservation", name) for key, name in theirs.items()}
            ready = all((r or {}).get("status", {}).get("phase") == "Available" for r in found.values())
            return {k: v for k, v in found.items() if v is not None} if ready else None

        before = {key: as_left(res) for key, res in wait_until("team B's Reservations placed", placed).items()}
        token = control_plane.token(ns, intruder)
        with control_plane.client(token) as client:
            attacker = Kube(client)
            for key, victim in (("db", web_a), ("web", web_b)):
                attacker.create(
                    {
                        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
                        "kind": "PodMigrationJob",
                        "metadata": {"name": f"take-{key}-{ns}"},
                        "spec": {
                            "ttl": "5m",
                            "podRef": {"namespace": ns, "name": victim},
                            "reservationOptions": {"template": {"metadata": {"name": theirs[key]}}},
                        },
                    }
                )
        kube.patch("PodMigrationJob", paused, {"spec": {"paused": False}})

        def ended(name: str) -> dict[str, Any] | None:
            status = ((kube.get("PodMigrationJob", name) or {}).get("status")) or {}
            return status if status.get("phase") in ("Failed", "Succeeded") else None

        for key in ("db", "web"):
            final = wait_until(f"the job naming {theirs[key]} ended", lambda key=key: ended(f"take-{key}-{ns}"))
            assert (final["phase"], final["reason"]) == ("Failed", "InvalidSpec"), final
            assert final["message"].startswith(
                f"spec.reservationOptions.template.metadata.name: '{theirs[key]}' may not be set"
            ), final
        final = wait_until("the paused job ended", lambda: ended(paused))
        assert (final["phase"], final["reason"]) == ("Failed", "FailedCreateReservation"), final
        assert f'Reservation "{taken}" exists and was not created by this job' in final["message"], final
        for name, reason in ((f"take-db-{ns}", "InvalidSpec"), (paused, "FailedCreateReservation")):
            warnings = [(e["type"], e["reason"]) for e in kube.events("default", involved=name)]
            assert ("Warning", reason) in warnings, (name, warnings)
        rounds = migration_rounds(koordpy)
        wait_until("five more migration rounds", lambda: migration_rounds(koordpy) >= rounds + 5)
        time.sleep(11.0)  # past the stale-reservation sweep's period (10 s)
        wait_until("another migration round", lambda: migration_rounds(koordpy) >= rounds + 6)
        after = {key: as_left(kube.get("Reservation", name)) for key, name in theirs.items()}
        assert after == before
        assert {key: res["currentOwners"] for key, res in after.items() if res} == dict.fromkeys(theirs)
        # the manager wrote no Reservation and evicted nothing of this namespace
        touched = [
            (e["verb"], e["objectRef"]["name"])
            for e in manager_writes(control_plane, "reservations", "create")
            + manager_writes(control_plane, "reservations", "delete")
            if e["objectRef"].get("name") in set(theirs.values())
        ]
        assert touched == []
        evictions = manager_writes(control_plane, "pods", "create", "eviction")
        assert [e for e in evictions if e["objectRef"].get("namespace") == ns] == []
        assert {name: pod["metadata"]["uid"] for name, pod in running(space, "web").items()} == {
            name: pod["metadata"]["uid"] for name, pod in pods.items()
        }
        for job in (f"take-db-{ns}", f"take-web-{ns}", paused):
            ref = ((kube.get("PodMigrationJob", job) or {}).get("spec") or {}).get("reservationOptions") or {}
            assert "reservationRef" not in ref, (job, ref)  # never recorded as the job's
    finally:
        for name in made:
            kube.delete("Reservation", name)
        for job in (f"take-db-{ns}", f"take-web-{ns}", paused):
            kube.delete("PodMigrationJob", job)
        kube.delete("ClusterRoleBinding", migrate)
