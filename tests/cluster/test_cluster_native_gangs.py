"""Kubernetes' own gangs (``scheduling.k8s.io/v1beta1`` PodGroups, v1.37 beta) through the chart's
koordpy-scheduler, on a control plane of its own with the ``GenericWorkload`` gate on (kube-apiserver,
kube-controller-manager and both kube-schedulers) and the API served.

Who gates what (docs/gang.md, "Kubernetes' own PodGroup"): kube-scheduler's ``GangScheduling`` plugin (in
the profile's defaults once the gate is on) admits the members (PreEnqueue: the PodGroup and ``minCount``
pods exist) and schedules them in one pod group cycle; the extender filters and scores each member
(load-aware), never refuses one for quorum, and holds the binds until ``minCount`` of them are held, then
binds them together, so a member whose bind it refuses (its node no longer fits once a sibling is counted)
leaves nothing of the gang bound.

The plane is module-scoped: started, with the chart installed, once for these tests (the session's plane
keeps the gate off for every other test). Timings are printed, never asserted.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import yaml
from cluster_kit import KOORDPY, Components, Kube, Release, Space, poll, started_plane, wait_until
from nodemetrics import report
from test_cluster_gangs import UNDER_THE_FLUSH, koordpy_ready, one_binding_each, requeue_patches
from test_cluster_migrations import (
    GANG_OF_FOUR,
    PMJ,
    event_reasons,
    gang_set,
    job,
    manager_audit,
    running_pods,
    status,
    waiting,
)
from test_cluster_rbac import SA_PREFIX, denied

from koordpy.model.durations import parse_rfc3339
from koordpy.scheduler.plugins.gang import QUORUM_REFUSED
from koordpy.scheduler.plugins.reservation.starving import label_value
from koordpy_testkit.controlplane import GENERIC_WORKLOAD, ControlPlane
from koordpy_testkit.manifests import doc_objects, example_files, kube_objects

pytestmark = pytest.mark.cluster

PODGROUPS = "/apis/scheduling.k8s.io/v1beta1/namespaces/{namespace}/podgroups"
KOORD = "gang.scheduling.koordinator.sh/"


# ---- a control plane with the gate on, for this module ------------------------------------------------


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with started_plane(tmp_path_factory.mktemp("controlplane-generic-workload"), **GENERIC_WORKLOAD) as plane:
        yield plane


@pytest.fixture(scope="module")
def kube(control_plane: ControlPlane) -> Iterator[Kube]:
    with control_plane.client() as client:
        yield Kube(client)


@pytest.fixture(scope="module")
def release(control_plane: ControlPlane, kube: Kube) -> Release:
    installed = Release(control_plane, kube)
    installed.install("--set", "scheduler.kubeScheduler.featureGates.GenericWorkload=true")
    return installed


# ---- helpers ---------------------------------------------------------------------------------------------


def native_podgroup(kube: Kube, namespace: str, name: str, min_count: int, disruption: str = "all") -> dict[str, Any]:
    body = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}, "disruptionMode": {disruption: {}}},
    }
    resp = kube.client.post(PODGROUPS.format(namespace=namespace), json=body)
    assert resp.status_code == 201, resp.text
    created: dict[str, Any] = resp.json()
    return created


def native_member(
    space: Space, name: str, group: str, cpu: str = "1", annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    return space.create_pod(
        name, cpu=cpu, memory="1Gi", annotations=annotations, extra_spec={"schedulingGroup": {"podGroupName": group}}
    )


def nodes_with_usage(space: Space, kube: Kube, shapes: list[tuple[str, str, int]]) -> list[str]:
    """Nodes ``(suffix, cpu, reported cpu millicores)``, Ready, each with a fresh NodeMetric report."""
    names = [space.node(suffix, cpu=cpu, memory="64Gi") for suffix, cpu, _ in shapes]
    space.wait_nodes_ready()
    for name, (_, _, used) in zip(names, shapes, strict=True):
        report(kube, name, used, memory=4 << 30)
    return names


def podgroup_condition(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    resp = kube.client.get(PODGROUPS.format(namespace=namespace) + f"/{name}")
    for condition in (resp.json().get("status") or {}).get("conditions") or []:
        if condition["type"] == "PodGroupInitiallyScheduled":
            return dict(condition)
    return None


def refused_binds(koordpy: Components) -> float:
    """Binds the extender refused because the node no longer fits (``koordpy_extender_requests_total``
    for ``bind`` with outcome ``no_longer_fits``): 0 when kube-scheduler placed no two members where only one fits."""
    return metric_sum(koordpy, "koordpy_extender_requests_total{", 'verb="bind"', 'outcome="no_longer_fits"')


def metric_sum(koordpy: Components, prefix: str, *parts: str) -> float:
    """The sum of the extender's samples whose line starts with ``prefix`` and contains each of ``parts``."""
    total = 0.0
    for line in koordpy.extender_metrics().splitlines():
        if line.startswith(prefix) and all(part in line for part in parts):
            total += float(line.rsplit(" ", 1)[1])
    return total


