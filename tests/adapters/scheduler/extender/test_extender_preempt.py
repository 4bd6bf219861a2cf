"""The preempt verb over real HTTP: kube-scheduler's candidates, minus where preempting cannot help or would loop.

Nodes ``held`` and ``free`` (8 cpu each; ``free`` has a NodeMetric, ``held`` none). ``held`` runs ``x``
(2 cpu) and the victim ``v`` (3 cpu) and carries Reservation ``r1`` (Available, 4 cpu, owners: pods
labelled ``job=big``); ``free`` runs the victim ``w`` (3 cpu). For a pod that does not own r1, with ``v``
gone: free on held = 8 - 2 - 4 = 2 cpu.
"""

from __future__ import annotations

from typing import Any

import orjson

from koordpy.scheduler.plugins.reservation.hold import TAINT
from koordpy_testkit import NodeBuilder, PodBuilder
from koordpy_testkit.reservations import owner_labels, reservation_manifest


def pod(name: str, cpu: str, *, owner: bool = False, nominated: str = "") -> dict[str, Any]:
    builder = PodBuilder(name, "default").requests(cpu=cpu).priority(1000)
    if owner:
        builder = builder.label("job", "big")
    raw = builder.build()
    raw["metadata"]["resourceVersion"] = "1"
    if nominated:
        raw["status"]["nominatedNodeName"] = nominated
    return raw


def uid(name: str) -> str:
    return str(PodBuilder(name, "default").build()["metadata"]["uid"])


def seed(ext: Any, *, taint_held: bool = False) -> None:
    for name in ("held", "free"):
        node = NodeBuilder(name).allocatable(cpu="8", memory="32Gi", pods="110").build()
        if taint_held and name == "held":
            node["spec"] = {"taints": [dict(TAINT)]}
        ext.extender.cache.handler("nodes")("ADDED", node)
    ext.metric("free", cpu="1", memory="4Gi")
    for name, node, cpu in (("x", "held", "2"), ("v", "held", "3"), ("w", "free", "3")):
        ext.pod_event("ADDED", PodBuilder(name).requests(cpu=cpu).node(node).phase("Running").build())
    raw = reservation_manifest(
        "r1", node="held", owners=[owner_labels(job="big")], created=ext.clock.now() - 60, cpu="4"
    )
    ext.extender.cache.handler("reservations")("ADDED", raw)


CANDIDATES = {
    "held": {"Pods": [{"UID": uid("v")}], "NumPDBViolations": 0},
    "free": {"Pods": [{"UID": uid("w")}], "NumPDBViolations": 1},
}


async def preempt(ext: Any, raw: dict[str, Any], candidates: dict[str, Any] = CANDIDATES) -> dict[str, Any]:
    resp = await ext.post("preempt", {"Pod": raw, "NodeNameToVictims": None, "NodeNameToMetaVictims": candidates})
    assert resp.status_code == 200, resp.text
    result: dict[str, Any] = orjson.loads(resp.content)["NodeNameToMetaVictims"]
    return result


async def refused(ext: Any) -> dict[str, float]:
    text = (await ext.http.get("/metrics")).text
    out = {}
    for line in text.splitlines():
        if line.startswith("koordpy_extender_preemption_nodes_refused_total{"):
            reason = line.split('reason="', 1)[1].split('"', 1)[0]
            out[reason] = float(line.rsplit(" ", 1)[1])
    return out


async def test_a_node_whose_room_stays_reserved_is_no_candidate(ext: Any) -> None:
    seed(ext)
    # 3 cpu: with v gone 2 cpu are free for it on held → refused there; free is kept with its victims as sent
    assert await preempt(ext, pod("p", "3")) == {"free": CANDIDATES["free"]}
    # 2 cpu: 2 ≤ 2, preempting v helps
    assert await preempt(ext, pod("q", "2")) == CANDIDATES
    assert (await refused(ext))["reserved"] == 1


async def test_an_owner_preempts_only_on_its_reservations_node(ext: Any) -> None:
    seed(ext)
    assert await preempt(ext, pod("big-0", "4", owner=True)) == {"held": CANDIDATES["held"]}
    assert (await refused(ext))["not_reserved_node"] == 1


async def test_a_pod_that_lost_a_node_to_another_scheduler_does_not_preempt_for_the_back_off(ext: Any) -> None:
    seed(ext)
    small = {"free": CANDIDATES["free"]}
    assert await preempt(ext, pod("p", "1"), small) == small  # first preemption: offered
    # kube-scheduler preempted on free and nominated it; the victims went, free still does not fit:
    # another scheduler took the room. p preempts nowhere for preemptionBackoffSeconds (120 s default)
    assert await preempt(ext, pod("p", "1", nominated="free"), CANDIDATES) == {}
    ext.clock.advance(119)
    assert await preempt(ext, pod("p", "1", nominated="free"), small) == {}
    assert await preempt(ext, pod("other", "1"), small) == small  # per pod
    ext.clock.advance(1)
    assert await preempt(ext, pod("p", "1", nominated="free"), small) == small  # back-off over, offered again
    assert (await refused(ext))["backoff"] == 3  # held and free, then free


