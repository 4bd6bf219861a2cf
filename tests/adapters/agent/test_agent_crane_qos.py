"""The agent watches Crane v0.8+ NodeQOS and PodQOS: Crane's own example pair drives evictions,
the PodQOS limits them to BestEffort pods, and problems become Warning Events on the objects.

Fixture: tests/fixtures/crane/be-rules.yaml (cpu_total_usage above 5000 milliCPU for 2 consecutive
samples runs AvoidanceAction ``eviction``; PodQOS ``all-be-pods`` allows it on BestEffort pods only).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import yaml
from test_agent_loop import Node, make_agent  # same directory (pytest prepend import mode)

from koordpy.kube import resources
from koordpy_testkit.bounds import HANG_BACKSTOP, eventually
from koordpy_testkit.builders import NodeBuilder, PodBuilder

CRANE = Path(__file__).resolve().parents[2] / "fixtures" / "crane" / "be-rules.yaml"


def crane_objects() -> list[dict]:
    return list(yaml.safe_load_all(CRANE.read_text()))


async def wait_for(predicate, what: str):
    """Poll the async ``predicate`` until it returns something truthy; the hang backstop only."""
    loop = asyncio.get_running_loop()
    end = loop.time() + HANG_BACKSTOP
    while not (value := await predicate()):
        assert loop.time() < end, f"{what}: not reached after {HANG_BACKSTOP:.0f} s (hang backstop)"
        await asyncio.sleep(0.02)
    return value


async def test_nodeqos_and_podqos_evict_only_besteffort_pods(apiserver, api_client, tmp_path):
    web = PodBuilder("web").requests(cpu="2").node("node-1").phase("Running").build()  # Burstable
    be = PodBuilder("be").node("node-1").phase("Running").build()  # BestEffort
    broken = {
        "apiVersion": "ensurance.crane.io/v1alpha1",
        "kind": "NodeQOS",
        "metadata": {"name": "broken"},
        "spec": {
            "rules": [
                {
                    "name": "r",
                    "actionName": "disablescheduling",
                    "metricRule": {"name": "cpu_total_usage", "value": 9000},
                }
            ]
        },
    }
    # Crane's disable-scheduling action has neither eviction nor throttle: koordpy cannot run it.
    disable = {
        "apiVersion": "ensurance.crane.io/v1alpha1",
        "kind": "AvoidanceAction",
        "metadata": {"name": "disablescheduling"},
        "spec": {"coolDownSeconds": 300, "description": "disable schedule new pods to the node"},
    }
    apiserver.seed(NodeBuilder("node-1").build(), *crane_objects(), broken, disable, web, be)
    uweb, ube = web["metadata"]["uid"], be["metadata"]["uid"]
    node = Node(tmp_path, [web, be])
    agent = make_agent(tmp_path, api_client, node)
    await agent.start(sync_timeout=HANG_BACKSTOP)
    try:
        assert set(agent.node_qos) == {"eviction-on-high-usage", "broken"}
        assert set(agent.pod_qos) == {"all-be-pods"}
        first = await agent.tick()  # CPU needs two samples: no value yet
        assert first.actions == ()
        # node 6.5 cores > line 5 -> gap 1.5; web uses 3 cores (Burstable), be 1 core (BestEffort).
        node.step(10, 6.5, {uweb: 3.0, ube: 1.0})
        above_once = await agent.tick()
        assert above_once.actions == ()  # avoidanceThreshold 2
        node.step(10, 6.5, {uweb: 3.0, ube: 1.0})
        fired = await agent.tick()
        assert [(str(a.kind), a.pod) for a in fired.actions] == [("evict", "default/be")]
        assert fired.candidates["evict"] == ("default/be",)  # web is not a candidate at all
        assert any(e.reason == "GapNotClosed" for e in fired.events)  # 1.5 - 1.0 left: web still untouched

        pod = await wait_for(lambda: _terminating(api_client, "be"), "the BestEffort pod's eviction")
        assert pod["metadata"]["name"] == "be"
        web_now = await api_client.get(resources.PODS, "web", "default")
        assert not web_now["metadata"].get("deletionTimestamp")

        async def warning_events():
            items = (await api_client.list(resources.EVENTS, namespace="default")).items
            return [e for e in items if e["involvedObject"].get("kind") == "NodeQOS"]

        events = await wait_for(warning_events, "the Warning Event on NodeQOS broken")
        assert {(e["involvedObject"]["name"], e["reason"], e["type"]) for e in events} == {
            ("broken", "UnsupportedAction", "Warning")
        }
        assert "neither evicts nor throttles CPU" in events[0]["message"]
        # The warning is recorded once, not every tick.
        node.step(10, 6.5, {uweb: 3.0, ube: 1.0})
        await agent.tick()
        assert agent.check_qos_objects() == []
    finally:
        await agent.shutdown()


async def _terminating(api_client, name: str):
    pod = await api_client.get(resources.PODS, name, "default")
    return pod if pod["metadata"].get("deletionTimestamp") else None


async def test_deleting_the_podqos_stops_the_evictions(apiserver, api_client, tmp_path):
    be = PodBuilder("be").node("node-1").phase("Running").build()
    # Exists is a core ScopeSelectorOperator, but Crane evaluates only In/NotIn: refused, with an Event.
    invalid = {
        "apiVersion": "ensurance.crane.io/v1alpha1",
        "kind": "PodQOS",
        "metadata": {"name": "invalid"},
        "spec": {
            "allowedActions": ["eviction"],
            "scopeSelector": {"matchExpressions": [{"scopeName": "QOSClass", "operator": "Exists", "values": ["x"]}]},
        },
    }
    apiserver.seed(NodeBuilder("node-1").build(), *crane_objects(), invalid, be)
    node = Node(tmp_path, [be])
    agent = make_agent(tmp_path, api_client, node)
    await agent.start(sync_timeout=HANG_BACKSTOP)
    try:
        await api_client.delete(resources.PODQOSS, "all-be-pods")
        await eventually(lambda: not agent.pod_qos, "the PodQOS deletion seen by the agent")
        assert agent.pod_qos == {}
        await agent.tick()
        for _ in range(2):
            node.step(10, 6.5, {be["metadata"]["uid"]: 1.0})
            result = await agent.tick()
        assert result.actions == ()  # Crane v0.8+: no PodQOS allows eviction -> no candidate
        assert any(w.reason == "NoPodAllowed" for w in agent.qos_warnings)

        async def invalid_events():
            items = (await api_client.list(resources.EVENTS, namespace="default")).items
            return [e for e in items if e["involvedObject"].get("name") == "invalid"]

        (event,) = await wait_for(invalid_events, "the SkippedByAgent Event")
        assert (event["involvedObject"]["kind"], event["reason"], event["type"]) == (
            "PodQOS",
            "SkippedByAgent",
            "Warning",
        )
        assert event["message"].startswith("koordpy-agent cannot use this object:")
        assert "spec.scopeSelector.matchExpressions[0].operator" in event["message"]
        assert "unknown operator 'Exists'" in event["message"]
    finally:
        await agent.shutdown()