def strict_releases(koordpy: Components) -> float:
    return metric_sum(koordpy, "koordpy_extender_gang_releases_total{", 'cause="strict"')


def barrier_binds(koordpy: Components) -> float:
    """Members bound by the gang barrier (``koordpy_extender_gang_wait_seconds`` observations, ``bound``)."""
    return metric_sum(koordpy, "koordpy_extender_gang_wait_seconds_count{", 'outcome="bound"')


def koordpy_writes(plane: ControlPlane, namespace: str) -> set[tuple[str, str, str]]:
    """(resource, subresource, verb) of the writes koordpy's processes made in ``namespace`` (audit log; the
    chart's kube-scheduler shares the extender's ServiceAccount, so they are told apart by user agent)."""
    return {
        ((e.get("objectRef") or {}).get("resource", ""), (e.get("objectRef") or {}).get("subresource", ""), e["verb"])
        for e in plane.audit_events()
        if e["user"]["username"].startswith(SA_PREFIX)
        and str(e.get("userAgent", "")).startswith("koordpy")
        and (e.get("objectRef") or {}).get("namespace") == namespace
        and e["verb"] in ("create", "patch", "update", "delete")
    }


# ---- the gang of four --------------------------------------------------------------------------------


def test_a_native_gang_of_four_binds_whole_and_no_member_lands_over_the_load_threshold(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube
) -> None:
    """PodGroup ``sim`` (gang minCount 4), members of 2 cpu (load-aware estimate 2 x 85 % = 1.7 cores).
    Threshold cpu 65 % (the chart's default). Nodes:

    * ``big``: 64 cpu reporting 39.5 cores: 65 % of 64 = 41.6, so 39.5 + 1.7 = 41.2 fits one member and
      39.5 + 3.4 = 42.9 does not fit two. By requests it is the emptiest node by far, so kube-scheduler's
      own scores send members there;
    * ``s0``-``s2``: 4 cpu reporting 0.1 core: 65 % of 4 = 2.6, so 0.1 + 1.7 = 1.8 fits one, 3.5 not two.

    Room for exactly one member per node: every placement that binds the whole gang has one member on each
    node. Every member also carries Koordinator annotations naming another gang of minimum 9, which would
    never complete if it were read: the gang binds without it (no second gate), each member once, and
    kube-scheduler marks the PodGroup scheduled."""
    names = nodes_with_usage(space, kube, [("big", "64", 39500), ("s0", "4", 100), ("s1", "4", 100), ("s2", "4", 100)])
    koordpy.start_scheduling()
    native_podgroup(kube, space.namespace, "sim", 4)
    decoy = {KOORD + "name": "decoy", KOORD + "min-available": "9"}
    for index in range(4):
        native_member(space, f"sim-{index}", "sim", cpu="2", annotations=decoy)
    bound = poll("the native gang bound", lambda: space.count_bound(4), timeout=UNDER_THE_FLUSH)
    assert bound, space.bound()
    print(f"binds the extender refused for want of room (then placed elsewhere): {refused_binds(koordpy):g}")
    assert sorted(bound.values()) == sorted(names)  # one member per node: none over the threshold
    one_binding_each(control_plane, space.namespace, sorted(bound))
    # Each member went through the barrier and was bound with its gang, none on its own.
    assert barrier_binds(koordpy) == 4
    condition = wait_until("kube-scheduler's condition", lambda: podgroup_condition(kube, space.namespace, "sim"))
    assert condition["status"] == "True", condition
    # No quorum refusal of the extender's on any member: kube-scheduler alone admitted them.
    for pod in space.pods().values():
        for cond in pod["status"].get("conditions") or []:
            assert QUORUM_REFUSED not in str(cond.get("message")), cond
    # koordpy wrote nothing of the PodGroup (kube-scheduler owns its status): the extender only bound pods.
    assert koordpy_writes(control_plane, space.namespace) == {("pods", "binding", "create")}