async def test_the_owners_tainted_node_is_exempt_from_the_back_off(ext: Any) -> None:
    # held carries koordpy's hold taint: nobody without the toleration can refill it, no loop possible
    seed(ext, taint_held=True)
    owner = pod("big-0", "4", owner=True, nominated="held")
    home = {"held": CANDIDATES["held"]}
    assert await preempt(ext, owner, home) == home
    assert await preempt(ext, owner, home) == home


async def test_full_victim_pods_are_read_and_answered_as_uids(ext: Any) -> None:
    seed(ext)
    victims = {"free": {"Pods": [PodBuilder("w").requests(cpu="3").node("free").build()], "NumPDBViolations": 0}}
    resp = await ext.post(
        "preempt", {"Pod": pod("p", "3"), "NodeNameToVictims": victims, "NodeNameToMetaVictims": None}
    )
    assert orjson.loads(resp.content) == {
        "NodeNameToMetaVictims": {"free": {"Pods": [{"UID": uid("w")}], "NumPDBViolations": 0}}
    }


async def test_a_malformed_request_is_a_400(ext: Any) -> None:
    seed(ext)
    resp = await ext.post("preempt", {"Pod": pod("p", "3"), "NodeNameToMetaVictims": {"held": {"Pods": [{}]}}})
    assert resp.status_code == 400
    assert "Pods[0]: UID required string" in orjson.loads(resp.content)["Error"]


def gang_member(name: str, node: str, minimum: int = 4) -> dict[str, Any]:
    """A running member of Koordinator's annotation gang ``train`` (minimum ``minimum``), 1 cpu."""
    builder = PodBuilder(name).requests(cpu="1").node(node).phase("Running")
    builder = builder.annotation("gang.scheduling.koordinator.sh/name", "train")
    return builder.annotation("gang.scheduling.koordinator.sh/min-available", str(minimum)).build()


async def test_victims_that_would_break_a_running_gang_are_no_candidate(ext: Any) -> None:
    """A gang of four running (minimum 4): t0 and t1 on free, t2 and t3 on held2. Preempting t0 leaves
    4-1 = 3 < 4 running: free is refused. On held2 the victims are t2, t3 and the plain pod: 4-2 = 2 < 4,
    refused too. The same gang with minimum 2: 4-2 = 2 >= 2, both kept."""
    for name in ("free", "held2"):
        ext.node(name, cpu="8")
        ext.metric(name, cpu="1", memory="4Gi")
    for raw in (
        gang_member("t0", "free"),
        gang_member("t1", "free"),
        gang_member("t2", "held2"),
        gang_member("t3", "held2"),
    ):
        ext.pod_event("ADDED", raw)
    ext.pod_event("ADDED", PodBuilder("plain").requests(cpu="1").node("held2").phase("Running").build())
    candidates = {
        "free": {"Pods": [{"UID": uid("t0")}], "NumPDBViolations": 0},
        "held2": {"Pods": [{"UID": uid("t2")}, {"UID": uid("t3")}, {"UID": uid("plain")}], "NumPDBViolations": 0},
    }
    assert await preempt(ext, pod("p", "6"), candidates) == {}
    assert (await refused(ext))["gang"] == 2
    # the same pods in a gang of minimum 2 (an annotation gang takes its first member's minimum: the
    # members leave, and come back with the new annotation)
    placed = list(enumerate(("free", "free", "held2", "held2")))
    for i, node in placed:
        ext.pod_event("DELETED", gang_member(f"t{i}", node))
    for i, node in placed:
        ext.pod_event("ADDED", gang_member(f"t{i}", node, minimum=2))
    assert await preempt(ext, pod("p", "6"), candidates) == candidates


async def test_victims_that_take_a_whole_gang_are_a_candidate(ext: Any) -> None:
    """Every running member of the gang on one node and all of them victims: the gang is disrupted
    whole (4-4 = 0 left), its replacements are gang-scheduled again: kept. One pending member changes
    nothing (it does not run)."""
    ext.node("free", cpu="8")
    ext.metric("free", cpu="1", memory="4Gi")
    for i in range(4):
        ext.pod_event("ADDED", gang_member(f"t{i}", "free"))
    pending = PodBuilder("t4").requests(cpu="1").annotation("gang.scheduling.koordinator.sh/name", "train")
    ext.pod_event("ADDED", pending.annotation("gang.scheduling.koordinator.sh/min-available", "4").build())
    whole = {"free": {"Pods": [{"UID": uid(f"t{i}")} for i in range(4)], "NumPDBViolations": 0}}
    assert await preempt(ext, pod("p", "6"), whole) == whole
    assert (await refused(ext))["gang"] == 0
