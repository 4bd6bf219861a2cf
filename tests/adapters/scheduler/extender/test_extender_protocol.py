"""The wire protocol over real HTTP, with the exact payloads kube-scheduler sends.

Cluster used by most tests (allocatable 32 cores / 128Gi each; threshold cpu 65 %, memory 95 %):

* ``idle``: NodeMetric usage 4 cores, 32Gi   -> 12.5 % cpu
* ``hot``:  NodeMetric usage 24 cores, 32Gi  -> 75 % cpu > 65 %: fails
* ``ghost``: in the request only (unknown to the extender)

The incoming pod requests cpu 2, memory 4Gi; its estimate is 85 % of cpu = 1700m and 70 % of
memory = 2.8Gi (Go rounding: 3006477107 bytes).
"""

from __future__ import annotations

from typing import Any

import orjson

from koordpy.scheduler.framework.cluster import REASON_NODE_UNKNOWN
from koordpy_testkit import NodeBuilder, PodBuilder

FILTER_KEYS = {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}


def incoming(name: str = "web-0", scheduler: str = "koordpy-scheduler") -> dict[str, Any]:
    pod = PodBuilder(name, "shop").requests(cpu="2", memory="4Gi").scheduler(scheduler).build()
    pod["metadata"]["resourceVersion"] = "1001"
    return pod


def seed(ext: Any) -> None:
    ext.node("idle")
    ext.node("hot")
    ext.metric("idle", cpu="4", memory="32Gi")
    ext.metric("hot", cpu="24", memory="32Gi")


async def test_filter_node_cache_capable_exact_shape(ext: Any) -> None:
    seed(ext)
    args = {"Pod": incoming(), "Nodes": None, "NodeNames": ["idle", "hot", "ghost"]}
    resp = await ext.post("filter", args)
    assert resp.status_code == 200
    assert resp.headers["content-type"] == "application/json"
    result = orjson.loads(resp.content)
    assert set(result) == FILTER_KEYS
    assert result["Nodes"] is None
    assert result["NodeNames"] == ["idle"]
    assert set(result["NodeNames"]) <= set(args["NodeNames"])
    assert result["FailedNodes"] == {"hot": "node(s) cpu usage exceed threshold", "ghost": REASON_NODE_UNKNOWN}
    assert result["FailedAndUnresolvableNodes"] == {}
    assert result["Error"] == ""


async def test_filter_full_node_objects_answers_in_the_same_form(ext: Any) -> None:
    seed(ext)
    idle = NodeBuilder("idle").allocatable(cpu="32", memory="128Gi", pods="110").build()
    hot = NodeBuilder("hot").allocatable(cpu="32", memory="128Gi", pods="110").build()
    args = {"Pod": incoming(), "Nodes": {"metadata": {}, "items": [idle, hot]}, "NodeNames": None}
    resp = await ext.post("filter", args)
    assert resp.status_code == 200
    result = orjson.loads(resp.content)
    assert set(result) == FILTER_KEYS
    assert result["NodeNames"] is None
    assert result["Nodes"]["items"] == [idle]  # the object as sent, untouched
    assert result["FailedNodes"] == {"hot": "node(s) cpu usage exceed threshold"}


async def test_prioritize_is_a_bare_clamped_host_priority_list(ext: Any) -> None:
    seed(ext)
    ext.node("empty-metric")  # no NodeMetric: scores 0
    args = {"Pod": incoming(), "Nodes": None, "NodeNames": ["idle", "hot", "empty-metric", "ghost"]}
    resp = await ext.post("prioritize", args)
    assert resp.status_code == 200
    result = orjson.loads(resp.content)
    assert isinstance(result, list)
    assert all(set(entry) == {"Host", "Score"} for entry in result)
    scores = {entry["Host"]: entry["Score"] for entry in result}
    # unknown names and scores of 0 are left out (kube-scheduler adds nothing for a missing host)
    assert set(scores) == {"idle", "hot"}
    # idle: cpu (32000-5700)*100//32000 = 82; memory 32Gi+3006477107 of 128Gi -> 72; (82+72)//2 = 77 -> 7
    # hot:  cpu (32000-25700)*100//32000 = 19; memory 72; (19+72)//2 = 45 -> 4
    assert scores == {"idle": 7, "hot": 4}  # empty-metric: 0
    assert all(isinstance(s, int) and 0 <= s <= 10 for s in scores.values())


async def test_prioritize_full_node_objects(ext: Any) -> None:
    seed(ext)
    idle = NodeBuilder("idle").allocatable(cpu="32", memory="128Gi").build()
    resp = await ext.post("prioritize", {"Pod": incoming(), "Nodes": {"items": [idle]}, "NodeNames": None})
    assert orjson.loads(resp.content) == [{"Host": "idle", "Score": 7}]