def test_a_gang_short_of_room_by_load_binds_nothing(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube
) -> None:
    """minCount 4 on one 8-cpu node reporting 2.5 cores; members of 1 cpu (estimate 0.85 core). 65 % of 8 =
    5.2: three members fit (2.5 + 2.55 = 5.05), four do not (5.9). By requests all four fit (4 of 8 cpu), so
    kube-scheduler schedules the gang; the extender holds three binds and refuses the fourth (the node no
    longer fits), and when the fourth fits nowhere the held three are released: nothing binds. A second
    node later makes room, and the gang binds whole, each member once."""
    nodes_with_usage(space, kube, [("n0", "8", 2500)])
    koordpy.start_scheduling()
    native_podgroup(kube, space.namespace, "tight", 4)
    for index in range(4):
        native_member(space, f"tight-{index}", "tight")
    # The fourth's retry fits nowhere (PodScheduled=False): the three held binds are released. Or, without
    # a barrier, members are bound one by one and the gang is left partly bound.
    wait_until("the held binds released, or a member bound", lambda: strict_releases(koordpy) >= 1 or space.bound())
    assert refused_binds(koordpy) >= 1
    assert space.bound() == {}
    # The release is told on the PodGroup with an Event (kube-scheduler's status is left alone).
    released = wait_until(
        "the release's Event on the PodGroup",
        lambda: [e for e in kube.events(space.namespace, "tight") if e["reason"] == "GangReleased"],
    )
    assert released[0]["involvedObject"]["apiVersion"] == "scheduling.k8s.io/v1beta1", released[0]
    nodes_with_usage(space, kube, [("n1", "8", 100)])
    bound = poll("the gang bound once there is room", lambda: space.count_bound(4), timeout=UNDER_THE_FLUSH)
    assert bound, space.bound()
    one_binding_each(control_plane, space.namespace, sorted(bound))
    assert koordpy_writes(control_plane, space.namespace) == {("pods", "binding", "create"), ("events", "", "create")}


# ---- a late member ----------------------------------------------------------------------------------


def test_a_late_member_binds_its_native_gang_without_a_long_wait(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube
) -> None:
    """minCount 3: two members, then the third once kube-scheduler holds the two at its PreEnqueue (its
    ``GangScheduling`` plugin; they never reach the extender). The third's creation moves them (the plugin's
    own queueing hint): the gang binds well under kube-scheduler's 5-minute flush, with no requeue patch of
    the extender's (it refused nobody)."""
    nodes_with_usage(space, kube, [("n0", "8", 100), ("n1", "8", 100)])
    koordpy.start_scheduling()
    native_podgroup(kube, space.namespace, "late", 3)
    for index in range(2):
        native_member(space, f"late-{index}", "late")
    wait_until("two members held by kube-scheduler's PreEnqueue", lambda: koordpy.scheduler_queue().get("gated") == 2)
    assert space.bound() == {}
    native_member(space, "late-2", "late")
    bound = poll("the gang bound after its late member", lambda: space.count_bound(3), timeout=UNDER_THE_FLUSH)
    assert bound, space.bound()
    assert requeue_patches(control_plane, space.namespace) == {}
    one_binding_each(control_plane, space.namespace, sorted(bound))


# ---- the extender killed mid-gang ----------------------------------------------------------------------


