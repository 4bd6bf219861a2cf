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
