"""``reservation.taintNodes`` against the API server emulator: the round tolerates, taints, then untaints.

Two 4-cpu nodes n1, n2, each running a 3-cpu pod ``busy-<node>``; ``big`` (2 cpu, priority 100) fits
nowhere and starves after 60 s. n1 carries a foreign taint (``dedicated=gpu:PreferNoSchedule``) that every
write must keep.
"""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.config.reservation import ReservationSettings
from koordpy.kube.client import ApiClient
from koordpy.kube.resources import NODES, PODS, RESERVATIONS
from koordpy.manager.api import KubeReservationApi
from koordpy.manager.cache import ManagerCache
from koordpy.manager.reservations import ReservationController, RoundResult, WriteRefusedError
from koordpy.model.durations import parse_rfc3339
from koordpy.scheduler.plugins.reservation.hold import TAINT, TOLERATION
from koordpy.scheduler.plugins.reservation.spec import allocated_annotations, reservation_from_dict
from koordpy_testkit.apiserver import ApiServerEmulator
from koordpy_testkit.apiserver.fixture import api_client, apiserver
from koordpy_testkit.builders import NodeBuilder, PodBuilder

__all__ = ["api_client", "apiserver"]

FOREIGN = {"key": "dedicated", "value": "gpu", "effect": "PreferNoSchedule"}
RAW: dict[str, Any] = {"enabled": True, "starvingJobTimeThreshold": 60, "reservedNodePercent": 50, "intervalSeconds": 1}
TAINTING = ReservationSettings.model_validate({**RAW, "taintNodes": True})
PLAIN = ReservationSettings.model_validate(RAW)


async def cluster(api: ApiClient) -> dict[str, Any]:
    for name in ("n1", "n2"):
        node = NodeBuilder(name).allocatable(cpu="4", memory="16Gi", pods="110").build()
        node["spec"] = {"taints": [FOREIGN]}
        await api.create(NODES, node)
        busy = PodBuilder(f"busy-{name}").requests(cpu="3", memory="1Gi").node(name).phase("Running").build()
        busy["metadata"].pop("uid")
        await api.create(PODS, busy)
    big = PodBuilder("big").requests(cpu="2", memory="1Gi").priority(100).build()
    big["metadata"].pop("uid")
    big["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    return await api.create(PODS, big)


async def cached_api(api: ApiClient) -> KubeReservationApi:
    cache = ManagerCache(api, ("pods", "reservations", "nodes", "nodemetrics", "podgroups"))
    await cache.resync()
    return KubeReservationApi(api, cache)


async def round_of(controller: ReservationController) -> RoundResult:
    """One round on freshly relisted caches (what the watches give a moment after each write)."""
    assert isinstance(controller.api, KubeReservationApi)
    await controller.api.cache.resync()
    return await controller.run_round()


async def taints(api: ApiClient) -> dict[str, list[dict[str, Any]]]:
    return {n["metadata"]["name"]: n["spec"].get("taints") or [] for n in (await api.list(NODES)).items}


async def test_the_round_holds_the_node_against_every_scheduler_then_lets_go(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    big = await cluster(api_client)
    later = parse_rfc3339(big["metadata"]["creationTimestamp"]) + 61  # past the 60 s threshold
    controller = ReservationController(await cached_api(api_client), TAINTING, clock=lambda: later)
    one = await round_of(controller)
    (res,) = (await api_client.list(RESERVATIONS)).items
    node = res["status"]["nodeName"]
    other = "n2" if node == "n1" else "n1"
    assert one.outcomes[("tolerate", "done")] == 1 and one.outcomes[("taint", "done")] == 1
    # the owner tolerates the taint (its own toleration kept), the held node carries it (the foreign one kept)
    tolerations = (await api_client.get(PODS, "big", "default"))["spec"]["tolerations"]
    assert tolerations == [{"key": "dedicated", "operator": "Exists"}, dict(TOLERATION)]
    assert await taints(api_client) == {node: [FOREIGN, dict(TAINT)], other: [FOREIGN]}

    # a second round changes nothing
    two = await round_of(controller)
    assert not any(action in ("tolerate", "taint", "untaint") for action, _ in two.outcomes)

    # big binds through the Reservation (as the extender binds): consumed, the node is let go
    await api_client.delete(PODS, f"busy-{node}", "default", grace_period_seconds=0)
    through = allocated_annotations(reservation_from_dict(res))
    await api_client.create_binding("default", "big", big["metadata"]["uid"], node, annotations=through)
    three = await round_of(controller)
    assert three.outcomes[("untaint", "done")] == 1
    assert await taints(api_client) == {node: [FOREIGN], other: [FOREIGN]}


async def test_switching_the_setting_off_removes_the_taint(api_client: ApiClient) -> None:
    big = await cluster(api_client)
    later = parse_rfc3339(big["metadata"]["creationTimestamp"]) + 61
    await round_of(ReservationController(await cached_api(api_client), TAINTING, clock=lambda: later))
    assert sum(TAINT in t for t in (await taints(api_client)).values()) == 1
    off = await round_of(ReservationController(await cached_api(api_client), PLAIN, clock=lambda: later + 1))
    assert off.outcomes[("untaint", "done")] == 1
    assert await taints(api_client) == {"n1": [FOREIGN], "n2": [FOREIGN]}


async def test_a_node_changed_since_the_list_is_not_overwritten(api_client: ApiClient) -> None:
    await cluster(api_client)
    api = await cached_api(api_client)
    listed = await api_client.get(NODES, "n1")
    # someone else changes the node after our list: our write with the old resourceVersion is refused
    await api_client.patch(NODES, "n1", {"metadata": {"labels": {"touched": "yes"}}})
    with pytest.raises(WriteRefusedError) as refused:
        await api.patch_node_taints("n1", listed["metadata"]["resourceVersion"], [FOREIGN, dict(TAINT)])
    assert refused.value.outcome == "conflict"
    assert (await taints(api_client))["n1"] == [FOREIGN]
    fresh = await api_client.get(NODES, "n1")
    written = await api.patch_node_taints("n1", fresh["metadata"]["resourceVersion"], [FOREIGN, dict(TAINT)])
    assert written["spec"]["taints"] == [FOREIGN, dict(TAINT)]
