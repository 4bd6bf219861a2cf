"""Gang scheduling on the real control plane: the chart's koordpy-scheduler (stock kube-scheduler, its
queueing, its binding cycle) with the extender holding members' binds until the gang can bind.

PodGroups of ``scheduling.sigs.k8s.io/v1alpha1`` (the chart's CRD); members name theirs with the
``pod-group.scheduling.sigs.k8s.io`` label, or use Koordinator's ``gang.scheduling.koordinator.sh/*``
annotations. Timings are printed (``poll``/``wait_until`` say how long each wait took) and never asserted:
a backstop only separates "within seconds" from kube-scheduler's 5-minute flush.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from cluster_kit import PROFILE, Components, Kube, Space, bindings_by_pod, poll, wait_until
from promtext import total

from koordpy.crds import crd_manifest
from koordpy.crds.podgroup import POD_GROUP_VOLCANO, POD_GROUP_X_K8S
from koordpy.model.durations import format_rfc3339
from koordpy.scheduler.extender.requeue import REQUEUE_ANNOTATION
from koordpy.scheduler.plugins.gang import QUORUM_REFUSED
from koordpy_testkit.controlplane import ControlPlane

pytestmark = pytest.mark.cluster

POD_GROUP_LABEL = "pod-group.scheduling.sigs.k8s.io"
GANG = "gang.scheduling.koordinator.sh/"
UNDER_THE_FLUSH = 240.0
"""A backstop for a gang that binds within a couple of seconds once its last member exists: still under
kube-scheduler's 5-minute flush of unschedulable pods, so a bind within it is not the flush's doing."""


def podgroup(
    namespace: str,
    name: str,
    min_member: int,
    timeout_seconds: int | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member}
    if timeout_seconds is not None:
        spec["scheduleTimeoutSeconds"] = timeout_seconds
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations or {}},
        "spec": spec,
    }


def ready_nodes(space: Space, kube: Kube, count: int, cpu: str = "4", prefix: str = "n") -> list[str]:
    nodes = [space.node(f"{prefix}{i}", cpu=cpu, memory="16Gi") for i in range(count)]
    now = format_rfc3339(time.time())
    for node in nodes:
        kube.create(
            {
                "apiVersion": "slo.koordinator.sh/v1alpha1",
                "kind": "NodeMetric",
                "metadata": {"name": node},
                "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
            }
        )
        kube.patch(
            "NodeMetric",
            node,
            {
                "status": {
                    "updateTime": now,
                    "nodeMetric": {"nodeUsage": {"resources": {"cpu": "100m", "memory": "1Gi"}}},
                }
            },
            subresource="status",
        )
    space.wait_nodes_ready()
    return nodes


def member(space: Space, name: str, group: str, cpu: str = "1") -> dict[str, Any]:
    return space.create_pod(name, cpu=cpu, memory="1Gi", labels={POD_GROUP_LABEL: group})


def scheduled_condition(pod: dict[str, Any] | None) -> dict[str, Any] | None:
    for condition in (pod or {}).get("status", {}).get("conditions") or []:
        if condition["type"] == "PodScheduled":
            return dict(condition)
    return None


def refused(kube: Kube, space: Space, name: str) -> bool:
    """kube-scheduler wrote the extender's quorum refusal into the pod's PodScheduled condition."""
    condition = scheduled_condition(kube.get("Pod", name, space.namespace)) or {}
    return condition.get("status") == "False" and QUORUM_REFUSED in str(condition.get("message"))


def unschedulable(kube: Kube, space: Space, name: str) -> bool:
    """kube-scheduler wrote ``PodScheduled=False/Unschedulable`` on the pod."""
    condition = scheduled_condition(kube.get("Pod", name, space.namespace)) or {}
    return condition.get("status") == "False" and condition.get("reason") == "Unschedulable"


def signal_writes(plane: ControlPlane, since: str) -> list[int]:
    """The answers to the extender's writes of its requeue signal (the chart's CSIStorageCapacity) received
    at or after ``since`` (an audit timestamp), from the audit log."""
    return [
        (event.get("responseStatus") or {}).get("code", 0)
        for event in plane.audit_events()
        if (event.get("objectRef") or {}).get("resource") == "csistoragecapacities"
        and event.get("verb") == "patch"
        and event["user"]["username"] == "system:serviceaccount:koordpy-system:koordpy-scheduler"
        and event["requestReceivedTimestamp"] >= since
    ]


def audit_now() -> str:
    """Now, as the audit log writes ``requestReceivedTimestamp`` (UTC, microseconds)."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def requeue_patches(plane: ControlPlane, namespace: str) -> dict[str, int]:
    """Per pod: the patches of the pod itself (not a subresource) the API server answered 200, from the
    audit log (the extender's requeue wrote such patches before it had a signal object of its own)."""
    out: dict[str, int] = {}
    for event in plane.audit_events():
        ref = event.get("objectRef") or {}
        if (
            ref.get("resource") == "pods"
            and not ref.get("subresource")
            and ref.get("namespace") == namespace
            and event.get("verb") == "patch"
            and (event.get("responseStatus") or {}).get("code") == 200
        ):
            out[ref.get("name", "")] = out.get(ref.get("name", ""), 0) + 1
    return out


