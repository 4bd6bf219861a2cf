"""The agent loop end to end: API emulator + fabricated cgroup v2 tree + fabricated procfs.

Time is driven by the test (wall and monotonic clocks are injected); nothing sleeps for a tick.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import generate_latest

from koordpy.agent.loop import Agent
from koordpy.config.agent import AgentConfiguration
from koordpy.config.errors import validate
from koordpy.kube import resources
from koordpy.model.objects import nodemetric_from_dict
from koordpy.runtime.listeners import ListenerLimits, aiohttp_handler_args
from koordpy_testkit.bounds import HANG_BACKSTOP, eventually, eventually_awaited
from koordpy_testkit.builders import NodeBuilder, PodBuilder
from koordpy_testkit.cgroupfs import FakeCgroupTree, write_procfs
from koordpy_testkit.hostile_http import dripped_head, oversized_head

GiB = 1 << 30
CPUS = 8
T0 = 1_795_000_000.0


class Node:
    """The fabricated node: cgroup tree + /proc, advanced by ``step``."""

    def __init__(self, tmp_path, pods):
        self.tree = FakeCgroupTree(tmp_path / "cgroup", version=2, driver="systemd")
        self.proc = tmp_path / "proc"
        self.rel = {}
        for raw in pods:
            uid = raw["metadata"]["uid"]
            self.rel[uid] = self.tree.add_pod(uid, qos="besteffort", containers=["c" * 64])
        self.busy = 0
        self.total = 0
        self.now = 0.0
        self.memory_used = 8 * GiB
        self._proc()

    def _proc(self):
        write_procfs(
            self.proc,
            cpus=CPUS,
            busy_jiffies=self.busy,
            total_jiffies=self.total,
            mem_total_kib=32 * GiB // 1024,
            mem_avail_kib=(32 * GiB - self.memory_used) // 1024,
        )

    def step(self, seconds: float, node_cores: float, pods: dict[str, float]):
        """Advance time; the node used ``node_cores`` and each pod uid its cores on average."""
        self.now += seconds
        jiffies = int(seconds * 100 * CPUS)
        self.total += jiffies
        self.busy += int(jiffies * node_cores / CPUS)
        self._proc()
        for uid, cores in pods.items():
            self.tree.advance_cpu(self.rel[uid], cores * seconds)


def config(tmp_path, **qos):
    return validate(
        AgentConfiguration,
        {
            "collectIntervalSeconds": 10,
            "stateDir": str(tmp_path / "state"),
            "qos": qos,
            "nodeMetric": {
                "reportIntervalSeconds": 10,
                "aggregateDurationSeconds": 30,
                "aggregationDurationsSeconds": [60],
            },
        },
    )


def objects():
    policy = {
        "apiVersion": "ensurance.crane.io/v1alpha1",
        "kind": "NodeQOSEnsurancePolicy",
        "metadata": {"name": "waterline"},
        "spec": {
            "objectiveEnsurances": [
                {
                    "name": "cpu",
                    "avoidanceThreshold": 2,
                    "restoreThreshold": 2,
                    "actionName": "throttle",
                    "metricRule": {"name": "cpu_total_usage", "value": 4000},
                },
                {"name": "mem", "actionName": "evict", "metricRule": {"name": "memory_total_usage", "value": "20Gi"}},
            ]
        },
    }
    throttle = {
        "apiVersion": "ensurance.crane.io/v1alpha1",
        "kind": "AvoidanceAction",
        "metadata": {"name": "throttle"},
        "spec": {"coolDownSeconds": 1, "throttle": {"cpuThrottle": {"minCPURatio": 0, "stepCPURatio": 50}}},
    }
    evict = {
        "apiVersion": "ensurance.crane.io/v1alpha1",
        "kind": "AvoidanceAction",
        "metadata": {"name": "evict"},
        "spec": {"coolDownSeconds": 1, "eviction": {"terminationGracePeriodSeconds": 3}},
    }
    pods = [
        PodBuilder("a").node("node-1").phase("Running").build(),
        PodBuilder("b").node("node-1").phase("Running").build(),
        PodBuilder("dns", "kube-system").node("node-1").phase("Running").build(),
    ]
    return policy, throttle, evict, pods


def make_agent(tmp_path, client, node: Node, **qos) -> Agent:
    return Agent(
        config(tmp_path, **qos),
        "node-1",
        client,
        cgroup_root=str(tmp_path / "cgroup"),
        proc_root=str(node.proc),
        wall=lambda: T0 + node.now,
        mono=lambda: node.now,
    )


async def test_throttle_restart_readopt_and_restore_exactly(apiserver, api_client, tmp_path):
    policy, throttle, evict, pods = objects()
    apiserver.seed(NodeBuilder("node-1").build(), policy, throttle, evict, *pods)
    ua, ub, udns = (p["metadata"]["uid"] for p in pods)
    node = Node(tmp_path, pods)
    agent = make_agent(tmp_path, api_client, node)
    await agent.start(sync_timeout=HANG_BACKSTOP)
    first = await agent.tick()  # first sample: no CPU deltas yet
    assert first.actions == () and any(e.reason == "MetricMissing" for e in first.events)

    busy = {ua: 3.0, ub: 1.0, udns: 1.5}
    node.step(10, 6.0, busy)
    assert (await agent.tick()).actions == ()  # one sample above: not yet consecutive enough
    node.step(10, 6.0, busy)
    fired = await agent.tick()
    # gap 6 - 4 = 2: a 3.0 -> 1.5 frees 1.5, b 1.0 -> 0.5 frees 0.5: closed. dns (kube-system) never.
    assert [(a.pod, round(a.released, 6)) for a in fired.actions] == [("default/a", 1.5), ("default/b", 0.5)]
    assert node.tree.quota(node.rel[ua]) == "150000 100000"
    assert node.tree.quota(node.rel[ub]) == "50000 100000"
    assert node.tree.quota(node.rel[udns]) == "max 100000"

    # The agent restarts: both caps are re-adopted (not restored, not forgotten).
    await agent.shutdown()
    agent = make_agent(tmp_path, api_client, node)
    await agent.start(sync_timeout=HANG_BACKSTOP)
    assert set(agent.state.throttled) == {ua, ub}
    assert node.tree.quota(node.rel[ua]) == "150000 100000"

    # Load drops for good: after 2 consecutive samples below, caps step up until they are exactly "max" again.
    calm = {ua: 0.5, ub: 0.2, udns: 0.1}
    node.step(10, 1.0, calm)
    await agent.tick()  # re-prime CPU counters after the restart
    for _ in range(12):
        node.step(10, 1.0, calm)
        await agent.tick()
    assert node.tree.quota(node.rel[ua]) == "max 100000"
    assert node.tree.quota(node.rel[ub]) == "max 100000"
    assert agent.state.throttled == {}
    assert agent.writer.originals == {}
    # Crane 1.9: a taint/condition left on the node after restore. koordpy never writes the Node at all.
    node_writes = [
        r for r in apiserver.requests if r["resource"] == "nodes" and r["verb"] not in ("get", "list", "watch")
    ]
    assert node_writes == []
    await agent.shutdown()


async def test_eviction_nodemetric_events_and_endpoints(apiserver, api_client, tmp_path):
    policy, throttle, evict, pods = objects()
    apiserver.seed(NodeBuilder("node-1").build(), policy, throttle, evict, *pods)
    ua, ub, udns = (p["metadata"]["uid"] for p in pods)
    node = Node(tmp_path, pods)
    node.tree.set_memory(node.rel[ua], 6 * GiB, 0)
    node.tree.set_memory(node.rel[ub], 1 * GiB, 0)
    node.memory_used = 22 * GiB  # line 20 GiB -> gap 2 GiB: a (6 GiB) alone closes it
    agent = make_agent(tmp_path, api_client, node)
    await agent.start(sync_timeout=HANG_BACKSTOP)
    http = TestClient(TestServer(agent.app()))
    await http.start_server()
    try:
        assert (await http.get("/readyz")).status == 503
        await agent.tick()
        node.step(10, 1.0, {ua: 0.2, ub: 0.2, udns: 0.1})
        result = await agent.tick()
        agent.ready = True
        assert [(str(a.kind), a.pod, a.grace_seconds) for a in result.actions] == [("evict", "default/a", 3)]

        async def terminating() -> Any:
            pod = await api_client.get(resources.PODS, "a", "default")
            return pod if pod["metadata"].get("deletionTimestamp") else None

        pod = await eventually_awaited(terminating, "pod a terminating")
        assert pod["metadata"]["deletionGracePeriodSeconds"] == 3
        assert not any(r["verb"] == "delete" and r["resource"] == "pods" for r in apiserver.requests)
        # Next tick: a still present (terminating): neither picked again nor is b evicted.
        node.step(10, 1.0, {ua: 0.2, ub: 0.2, udns: 0.1})
        again = await agent.tick()
        assert again.actions == ()

        assert await agent.report(force=True)
        stored = nodemetric_from_dict(await api_client.get(resources.NODEMETRICS, "node-1"))
        assert stored.node_usage is not None and stored.node_usage["memory"] == 22 * GiB
        assert {(p.namespace, p.name) for p in stored.pods} >= {("default", "b"), ("kube-system", "dns")}

        events = (await api_client.list(resources.EVENTS, namespace="default")).items
        assert any(e["reason"] == "Evicted" and e["involvedObject"]["name"] == "a" for e in events)

        assert (await http.get("/healthz")).status == 200
        assert (await http.get("/readyz")).status == 200
        text = await (await http.get("/metrics")).text()
        assert 'koordpy_agent_actions_total{kind="evict"} 1.0' in text
        assert 'koordpy_agent_evictions_total{outcome="evicted"} 1.0' in text
        assert "koordpy_agent_nodemetric_reports_total" in text
    finally:
        await http.close()
        await agent.shutdown()


async def test_corrupt_state_files_do_not_crash_loop_the_agent(apiserver, api_client, tmp_path):
    _, _, _, pods = objects()
    node = Node(tmp_path, pods)
    state = tmp_path / "state"
    state.mkdir()
    (state / "throttle-originals.json").write_text("{not json")
    (state / "policy-state.json").write_text("[]")
    agent = make_agent(tmp_path, api_client, node)
    assert agent.writer.originals == {}
    assert agent.state.throttled == {}
    assert any(p.name.startswith("throttle-originals.json.corrupt-") for p in state.iterdir())


async def test_cap_of_a_pod_that_leaves_is_not_orphaned(apiserver, api_client, tmp_path):
    policy, throttle, evict, pods = objects()
    apiserver.seed(NodeBuilder("node-1").build(), policy, throttle, evict, *pods)
    ua, ub, udns = (p["metadata"]["uid"] for p in pods)
    node = Node(tmp_path, pods)
    agent = make_agent(tmp_path, api_client, node)
    await agent.start(sync_timeout=HANG_BACKSTOP)
    await agent.tick()
    busy = {ua: 3.0, ub: 1.0, udns: 1.5}
    for _ in range(2):
        node.step(10, 6.0, busy)
        await agent.tick()
    assert set(agent.writer.originals) == {ua, ub}
    # b is deleted and its cgroup removed: the next tick drops it from the ledger and from the writer.
    await api_client.delete(resources.PODS, "b", "default", grace_period_seconds=0)
    await eventually(lambda: ub not in agent.pods, "b's deletion seen by the agent's watch")
    node.tree.remove(node.rel[ub])
    node.step(10, 6.0, {ua: 1.5, udns: 1.5})
    await agent.tick()
    assert ub not in agent.state.throttled
    assert set(agent.writer.originals) == {ua}
    await agent.shutdown()


async def test_unusable_pods_and_policies_are_skipped_and_the_ticks_go_on(apiserver, api_client, tmp_path):
    """A pod with ``limits.cpu: 1e400``, a malformed pod, a policy value out of range and one refused
    outright: each is skipped (log, metric, Event on it), while QoS and the NodeMetric go on for the rest."""
    policy, throttle, evict, pods = objects()
    huge = PodBuilder("huge").node("node-1").phase("Running").limits(cpu="1e400").build()
    malformed = PodBuilder("malformed").node("node-1").phase("Running").build()
    malformed["spec"]["containers"] = [None, 5]
    beyond = {
        **policy,
        "metadata": {"name": "beyond"},
        "spec": {
            "objectiveEnsurances": [
                {"name": "cpu", "actionName": "throttle", "metricRule": {"name": "cpu_total_usage", "value": "1e400"}}
            ]
        },
    }
    refused = {**beyond, "metadata": {"name": "refused"}}
    refused["spec"] = {
        "objectiveEnsurances": [
            {"name": "cpu", "actionName": "throttle", "metricRule": {"name": "cpu_total_usage", "value": "0"}}
        ]
    }
    apiserver.seed(NodeBuilder("node-1").build(), policy, beyond, refused, throttle, evict, *pods, huge, malformed)
    ua, ub, udns = (p["metadata"]["uid"] for p in pods)
    node = Node(tmp_path, [*pods, huge, malformed])
    agent = make_agent(tmp_path, api_client, node)
    await agent.start(sync_timeout=HANG_BACKSTOP)
    assert "refused" not in agent.policies
    assert malformed["metadata"]["uid"] not in agent.pods

    await agent.tick()
    busy = {ua: 3.0, ub: 1.0, udns: 1.5, huge["metadata"]["uid"]: 0.1, malformed["metadata"]["uid"]: 0.1}
    for _ in range(2):
        node.step(10, 6.0, busy)
        result = await agent.tick()
    # The good policy still acts on the good pods exactly as without the bad objects (gap 6 - 4 = 2).
    assert [(a.pod, round(a.released, 6)) for a in result.actions] == [("default/a", 1.5), ("default/b", 0.5)]
    assert node.tree.quota(node.rel[ua]) == "150000 100000"
    assert await agent.report(force=True)
    stored = nodemetric_from_dict(await api_client.get(resources.NODEMETRICS, "node-1"))
    assert {("default", "a"), ("default", "b")} <= {(p.namespace, p.name) for p in stored.pods}
    text = generate_latest(agent.metrics.registry).decode()
    assert "koordpy_agent_ticks_total 3.0" in text
    assert 'koordpy_agent_skipped_objects_total{kind="Pod"}' in text
    assert 'koordpy_agent_skipped_objects_total{kind="NodeQOSEnsurancePolicy"}' in text
    for _ in range(100):
        events = (await api_client.list(resources.EVENTS, namespace="default")).items
        skipped = {e["involvedObject"]["name"] for e in events if e["reason"] == "SkippedByAgent"}
        if {"malformed", "refused"} <= skipped:
            break
        await asyncio.sleep(0.02)
    assert {"malformed", "refused"} <= skipped
    refused_event = next(e for e in events if e["involvedObject"]["name"] == "refused")
    assert refused_event["involvedObject"]["kind"] == "NodeQOSEnsurancePolicy"
    assert "must be > 0" in refused_event["message"]
    await agent.shutdown()


async def test_poison_watch_events_are_skipped_and_the_listener_is_bounded(apiserver, api_client, tmp_path):
    """A malformed pod event does not stop the agent's watch; its port (served as ``koordpy agent run``
    serves it) disconnects a client that drips a head and refuses an oversized one."""
    policy, throttle, evict, pods = objects()
    apiserver.seed(NodeBuilder("node-1").build(), policy, throttle, evict, *pods)
    node = Node(tmp_path, pods)
    agent = make_agent(tmp_path, api_client, node)
    await agent.start(sync_timeout=HANG_BACKSTOP)
    pods_reflector = agent.reflectors[0]
    apiserver.inject_watch_event("pods", {"type": "MODIFIED", "object": {"metadata": "oops"}})
    late = PodBuilder("late", "default").node("node-1").build()
    await api_client.create(resources.PODS, late)
    await eventually(lambda: any(p.name == "late" for p in agent.pods.values()), "the late pod seen")
    # a pod the agent cannot convert is the agent's own skip (one log line, metric and Event), not the watch's
    garbled = PodBuilder("garbled", "default").node("node-1").requests(cpu="garbage").build()
    await api_client.create(resources.PODS, garbled)

    async def some_events() -> Any:
        return (await api_client.list(resources.EVENTS, namespace="default")).items

    events = await eventually_awaited(some_events, "an Event in default")
    assert [(e["involvedObject"]["name"], e["reason"]) for e in events] == [("garbled", "SkippedByAgent")]
    assert pods_reflector.bad_objects == {"bad_metadata": 1} and pods_reflector.errors == 0
    await agent.tick()
    agent.ready = True
    assert agent.not_ready() is None  # a skipped object is not a failure loop

    runner = web.AppRunner(agent.app(ListenerLimits(request_read_seconds=0.5)), access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        port = int(runner.addresses[0][1])
        dripped = await dripped_head("127.0.0.1", port, interval=0.05, max_bytes=2000)
        assert dripped.closed and dripped.sent < 2000
        big = await oversized_head("127.0.0.1", port, 40 * 1024 * 1024)
        assert big.closed and big.sent < 16 * 1024 * 1024
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        text = (await asyncio.wait_for(reader.read(), HANG_BACKSTOP)).decode()
        writer.close()
        assert 'koordpy_agent_watch_bad_objects_total{reason="bad_metadata",resource="pods"} 1.0' in text
        assert 'koordpy_agent_skipped_objects_total{kind="Pod"} 1.0' in text
    finally:
        await runner.cleanup()
        await agent.shutdown()


def test_the_agent_listener_takes_its_bounds_from_the_configuration(api_client, tmp_path):
    node = Node(tmp_path, [])
    agent = make_agent(tmp_path, api_client, node)
    assert agent.app()._handler_args == aiohttp_handler_args(
        ListenerLimits(max_header_bytes=65536, request_read_seconds=10.0)  # the defaults of server.*
    )


async def test_the_agent_holds_its_own_nodes_pods_and_node_only(apiserver, api_client, tmp_path):
    """Its pod and node watches are field-selected (spec.nodeName, metadata.name): pods and nodes of other
    nodes never reach it, whatever its RBAC would let it list."""
    mine = PodBuilder("mine").node("node-1").build()
    others = [PodBuilder("theirs").node("node-2").build(), PodBuilder("pending").build()]
    apiserver.seed(
        NodeBuilder("node-1").label("zone", "a").build(),
        NodeBuilder("node-2").label("zone", "b").build(),
        mine,
        *others,
    )
    agent = make_agent(tmp_path, api_client, Node(tmp_path, [mine]), enabled=False)
    await agent.start(sync_timeout=5)
    try:
        assert set(agent.pods) == {mine["metadata"]["uid"]}
        assert agent.node_labels["zone"] == "a"
        await api_client.create(resources.PODS, PodBuilder("later").node("node-2").build())
        await api_client.create(resources.PODS, PodBuilder("later-mine").node("node-1").build())
        deadline = asyncio.get_running_loop().time() + 60  # a hang backstop, not a time bound
        while len(agent.pods) < 2 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)  # and nothing else arrives behind them
        assert sorted(p.name for p in agent.pods.values()) == ["later-mine", "mine"]
    finally:
        await agent.shutdown()


async def test_events_told_longer_ago_than_the_dedup_window_are_forgotten(apiserver, api_client, tmp_path):
    """Each Event's (reason, object, message) is remembered for 300 s so it is told once; past that it is as if
    never told, and the memory of it goes: pods and their messages come and go, the memory does not grow."""
    node = Node(tmp_path, [])
    agent = make_agent(tmp_path, api_client, node)
    for i in range(5):
        await agent._emit("Throttled", f"cpu capped at {i}00m", False, f"shop/pod-{i}")
    await agent._emit("Throttled", "cpu capped at 000m", False, "shop/pod-0")  # a repeat: not told again
    assert len(agent._event_seen) == 5
    events = (await api_client.list(resources.EVENTS, namespace="default")).items
    assert len(events) == 5
    node.now += 300  # past the window: the five are forgotten once the next Event is told
    await agent._emit("Throttled", "cpu capped at 900m", False, "shop/pod-9")
    assert list(agent._event_seen) == [("Throttled", "shop/pod-9", "cpu capped at 900m")]


@pytest.mark.parametrize(("placed_ago", "repeat"), [(120.0, True), (3600.0, False)])
async def test_an_eviction_soon_after_placement_is_a_repeat_move_told_on_the_controller(
    apiserver, api_client, tmp_path, placed_ago, repeat
):
    """Pod a (of ReplicaSet web) placed 2 minutes before the agent evicts it: counted in
    koordpy_descheduler_repeat_moves_total{cause="agent_eviction"} with a RepeatMove Event on the ReplicaSet; placed
    an hour before (qos.repeatMoveWindowSeconds 600): an eviction like any other."""
    policy, throttle, evict, pods = objects()
    pods[0] = PodBuilder("a").node("node-1").phase("Running").owner("ReplicaSet", "web")
    pods[0] = pods[0].scheduled_at(T0 - placed_ago).build()
    apiserver.seed(NodeBuilder("node-1").build(), policy, throttle, evict, *pods)
    ua, ub, udns = (p["metadata"]["uid"] for p in pods)
    node = Node(tmp_path, pods)
    node.tree.set_memory(node.rel[ua], 6 * GiB, 0)
    node.memory_used = 22 * GiB  # line 20 GiB: a (6 GiB) is evicted, as in the test above
    agent = make_agent(tmp_path, api_client, node, repeatMoveWindowSeconds=600)
    await agent.start(sync_timeout=HANG_BACKSTOP)
    try:
        await agent.tick()
        node.step(10, 1.0, {ua: 0.2, ub: 0.2, udns: 0.1})
        result = await agent.tick()
        assert [a.pod for a in result.actions] == ["default/a"]

        # the RepeatMove Event follows the Evicted one, in the same task
        told_reason = "RepeatMove" if repeat else "Evicted"
        events = await eventually_awaited(lambda: _events(api_client, told_reason), f"a {told_reason} Event")
        text = generate_latest(agent.metrics.registry).decode()
        counted = 'koordpy_descheduler_repeat_moves_total{cause="agent_eviction"} 1.0' in text
        assert counted is repeat
        if repeat:
            (told,) = events
            assert (told["involvedObject"]["kind"], told["involvedObject"]["name"], told["type"]) == (
                "ReplicaSet",
                "web",
                "Warning",
            )
            assert (
                "pod default/a evicted by the koordpy agent on node node-1 130s after it was placed" in told["message"]
            )
        else:
            assert 'koordpy_descheduler_repeat_moves_total{cause="agent_eviction"} 0.0' in text
            assert await _events(api_client, "RepeatMove") is None
    finally:
        await agent.shutdown()


async def _events(api_client, reason: str) -> list[dict[str, Any]] | None:
    found = [e for e in (await api_client.list(resources.EVENTS, namespace="default")).items if e["reason"] == reason]
    return found or None