def test_extender_killed_with_native_binds_held_loses_and_duplicates_nothing(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube
) -> None:
    """minCount 4 on two roomy nodes. kube-scheduler's bind request for ``mpi-3`` is held 15 s on its way
    to the extender (a proxy between them), so the extender holds the other three binds, waiting for it.
    SIGKILL the extender: kube-scheduler's three requests fail, nothing is bound. The extender starts
    again on the same port; kube-scheduler schedules the three again, mpi-3's request arrives, and the
    gang binds whole, each member once."""
    nodes_with_usage(space, kube, [("n0", "8", 100), ("n1", "8", 100)])
    extender = koordpy.start_extender()
    front = koordpy.record_extender_calls()
    koordpy.start_scheduler()
    native_podgroup(kube, space.namespace, "mpi", 4)
    front.delay("/bind", 15.0, body_contains=b'"PodName":"mpi-3"')
    for index in range(4):
        native_member(space, f"mpi-{index}", "mpi")
    wait_until("three binds held", lambda: "koordpy_extender_gang_held_binds 3.0" in koordpy.extender_metrics())
    extender.kill()
    extender.start()
    wait_until("extender back", lambda: "ok" in koordpy_ready(koordpy))
    assert space.bound() == {}
    front.delay("/bind", 0, body_contains=b'"PodName":"mpi-3"')
    bound = poll("the gang bound after the restart", lambda: space.count_bound(4), timeout=UNDER_THE_FLUSH)
    assert bound, space.bound()
    one_binding_each(control_plane, space.namespace, sorted(bound))


# ---- a starving native gang ----------------------------------------------------------------------------


def test_a_starving_native_gang_gets_room_held_for_its_minimum(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube
) -> None:
    """The manager's reservation round (threshold 1 s, priority 1000) on a native PodGroup of gang minCount 2
    with three members of priority 1000 that no scheduler takes (they starve): it holds room for two
    members, its minimum (one starving-job Reservation each, owned by that member, placed on a node), not
    three; and it writes nothing of the PodGroup."""
    nodes_with_usage(space, kube, [("n0", "8", 100), ("n1", "8", 100)])
    priority_class = f"{space.namespace}-urgent"
    kube.create(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": priority_class},
            "value": 1000,
        }
    )
    reservation = {
        "enabled": True,
        "starvingJobTimeThreshold": 1,
        "intervalSeconds": 1,
        "reservedNodePercent": 100,
        "priorityThreshold": 1000,
    }
    koordpy.start_manager({"nodeMetric": {"enabled": False}, "reservation": reservation})
    native_podgroup(kube, space.namespace, "starved", 2)
    members = [f"starved-{index}" for index in range(3)]
    for name in members:
        space.create_pod(
            name,
            cpu="1",
            memory="1Gi",
            priority_class=priority_class,
            extra_spec={"schedulingGroup": {"podGroupName": "starved"}},
        )
    job = label_value(f"{space.namespace}/starved")

    def rounds() -> float:
        text = httpx.get(koordpy.manager_base + "/metrics", timeout=30).text
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("koordpy_reservation_rounds_total{") and 'outcome="done"' in line
        )

    def held() -> list[dict[str, Any]]:
        found = kube.list("Reservation", labelSelector=f"koordpy.io/starving-job={job}")
        return found if found and all((r.get("status") or {}).get("nodeName") for r in found) else []

    try:
        wait_until("room held for the starving native gang", held)
        # two more rounds: neither adds a third (2 reserved ≥ minCount 2: Condition Ready)
        after = rounds()
        wait_until("two more reservation rounds", lambda: rounds() >= after + 2)
        reservations = held()
        assert len(reservations) == 2, [r["metadata"]["name"] for r in reservations]
        owners = sorted(r["spec"]["owners"][0]["object"]["name"] for r in reservations)
        assert len(set(owners)) == 2 and set(owners) <= set(members), owners
        assert {r["status"]["nodeName"] for r in reservations} <= set(space.nodes)
        assert koordpy_writes(control_plane, space.namespace) <= {("events", "", "create")}
    finally:
        for found in kube.list("Reservation", labelSelector=f"koordpy.io/starving-job={job}"):
            kube.delete("Reservation", found["metadata"]["name"])
        kube.delete("PriorityClass", priority_class)


# ---- a native gang's migration ---------------------------------------------------------------------------


def native_set(space: Space, name: str, members: int, node: str | None = None) -> dict[str, Any]:
    """:func:`test_cluster_migrations.gang_set` with its members in the native PodGroup ``name``
    (``spec.schedulingGroup``) instead of a CRD PodGroup's label: scheduled by the stock default scheduler,
    whose ``GangScheduling`` admits them, or, with ``node``, bound there at creation (no scheduler)."""
    obj = gang_set(space, name, members)
    template = obj["spec"]["template"]
    template["metadata"]["labels"] = {"app": name}
    obj["spec"]["selector"]["matchLabels"] = {"app": name}
    template["spec"]["schedulingGroup"] = {"podGroupName": name}
    if node is not None:
        template["spec"]["nodeName"] = node
        del template["spec"]["affinity"]
    return obj