async def test_prioritize_reuses_the_filter_answer_and_stays_correct(ext: Any) -> None:
    seed(ext)
    pod = incoming()
    filtered = orjson.loads(
        (await ext.post("filter", {"Pod": pod, "Nodes": None, "NodeNames": ["idle", "hot"]})).content
    )
    assert filtered["NodeNames"] == ["idle"]
    first = orjson.loads((await ext.post("prioritize", {"Pod": pod, "Nodes": None, "NodeNames": ["idle"]})).content)
    other = orjson.loads((await ext.post("prioritize", {"Pod": pod, "Nodes": None, "NodeNames": ["hot"]})).content)
    assert first == [{"Host": "idle", "Score": 7}]
    assert other == [{"Host": "hot", "Score": 4}]


async def test_empty_and_null_candidate_lists(ext: Any) -> None:
    seed(ext)
    resp = await ext.post("filter", {"Pod": incoming(), "Nodes": None, "NodeNames": []})
    assert orjson.loads(resp.content)["NodeNames"] == []
    resp = await ext.post("filter", {"Pod": incoming(), "Nodes": None, "NodeNames": None})
    assert orjson.loads(resp.content)["NodeNames"] == []
    resp = await ext.post("prioritize", {"Pod": incoming(), "Nodes": None, "NodeNames": []})
    assert orjson.loads(resp.content) == []


async def test_bind_shape_and_binding_call(ext: Any) -> None:
    seed(ext)
    pod = incoming()
    uid = pod["metadata"]["uid"]
    await ext.post("filter", {"Pod": pod, "Nodes": None, "NodeNames": ["idle"]})
    args = {"PodName": "web-0", "PodNamespace": "shop", "PodUID": uid, "Node": "idle"}
    resp = await ext.post("bind", args)
    assert resp.status_code == 200
    assert orjson.loads(resp.content) == {"Error": ""}
    assert ext.binder.calls == [("shop", "web-0", uid, "idle")]
    assert ext.extender.state.assigned[uid].node_name == "idle"


async def test_pods_of_other_schedulers_are_answered_and_counted(ext: Any) -> None:
    seed(ext)
    pod = incoming("batch-0", scheduler="default-scheduler")
    resp = await ext.post("filter", {"Pod": pod, "Nodes": None, "NodeNames": ["idle", "hot"]})
    assert orjson.loads(resp.content)["NodeNames"] == ["idle"]
    metrics = (await ext.http.get("/metrics")).text
    assert 'koordpy_extender_foreign_pods_total{verb="filter"} 1.0' in metrics


async def test_prioritize_after_filter_in_any_encoding_scores_the_request_pod(ext: Any) -> None:
    seed(ext)
    small, big = incoming("small"), incoming("big")
    big["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "16"
    filtered = orjson.loads(
        (await ext.post("filter", {"Pod": small, "Nodes": None, "NodeNames": ["idle", "hot"]})).content
    )
    assert filtered["NodeNames"] == ["idle"]
    args = {"Pod": small, "Nodes": None, "NodeNames": ["idle"]}
    compact = orjson.loads((await ext.post("prioritize", args)).content)
    spaced = orjson.loads((await ext.http.post("/prioritize", json=args)).content)  # stdlib json: ", " and ": "
    assert compact == spaced == [{"Host": "idle", "Score": 7}]
    # same names as the filter answered, another pod: its own estimate counts
    # big: cpu 4000 + 16000*85% = 17600 -> (32000-17600)*100//32000 = 45; (45+72)//2 = 58 -> 5
    other = orjson.loads((await ext.post("prioritize", {"Pod": big, "Nodes": None, "NodeNames": ["idle"]})).content)
    assert other == [{"Host": "idle", "Score": 5}]


async def test_a_node_removed_between_filter_and_prioritize_is_not_scored_by_a_reused_index(ext: Any) -> None:
    seed(ext)
    pod = incoming()
    filtered = orjson.loads(
        (await ext.post("filter", {"Pod": pod, "Nodes": None, "NodeNames": ["idle", "hot"]})).content
    )
    assert filtered["NodeNames"] == ["idle"]
    ext.extender.cache.handler("nodes")("DELETED", {"metadata": {"name": "idle"}})
    ext.node("newcomer")  # takes the freed index of "idle"
    ext.metric("newcomer", cpu="30", memory="100Gi")
    result = orjson.loads((await ext.post("prioritize", {"Pod": pod, "Nodes": None, "NodeNames": ["idle"]})).content)
    assert result == []  # "idle" is gone; "newcomer" was not asked about


async def test_verbs_over_http_answer_exactly_the_service_bytes(ext: Any) -> None:
    """The ASGI fast path adds nothing and drops nothing: the HTTP body is the service's reply, byte for byte."""
    seed(ext)
    body = orjson.dumps({"Pod": incoming(), "Nodes": None, "NodeNames": ["idle", "hot", "ghost"]})
    headers = {"Content-Type": "application/json"}
    resp = await ext.http.post("/filter", content=body, headers=headers)
    assert resp.content == ext.extender.service.filter(body).body
    assert resp.headers["content-length"] == str(len(resp.content))
    prio = orjson.dumps({"Pod": incoming(), "Nodes": None, "NodeNames": ["idle"]})
    resp = await ext.http.post("/prioritize", content=prio, headers=headers)
    assert resp.content == ext.extender.service.prioritize(prio).body
    assert resp.headers["content-type"] == "application/json"
