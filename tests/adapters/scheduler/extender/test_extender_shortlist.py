"""``extender.shortlistNodes``: ``/filter`` passes only the nodes koordpy scores highest, in request order."""

from __future__ import annotations

from typing import Any

import orjson

from koordpy_testkit import PodBuilder


async def test_filter_passes_the_best_scored_nodes_only_and_prioritize_scores_them(make_ext: Any) -> None:
    """Six 32-cpu nodes used 2, 16, 4, 14, 6 and 12 cpu: load-aware scores the idle ones highest, so a
    shortlist of 3 is n0, n2, n4 (used 2, 4, 6), in the request's order; /prioritize then gets those."""
    ext = await make_ext(shortlistNodes=3)
    used = {"n0": "2", "n1": "16", "n2": "4", "n3": "14", "n4": "6", "n5": "12"}
    for name, cpu in used.items():
        ext.node(name)
        ext.metric(name, cpu=cpu, memory="8Gi")
    pod = PodBuilder("web", "team").requests(cpu="1", memory="1Gi").build()
    order = ["n5", "n4", "n3", "n2", "n1", "n0"]
    resp = await ext.post("filter", {"Pod": pod, "Nodes": None, "NodeNames": order})
    body = orjson.loads(resp.content)
    assert body["NodeNames"] == ["n4", "n2", "n0"]
    assert body["FailedNodes"] == {} and body["FailedAndUnresolvableNodes"] == {}
    resp = await ext.post("prioritize", {"Pod": pod, "Nodes": None, "NodeNames": body["NodeNames"]})
    assert sorted(entry["Host"] for entry in orjson.loads(resp.content)) == ["n0", "n2", "n4"]


async def test_no_shortlist_passes_every_feasible_node(make_ext: Any) -> None:
    ext = await make_ext()
    for name in ("n0", "n1", "n2"):
        ext.node(name)
        ext.metric(name, cpu="2", memory="8Gi")
    pod = PodBuilder("web", "team").requests(cpu="1", memory="1Gi").build()
    resp = await ext.post("filter", {"Pod": pod, "Nodes": None, "NodeNames": ["n2", "n0", "n1"]})
    assert orjson.loads(resp.content)["NodeNames"] == ["n2", "n0", "n1"]