def test_a_native_gang_member_waits_for_its_podgroup_and_moves_with_its_gang(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube
) -> None:
    """Two native gangs, each a StatefulSet's pods:

    * ``late``: two members bound to a node at creation (no scheduler) before their PodGroup exists. A job
      for ``late-0`` waits as ``GangUnknown`` (neither the gang's minimum nor its disruption mode is known:
      held, not let through), evicting nothing; once the PodGroup (minCount 2, disruptionMode all) is
      created, the same job waits as ``GangDisruptionAll`` (2-1 = 1 left, not 0);
    * ``sim``: PodGroup minCount 4, disruptionMode all, four members placed one per node by the stock
      default scheduler (its ``GangScheduling`` admits them together). A job for ``sim-0`` waits as
      ``GangDisruptionAll`` (4-1 = 3 left, not 0); once every member has a job, the four pass in one round
      (each carries ``koordpy.io/gang-migration`` naming the four), the audit log shows the four evictions,
      all after the last job was created, and the StatefulSet's replacements run again."""
    ns = space.namespace
    for i in range(4):
        space.node(f"n{i}", cpu="8", memory="32Gi")
    space.wait_nodes_ready()
    kube.create(native_set(space, "late", 2, node=space.nodes[0]))
    native_podgroup(kube, ns, "sim", 4)
    kube.create(native_set(space, "sim", 4))
    late = running_pods(space, "late", 2)
    sim = running_pods(space, "sim", 4)
    assert len({space.pods()[p]["spec"]["nodeName"] for p in sim}) == 4
    uids = {name: space.pods()[name]["metadata"]["uid"] for name in sim}
    manager = koordpy.start_manager(GANG_OF_FOUR)
    names: list[str] = []
    try:
        for suffix, pod in (("l0", late[0]), ("s0", sim[0])):
            names.append(kube.create(job(space, suffix, pod))["metadata"]["name"])
        held, first = names

        def reason(name: str) -> str | None:
            """The reason the job waits for, its phase once it moved on, None while arbitration said nothing."""
            found = status(kube, name)
            condition = waiting(found)
            if condition is not None:
                return str(condition["reason"])
            return None if found.get("phase") in (None, "Pending") else f"phase {found['phase']}"

        wait_until("arbitration judged both jobs", lambda: reason(held) and reason(first))
        unseen = waiting(status(kube, held))
        assert unseen is not None and unseen["reason"] == "GangUnknown", status(kube, held)
        assert unseen["message"].startswith(
            f"gang {ns}/late: PodGroup {ns}/late (scheduling.k8s.io) not found: its minimum"
        )
        assert reason(first) == "GangDisruptionAll", status(kube, first)
        wait_until("the GangUnknown Event", lambda: "GangUnknown" in event_reasons(kube, held))

        def evictions(pods: list[str]) -> list[dict[str, Any]]:
            return [e for e in manager_audit(control_plane, "pods", "eviction") if e["objectRef"].get("name") in pods]

        # The PodGroup comes: the gang is known, and the job waits for its mate (disruptionMode all).
        native_podgroup(kube, ns, "late", 2)
        wait_until("late-0's job waits for its gang", lambda: reason(held) == "GangDisruptionAll")
        assert evictions(late + sim) == []
        assert (status(kube, held).get("phase") or "Pending") == "Pending"

        names += [kube.create(job(space, f"s{i}", sim[i]))["metadata"]["name"] for i in range(1, 4)]
        together = names[1:]
        last_created = max(parse_rfc3339((kube.get(PMJ, n) or {})["metadata"]["creationTimestamp"]) for n in together)
        wait_until(
            "the four jobs done",
            lambda: all(status(kube, n).get("phase") == "Succeeded" for n in together),
            timeout=300,
        )
        unit = json.dumps({"gang": f"gang {ns}/sim", "jobs": sorted(together)}, separators=(",", ":"))
        for name in together:
            annotations = (kube.get(PMJ, name) or {})["metadata"]["annotations"]
            assert annotations["koordpy.io/gang-migration"] == unit, annotations
        evicted = evictions(sim)
        assert sorted((e["objectRef"]["name"], e["responseStatus"]["code"]) for e in evicted) == [(p, 201) for p in sim]
        assert min(parse_rfc3339(e["requestReceivedTimestamp"]) for e in evicted) >= last_created
        assert evictions(late) == [] and reason(held) == "GangDisruptionAll"
        # The replacements: four new pods of the gang, admitted and placed again by kube-scheduler.
        replaced = running_pods(space, "sim", 4)
        assert not {space.pods()[n]["metadata"]["uid"] for n in replaced} & set(uids.values())
        log = manager.log.read_text(errors="replace")
        assert f"pass together: gang {ns}/sim moves as one" in log
        assert "Traceback" not in log
    finally:
        for name in names:
            kube.delete(PMJ, name)


