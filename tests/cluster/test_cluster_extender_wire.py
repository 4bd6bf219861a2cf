"""What the real kube-scheduler (the chart's KubeSchedulerConfiguration) sends the extender and what the
extender answers, as the recording proxy between them saw it: the request bodies the extender's decoder
accepts (``Pod``, ``Nodes`` null with ``nodeCacheCapable``, ``NodeNames``; the four bind fields), the call
order the extender relies on (prioritize right after the filter of the same pod, with exactly the nodes it
passed; no prioritize when one node is feasible), and answers in the exact shape Go's decoder reads.
"""

from __future__ import annotations

import pytest
from cluster_kit import Components, Kube, Space, wait_until
from extender_calls import decisions_from
from nodemetrics import FRESH_FOR_THE_RUN, populate

pytestmark = pytest.mark.cluster

FILTER_ANSWER = ["Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"]


def test_kube_scheduler_and_the_extender_speak_the_same_wire_format(
    koordpy: Components, space: Space, kube: Kube
) -> None:
    level_of = populate(space, kube, [10, 20, 90])  # the 90 % node is over the chart's 65 % cpu threshold
    cool, warm, hot = sorted(level_of, key=level_of.__getitem__)
    koordpy.start_extender(FRESH_FOR_THE_RUN)
    front = koordpy.record_extender_calls()
    koordpy.start_scheduler()
    for i in range(3):
        space.create_pod(f"any-{i}")
    space.create_pod("pinned", node_selector={"kubernetes.io/hostname": cool})  # one feasible node
    wait_until("4 pods bound", lambda: space.count_bound(4))
    wait_until("4 bind calls answered", lambda: len([e for e in front.exchanges() if e.path.endswith("/bind")]) == 4)
    exchanges = sorted(front.exchanges(), key=lambda e: e.seq)

    for exchange in exchanges:
        verb = exchange.path.rsplit("/", 1)[-1]
        body = exchange.json()
        assert exchange.method == "POST" and exchange.status == 200, exchange
        if verb in ("filter", "prioritize"):
            assert list(body) == ["Pod", "Nodes", "NodeNames"] and body["Nodes"] is None, sorted(body)
            assert body["Pod"]["metadata"]["namespace"] == space.namespace
        else:
            assert list(body) == ["PodName", "PodNamespace", "PodUID", "Node"], body
        answer = exchange.answer_json()
        if verb == "filter":
            assert list(answer) == FILTER_ANSWER and answer["Error"] == "" and answer["Nodes"] is None, answer
        elif verb == "prioritize":
            # a score of 0 is left out of the answer
            assert all(list(row) == ["Host", "Score"] and 0 < row["Score"] <= 10 for row in answer), answer
        else:
            assert answer == {"Error": ""}

    # Each prioritize call follows its pod's filter call and scores exactly the nodes that filter passed.
    previous = None
    for exchange in exchanges:
        verb = exchange.path.rsplit("/", 1)[-1]
        if verb == "prioritize":
            assert previous is not None and previous.path.endswith("/filter")
            assert previous.json()["Pod"]["metadata"]["uid"] == exchange.json()["Pod"]["metadata"]["uid"]
            assert exchange.json()["NodeNames"] == previous.answer_json()["NodeNames"]
        if verb != "bind":
            previous = exchange

    decisions = {d.pod.split("/")[1]: d for d in decisions_from(exchanges)}
    assert sorted(decisions) == ["any-0", "any-1", "any-2", "pinned"]
    for name, decision in decisions.items():
        if name == "pinned":  # kube-scheduler's own filters leave one node: no prioritize call
            assert decision.candidates == [cool] and decision.prioritize_sent is None
        else:
            assert sorted(decision.candidates) == sorted([cool, warm, hot])
            assert decision.failed == {hot: "node(s) cpu usage exceed threshold"}
            assert sorted(decision.passed) == sorted([cool, warm]) and decision.prioritize_sent is not None
        assert decision.bind_outcome == "ok" and decision.node in decision.passed
