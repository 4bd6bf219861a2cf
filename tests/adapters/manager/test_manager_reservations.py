"""The manager's reservation round: executing decisions (fake API, stub decisions), the Kubernetes API
calls (emulator), and the real ``decide`` end to end with a restart in the middle (emulator)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from koordpy.config.errors import validate
from koordpy.config.manager import ManagerConfiguration
from koordpy.config.reservation import ReservationSettings
from koordpy.kube.client import ApiClient
from koordpy.kube.connection import write_kubeconfig
from koordpy.kube.resources import EVENTS, NODEMETRICS, NODES, PODS, RESERVATIONS
from koordpy.manager.api import KubeReservationApi
from koordpy.manager.cache import ManagerCache
from koordpy.manager.operator import run
from koordpy.manager.reservations import (
    ClusterSnapshot,
    ConversionCache,
    ReservationController,
    ReservationMetrics,
    RoundResult,
    WriteRefusedError,
    reservation_loop,
)
from koordpy.model.durations import parse_rfc3339
from koordpy.runtime.metrics import new_registry, render
from koordpy.scheduler.plugins.reservation.controller import (
    Deletion,
    EventDecision,
    NewReservation,
    Regarding,
    ReservationDecision,
    ReservationInputs,
    StatusUpdate,
)
from koordpy.scheduler.plugins.reservation.spec import allocated_annotations, reservation_from_dict
from koordpy.scheduler.plugins.reservation.starving import LABEL_STARVING_JOB
from koordpy_testkit.apiserver import ApiServerEmulator
from koordpy_testkit.apiserver.fixture import api_client, apiserver
from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.builders import NodeBuilder, NodeMetricBuilder, PodBuilder
from koordpy_testkit.reservations import reservation_dict

__all__ = ["api_client", "apiserver"]

Raw = dict[str, Any]
SETTINGS = ReservationSettings.model_validate(
    {"enabled": True, "starvingJobTimeThreshold": 60, "reservedNodePercent": 50, "intervalSeconds": 1}
)


def stored(name: str, phase: str = "Available", uid: str | None = None) -> Raw:
    raw = reservation_dict(name, phase=phase, node="n1")
    raw["metadata"]["uid"] = uid or f"uid-{name}"
    return raw


def pod_raw(name: str, uid: str) -> Raw:
    return PodBuilder(name).uid(uid).requests(cpu="1").build()


class FakeApi:
    """An in-memory ReservationApi: records calls in order, refuses the writes named in ``refuse``."""

    def __init__(self, snapshot: ClusterSnapshot, refuse: Mapping[tuple[str, str], str] | None = None) -> None:
        self.view = snapshot
        self.refuse = dict(refuse or {})
        self.calls: list[tuple[str, str]] = []
        self.events: list[tuple[Raw, EventDecision]] = []
        self.deleted_uids: list[str | None] = []

    def _check(self, action: str, name: str) -> None:
        self.calls.append((action, name))
        outcome = self.refuse.get((action, name))
        if outcome is not None:
            raise WriteRefusedError(outcome, f"{action} {name}")

    async def snapshot(self) -> ClusterSnapshot:
        return self.view

    async def create_reservation(self, body: Mapping[str, Any]) -> Raw:
        name = str(body["metadata"]["name"])
        self._check("create", name)
        return {**body, "metadata": {**body["metadata"], "uid": f"new-{name}"}}

    async def patch_reservation_status(self, name: str, status: Mapping[str, Any]) -> Raw:
        self._check("status", name)
        return {"metadata": {"name": name}, "status": dict(status)}

    async def delete_reservation(self, name: str, uid: str | None) -> None:
        self._check("delete", name)
        self.deleted_uids.append(uid)

    async def post_event(self, involved: Mapping[str, Any], event: EventDecision) -> None:
        self.calls.append(("event", event.reason))
        self.events.append((dict(involved), event))


KINDS = ("pods", "reservations", "nodes", "nodemetrics", "podgroups")


async def cached_api(api_client: ApiClient, cls: type[KubeReservationApi] = KubeReservationApi) -> KubeReservationApi:
    cache = ManagerCache(api_client, KINDS)
    await cache.resync()
    return cls(api_client, cache)


async def round_of(controller: ReservationController) -> RoundResult:
    """One round; on freshly relisted caches when the API reads them (what the watches give a moment
    after each write)."""
    if isinstance(controller.api, KubeReservationApi):
        await controller.api.cache.resync()
    return await controller.run_round()


def decision(
    creates: tuple[NewReservation, ...] = (),
    statuses: tuple[StatusUpdate, ...] = (),
    deletes: tuple[Deletion, ...] = (),
    events: tuple[EventDecision, ...] = (),
) -> ReservationDecision:
    return ReservationDecision(starving=(), creates=creates, statuses=statuses, deletes=deletes, events=events)


def fixed(result: ReservationDecision) -> Any:
    seen: list[ReservationInputs] = []

    def decide(inputs: ReservationInputs, settings: ReservationSettings, now: float) -> ReservationDecision:
        seen.append(inputs)
        return result

    decide.seen = seen  # type: ignore[attr-defined]
    return decide


NEW = NewReservation(
    "starving-default-big-0",
    "default/big",
    "n1",
    {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": "starving-default-big-0"},
    },
    {"phase": "Waiting", "nodeName": "n1"},
)


def snapshot(reservations: list[Raw], pods: list[Raw] | None = None) -> ClusterSnapshot:
    return ClusterSnapshot(nodes=[], pods=pods or [], podgroups=[], reservations=reservations)


async def test_a_round_creates_then_writes_status_updates_deletes_and_posts_events() -> None:
    api = FakeApi(snapshot([stored("user-1"), stored("old", uid="uid-old")], [pod_raw("big", "uid-big")]))
    events = (
        EventDecision(Regarding("Reservation", "", NEW.name), "Normal", "StarvingJobReserved", "node n1 held"),
        EventDecision(Regarding("Pod", "default", "big"), "Normal", "Reserved", "node n1 is reserved"),
    )
    result = decision(
        creates=(NEW,),
        statuses=(StatusUpdate("user-1", {"phase": "Succeeded"}),),
        deletes=(Deletion("old", "default/gone", "job default/gone was deleted"),),
        events=events,
    )
    metrics = ReservationMetrics(new_registry())
    controller = ReservationController(api, SETTINGS, decide=fixed(result), clock=lambda: 1000.0, metrics=metrics)
    done = await round_of(controller)
    assert api.calls == [
        ("create", NEW.name),
        ("status", NEW.name),  # right after its create
        ("status", "user-1"),
        ("delete", "old"),
        ("event", "StarvingJobReserved"),
        ("event", "Reserved"),
    ]
    assert api.deleted_uids == ["uid-old"]  # the uid listed: a re-created namesake is never deleted
    # Events name their object with the uid the API gave it (the created Reservation's from the create answer).
    involved = [(raw["kind"], raw["metadata"].get("uid")) for raw, _ in api.events]
    assert involved == [("Reservation", f"new-{NEW.name}"), ("Pod", "uid-big")]
    # user-1 Succeeded, the new one Waiting, old deleted
    assert done.phases == {"Succeeded": 1, "Waiting": 1}
    assert done.outcomes == Counter(
        {("status", "done"): 2, ("create", "done"): 1, ("delete", "done"): 1, ("event", "done"): 2}
    )
    text = render(metrics.registry)[0].decode()
    assert 'koordpy_reservations{phase="Waiting"} 1.0' in text
    assert 'koordpy_reservations{phase="Available"} 0.0' in text
    assert 'koordpy_reservation_actions_total{action="create",outcome="done"} 1.0' in text


async def test_lost_races_are_counted_and_the_round_goes_on() -> None:
    refuse = {("create", NEW.name): "exists", ("status", "user-1"): "gone", ("delete", "old"): "gone"}
    api = FakeApi(snapshot([stored("user-1"), stored("old"), stored("kept", phase="Waiting")]), refuse)
    result = decision(
        creates=(NEW,),
        statuses=(StatusUpdate("user-1", {"phase": "Succeeded"}), StatusUpdate("kept", {"phase": "Available"})),
        deletes=(Deletion("old", "default/gone", "gone"),),
    )
    metrics = ReservationMetrics(new_registry())
    controller = ReservationController(api, SETTINGS, decide=fixed(result), metrics=metrics)
    done = await round_of(controller)
    # no status write for a create that lost (409): the next round sees the existing object and decides
    assert ("status", NEW.name) not in api.calls
    assert api.calls[-1] == ("status", "kept") or ("delete", "old") in api.calls
    assert done.outcomes[("create", "exists")] == 1
    assert done.outcomes[("status", "gone")] == 1
    assert done.outcomes[("status", "done")] == 1
    assert done.outcomes[("delete", "gone")] == 1
    # user-1 keeps its listed phase (the write failed), old is gone either way, kept became Available
    assert done.phases == {"Available": 2}
    text = render(metrics.registry)[0].decode()
    assert 'koordpy_reservation_actions_total{action="create",outcome="exists"} 1.0' in text


async def test_events_repeat_only_when_their_message_changed_and_the_interval_ran_out() -> None:
    now = [1000.0]
    message = ["no node fits"]

    def decide(inputs: ReservationInputs, settings: ReservationSettings, at: float) -> ReservationDecision:
        event = EventDecision(Regarding("Reservation", "", "user-1"), "Warning", "Unschedulable", message[0])
        return decision(events=(event,) if inputs.reservations else ())

    api = FakeApi(snapshot([stored("user-1", phase="Pending")]))
    controller = ReservationController(api, SETTINGS, decide=decide, clock=lambda: now[0], event_interval=60)
    await round_of(controller)
    await round_of(controller)  # the same message again: not reposted
    message[0] = "n1: Insufficient cpu"
    now[0] += 30
    await round_of(controller)  # changed, but within 60 s of the last: held back
    now[0] += 31
    await round_of(controller)  # changed and 61 s later: posted
    assert [e.message for _, e in api.events] == ["no node fits", "n1: Insufficient cpu"]
    assert api.events[0][1].type == "Warning"
    # the Reservation is deleted (no longer listed): its memory goes; a namesake's Event is posted again
    api.view = snapshot([])
    message[0] = "no node fits"
    now[0] += 1
    await round_of(controller)
    assert len(controller.throttle) == 0
    api.view = snapshot([stored("user-1", phase="Pending")])
    now[0] += 1
    await round_of(controller)
    assert [e.message for _, e in api.events] == ["no node fits", "n1: Insufficient cpu", "no node fits"]


async def test_an_event_of_another_reason_is_never_held_back_by_the_last_one() -> None:
    """Reserved, then Available, then Released on one Reservation in three rounds 1 s apart: all three."""
    now = [1000.0]
    reasons = iter(["StarvingJobReserved", "Available", "StarvingJobReleased"])

    def decide(inputs: ReservationInputs, settings: ReservationSettings, at: float) -> ReservationDecision:
        event = EventDecision(Regarding("Reservation", "", "user-1"), "Normal", next(reasons), "on n1")
        return decision(events=(event,))

    api = FakeApi(snapshot([stored("user-1")]))
    controller = ReservationController(api, SETTINGS, decide=decide, clock=lambda: now[0], event_interval=60)
    for _ in range(3):
        await round_of(controller)
        now[0] += 1
    assert [e.reason for _, e in api.events] == ["StarvingJobReserved", "Available", "StarvingJobReleased"]


async def test_unreadable_objects_are_skipped_and_unusable_reservations_failed_once() -> None:
    bad_pod = pod_raw("bad", "uid-bad")
    bad_pod["spec"]["priority"] = "high"
    bad_ttl = stored("bad-ttl")
    bad_ttl["spec"]["ttl"] = "forever"
    negative = reservation_dict("negative", cpu="-100", phase="Available", node="n1")  # placed before it was checked
    decide = fixed(decision())
    api = FakeApi(snapshot([stored("user-1"), bad_ttl, negative], [pod_raw("good", "uid-good"), bad_pod]))
    controller = ReservationController(api, SETTINGS, decide=decide)
    done = await controller.run_round()
    assert done.skipped == ["Pod default/bad: spec.priority: expected an integer"]
    inputs = decide.seen[0]
    assert [p.name for p in inputs.pods] == ["good"]
    assert [r.name for r in inputs.reservations] == ["user-1"]  # neither placed nor counted
    assert set(inputs.placements) == {"uid-good"}
    # each unusable Reservation: phase Failed, condition Ready False/Invalid naming the field, one Event
    assert api.calls == [("status", "bad-ttl"), ("event", "Invalid"), ("status", "negative"), ("event", "Invalid")]
    failed = {involved["metadata"]["name"]: event for involved, event in api.events}
    assert "spec.ttl" in failed["bad-ttl"].message and failed["bad-ttl"].type == "Warning"
    assert "cpu is negative" in failed["negative"].message
    # the next rounds see them Failed (their status as written): no write, no Event, no log line again
    written = {"phase": "Failed", "conditions": [{"type": "Ready", "status": "False", "reason": "Invalid"}]}
    api.view = snapshot(
        [stored("user-1"), {**bad_ttl, "status": written}, {**negative, "status": written}],
        [pod_raw("good", "uid-good"), bad_pod],
    )
    api.calls.clear()
    for _ in range(2):
        await controller.run_round()
    assert api.calls == []


async def test_the_loop_counts_rounds_and_goes_on_after_a_failed_one() -> None:
    rounds: list[int] = []

    class Once(ReservationController):
        async def run_round(self) -> Any:
            rounds.append(len(rounds))
            if len(rounds) == 2:
                raise RuntimeError("decide failed")
            return None

    metrics = ReservationMetrics(new_registry())
    controller = Once(FakeApi(snapshot([])), SETTINGS, metrics=metrics)
    loop = reservation_loop(controller, 1.0)
    for _ in range(3):
        assert await loop.run_once() is True  # the second fails; the loop goes on
    assert rounds == [0, 1, 2] and loop.errors == 1
    text = render(metrics.registry)[0].decode()
    assert 'koordpy_reservation_rounds_total{outcome="done"} 2.0' in text
    assert 'koordpy_reservation_rounds_total{outcome="error"} 1.0' in text


class Source:
    def __init__(self, reservations: int, ready: bool = True, taints: list[Raw] | None = None) -> None:
        self.reservations = list(range(reservations))
        self.ready = ready
        self.nodes = {"n1": {"metadata": {"name": "n1"}, "spec": {"taints": taints or []}}}

    def not_ready(self) -> str | None:
        return None if self.ready else "pods: waiting for the first list"


HOLD = [{"key": "koordpy.io/reserved", "effect": "NoSchedule"}]


@pytest.mark.parametrize(
    ("enabled", "taint_nodes", "reservations", "ready", "taints", "due"),
    [
        (False, False, 0, True, [], False),  # nothing to place, create or take off: no round at all
        (False, False, 1, True, [], True),  # a user Reservation: placed, expired, released
        (True, False, 0, True, [], True),  # starving jobs are found over time
        (False, True, 0, True, [], True),  # the hold is kept
        (False, False, 0, True, HOLD, True),  # a hold taint left behind is taken off
        (True, False, 3, False, [], False),  # never on caches that have not listed everything yet
    ],
)
def test_a_round_is_due_only_with_something_to_do(
    enabled: bool, taint_nodes: bool, reservations: int, ready: bool, taints: list[Raw], due: bool
) -> None:
    settings = ReservationSettings.model_validate({"enabled": enabled, "taintNodes": taint_nodes})
    source = Source(reservations, ready, taints)
    controller = ReservationController(FakeApi(snapshot([])), settings, source=source)
    assert controller.due() is due


# ---- against the API server emulator -------------------------------------------------------------


async def test_kube_api_maps_conflicts_and_not_found(apiserver: ApiServerEmulator, api_client: ApiClient) -> None:
    api = await cached_api(api_client)
    body = reservation_dict("r1")
    for key in ("uid", "creationTimestamp"):
        body["metadata"].pop(key)
    created = await api.create_reservation(body)
    with pytest.raises(WriteRefusedError) as exists:
        await api.create_reservation(body)
    assert exists.value.outcome == "exists"
    written = await api.patch_reservation_status("r1", {"phase": "Available", "nodeName": "n1"})
    assert written["status"] == {"phase": "Available", "nodeName": "n1"}
    with pytest.raises(WriteRefusedError) as gone:
        await api.patch_reservation_status("nope", {"phase": "Available"})
    assert gone.value.outcome == "gone"
    with pytest.raises(WriteRefusedError) as stale:
        await api.delete_reservation("r1", "some-other-uid")
    assert stale.value.outcome == "conflict"
    await api.delete_reservation("r1", created["metadata"]["uid"])
    with pytest.raises(WriteRefusedError) as deleted:
        await api.delete_reservation("r1", None)
    assert deleted.value.outcome == "gone"
    # scheduling.x-k8s.io is not served by the emulator: discovery says so, it is never listed or watched
    await api.cache.resync()
    view = await api.snapshot()
    assert view.podgroups == [] and view.reservations == []
    assert not api.cache.served("podgroups_x_k8s") and api.cache.served("podgroups_sigs")
    podgroup_lists = [r for r in apiserver.requests if r.get("resource") == "podgroups" and r["verb"] == "list"]
    assert {r["group"] for r in podgroup_lists} == {"scheduling.sigs.k8s.io"}


async def cluster(api_client: ApiClient) -> None:
    """Two 4-cpu nodes, each running a 3-cpu pod; ``big`` (2 cpu, priority 100) fits nowhere."""
    for name in ("n1", "n2"):
        await api_client.create(NODES, NodeBuilder(name).allocatable(cpu="4", memory="16Gi", pods="110").build())
        busy = PodBuilder(f"busy-{name}").requests(cpu="3", memory="1Gi").node(name).phase("Running").build()
        busy["metadata"].pop("uid")
        await api_client.create(PODS, busy)
    big = PodBuilder("big").requests(cpu="2", memory="1Gi").priority(100).build()
    big["metadata"].pop("uid")
    await api_client.create(PODS, big)


async def starving_reservations(api_client: ApiClient) -> list[Raw]:
    return [
        r for r in (await api_client.list(RESERVATIONS)).items if LABEL_STARVING_JOB in r["metadata"].get("labels", {})
    ]


def creates(apiserver: ApiServerEmulator) -> int:
    return sum(1 for r in apiserver.requests if r.get("resource") == "reservations" and r.get("verb") == "create")


async def test_starving_pod_is_reserved_once_across_rounds_and_a_restart(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    await cluster(api_client)
    big = await api_client.get(PODS, "big", "default")
    later = parse_rfc3339(big["metadata"]["creationTimestamp"]) + 61  # past the 60 s threshold
    api = await cached_api(api_client)
    first = ReservationController(api, SETTINGS, clock=lambda: later)
    one = await round_of(first)
    assert [c.job for c in one.decision.creates] == ["default/big"]
    assert one.outcomes[("create", "done")] == 1 and one.outcomes[("status", "done")] == 1
    two = await round_of(first)
    assert two.decision.creates == ()
    restarted = ReservationController(await cached_api(api_client), SETTINGS, clock=lambda: later + 1)
    three = await round_of(restarted)
    assert three.decision.creates == ()
    held = await starving_reservations(api_client)
    assert len(held) == 1 and creates(apiserver) == 1
    (res,) = held
    # preAllocation: 1 cpu free of the 2 requested, so Waiting (held, not yet usable), on one node
    assert res["status"]["phase"] == "Waiting"
    assert res["status"]["nodeName"] in ("n1", "n2")
    assert res["metadata"]["annotations"]["koordpy.io/starving-job"] == "default/big"
    assert res["spec"]["owners"][0]["object"]["uid"] == big["metadata"]["uid"]
    # Events: on the Reservation and on the pod, with their uids
    posted = [e for e in (await api_client.list(EVENTS)).items if e["source"]["component"] == "koordpy-manager"]
    kinds = {(e["involvedObject"]["kind"], e["reason"], e["involvedObject"].get("uid")) for e in posted}
    assert ("Reservation", "StarvingJobReserved", res["metadata"]["uid"]) in kinds
    assert ("Pod", "Reserved", big["metadata"]["uid"]) in kinds
    # the node drains: free covers the template → Available; the pod binds there → the job is Ready and
    # its reservation is deleted
    node = res["status"]["nodeName"]
    await api_client.delete(PODS, f"busy-{node}", "default", grace_period_seconds=0)
    four = await round_of(restarted)
    assert [(u.name, u.status["phase"]) for u in four.decision.statuses] == [(res["metadata"]["name"], "Available")]
    await api_client.create_binding("default", "big", big["metadata"]["uid"], node)
    five = await round_of(restarted)
    assert [d.name for d in five.decision.deletes] == [res["metadata"]["name"]]
    assert five.outcomes[("delete", "done")] == 1
    assert await starving_reservations(api_client) == []
    assert creates(apiserver) == 1


async def test_user_reservation_is_placed_then_consumed_by_its_owner(api_client: ApiClient) -> None:
    await cluster(api_client)
    body = reservation_dict(
        "hold-web", cpu="1", memory="1Gi", owners=[{"object": {"namespace": "default", "name": "web"}}]
    )
    for key in ("uid", "creationTimestamp"):
        body["metadata"].pop(key)
    await api_client.create(RESERVATIONS, body)
    controller = ReservationController(await cached_api(api_client), SETTINGS)
    await round_of(controller)
    placed = await api_client.get(RESERVATIONS, "hold-web")
    assert placed["status"]["phase"] == "Available"  # 1 cpu free on either node covers 1 cpu
    node = placed["status"]["nodeName"]
    # an owner created straight on the node (not bound through the Reservation) allocates nothing
    early = PodBuilder("web").requests(cpu="1", memory="1Gi").node(node).phase("Running").build()
    early["metadata"].pop("uid")
    early = await api_client.create(PODS, early)
    await controller.run_round()
    assert (await api_client.get(RESERVATIONS, "hold-web"))["status"]["phase"] == "Available"
    await api_client.delete(PODS, "web", "default", grace_period_seconds=0)
    # the owner bound through it, as the extender binds (the binding carries the reservation-allocated record)
    web = PodBuilder("web").requests(cpu="1", memory="1Gi").build()
    web["metadata"].pop("uid")
    web = await api_client.create(PODS, web)
    through = allocated_annotations(reservation_from_dict(placed))
    await api_client.create_binding("default", "web", web["metadata"]["uid"], node, annotations=through)
    await round_of(controller)
    consumed = await api_client.get(RESERVATIONS, "hold-web")
    assert consumed["status"]["phase"] == "Succeeded"
    assert consumed["status"]["currentOwners"] == [
        {"kind": "Pod", "namespace": "default", "name": "web", "uid": web["metadata"]["uid"]}
    ]
    assert controller.last is not None and controller.last.phases == {"Succeeded": 1}


@pytest.mark.parametrize(("hot", "expected"), [("n1", "n2"), ("n2", "n1")])
async def test_placement_reads_nodemetrics_and_avoids_a_node_above_the_load_threshold(
    api_client: ApiClient, hot: str, expected: str
) -> None:
    now = time.time()
    for name in ("n1", "n2"):  # empty and alike: equal node scores, the name breaks the tie
        await api_client.create(NODES, NodeBuilder(name).allocatable(cpu="4", memory="16Gi", pods="110").build())
        # hot: 3.9 of 4 cpu = 98% > the default threshold 65%; cool: 0.5 + the template's estimate
        # (1 cpu × 0.85) = 1.35 of 4 = 34%
        usage = "3900m" if name == hot else "500m"
        metric = NodeMetricBuilder(name).updated(now).usage(cpu=usage, memory="1Gi").build()
        await api_client.create(NODEMETRICS, {**metric, "status": {}})
        await api_client.patch_status(NODEMETRICS, name, {"status": metric["status"]})  # as the agent reports
    body = reservation_dict("hold-web", cpu="1", memory="1Gi")
    for key in ("uid", "creationTimestamp"):
        body["metadata"].pop(key)
    await api_client.create(RESERVATIONS, body)
    controller = ReservationController(await cached_api(api_client), SETTINGS)
    await round_of(controller)
    placed = await api_client.get(RESERVATIONS, "hold-web")
    assert (placed["status"]["phase"], placed["status"]["nodeName"]) == ("Available", expected)


async def test_the_operator_places_a_user_reservation_from_its_watch_caches(
    apiserver: ApiServerEmulator,
    api_client: ApiClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kubeconfig", apiserver.url, "manager")))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    # no agent reports here: without NodeMetrics every node passes placement's load-aware filter (a
    # NodeMetric the manager created but no agent filled in is expired, and blocks the node, as for pods)
    config = validate(ManagerConfiguration, {"nodeMetric": {"enabled": False}, "reservation": {"intervalSeconds": 1}})
    assert config.reservation.enabled is False  # user Reservations are placed all the same
    await api_client.create(NODES, NodeBuilder("n1").allocatable(cpu="4", memory="16Gi", pods="110").build())
    body = reservation_dict("hold", owners=[{"object": {"namespace": "default", "name": "web"}}])
    for key in ("uid", "creationTimestamp"):
        body["metadata"].pop(key)
    await api_client.create(RESERVATIONS, body)
    stop = asyncio.Event()
    task = asyncio.create_task(run(config, stop_flag=stop, liveness=False))
    try:
        async with asyncio.timeout(HANG_BACKSTOP):
            while ((await api_client.get(RESERVATIONS, "hold")).get("status") or {}).get("phase") != "Available":
                await asyncio.sleep(0.1)
        # a few more rounds (interval 1 s) with nothing changing
        await asyncio.sleep(3)
    finally:
        stop.set()
        await asyncio.wait_for(task, HANG_BACKSTOP)
    placed = await api_client.get(RESERVATIONS, "hold")
    assert placed["status"]["nodeName"] == "n1"
    messages = [r.getMessage() for r in caplog.records]
    assert "reservation hold status: phase Available" in messages
    # quiet: no line per watch event from kopf's handlers (the node event ran, its success is not logged)
    assert not [m for m in messages if m.startswith("Handler '") and m.endswith("' succeeded.")]
    # rounds (every second for 3 s and more) read the watch caches: each kind was listed by its reflector's
    # first list, and once more by kopf for the kinds its handlers watch (NodeMetrics per node, gangs)
    lists = Counter(
        (r["resource"], r["group"]) for r in apiserver.requests if r.get("user") == "manager" and r["verb"] == "list"
    )
    assert lists[("reservations", "scheduling.koordinator.sh")] == 1, lists
    assert lists[("podmigrationjobs", "scheduling.koordinator.sh")] == 1, lists
    for kind in (("pods", ""), ("nodes", ""), ("nodemetrics", "slo.koordinator.sh")):
        assert lists[kind] <= 2, lists
    assert ("podgroups", "scheduling.x-k8s.io") not in lists  # not served by the emulator: never asked
    # the manager never writes a Node
    assert (await api_client.get(NODES, "n1"))["metadata"].get("finalizers") in (None, [])
    node_writes = [
        r
        for r in apiserver.requests
        if r.get("user") == "manager" and r.get("resource") == "nodes" and r.get("verb") not in ("list", "watch")
    ]
    assert node_writes == []
    status_writes = [
        r for r in apiserver.requests if r.get("resource") == "reservations" and r.get("subresource") == "status"
    ]
    assert {(r["user"], r["verb"]) for r in status_writes} == {("manager", "patch")}


def test_the_conversion_cache_reads_an_object_again_only_when_its_resource_version_changed() -> None:
    reads: list[str] = []

    def read(raw: Raw) -> str:
        reads.append(raw["metadata"]["name"])
        return f"{raw['metadata']['name']}@{raw['metadata'].get('resourceVersion')}"

    def obj(name: str, version: str | None) -> Raw:
        meta: Raw = {"name": name, "uid": f"uid-{name}"}
        if version is not None:
            meta["resourceVersion"] = version
        return {"metadata": meta}

    cache = ConversionCache()
    assert [cache.read("Pod", o, read) for o in (obj("a", "1"), obj("b", "1"), obj("c", None))] == [
        "a@1",
        "b@1",
        "c@None",
    ]
    cache.prune()
    assert len(cache) == 2  # c has no resourceVersion: never cached
    assert [cache.read("Pod", o, read) for o in (obj("a", "1"), obj("b", "2"), obj("c", None))] == [
        "a@1",
        "b@2",
        "c@None",
    ]
    assert reads == ["a", "b", "c", "b", "c"]  # a unchanged: not read again
    cache.prune()
    cache.read("Pod", obj("a", "1"), read)
    cache.prune()  # b was not listed in this round: dropped
    assert len(cache) == 1
    assert cache.read("Node", obj("a", "1"), read) == "a@1" and reads[-1] == "a"  # keyed by kind too


class CrashAfterCreate(KubeReservationApi):
    """The process dies between the create and its status write (the first status write raises)."""

    crashed = False

    async def patch_reservation_status(self, name: str, status: Mapping[str, Any]) -> Raw:
        if not self.crashed:
            self.crashed = True
            raise RuntimeError("killed")
        return await super().patch_reservation_status(name, status)


async def test_a_crash_between_create_and_status_is_adopted_and_placed_by_the_next_process(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    await cluster(api_client)
    big = await api_client.get(PODS, "big", "default")
    later = parse_rfc3339(big["metadata"]["creationTimestamp"]) + 61
    with pytest.raises(RuntimeError, match="killed"):
        await ReservationController(
            await cached_api(api_client, CrashAfterCreate), SETTINGS, clock=lambda: later
        ).run_round()
    (orphan,) = await starving_reservations(api_client)
    assert not (orphan.get("status") or {}).get("phase")  # created, never placed
    restarted = ReservationController(await cached_api(api_client), SETTINGS, clock=lambda: later + 1)
    result = await round_of(restarted)
    assert result.decision.creates == ()
    (placed,) = await starving_reservations(api_client)
    assert placed["metadata"]["uid"] == orphan["metadata"]["uid"]
    assert placed["status"]["phase"] == "Waiting" and placed["status"]["nodeName"] in ("n1", "n2")
    assert creates(apiserver) == 1