def logged_bindings(plane: ControlPlane, namespace: str, names: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The namespace's bindings from the audit log once each of ``names`` has one there: the API server writes
    a request's audit event after it answers, so a pod can show as bound a moment before its binding is logged."""
    (bindings,) = wait_until(
        f"a binding of each of {names} in the audit log",
        lambda: [found] if all((found := bindings_by_pod(plane, namespace)).get(name) for name in names) else None,
    )
    return bindings


def one_binding_each(plane: ControlPlane, namespace: str, names: list[str]) -> None:
    bindings = logged_bindings(plane, namespace, names)
    assert {pod: len(events) for pod, events in bindings.items()} == dict.fromkeys(names, 1)


def gang_condition(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    for condition in ((kube.get("PodGroup", name, namespace) or {}).get("status") or {}).get("conditions") or []:
        if condition["type"] == "GangScheduled":
            return dict(condition)
    return None


@pytest.fixture
def other_space(kube: Kube, space: Space) -> Iterator[Space]:
    """A second namespace for the test (nodes stay in ``space``)."""
    extra = Space(kube, f"{space.namespace[:50]}-x")
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": extra.namespace}})
    try:
        yield extra
    finally:
        extra.close()


# ---- the basics ----------------------------------------------------------------------------------


def test_fresh_gang_binds_whole_with_one_binding_per_member(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube
) -> None:
    ready_nodes(space, kube, 2)
    # Members exist before kube-scheduler starts, so its first cycle cannot race the extender's pod
    # watch (that race, and a member arriving late, are tests of their own).
    koordpy.start_extender()
    kube.create(podgroup(space.namespace, "train", 3))
    for index in range(3):
        member(space, f"train-{index}", "train")
    koordpy.start_scheduler()
    bound = wait_until("gang bound", lambda: space.count_bound(3))
    assert sorted(bound) == ["train-0", "train-1", "train-2"]
    one_binding_each(control_plane, space.namespace, sorted(bound))
    assert gang_condition(kube, space.namespace, "train") is None  # bound at its first attempt: nothing to say


def test_gang_short_of_room_binds_nothing(koordpy: Components, space: Space, kube: Kube) -> None:
    """minMember 3 of 3 cpu each on two 4-cpu nodes: only two fit, so none binds (all-or-nothing)."""
    ready_nodes(space, kube, 2)
    koordpy.start_extender()
    kube.create(podgroup(space.namespace, "big", 3))
    for index in range(3):
        member(space, f"big-{index}", "big", cpu="3")
    koordpy.start_scheduler()

    def refused_or_bound() -> bool:
        pods = space.pods()
        return bool(space.bound()) or all(
            (scheduled_condition(p) or {}).get("status") == "False" for p in pods.values()
        )

    wait_until("every member tried", refused_or_bound)
    assert space.bound() == {}


@pytest.mark.parametrize("mode", ["Strict", "NonStrict"])
def test_a_timeout_releases_the_held_capacity_and_says_so_on_the_podgroup(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube, mode: str
) -> None:
    """Gang of 3 (wait 5 s) of 2 cpu on two 4-cpu nodes: one member fits per node (a second would take
    the node's estimated cpu over the load-aware threshold, 65 %), so two are held and the third fits
    nowhere. Strict: its failure releases the held pair at once; NonStrict: their 5 s run out. Either way
    the PodGroup says why, with an Event, and the room comes back (a plain 2-cpu pod binds)."""
    ready_nodes(space, kube, 2)
    koordpy.start_scheduling()
    annotations = {GANG + "mode": mode}
    kube.create(podgroup(space.namespace, "tight", 3, timeout_seconds=5, annotations=annotations))
    for index in range(3):
        member(space, f"tight-{index}", "tight", cpu="2")
    released = wait_until("the PodGroup says why", lambda: gang_condition(kube, space.namespace, "tight"))
    assert released["status"] == "False"
    assert released["reason"] == ("StrictRelease" if mode == "Strict" else "WaitTimeout"), released
    # The Event follows the condition (both posted by the extender, the Event second).
    events = wait_until(
        "the PodGroup's Event",
        lambda: [e for e in kube.events(space.namespace, "tight") if e["involvedObject"]["kind"] == "PodGroup"],
    )
    reasons = {e["reason"] for e in events}
    assert ("GangReleased" if mode == "Strict" else "GangTimedOut") in reasons
    assert reasons <= {"GangReleased", "GangTimedOut"}
    # The member that fits nowhere goes; the two others can no longer make a gang of 3, and whatever they
    # hold is let go within their wait time. The plain pod needs that room.
    kube.delete("Pod", "tight-2", space.namespace, grace=0)
    space.create_pod("plain", cpu="2", memory="1Gi")
    wait_until("the plain pod bound", lambda: "plain" in space.bound())
    assert {name: node for name, node in space.bound().items() if name.startswith("tight")} == {}
    assert sorted(logged_bindings(control_plane, space.namespace, ["plain"])) == ["plain"]


def test_extender_killed_with_held_binds_loses_and_duplicates_nothing(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube
) -> None:
    """NonStrict gang of 4 (wait 10 min): three members held, the fourth needs 6 cpu and no node has it.
    SIGKILL the extender: kube-scheduler's held bind requests fail, nothing is bound. A new extender
    process and a big node later, the whole gang binds, each member once."""
    ready_nodes(space, kube, 2)
    extender = koordpy.start_extender()
    koordpy.start_scheduler()
    kube.create(podgroup(space.namespace, "mpi", 4, timeout_seconds=600, annotations={GANG + "mode": "NonStrict"}))
    for index in range(3):
        member(space, f"mpi-{index}", "mpi")
    member(space, "mpi-3", "mpi", cpu="6")

    def held(count: int) -> bool:
        metrics = koordpy.extender_metrics()
        return f"koordpy_extender_gang_held_binds {count}.0" in metrics

    wait_until("three binds held", lambda: held(3))
    extender.kill()
    extender.start()
    wait_until("extender back", lambda: "ok" in koordpy_ready(koordpy))
    assert space.bound() == {} and bindings_by_pod(control_plane, space.namespace) == {}
    ready_nodes(space, kube, 1, cpu="16", prefix="big")
    bound = wait_until("the gang bound after the restart", lambda: space.count_bound(4))
    one_binding_each(control_plane, space.namespace, sorted(bound))


def filters(koordpy: Components) -> float:
    """``/filter`` requests the extender answered so far."""
    total = 0.0
    for line in koordpy.extender_metrics().splitlines():
        if line.startswith("koordpy_extender_requests_total{") and 'verb="filter"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def koordpy_ready(koordpy: Components) -> str:
    try:
        return httpx.get(koordpy.extender_base + "/readyz", timeout=5).text
    except httpx.HTTPError:
        return ""


# ---- the five reproductions ---------------------------------------------------------------------------


def test_late_member_completes_its_gang_without_waiting_for_the_flush(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube
) -> None:
    """minMember 2: member a, then b once a is parked. kube-scheduler does not retry a on b's creation;
    the extender's update of its requeue signal (a CSIStorageCapacity of the chart's, an event kube-scheduler
    retries pods only the extender refused on) does, with no write on a. Measured from b's creation to both
    bound."""
    ready_nodes(space, kube, 2)
    koordpy.start_scheduling()
    kube.create(podgroup(space.namespace, "late", 2))
    member(space, "late-a", "late")
    # The first member is refused (fewer than 2 members) and parked among kube-scheduler's
    # unschedulable pods (not in backoff, from which it would be retried anyway).
    # kube-scheduler tries it twice (its own condition update moves it once), then parks it.
    wait_until("first member parked", lambda: filters(koordpy) >= 2 and koordpy.parked(1))
    assert refused(kube, space, "late-a")
    since = audit_now()
    member(space, "late-b", "late")
    # kube-scheduler's flush of unschedulable pods comes after 5 minutes, and the cluster is otherwise
    # quiet; the backstop only separates the two.
    poll("gang bound after the late member", lambda: len(space.bound()) == 2, timeout=UNDER_THE_FLUSH)
    assert sorted(space.bound()) == ["late-a", "late-b"]
    assert requeue_patches(control_plane, space.namespace) == {}  # nothing written on the members
    assert wait_until("the signal write in the audit log", lambda: signal_writes(control_plane, since)) == [200]
    signal = kube.get("CSIStorageCapacity", "koordpy-gang-requeue", "koordpy-system") or {}
    assert signal["metadata"]["annotations"][REQUEUE_ANNOTATION] >= since
    pod = kube.get("Pod", "late-a", space.namespace) or {}
    assert REQUEUE_ANNOTATION not in (pod["metadata"].get("annotations") or {})
    one_binding_each(control_plane, space.namespace, ["late-a", "late-b"])


def incoming(koordpy: Components) -> dict[str, float]:
    """kube-scheduler's ``scheduler_queue_incoming_pods_total`` by event (pods moved into its queues)."""
    out: dict[str, float] = {}
    for line in koordpy.scheduler_metrics().splitlines():
        if line.startswith("scheduler_queue_incoming_pods_total{") and 'event="' in line:
            event = line.split('event="', 1)[1].split('"', 1)[0]
            out[event] = out.get(event, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def test_without_the_requeue_the_extender_writes_nothing_and_kube_scheduler_moves_the_member(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube
) -> None:
    """The late-member test's control: with ``gang.requeueQPS: 0`` the extender writes nothing; the parked
    member a is moved by kube-scheduler alone, on a cluster event that is not b's creation (on kwok, a node
    heartbeat) or by its flush of pods left unschedulable too long, whichever comes first. The flush's age is
    shortened to 20 s (the default is 5 minutes; the flush runs every 30 s) so that the wait stays short;
    which event moved a is printed (kube-scheduler's own counter), not asserted: both are kube-scheduler's."""
    ready_nodes(space, kube, 2)
    koordpy.start_extender({"gang": {"requeueQPS": 0}})
    koordpy.start_scheduler(extra_args=["--pod-max-in-unschedulable-pods-duration=20s"])
    kube.create(podgroup(space.namespace, "late", 2))
    member(space, "late-a", "late")
    wait_until("first member parked", lambda: filters(koordpy) >= 2 and koordpy.parked(1))
    assert refused(kube, space, "late-a")
    before = incoming(koordpy)
    since = audit_now()
    member(space, "late-b", "late")
    poll("gang bound by kube-scheduler's own move", lambda: len(space.bound()) == 2, timeout=UNDER_THE_FLUSH)
    assert sorted(space.bound()) == ["late-a", "late-b"]
    after = incoming(koordpy)
    moved = {event: after[event] - before.get(event, 0.0) for event in after if after[event] > before.get(event, 0.0)}
    print(f"kube-scheduler's queue moves since b was created, by event: {moved}")
    assert requeue_patches(control_plane, space.namespace) == {}
    assert signal_writes(control_plane, since) == []
    one_binding_each(control_plane, space.namespace, ["late-a", "late-b"])


def test_recreated_gang_is_all_or_nothing_again(koordpy: Components, space: Space, kube: Kube) -> None:
    ready_nodes(space, kube, 2)
    koordpy.start_extender()
    kube.create(podgroup(space.namespace, "rerun", 2))
    member(space, "rerun-a", "rerun")
    member(space, "rerun-b", "rerun")
    koordpy.start_scheduler()
    wait_until("first run bound", lambda: len(space.bound()) == 2)
    for name in ("rerun-a", "rerun-b"):
        kube.delete("Pod", name, space.namespace, grace=0)
    kube.delete("PodGroup", "rerun", space.namespace)
    wait_until("first run gone", lambda: not space.pods() and kube.get("PodGroup", "rerun", space.namespace) is None)

    kube.create(podgroup(space.namespace, "rerun", 2))
    member(space, "rerun-c", "rerun")
    # Either the lone member binds (wrong) or kube-scheduler records why it cannot (right).
    wait_until("lone member bound or refused", lambda: space.bound() or refused(kube, space, "rerun-c"))
    assert space.bound() == {}
    # A second member completes the new run, through the requeue of the first.
    member(space, "rerun-d", "rerun")
    poll("the new run bound", lambda: len(space.bound()) == 2, timeout=UNDER_THE_FLUSH)
    assert sorted(space.bound()) == ["rerun-c", "rerun-d"]


def test_another_namespace_cannot_complete_a_gang_group(
    control_plane: ControlPlane, koordpy: Components, space: Space, other_space: Space, kube: Kube
) -> None:
    """The victim's GangGroup: PodGroups train (2 members) and ps (1 of its 2 members), both declaring
    [train, ps]. A pod in another namespace names the victim's gangs in its own groups annotation. It binds
    (alone: foreign entries are left out of its group) and nothing of the victim binds, until ps's own
    second member arrives: then both gangs are satisfied and all four members bind. Five pods of 1 cpu
    (estimate 850m) on two nodes of 8 cpu: room for five per node under the 65 % threshold."""
    ready_nodes(space, kube, 2, cpu="8")
    koordpy.start_scheduling()
    victim = space.namespace
    group = f'["{victim}/train", "{victim}/ps"]'
    for name in ("train", "ps"):
        kube.create(podgroup(victim, name, 2, annotations={GANG + "groups": group}))
    for name, gang in (("train-0", "train"), ("train-1", "train"), ("ps-0", "ps")):
        member(space, name, gang)
    evil = other_space.pod(
        "e-0",
        cpu="1",
        memory="1Gi",
        annotations={GANG + "name": "e", GANG + "min-available": "1", GANG + "groups": group},
        node_selector=space.selector,
    )
    kube.create(evil)

    def evil_bound() -> bool:
        return "e-0" in other_space.bound()

    wait_until("the other namespace's pod bound", evil_bound)
    # Every member of the victim is refused at quorum (ps has 1 of its 2) and none binds.
    wait_until(
        "the victim's members refused", lambda: all(refused(kube, space, n) for n in ("train-0", "train-1", "ps-0"))
    )
    assert space.bound() == {}
    # ps's own second member satisfies both gangs of the group: all four bind, once each
    member(space, "ps-1", "ps")
    poll("the GangGroup bound", lambda: len(space.bound()) == 4, timeout=UNDER_THE_FLUSH)
    names = ["ps-0", "ps-1", "train-0", "train-1"]
    assert sorted(space.bound()) == names
    one_binding_each(control_plane, space.namespace, names)


def test_members_filtered_before_the_watch_saw_them_are_not_bound_below_quorum(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube
) -> None:
    """Members created back to back while kube-scheduler runs: it filters and binds each new pod within
    milliseconds, often before the extender's watch has shown it. The extender reads membership from the
    request, so none binds until the sixth member exists, and then all six bind, once each."""
    ready_nodes(space, kube, 2)
    koordpy.start_scheduling()
    kube.create(podgroup(space.namespace, "fast", 6))
    for index in range(5):
        member(space, f"fast-{index}", "fast", cpu="500m")
    wait_until("five members tried", lambda: all(scheduled_condition(p) for p in space.pods().values()))
    assert space.bound() == {}
    member(space, "fast-5", "fast", cpu="500m")
    poll("the gang bound after the sixth", lambda: len(space.bound()) == 6, timeout=UNDER_THE_FLUSH)
    names = [f"fast-{i}" for i in range(6)]
    assert sorted(space.bound()) == names
    one_binding_each(control_plane, space.namespace, names)


def test_a_restarted_extender_does_not_misread_its_refusals(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube
) -> None:
    """Strict gang of 3: two members refused at quorum (their conditions carry the refusal). The extender
    restarts; the third member arrives. The new process neither treats the refusals as Strict failures
    (no release round) nor forgets to wake the two: the gang binds."""
    ready_nodes(space, kube, 2)
    extender = koordpy.start_extender()
    koordpy.start_scheduler()
    kube.create(podgroup(space.namespace, "restart", 3))
    for name in ("restart-a", "restart-b"):
        member(space, name, "restart")
    wait_until("both refused", lambda: refused(kube, space, "restart-a") and refused(kube, space, "restart-b"))
    extender.kill()
    extender.start()
    wait_until("extender back", lambda: "ok" in koordpy_ready(koordpy))
    member(space, "restart-c", "restart")
    poll("the gang bound after the restart", lambda: len(space.bound()) == 3, timeout=UNDER_THE_FLUSH)
    assert sorted(space.bound()) == ["restart-a", "restart-b", "restart-c"]
    metrics = koordpy.extender_metrics()
    # every cause is exposed from the start, at 0: these two never counted
    assert total(metrics, "koordpy_extender_gang_releases_total", cause="strict") == 0
    assert total(metrics, "koordpy_extender_gang_releases_total", cause="rejected") == 0
    assert 'koordpy_extender_gang_releases_total{cause="strict"} 0.0' in metrics
    one_binding_each(control_plane, space.namespace, ["restart-a", "restart-b", "restart-c"])


# ---- Volcano's PodGroup ------------------------------------------------------------------------------


@pytest.fixture
def volcano_crd(kube: Kube) -> None:
    """Volcano's PodGroup CRD (koordpy's model of it: Volcano's fields, no status subresource), served before
    koordpy starts."""
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    if kube.client.get(f"{path}/podgroups.scheduling.volcano.sh").status_code == 404:
        kube.client.post(path, json=crd_manifest(POD_GROUP_VOLCANO)).raise_for_status()

    def established() -> bool:
        crd = kube.client.get(f"{path}/podgroups.scheduling.volcano.sh").json()
        conditions = {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or []}
        return conditions.get("Established") == "True"

    wait_until("Volcano's PodGroup CRD established", established)


def volcano_status(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    resp = kube.client.get(f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{namespace}/podgroups/{name}")
    obj = resp.json() if resp.status_code == 200 else {}
    return dict(obj.get("status") or {})


def test_a_volcano_podgroup_gang_binds_whole_and_gets_volcano_phases(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube, volcano_crd: None
) -> None:
    """A ``scheduling.volcano.sh/v1beta1`` PodGroup (minMember 3, a queue koordpy does not honour) with
    members that name it in Volcano's annotation: nothing binds below 3 members, then all three bind
    once each, and the manager writes Volcano's phases (Inqueue at once, then Running) on the object."""
    ready_nodes(space, kube, 2)
    koordpy.start_scheduling()
    koordpy.start_manager()
    resp = kube.client.post(
        f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{space.namespace}/podgroups",
        json={
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "vjob", "namespace": space.namespace},
            "spec": {"minMember": 3, "queue": "research"},
        },
    )
    assert resp.status_code == 201, resp.text
    wait_until("Inqueue", lambda: volcano_status(kube, space.namespace, "vjob").get("phase") == "Inqueue")
    for index in range(2):
        space.create_pod(f"vjob-{index}", cpu="1", memory="1Gi", annotations={"scheduling.k8s.io/group-name": "vjob"})
    wait_until("two members refused", lambda: all(refused(kube, space, f"vjob-{i}") for i in range(2)))
    assert space.bound() == {}
    space.create_pod("vjob-2", cpu="1", memory="1Gi", annotations={"scheduling.k8s.io/group-name": "vjob"})
    poll("the Volcano gang bound", lambda: len(space.bound()) == 3, timeout=UNDER_THE_FLUSH)
    names = ["vjob-0", "vjob-1", "vjob-2"]
    assert sorted(space.bound()) == names
    one_binding_each(control_plane, space.namespace, names)

    def running() -> dict[str, Any] | None:
        status = volcano_status(kube, space.namespace, "vjob")
        return status if status.get("phase") == "Running" and status.get("running") == 3 else None

    status = wait_until("Running, 3 running", running)
    assert (status["succeeded"], status["failed"]) == (0, 0)


# ---- the other ways to declare a gang, and gangs competing --------------------------------------------


@pytest.fixture
def x_k8s_crd(kube: Kube) -> None:
    """scheduler-plugins' ``scheduling.x-k8s.io`` PodGroup CRD (koordpy's model of it), served before koordpy
    starts (the chart installs only the ``scheduling.sigs.k8s.io`` one; koordpy reads this one when it exists)."""
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    if kube.client.get(f"{path}/podgroups.scheduling.x-k8s.io").status_code == 404:
        kube.client.post(path, json=crd_manifest(POD_GROUP_X_K8S)).raise_for_status()

    def established() -> bool:
        crd = kube.client.get(f"{path}/podgroups.scheduling.x-k8s.io").json()
        conditions = {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or []}
        return conditions.get("Established") == "True"

    wait_until("scheduling.x-k8s.io PodGroup CRD established", established)


def test_a_gang_of_the_x_k8s_podgroup_api_waits_for_quorum_then_binds_whole(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube, x_k8s_crd: None
) -> None:
    """A ``scheduling.x-k8s.io/v1alpha1`` PodGroup (minMember 3), members labelled
    ``scheduling.x-k8s.io/pod-group``: two members are refused, the third completes the gang."""
    ready_nodes(space, kube, 2)
    koordpy.start_scheduling()
    resp = kube.client.post(
        f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{space.namespace}/podgroups",
        json={
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "xjob", "namespace": space.namespace},
            "spec": {"minMember": 3},
        },
    )
    assert resp.status_code == 201, resp.text
    labels = {"scheduling.x-k8s.io/pod-group": "xjob"}
    for index in range(2):
        space.create_pod(f"xjob-{index}", cpu="1", memory="1Gi", labels=labels)
    wait_until("two members refused", lambda: all(refused(kube, space, f"xjob-{i}") for i in range(2)))
    assert space.bound() == {}
    space.create_pod("xjob-2", cpu="1", memory="1Gi", labels=labels)
    poll("the gang bound", lambda: len(space.bound()) == 3, timeout=UNDER_THE_FLUSH)
    names = ["xjob-0", "xjob-1", "xjob-2"]
    assert sorted(space.bound()) == names
    one_binding_each(control_plane, space.namespace, names)


def test_a_gang_declared_by_annotations_alone_waits_for_quorum_then_binds_whole(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube
) -> None:
    """No PodGroup object: Koordinator's ``gang.scheduling.koordinator.sh/name`` and ``min-available``
    annotations on the members (minimum 3)."""
    ready_nodes(space, kube, 2)
    koordpy.start_scheduling()
    annotations = {GANG + "name": "ajob", GANG + "min-available": "3"}
    for index in range(2):
        space.create_pod(f"ajob-{index}", cpu="1", memory="1Gi", annotations=annotations)
    wait_until("two members refused", lambda: all(refused(kube, space, f"ajob-{i}") for i in range(2)))
    assert space.bound() == {}
    space.create_pod("ajob-2", cpu="1", memory="1Gi", annotations=annotations)
    poll("the gang bound", lambda: len(space.bound()) == 3, timeout=UNDER_THE_FLUSH)
    names = ["ajob-0", "ajob-1", "ajob-2"]
    assert sorted(space.bound()) == names
    one_binding_each(control_plane, space.namespace, names)


def test_two_gangs_competing_for_room_for_one_bind_one_whole_and_nothing_of_the_other(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube
) -> None:
    """Two NonStrict gangs of 2 members of 5 cpu each on two 8-cpu nodes: the room fits one gang (one member
    per node; a member's load-aware estimate is 5 x 85 % = 4.25 cores, 53 % of a node, under the 65 %
    threshold). Whatever order kube-scheduler takes the four members in, one gang binds whole and the other
    binds nothing: when each holds one node, the deadlock resolution releases the younger PodGroup's hold,
    the released gang yields, and the older gang's pending member takes the room; no gang is partly bound.
    (kube-scheduler's informer lists the pods by name, so it usually takes blue's two first and no deadlock
    forms; the next test makes it form.)

    The PodGroups are created in different seconds (creation times have a resolution of one second): with
    equal creation times the victim is the greater group id (docs/gang.md, NonStrict deadlocks)."""
    ready_nodes(space, kube, 2, cpu="8")
    koordpy.start_extender()
    for gang in ("red", "blue"):
        kube.create(podgroup(space.namespace, gang, 2, timeout_seconds=600, annotations={GANG + "mode": "NonStrict"}))
        time.sleep(1.1)  # the next PodGroup's creationTimestamp is a later second
    for index in range(2):  # interleaved, so each gang has a member in the queue before the other's second
        for gang in ("red", "blue"):
            member(space, f"{gang}-{index}", gang, cpu="5")
    koordpy.start_scheduler()
    wait_until("one gang bound", lambda: len(space.bound()) >= 2)
    # The loser's members are refused (no room) from then on; give kube-scheduler a few more cycles.
    poll("a third pod bound (it must not be)", lambda: len(space.bound()) > 2, timeout=20)
    bound = space.bound()
    gangs = {name.split("-")[0] for name in bound}
    assert len(bound) == 2 and len(gangs) == 1, bound
    winner = gangs.pop()
    assert sorted(bound) == [f"{winner}-0", f"{winner}-1"]
    assert sorted(set(bound.values())) == sorted(space.nodes)  # one member per node
    one_binding_each(control_plane, space.namespace, sorted(bound))


def test_a_formed_deadlock_binds_the_older_gang_whole_and_the_released_one_yields(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube
) -> None:
    """The deadlock made to form: NonStrict gangs red (older PodGroup) and blue, 2 members of 5 cpu each,
    two 8-cpu nodes. The second member of each is created behind a scheduling gate, so kube-scheduler
    places red-0 and blue-0 first, one per node (5 + 5 > 8), and both are held. Ungated, red-1 and blue-1
    fit nowhere (8 − 5 = 3 < 5): a deadlock. Blue (the younger) is released and yields, so red-1 takes
    the freed node and red binds whole; blue binds nothing.

    blue-1 is ungated first, so it fails before red-1: without the yield, kube-scheduler retries it first
    once the release moves both, it takes the freed node and the deadlock forms again."""
    ready_nodes(space, kube, 2, cpu="8")
    koordpy.start_extender()
    for gang in ("red", "blue"):
        kube.create(podgroup(space.namespace, gang, 2, timeout_seconds=600, annotations={GANG + "mode": "NonStrict"}))
        time.sleep(1.1)  # the next PodGroup's creationTimestamp is a later second
    gate = {"schedulingGates": [{"name": "koordpy.io/test-hold"}]}
    for gang in ("red", "blue"):
        member(space, f"{gang}-0", gang, cpu="5")
        space.create_pod(f"{gang}-1", cpu="5", memory="1Gi", labels={POD_GROUP_LABEL: gang}, extra_spec=gate)
    koordpy.start_scheduler()
    wait_until("red-0 and blue-0 held", lambda: "koordpy_extender_gang_held_binds 2.0" in koordpy.extender_metrics())
    assert space.bound() == {}
    # blue-1 first: it fails before red-1, so it is ahead of red-1 in kube-scheduler's queue once the
    # release moves both (the order that defeats a release without a yield).
    kube.patch("Pod", "blue-1", {"spec": {"schedulingGates": None}}, space.namespace)
    wait_until("blue-1 unschedulable", lambda: unschedulable(kube, space, "blue-1"))
    kube.patch("Pod", "red-1", {"spec": {"schedulingGates": None}}, space.namespace)
    wait_until("one gang bound", lambda: len(space.bound()) >= 2)
    poll("a third pod bound (it must not be)", lambda: len(space.bound()) > 2, timeout=20)
    bound = space.bound()
    assert sorted(bound) == ["red-0", "red-1"], bound
    assert sorted(set(bound.values())) == sorted(space.nodes)  # one member per node
    one_binding_each(control_plane, space.namespace, sorted(bound))
    wait_until("blue-0's GangDeadlockReleased Event", lambda: kube.events(space.namespace, "blue-0"))
    released = {
        name: sum(
            e.get("count") or 1 for e in kube.events(space.namespace, name) if e["reason"] == "GangDeadlockReleased"
        )
        for name in ("red-0", "red-1", "blue-0", "blue-1")
    }
    assert released == {"red-0": 0, "red-1": 0, "blue-0": 1, "blue-1": 0}  # once: the deadlock did not form again


# ---- PodGroup status and gang Events, written by the manager ------------------------------------------


def owned_member(space: Space, name: str, group: str, owner: dict[str, Any], scheduler: str = PROFILE) -> None:
    """A member of ``group`` controlled by ``owner`` (a ConfigMap: no controller acts on its pods, and the
    garbage collector keeps them while it exists)."""
    pod = space.pod(name, cpu="500m", memory="1Gi", labels={POD_GROUP_LABEL: group}, scheduler=scheduler)
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": owner["metadata"]["name"], "controller": True}
    pod["metadata"]["ownerReferences"] = [{**ref, "uid": owner["metadata"]["uid"]}]
    space.kube.create(pod)


def podgroup_status(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    return dict((kube.get("PodGroup", name, namespace) or {}).get("status") or {})


def test_the_manager_writes_podgroup_status_and_one_quorum_event_per_object(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube
) -> None:
    """PodGroup ``mpi`` (minMember 3): with 2 members the manager posts the quorum Event on the PodGroup and
    keeps it Pending; the third completes it, the three bind, kwok runs them, and the status says Running
    with three running and ``occupiedBy`` the members' owner. PodGroup ``idle`` (minMember 2) has one
    member that no scheduler takes: the PodGroup and the pod get the quorum Event, once each, and ``idle``
    stays Pending. The manager writes the PodGroups' status subresource and nothing else of them or the
    pods."""
    ns = space.namespace
    ready_nodes(space, kube, 2)
    koordpy.start_scheduling()
    koordpy.start_manager()
    owner = kube.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mpi", "namespace": ns}})
    idle_owner = kube.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "idle", "namespace": ns}})
    kube.create(podgroup(ns, "mpi", 3, timeout_seconds=600))
    kube.create(podgroup(ns, "idle", 2))
    owned_member(space, "idle-0", "idle", idle_owner, scheduler="nobody")
    for index in range(2):
        owned_member(space, f"mpi-{index}", "mpi", owner)

    def event(kind: str, name: str, message: str) -> dict[str, Any] | None:
        return next(
            (
                e
                for e in kube.events(ns, involved=name)
                if e["involvedObject"]["kind"] == kind and e["message"] == message
            ),
            None,
        )

    quorum = wait_until(
        "the PodGroup's quorum Event", lambda: event("PodGroup", "mpi", f"gang {ns}/mpi: 2 of 3 members exist")
    )
    assert quorum["reason"] == "GangWaiting"
    assert quorum["involvedObject"]["apiVersion"] == "scheduling.sigs.k8s.io/v1alpha1"
    assert (quorum.get("source") or {}).get("component") == "koordpy-manager", quorum
    assert podgroup_status(kube, ns, "mpi").get("phase", "Pending") == "Pending"
    assert space.bound() == {}

    owned_member(space, "mpi-2", "mpi", owner)
    poll("the gang bound", lambda: len(space.bound()) == 3, timeout=UNDER_THE_FLUSH)
    assert sorted(space.bound()) == ["mpi-0", "mpi-1", "mpi-2"]

    def running() -> dict[str, Any] | None:
        got = podgroup_status(kube, ns, "mpi")
        return got if got.get("phase") == "Running" and got.get("running") == 3 else None

    got = wait_until("phase Running, three running", running)
    assert (got["scheduled"], got["succeeded"], got["failed"]) == (3, 0, 0), got
    assert got["occupiedBy"] == f"{ns}/mpi", got

    message = f"gang {ns}/idle: 1 of 2 members exist"
    wait_until(
        "the quorum Event on idle and idle-0",
        lambda: event("PodGroup", "idle", message) and event("Pod", "idle-0", message),
    )
    assert podgroup_status(kube, ns, "idle").get("phase", "Pending") == "Pending"
    # one Event of the manager per object and message, never a repeat (a repeat would raise the count or
    # add an object)
    events = [e for e in kube.events(ns) if (e.get("source") or {}).get("component") == "koordpy-manager"]
    keys = [(e["involvedObject"]["kind"], e["involvedObject"]["name"], e["message"]) for e in events]
    assert len(keys) == len(set(keys)), keys
    assert events and all((e.get("count") or 1) == 1 for e in events), events

    manager = "system:serviceaccount:koordpy-system:koordpy-manager"
    writes = {
        ((e.get("objectRef") or {}).get("resource"), (e.get("objectRef") or {}).get("subresource", ""))
        for e in control_plane.audit_events()
        if e["user"]["username"] == manager
        and (e.get("objectRef") or {}).get("namespace") == ns
        and e["verb"] in ("patch", "update")
    }
    assert writes == {("podgroups", "status")}, writes


def gang_refusals(koordpy: Components) -> float:
    """``koordpy_extender_preemption_nodes_refused_total{reason="gang"}``."""
    prefix = 'koordpy_extender_preemption_nodes_refused_total{reason="gang"}'
    lines = [line for line in koordpy.extender_metrics().splitlines() if line.startswith(prefix)]
    return float(lines[0].rsplit(" ", 1)[1]) if lines else 0.0


def test_preemption_never_takes_a_running_gang_below_its_minimum(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube
) -> None:
    """One 16 GiB node runs a gang of two (Koordinator's annotations, minimum 2, 6 GiB each, priority 0,
    placed by the default scheduler): under 4 GiB stay free. A 6 GiB pod of priority 1000 fits only if one
    member goes: kube-scheduler's preemption picks that one member, the extender's preempt verb refuses the
    node (2-1 = 1 < 2 would keep running), and no member is deleted. A 12 GiB pod needs both members gone:
    the gang is disrupted whole, which the verb allows, and the pod binds. (Memory, not cpu, is the scarce
    resource: the 12 GiB pod's estimated usage stays under the load-aware memory threshold.)"""
    node = ready_nodes(space, kube, 1)[0]
    koordpy.start_scheduling()
    gang = {f"{GANG}name": "pair", f"{GANG}min-available": "2"}
    for name in ("g0", "g1"):
        space.create_pod(name, cpu="100m", memory="6Gi", scheduler="default-scheduler", annotations=gang)
    wait_until("the gang runs", lambda: space.count_bound(2))
    members = {name: pod["metadata"]["uid"] for name, pod in space.pods().items()}
    high = f"{space.namespace}-high"
    kube.create(
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": high}, "value": 1000}
    )
    before = gang_refusals(koordpy)
    space.create_pod("one", cpu="100m", memory="6Gi", priority_class=high)

    def judged() -> str | None:
        """``refused`` once the verb refused the node for the gang; what happened to a member if one went."""
        if gang_refusals(koordpy) > before:
            return "refused"
        pods = space.pods()
        gone = [
            n
            for n, uid in members.items()
            if n not in pods or pods[n]["metadata"]["uid"] != uid or pods[n]["metadata"].get("deletionTimestamp")
        ]
        return f"preempted {gone}" if gone else None

    outcome = wait_until("kube-scheduler's preemption judged", judged)
    assert outcome == "refused", outcome
    time.sleep(2)  # kube-scheduler retries the pod: still no member goes
    pods = space.pods()
    assert {n: p["metadata"]["uid"] for n, p in pods.items() if n in members} == members
    assert not any(pods[n]["metadata"].get("deletionTimestamp") for n in members)
    assert not pods["one"]["spec"].get("nodeName")
    deleted = [
        e
        for e in control_plane.audit_events()
        if e["verb"] == "delete"
        and (e.get("objectRef") or {}).get("namespace") == space.namespace
        and e["objectRef"].get("name") in members
    ]
    assert deleted == []
    kube.delete("Pod", "one", space.namespace, grace=0)
    space.create_pod("whole", cpu="100m", memory="12Gi", priority_class=high)
    placed = wait_until("the pod that takes the whole gang binds", lambda: space.bound().get("whole"))
    assert placed == node
    assert not set(members) & set(space.bound())  # both members went, together