# ---- the tools read native gangs ------------------------------------------------------------------------


def koordpy_cli(*args: str) -> str:
    result = subprocess.run([str(KOORDPY), *args], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_gangs_from_a_dump_give_the_live_verdicts(
    control_plane: ControlPlane, release: Release, space: Space, kube: Kube, tmp_path: Any
) -> None:
    """A native PodGroup (minCount 2) with two members no scheduler takes, another (minCount 3) with one, and
    a CRD PodGroup beside them: ``koordpy scheduler gangs`` reads the cluster, then a dump of the same objects
    (``kubectl get pods,podgroups... -o yaml``, as docs/gang.md says), and gives the same verdicts; so does
    ``koordpy scheduler explain`` for a member."""
    ns = space.namespace
    native_podgroup(kube, ns, "ready", 2, disruption="single")
    native_podgroup(kube, ns, "short", 3)
    kube.create(
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "crd", "namespace": ns},
            "spec": {"minMember": 2},
        }
    )
    for name, group in (("ready-0", "ready"), ("ready-1", "ready"), ("short-0", "short")):
        space.create_pod(
            name, scheduler="nobody", extra_spec={"schedulingGroup": {"podGroupName": group}}, cpu="1", memory="1Gi"
        )
    space.create_pod("crd-0", scheduler="nobody", labels={"pod-group.scheduling.sigs.k8s.io": "crd"})
    now = "2030-01-01T00:00:00Z"
    kubeconfig = str(control_plane.admin_kubeconfig)
    live = json.loads(koordpy_cli("scheduler", "gangs", "--kubeconfig", kubeconfig, "--now", now, "-o", "json"))
    assert control_plane.bin_dir is not None
    kubectl = control_plane.bin_dir / "kubectl"
    kinds = "pods,podgroups.scheduling.k8s.io,podgroups.scheduling.sigs.k8s.io"
    listed = subprocess.run(
        [str(kubectl), "--kubeconfig", kubeconfig, "get", kinds, "-n", ns, "-o", "yaml"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    dump = tmp_path / "dump.yaml"
    dump.write_text(listed)
    offline = json.loads(koordpy_cli("scheduler", "gangs", "-f", str(dump), "--now", now, "-o", "json"))
    ours = [g for g in live["gangs"] if g["id"].startswith(f"{ns}/")]
    assert [g["id"] for g in ours] == [f"{ns}/crd", f"{ns}/ready", f"{ns}/short"]
    assert offline["gangs"] == ours
    by_id = {g["id"].partition("/")[2]: g for g in ours}
    # kube-scheduler's quorum: ready has 2 of 2 members, short 1 of 3
    assert by_id["ready"]["admit"][f"{ns}/ready-0"]["ok"] is True
    assert by_id["short"]["admit"][f"{ns}/short-0"] == {
        "ok": False,
        "reason": f"gang {ns}/short: 1 of 3 members exist (kube-scheduler's GangScheduling)",
    }
    assert (by_id["ready"]["mode"], by_id["ready"]["matchPolicy"]) == ("Strict", "waiting-and-running")
    assert yaml.safe_load(listed)["items"]  # the dump is kubectl's own
    # explain's gang line, live and from the dump
    pod = f"{ns}/short-0"
    explained = [
        json.loads(koordpy_cli("scheduler", "explain", "--pod", pod, *source, "--now", now, "-o", "json"))["gang"]
        for source in (("--kubeconfig", kubeconfig), ("-f", str(dump)))
    ]
    assert (
        explained[0]
        == explained[1]
        == {
            "id": f"{ns}/short",
            "groupId": f"{ns}/short",
            "admit": by_id["short"]["admit"][pod],
            "permit": by_id["short"]["permit"],
        }
    )


# ---- the documentation's native manifests ------------------------------------------------------------


def test_the_documentations_native_manifests_pass_a_server_side_dry_run(
    control_plane: ControlPlane, release: Release, kube: Kube
) -> None:
    """Each YAML block of the documentation that needs the gate (``doc_objects(gated=True)``; the session's
    ``test_cluster_examples.py`` checks every other block) passes ``kubectl apply --server-side
    --dry-run=server --validate=strict`` here."""
    blocks = list(doc_objects(gated=True))
    assert any(block.path.name == "gang.md" for block, _ in blocks), [b.where for b, _ in blocks]
    assert control_plane.bin_dir is not None
    kubectl = [str(control_plane.bin_dir / "kubectl"), "--kubeconfig", str(control_plane.admin_kubeconfig)]
    namespaces = sorted({o["metadata"]["namespace"] for _, objects in blocks for o in objects})
    for name in namespaces:
        if kube.get("Namespace", name) is None:
            kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    try:
        for block, objects in blocks:
            args = ["apply", "--server-side", "--dry-run=server", "--validate=strict", "-f", "-"]
            result = subprocess.run(
                [*kubectl, *args], input=block.text, capture_output=True, text=True, timeout=120, check=False
            )
            assert result.returncode == 0, f"{block.where}: the API server refused it:\n{result.stderr}"
            for obj in objects:
                assert f"/{obj['metadata']['name']} serverside-applied (server dry run)" in result.stdout
    finally:
        for name in namespaces:
            kube.delete("Namespace", name)


def test_the_native_example_applies_for_real_and_deletes(control_plane: ControlPlane, space: Space, kube: Kube) -> None:
    """Each ``examples/`` file that needs the gate (``example_files(gated=True)``; the session's
    ``test_cluster_examples.py`` applies every other one) is applied for real: its PodGroup is stored with
    the API's defaults, the Job controller creates the pods with their ``spec.schedulingGroup``, and
    ``kubectl delete -f`` removes it again."""
    paths = example_files(gated=True)
    assert [p.name for p in paths] == ["podgroup-native.yaml"]
    assert control_plane.bin_dir is not None
    kubectl = [str(control_plane.bin_dir / "kubectl"), "--kubeconfig", str(control_plane.admin_kubeconfig)]
    for path in paths:
        applied = subprocess.run(
            [*kubectl, "apply", "-n", space.namespace, "-f", str(path)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert applied.returncode == 0, applied.stderr
        for obj in kube_objects(path.read_text(encoding="utf-8")):
            if obj["kind"] != "Job":
                continue
            parallelism = obj["spec"]["parallelism"]
            group = obj["spec"]["template"]["spec"]["schedulingGroup"]
            pods = wait_until(f"{obj['metadata']['name']}'s pods", lambda count=parallelism: space.count_pods(count))
            assert all(p["spec"].get("schedulingGroup") == group for p in pods.values()), pods
        stored = kube.client.get(PODGROUPS.format(namespace=space.namespace) + "/simulation").json()
        assert stored["spec"]["disruptionMode"] == {"all": {}}
        deleted = subprocess.run(
            [*kubectl, "delete", "-n", space.namespace, "-f", str(path), "--wait=true", "--timeout=120s"],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert deleted.returncode == 0, deleted.stderr


# ---- the chart's roles, checked by the real authorizer with the gate on --------------------------------


def test_no_component_request_was_denied_with_the_gate_on(control_plane: ControlPlane, release: Release) -> None:
    """Runs last in this module: every request of the components in the tests above was allowed, and the
    extender and the manager did list the native PodGroups (the chart's rules for them are used)."""
    assert denied(control_plane) == []
    listed = {
        e["user"]["username"].removeprefix(SA_PREFIX)
        for e in control_plane.audit_events()
        if e["user"]["username"].startswith(SA_PREFIX)
        and str(e.get("userAgent", "")).startswith("koordpy")
        and e["verb"] == "list"
        and (e.get("objectRef") or {}).get("apiGroup") == "scheduling.k8s.io"
        and (e.get("objectRef") or {}).get("resource") == "podgroups"
        and e["responseStatus"]["code"] == 200
    }
    assert listed == {"koordpy-scheduler", "koordpy-manager"}, listed
