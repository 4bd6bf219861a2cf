"""The gang bind barrier over real HTTP: quorum in /filter, held binds, batches, releases, abandon.

Gangs here use Koordinator's annotations (``gang.scheduling.koordinator.sh/*``) on pods in ``team``;
the clock is a FakeClock (advanced by hand) and the barrier's timer ticks every 20 ms so a clock
advance is acted on promptly. Holds are observed through the barrier's ``held`` table, never by time.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httpx
import orjson

from koordpy.kube.errors import ApiError
from koordpy.scheduler.extender.requeue import REQUEUE_ANNOTATION, Requeuer, TokenBucket
from koordpy.scheduler.plugins.gang import QUORUM_REFUSED, YIELD_REFUSED, keys
from koordpy.scheduler.plugins.reservation.spec import ANNOTATION_RESERVATION_ALLOCATED
from koordpy_testkit import PodBuilder
from koordpy_testkit.bounds import HANG_BACKSTOP, eventually
from koordpy_testkit.reservations import owner_pod, reservation_manifest


def member(name: str, gang: str = "g", minimum: int = 3, **annotations: str) -> dict[str, Any]:
    builder = PodBuilder(name, "team").requests(cpu="1", memory="1Gi")
    builder.annotation(keys.ANNOTATION_NAME, gang).annotation(keys.ANNOTATION_MIN_AVAILABLE, str(minimum))
    for key, value in annotations.items():
        builder.annotation(keys._PREFIX + key.replace("_", "-"), value)
    raw = builder.build()
    raw["metadata"]["resourceVersion"] = "3"
    return raw


def bind_args(raw: dict[str, Any], node: str) -> dict[str, str]:
    meta = raw["metadata"]
    return {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node}


def setup(ext: Any, *pods: dict[str, Any]) -> None:
    ext.node("n1")
    ext.node("n2")
    ext.metric("n1", cpu="1", memory="1Gi")
    ext.metric("n2", cpu="1", memory="1Gi")
    assert ext.extender.gangs is not None
    ext.extender.gangs.tick = 0.02
    for raw in pods:
        ext.pod_event("ADDED", raw)


async def until(predicate: Any, what: str) -> None:
    await eventually(predicate, what, interval=0.01)


def held(ext: Any) -> set[str]:
    return set(ext.extender.gangs.held)


async def test_filter_fails_every_node_unresolvable_until_quorum(ext: Any) -> None:
    a, b, c = member("a"), member("b"), member("c")
    setup(ext, a, b)
    resp = await ext.post("filter", {"Pod": a, "Nodes": None, "NodeNames": ["n1", "n2"]})
    body = orjson.loads(resp.content)
    # 2 pods exist, minMember 3: every node unresolvable; the reason names the gang and its minimum (no
    # count: it would change as members arrive, and kube-scheduler retries a pod whose condition changes)
    assert body["NodeNames"] == []
    refusal = QUORUM_REFUSED + "gang team/g: fewer than 3 members exist"
    assert body["FailedAndUnresolvableNodes"] == {"n1": refusal, "n2": refusal}
    plain = PodBuilder("plain", "team").requests(cpu="1").build()
    resp = await ext.post("filter", {"Pod": plain, "Nodes": None, "NodeNames": ["n1", "n2"]})
    assert orjson.loads(resp.content)["NodeNames"] == ["n1", "n2"]  # a pod in no gang is not touched
    ext.pod_event("ADDED", c)
    resp = await ext.post("filter", {"Pod": a, "Nodes": None, "NodeNames": ["n1", "n2"]})
    assert orjson.loads(resp.content)["NodeNames"] == ["n1", "n2"]


async def test_binds_are_held_until_the_whole_gang_is_held_then_all_bind(ext: Any) -> None:
    a, b, c = member("a"), member("b"), member("c")
    setup(ext, a, b, c)
    first = asyncio.create_task(ext.post("bind", bind_args(a, "n1")))
    second = asyncio.create_task(ext.post("bind", bind_args(b, "n2")))
    await until(lambda: held(ext) == {"team/a", "team/b"}, "two held binds")
    assert not first.done() and not second.done()
    assert ext.binder.calls == []  # nothing bound while the gang is short
    # the held placement counts at once (load-aware estimates see it)
    assert ext.extender.state.assigned[a["metadata"]["uid"]].node_name == "n1"
    view = (await ext.http.get("/debug/gangs/team/g")).json()
    assert [h["pod"] for h in view["held"]] == ["team/a", "team/b"]
    assert view["permit"]["verdict"] == "wait"
    third = await ext.post("bind", bind_args(c, "n1"))
    assert third.json() == {"Error": ""}
    assert (await first).json() == {"Error": ""} and (await second).json() == {"Error": ""}
    assert sorted(call[1] for call in ext.binder.calls) == ["a", "b", "c"]
    metrics = (await ext.http.get("/metrics")).text
    assert "koordpy_extender_gang_held_binds 0.0" in metrics
    assert 'koordpy_extender_gang_wait_seconds_count{outcome="bound"} 3.0' in metrics


async def test_wait_time_expiry_answers_error_and_unassumes(ext: Any) -> None:
    a, b, c = member("a", waiting_time="30s"), member("b"), member("c")
    setup(ext, a, b, c)
    task = asyncio.create_task(ext.post("bind", bind_args(a, "n1")))
    await until(lambda: held(ext) == {"team/a"}, "a held")
    ext.clock.advance(31)  # 31 s > the gang's 30 s wait time
    reply = (await task).json()
    assert "waited 30s" in reply["Error"]
    assert ext.binder.calls == []
    assert a["metadata"]["uid"] not in ext.extender.state.assigned  # un-assumed: kube-scheduler retries it
    assert 'koordpy_extender_gang_releases_total{cause="expired"} 1.0' in (await ext.http.get("/metrics")).text


async def test_answer_deadline_renews_before_the_binder_timeout(make_ext: Any) -> None:
    ext = await make_ext()
    a = member("a", waiting_time="1h")  # first writer: the gang waits 3600 s, longer than the binder timeout
    setup(ext, a, member("b"), member("c"))
    args = ext.extender.gangs.args
    task = asyncio.create_task(ext.post("bind", bind_args(a, "n1")))
    await until(lambda: held(ext) == {"team/a"}, "a held")
    # default binder timeout 660 s − margin 5 s = 655 s: answered then, before kube-scheduler gives up
    ext.clock.advance(args.binder_http_timeout_seconds - args.binder_answer_margin_seconds)
    reply = (await task).json()
    assert "before kube-scheduler's binder timeout" in reply["Error"]
    assert ext.binder.calls == []
    # kube-scheduler retries 10 s later: the wait clock is kept (3600 − 655 − 10 = 2935 s left)
    ext.clock.advance(10)
    retry = asyncio.create_task(ext.post("bind", bind_args(a, "n1")))
    await until(lambda: held(ext) == {"team/a"}, "a held again")
    left = (await ext.http.get("/debug/gangs/team/g")).json()["held"][0]["waitLeftSeconds"]
    assert left == 3600 - 655 - 10
    ext.extender.gangs.cache.delete_pod("team", "a")
    ext.extender.gangs.pump()
    assert "was deleted" in (await retry).json()["Error"]


async def test_an_abandoned_request_is_never_bound(ext: Any) -> None:
    a, b, c = member("a", mode="NonStrict"), member("b"), member("c")
    setup(ext, a, b, c)
    async with httpx.AsyncClient(base_url=ext.url, timeout=HANG_BACKSTOP) as impatient:
        request = asyncio.create_task(
            impatient.post(
                "/bind", content=orjson.dumps(bind_args(a, "n1")), headers={"Content-Type": "application/json"}
            )
        )
        await until(lambda: held(ext) == {"team/a"}, "a held")
        assert not request.done(), "the held bind answered before the gang was complete"
        request.cancel()  # the client gives up (as kube-scheduler's timeout does): its connection closes
        with contextlib.suppress(asyncio.CancelledError):
            await request
    await until(lambda: "team/a" not in held(ext), "a's abandoned hold dropped")
    second = asyncio.create_task(ext.post("bind", bind_args(b, "n2")))
    third = asyncio.create_task(ext.post("bind", bind_args(c, "n1")))
    await until(lambda: held(ext) == {"team/b", "team/c"}, "b and c held")
    # only b and c are held: 2 of 3, the gang waits; a is never bound from its abandoned request
    assert ext.binder.calls == []
    assert not second.done() and not third.done()
    assert 'koordpy_extender_gang_releases_total{cause="abandoned"} 1.0' in (await ext.http.get("/metrics")).text
    for name in ("b", "c"):
        ext.extender.gangs.cache.delete_pod("team", name)
    ext.extender.gangs.pump()
    assert "was deleted" in (await second).json()["Error"]
    assert "was deleted" in (await third).json()["Error"]
    assert ext.binder.calls == []


async def test_strict_member_failure_releases_every_held_member(ext: Any) -> None:
    a, b, c = member("a"), member("b"), member("c")
    setup(ext, a, b, c)
    tasks = [asyncio.create_task(ext.post("bind", bind_args(p, "n1"))) for p in (a, b)]
    await until(lambda: held(ext) == {"team/a", "team/b"}, "two held binds")
    failed = member("c")
    failed["status"]["conditions"] = [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/2 nodes are available: 2 Insufficient cpu.",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    ]
    ext.pod_event("MODIFIED", failed)
    replies = [(await t).json() for t in tasks]
    assert all("team/c failed scheduling" in r["Error"] for r in replies), replies
    assert ext.binder.calls == []


async def test_our_own_quorum_refusal_is_not_a_scheduling_failure(ext: Any) -> None:
    a, b = member("a"), member("b")
    setup(ext, a, b)
    resp = await ext.post("filter", {"Pod": a, "Nodes": None, "NodeNames": ["n1", "n2"]})
    reason = orjson.loads(resp.content)["FailedAndUnresolvableNodes"]["n1"]
    refused = member("a")
    refused["status"]["conditions"] = [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": f"0/2 nodes are available: 2 {reason}.",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    ]
    ext.pod_event("MODIFIED", refused)
    ext.pod_event("ADDED", member("c"))
    tasks = [asyncio.create_task(ext.post("bind", bind_args(p, "n1"))) for p in (a, b)]
    assert (await ext.post("bind", bind_args(member("c"), "n2"))).json() == {"Error": ""}
    assert [(await t).json() for t in tasks] == [{"Error": ""}, {"Error": ""}]


async def test_a_binding_that_keeps_failing_is_retried_and_the_partial_gang_reported(ext: Any) -> None:
    a, b = member("a", minimum=2), member("b", minimum=2)
    setup(ext, a, b)
    original = ext.binder.create_binding

    async def flaky(namespace: str, name: str, uid: str, node: str, *, annotations: Any = None) -> Any:
        if name == "b":
            ext.binder.calls.append((namespace, name, uid, node))
            raise ApiError(500, "InternalError", "etcd is unhappy")
        return await original(namespace, name, uid, node, annotations=annotations)

    ext.binder.create_binding = flaky
    ext.extender.gangs.retry_delay = 0.01
    first = asyncio.create_task(ext.post("bind", bind_args(a, "n1")))
    await until(lambda: held(ext) == {"team/a"}, "a held")
    reply_b = (await ext.post("bind", bind_args(b, "n2"))).json()
    assert (await first).json() == {"Error": ""}
    assert "binding team/b to n2 failed" in reply_b["Error"]
    assert [call[1] for call in ext.binder.calls].count("b") == 3  # bounded retries
    metrics = (await ext.http.get("/metrics")).text
    assert "koordpy_extender_gang_partial_binds_total 1.0" in metrics
    assert "koordpy_extender_gang_binding_retries_total 2.0" in metrics


async def test_podgroup_watch_feeds_the_gang(ext: Any) -> None:
    handler = ext.extender.gangs.podgroup_handler("scheduling.sigs.k8s.io")
    setup(ext)
    pod = PodBuilder("w0", "team").label(keys.LABEL_POD_GROUP, "job").requests(cpu="1").build()
    ext.pod_event("ADDED", pod)
    resp = await ext.post("filter", {"Pod": pod, "Nodes": None, "NodeNames": ["n1"]})
    assert orjson.loads(resp.content)["NodeNames"] == []  # the PodGroup does not exist yet
    handler("ADDED", {"metadata": {"name": "job", "namespace": "team"}, "spec": {"minMember": 1}})
    resp = await ext.post("filter", {"Pod": pod, "Nodes": None, "NodeNames": ["n1"]})
    assert orjson.loads(resp.content)["NodeNames"] == ["n1"]
    gangs = (await ext.http.get("/debug/gangs")).json()["gangs"]
    assert [g["id"] for g in gangs] == ["team/job"] and gangs[0]["minMember"] == 1
    assert (await ext.http.get("/debug/gangs/team/nope")).status_code == 404


class FakeEvents:
    def __init__(self) -> None:
        self.posted: list[tuple[str, str, str]] = []

    async def create_event(self, involved_object: Any, **kw: Any) -> None:
        self.posted.append((involved_object["metadata"]["name"], kw["reason"], kw["message"]))


async def test_nonstrict_deadlock_releases_one_gang_with_an_event(ext: Any) -> None:
    """One node of 2 cpu; gangs x and y (NonStrict, min 2, 1 cpu per member) each hold one member on it:
    free 2 − 1 − 1 = 0, x1 and y1 fit nowhere, releasing either gang lets the other's pending member fit."""
    ext.node("small", cpu="2", memory="8Gi")
    ext.metric("small", cpu="0", memory="1Gi")
    gangs = ext.extender.gangs
    gangs.tick = 0.02
    gangs.events = FakeEvents()
    pods = {}
    for gang in ("x", "y"):
        for i in range(2):
            raw = member(f"{gang}{i}", gang=gang, minimum=2, mode="NonStrict")
            raw["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1"
            pods[f"{gang}{i}"] = raw
            ext.pod_event("ADDED", raw)
    tasks = {n: asyncio.create_task(ext.post("bind", bind_args(pods[n], "small"))) for n in ("x0", "y0")}
    await until(lambda: held(ext) == {"team/x0", "team/y0"}, "x0 and y0 held")
    gangs.resolve_deadlock()
    done = await until_one(tasks)
    assert "deadlock" in done[1].json()["Error"]
    await until(lambda: len(gangs.events.posted) == 1, "one Event")
    name, reason, _ = gangs.events.posted[0]
    assert (name, reason) == (done[0], "GangDeadlockReleased")
    assert 'koordpy_extender_gang_releases_total{cause="deadlock"} 1.0' in (await ext.http.get("/metrics")).text
    for other in tasks.values():
        other.cancel()


async def test_a_member_the_watch_showed_while_held_is_unassumed_when_released(ext: Any) -> None:
    """The watch re-records a held member's placement on each event it shows for the pod (here a label
    added while it is held): the release must still free the node. The reproduction: left behind, the
    placement filled the node for good and no later deadlock could be found."""
    a, b, c = member("a", waiting_time="30s"), member("b"), member("c")
    setup(ext, a, b, c)
    task = asyncio.create_task(ext.post("bind", bind_args(a, "n1")))
    await until(lambda: held(ext) == {"team/a"}, "a held")
    uid = a["metadata"]["uid"]
    assert ext.extender.state.assigned[uid].node_name == "n1"  # the hold's placement counts
    changed = {**a, "metadata": {**a["metadata"], "labels": {"touched": "yes"}, "resourceVersion": "4"}}
    ext.pod_event("MODIFIED", changed)
    assert ext.extender.state.assigned[uid].labels == {"touched": "yes"}  # re-recorded from the event
    ext.clock.advance(31)  # 31 s > the gang's 30 s wait time
    assert "waited 30s" in (await task).json()["Error"]
    assert uid not in ext.extender.state.assigned
    ext.pod_event("MODIFIED", {**changed, "metadata": {**changed["metadata"], "resourceVersion": "5"}})
    assert uid not in ext.extender.state.assigned  # a later event of the pending pod does not bring it back


async def test_the_deadlock_victim_yields_at_filter_until_the_helped_gang_binds(ext: Any) -> None:
    """Gangs x and y (NonStrict, min 2, 1 cpu per member) each hold one member on the one 2-cpu node; x's
    PodGroup-less gang is older only by id, so y (the greater id) is released. y's members are refused at
    /filter (yielding to x) while x holds a member; once x binds whole, y's refused members are woken."""
    ext.node("small", cpu="2", memory="8Gi")
    ext.metric("small", cpu="0", memory="1Gi")
    gangs = ext.extender.gangs
    gangs.tick = 0.02
    gangs.events = FakeEvents()
    patcher = with_patcher(ext)
    pods = {}
    for gang in ("x", "y"):
        for i in range(2):
            raw = member(f"{gang}{i}", gang=gang, minimum=2, mode="NonStrict")
            pods[f"{gang}{i}"] = raw
            ext.pod_event("ADDED", raw)
    tasks = {n: asyncio.create_task(ext.post("bind", bind_args(pods[n], "small"))) for n in ("x0", "y0")}
    await until(lambda: held(ext) == {"team/x0", "team/y0"}, "x0 and y0 held")
    gangs.resolve_deadlock()
    assert "deadlock" in (await tasks["y0"]).json()["Error"]
    assert gangs.cache.yielding() == {"team/y": ("team/x",)}
    assert (await ext.http.get("/debug/gangs/team/y")).json()["yieldingTo"] == ["team/x"]
    for name in ("y0", "y1"):
        resp = await ext.post("filter", {"Pod": pods[name], "Nodes": None, "NodeNames": ["small"]})
        body = orjson.loads(resp.content)
        assert body["NodeNames"] == []
        assert body["FailedAndUnresolvableNodes"]["small"].startswith(YIELD_REFUSED + "gang group team/y ")
    resp = await ext.post("filter", {"Pod": pods["x1"], "Nodes": None, "NodeNames": ["small"]})
    refusals = " ".join(orjson.loads(resp.content)["FailedAndUnresolvableNodes"].values())
    assert YIELD_REFUSED not in refusals and QUORUM_REFUSED not in refusals  # the helped gang is admitted
    x1 = asyncio.create_task(ext.post("bind", bind_args(pods["x1"], "small")))
    assert (await x1).json()["Error"] == "" and (await tasks["x0"]).json()["Error"] == ""
    await until(lambda: gangs.cache.yielding() == {}, "the yield over")
    await until(lambda: requeues(ext, "patched") == 2.0, "y0 and y1 woken")
    assert {(call[0], call[1]) for call in patcher.calls} == {SIGNAL}  # the signal object, never a pod
    resp = await ext.post("filter", {"Pod": pods["y1"], "Nodes": None, "NodeNames": ["small"]})
    refusals = " ".join(orjson.loads(resp.content)["FailedAndUnresolvableNodes"].values())
    assert YIELD_REFUSED not in refusals  # admitted again (the node itself is full now)


async def until_one(tasks: dict[str, asyncio.Task[Any]]) -> tuple[str, Any]:
    await asyncio.wait(tasks.values(), return_when=asyncio.FIRST_COMPLETED, timeout=HANG_BACKSTOP)
    finished = [(n, t.result()) for n, t in tasks.items() if t.done()]
    assert len(finished) == 1, finished
    return finished[0]


async def test_a_gang_member_bound_through_its_reservation_carries_the_record(ext: Any) -> None:
    """Reservation ``r-a`` on n1 is owned by member a: a's held binding carries Koordinator's
    reservation-allocated record when the gang binds; b, bound outside every reservation, carries none."""
    a, b = member("a", minimum=2), member("b", minimum=2)
    setup(ext, a, b)
    raw = reservation_manifest("r-a", node="n1", owners=[owner_pod("team", "a")], created=ext.clock.now() - 60, cpu="1")
    ext.extender.cache.handler("reservations")("ADDED", raw)
    first = asyncio.create_task(ext.post("bind", bind_args(a, "n1")))
    await until(lambda: held(ext) == {"team/a"}, "a held")
    assert (await ext.post("bind", bind_args(b, "n2"))).json() == {"Error": ""}
    assert (await first).json() == {"Error": ""}
    by_pod = {call[1]: annotations for call, annotations in zip(ext.binder.calls, ext.binder.annotations, strict=True)}
    record = f'{{"name":"r-a","uid":"{raw["metadata"]["uid"]}"}}'
    assert by_pod == {"a": {ANNOTATION_RESERVATION_ALLOCATED: record}, "b": {}}
    assert ext.extender.gangs.annotations == {}  # nothing kept once answered


SIGNAL = ("koordpy-system", "koordpy-gang-requeue")
"""``gang.requeueSignal`` of the test configuration."""


def requeues(ext: Any, outcome: str) -> float:
    """``koordpy_extender_gang_requeues_total{outcome}``: members counted by what became of their request."""
    value = ext.extender.registry.get_sample_value("koordpy_extender_gang_requeues_total", {"outcome": outcome})
    return float(value or 0.0)


class FakePatcher:
    """Records patches (namespace, name, body, resource plural); ``fail_with`` is raised when set."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.resources: list[str] = []
        self.fail_with: ApiError | None = None

    async def patch(self, resource: Any, name: str, patch: Any, *, namespace: str | None = None, **_: Any) -> Any:
        self.calls.append((str(namespace), name, patch))
        self.resources.append(resource.plural)
        if self.fail_with is not None:
            raise self.fail_with
        return {}


def with_patcher(ext: Any, qps: float | None = None, burst: int | None = None) -> FakePatcher:
    """The barrier's requeuer patches through a FakePatcher; with ``qps``/``burst`` its token bucket runs
    on a hand-advanced clock (``ext.requeue_time[0]``), so pacing is checked without measuring time."""
    patcher = FakePatcher()
    requeuer = ext.extender.gangs.requeuer
    requeuer.patcher = lambda: patcher
    if qps is not None and burst is not None:
        ext.requeue_time = [0.0]
        requeuer.monotonic = lambda: ext.requeue_time[0]
        requeuer.qps = qps
        requeuer.bucket = TokenBucket(qps, burst, 0.0)
    return patcher


async def test_the_late_member_wakes_the_refused_ones_with_one_write_of_the_signal(ext: Any) -> None:
    """The reproduction (minMember 2; a, then b 2 s later): a was refused at quorum and kube-scheduler
    will not retry it on b's creation. b's arrival makes the extender update its requeue signal (a
    CSIStorageCapacity of its own, an event kube-scheduler retries a on), once; a itself is not written."""
    a, b = member("a", minimum=2), member("b", minimum=2)
    setup(ext, a)
    patcher = with_patcher(ext)
    resp = await ext.post("filter", {"Pod": a, "Nodes": None, "NodeNames": ["n1", "n2"]})
    assert orjson.loads(resp.content)["NodeNames"] == []
    assert (await ext.http.get("/debug/gangs/team/g")).json()["parked"] == ["team/a"]
    ext.pod_event("ADDED", b)
    await until(lambda: len(patcher.calls) == 1, "the signal written")
    namespace, name, body = patcher.calls[0]
    assert (namespace, name, list(body["metadata"]["annotations"])) == (*SIGNAL, [REQUEUE_ANNOTATION])
    assert patcher.resources == ["csistoragecapacities"]
    ext.pod_event("MODIFIED", b)  # more events of the complete gang: no second request
    await asyncio.sleep(0.05)
    assert len(patcher.calls) == 1
    metrics = (await ext.http.get("/metrics")).text
    assert 'koordpy_extender_gang_requeues_total{outcome="patched"} 1.0' in metrics
    assert "koordpy_extender_gang_requeue_pending 0.0" in metrics


async def test_one_write_asks_for_every_waiting_member_and_writes_are_paced(ext: Any) -> None:
    """Burst 1 at 1 per second. Gang g completes: its 3 parked members go with one write. Gang h completes
    at once after: no token, its 3 members wait; one that kube-scheduler retries on its own meanwhile (it
    passes /filter) is dropped. A second later the other two go with the second write."""
    g = [member(f"g{i}", gang="g", minimum=4) for i in range(4)]
    h = [member(f"h{i}", gang="h", minimum=4) for i in range(4)]
    setup(ext, *g[:3], *h[:3])
    patcher = with_patcher(ext, qps=1.0, burst=1)
    for raw in (*g[:3], *h[:3]):
        resp = await ext.post("filter", {"Pod": raw, "Nodes": None, "NodeNames": ["n1"]})
        assert orjson.loads(resp.content)["NodeNames"] == []
    ext.pod_event("ADDED", g[3])
    await until(lambda: len(patcher.calls) == 1, "g's write")
    assert requeues(ext, "patched") == 3.0
    requeuer = ext.extender.gangs.requeuer
    ext.pod_event("ADDED", h[3])
    await until(lambda: len(requeuer.pending) == 3, "h's members pending")
    await asyncio.sleep(0.05)
    assert len(patcher.calls) == 1  # no token yet
    resp = await ext.post("filter", {"Pod": h[2], "Nodes": None, "NodeNames": ["n1"]})
    assert orjson.loads(resp.content)["NodeNames"] == ["n1"]
    assert list(requeuer.pending) == ["team/h0", "team/h1"]
    ext.requeue_time[0] = 1.0  # one second on the bucket's clock: one more token
    await until(lambda: len(patcher.calls) == 2, "h's write")
    assert requeues(ext, "patched") == 5.0 and requeues(ext, "dropped") == 1.0
    assert requeuer.pending == {} and requeuer.writes == 2 and requeuer.peak_in_flight == 1
    assert {(c[0], c[1]) for c in patcher.calls} == {SIGNAL}


async def test_a_refused_write_is_counted_and_not_retried(ext: Any) -> None:
    a, b = member("a", minimum=2), member("b", minimum=2)
    setup(ext, a)
    patcher = with_patcher(ext)
    patcher.fail_with = ApiError(403, "Forbidden", "csistoragecapacities is forbidden")
    await ext.post("filter", {"Pod": a, "Nodes": None, "NodeNames": ["n1"]})
    ext.pod_event("ADDED", b)
    await until(lambda: requeues(ext, "forbidden") == 1.0, "counted")
    assert len(patcher.calls) == 1


async def test_without_a_signal_nothing_is_written_and_requests_count_as_off(ext: Any) -> None:
    gangs = ext.extender.gangs
    old = gangs.requeuer
    gangs.requeuer = Requeuer(qps=50, burst=100, patcher=old.patcher, log=old.log, metrics=old.metrics, signal=None)
    a, b = member("a", minimum=2), member("b", minimum=2)
    setup(ext, a)
    patcher = with_patcher(ext)
    await ext.post("filter", {"Pod": a, "Nodes": None, "NodeNames": ["n1"]})
    ext.pod_event("ADDED", b)
    await until(lambda: requeues(ext, "off") == 1.0, "counted as off")
    assert patcher.calls == []


async def test_a_member_the_watch_has_not_shown_is_counted_and_held(ext: Any) -> None:
    """On a real cluster kube-scheduler filters and binds a new pod before the extender's watch shows it.
    The quorum test and the barrier read membership from the request, so the member is held, not bound
    alone (which would also mark the gang satisfied once and let every later member bind alone)."""
    a, b, c = member("a"), member("b"), member("c")
    setup(ext, a)  # the watch has shown only a
    for raw in (b, c):
        resp = await ext.post("filter", {"Pod": raw, "Nodes": None, "NodeNames": ["n1", "n2"]})
    # b: 2 of 3 (refused); c: 3 of 3 counting a, b and c itself
    assert orjson.loads(resp.content)["NodeNames"] == ["n1", "n2"]
    task = asyncio.create_task(ext.post("bind", bind_args(c, "n1")))
    await until(lambda: held(ext) == {"team/c"}, "c held, not bound")
    assert ext.binder.calls == []
    task.cancel()


async def test_a_restarted_extender_recognises_the_refusals_its_predecessor_left(make_ext: Any) -> None:
    """A Strict gang of 3: a and b held; c's condition says a quorum refusal from before the restart
    (this process never refused c). It is not a failure: a and b stay held and bind with c."""
    ext = await make_ext()
    a, b, c = member("a"), member("b"), member("c")
    setup(ext, a, b, c)
    tasks = [asyncio.create_task(ext.post("bind", bind_args(p, "n1"))) for p in (a, b)]
    await until(lambda: held(ext) == {"team/a", "team/b"}, "a and b held")
    refused = member("c")
    refused["status"]["conditions"] = [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": f"0/2 nodes are available: 2 {QUORUM_REFUSED}gang team/g: fewer than 3 members exist. "
            "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    ]
    ext.pod_event("MODIFIED", refused)
    await asyncio.sleep(0.05)
    assert held(ext) == {"team/a", "team/b"}
    assert (await ext.post("bind", bind_args(c, "n2"))).json() == {"Error": ""}
    assert [(await t).json() for t in tasks] == [{"Error": ""}, {"Error": ""}]


async def test_volcano_podgroup_watch_feeds_the_gang(ext: Any) -> None:
    """A ``scheduling.volcano.sh/v1beta1`` PodGroup; its members join with Volcano's annotation. Its queue is
    not honoured: said once in the log, the gang is scheduled as if it had none."""
    handler = ext.extender.gangs.podgroup_handler("scheduling.volcano.sh")
    setup(ext)
    logged: list[tuple[str, dict[str, Any]]] = []
    log = ext.extender.gangs.log
    original = log.warning
    log.warning = lambda event, **kw: logged.append((event, kw))  # type: ignore[method-assign]
    try:
        pods = [PodBuilder(f"v{i}", "team").annotation("scheduling.k8s.io/group-name", "job").build() for i in range(2)]
        for raw in pods:
            ext.pod_event("ADDED", raw)
        body = {"metadata": {"name": "job", "namespace": "team"}, "spec": {"minMember": 2, "queue": "research"}}
        handler("ADDED", body)
        handler("MODIFIED", body)
    finally:
        log.warning = original  # type: ignore[method-assign]
    assert logged == [
        (
            "gang.podgroup_fields_ignored",
            {"podgroup": "team/job", "api": "scheduling.volcano.sh", "fields": ["spec.queue=research"]},
        )
    ]
    resp = await ext.post("filter", {"Pod": pods[0], "Nodes": None, "NodeNames": ["n1"]})
    assert orjson.loads(resp.content)["NodeNames"] == ["n1"]  # 2 of 2 members exist
    view = (await ext.http.get("/debug/gangs/team/job")).json()
    assert (view["minMember"], view["matchPolicy"]) == (2, "waiting-and-running")
