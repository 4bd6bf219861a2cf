"""System scenarios: real component processes, one API emulator process, the kube-scheduler driver.

Cluster shape shared by the scenarios: nodes of 16 cpu / 64 GiB; pods request 800m / 2 GiB, so the
default estimator (85 % cpu, 70 % memory) estimates 680m / 1434 MiB per pod; the chart's default
thresholds are cpu 65 %, memory 95 %. A node reporting u % cpu takes pods while
round((u % × 16000 + k × 680) / 16000 × 100) ≤ 65, e.g. u = 5 → k ≤ 14, u = 61 → k ≤ 1, u ≥ 69 → 0.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import httpx
import orjson
import pytest
import yaml
from loadaware_oracle import final_usage, sandwich_violations, score_mismatches
from scenario_kit import (
    NODEMETRICS,
    PODS_PATH,
    BusyProc,
    bound_pods,
    create,
    create_metric,
    driver_for,
    metric,
    node,
    pod,
    set_metric_status,
    start_agent,
)
from system_cluster import Cluster

from koordpy.config.scheduler import SchedulerConfiguration
from koordpy.model.quantity import resource_value
from koordpy_testkit.bounds import HANG_BACKSTOP

GiB = 1 << 30
CPU_MILLI = 16000
LEVELS = [5 + 8 * k for k in range(10)]  # reported cpu %, 5 .. 77
REASON_EXPIRED = "node(s) nodeMetric expired"


async def _populate(
    cluster: Cluster, count: int, now: float, level_of: dict[str, int]
) -> tuple[list[dict], list[dict]]:
    nodes = [node(f"node-{i:02d}") for i in range(count)]
    metrics = []
    async with cluster.admin() as admin:
        resp = await admin.post(
            "/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}
        )
        assert resp.status_code in (200, 201, 409), resp.text
        for i, raw in enumerate(nodes):
            name = raw["metadata"]["name"]
            level_of[name] = LEVELS[i % len(LEVELS)]
            await create(admin, "/api/v1/nodes", raw)
            m = metric(name, CPU_MILLI * level_of[name] // 100, 64 * GiB * 30 // 100, updated=now)
            await create_metric(admin, m)
            metrics.append(m)
    return nodes, metrics


async def _wait_extender_rejects(
    extender_url: str, node_name: str, reason: str, timeout: float = HANG_BACKSTOP
) -> None:
    """Ask the extender's /filter (as kube-scheduler would) until it fails ``node_name`` for ``reason``."""
    probe = pod("probe")
    probe["metadata"]["uid"] = "probe-uid"
    body = {"Pod": probe, "Nodes": None, "NodeNames": [node_name]}
    deadline = time.monotonic() + timeout
    last: object = None
    async with httpx.AsyncClient(base_url=extender_url, timeout=HANG_BACKSTOP) as client:
        while time.monotonic() < deadline:
            resp = await client.post(
                "/filter", content=orjson.dumps(body), headers={"Content-Type": "application/json"}
            )
            last = resp.json()
            if resp.status_code == 200 and (last.get("FailedNodes") or {}).get(node_name) == reason:
                return
            await asyncio.sleep(0.1)
    raise AssertionError(f"the extender never failed {node_name} with {reason!r}; last answer {last}")


async def _extender_requests(extender_url: str) -> dict[tuple[str, str], int]:
    """``koordpy_extender_requests_total`` from the extender's /metrics: (verb, outcome) → count (non-zero only)."""
    async with httpx.AsyncClient(base_url=extender_url, timeout=HANG_BACKSTOP) as client:
        text = (await client.get("/metrics")).text
    out: dict[tuple[str, str], int] = {}
    for line in text.splitlines():
        if line.startswith("koordpy_extender_requests_total{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}", 1)[0]))
            count = int(float(line.rsplit(" ", 1)[1]))
            if count:
                out[(labels["verb"], labels["outcome"])] = count
    return out


def _binding_calls(cluster: Cluster) -> Counter[str]:
    """Per pod name: how many ``create pods/binding`` requests the extender made (from the emulator record)."""
    return Counter(
        call.name
        for call in cluster.recorded_calls()
        if call.user == "extender"
        and call.resource == "pods"
        and call.subresource == "binding"
        and call.verb == "create"
    )


@pytest.mark.system
async def test_load_aware_placement_on_50_nodes(cluster: Cluster) -> None:
    """(a) 50 nodes at 5..77 % cpu, 200 pods: decisions match the plugin oracle, no node over its threshold."""
    now = time.time()
    level_of: dict[str, int] = {}
    nodes, metrics = await _populate(cluster, 50, now, level_of)
    config_path = cluster.extender_config()
    _, extender_url = cluster.start_extender(config_path)
    config = SchedulerConfiguration.model_validate(yaml.safe_load(config_path.read_text()))

    driver = driver_for(cluster.chart.kube_scheduler_config(), cluster.url, extender_url)
    async with driver, cluster.admin() as admin:
        created = {}
        for i in range(200):
            raw = await create(admin, PODS_PATH, pod(f"web-{i:03d}"))
            created[raw["metadata"]["uid"]] = raw
        await driver.wait_until(
            lambda: len(driver.bound()) == 200 and not driver.binds_in_flight(), HANG_BACKSTOP, "all 200 pods bound"
        )
        final = await bound_pods(admin)
        served = await _extender_requests(extender_url)

    stats = driver.stats
    assert stats.errors == {} and stats.binds_failed == 0, stats.as_dict()
    assert stats.binds_ok == 200
    assert stats.noncanonical_keys == [] and stats.extender_scores_out_of_range == 0
    assert len(final) == 200
    # Every call the driver made reached the extender and was answered "ok" (its own /metrics).
    assert served == {(verb, "ok"): 200 for verb in ("filter", "prioritize", "bind")}, served
    # Every placement was among the nodes the extender's filter passed in that cycle.
    for d in driver.decisions:
        if d.node is not None:
            assert d.node in d.passed and d.node not in d.failed and d.node not in d.unresolvable, d
    # The extender's filter answers agree with the plugin oracle, given what it could have known.
    problems, checked = sandwich_violations(driver.decisions, created, nodes, metrics, config, time.time())
    assert problems == []
    assert checked >= 200
    # ... and the oracle is discriminating: with a 50 % cpu threshold it disagrees with these answers.
    stricter = config.model_copy(
        update={"load_aware": config.load_aware.model_copy(update={"usage_thresholds": {"cpu": 50, "memory": 95}})}
    )
    wrong, _ = sandwich_violations(driver.decisions, created, nodes, metrics, stricter, time.time())
    assert wrong
    # Prioritize answers (0..10) agree with the plugin's extender score, bracketed the same way.
    mismatched, compared, exact = score_mismatches(driver.decisions, created, nodes, metrics, config, time.time())
    assert mismatched == []
    assert compared >= 200 and exact >= compared // 2, (compared, exact)
    # No node pushed past its threshold; hot nodes took fewer pods than cold ones.
    usage = final_usage(config, nodes, metrics, final, time.time())
    per_node = Counter(p["spec"]["nodeName"] for p in final)
    over = {name: u.over() for name, u in usage.items() if per_node[name] and u.over()}
    assert over == {}
    per_level = Counter()
    for name, level in level_of.items():
        per_level[level] += per_node[name]
    print(
        f"\n(a) pods per cpu level {dict(sorted(per_level.items()))}; oracle checked {checked}, host scores {compared} ({exact} pinned); {stats.as_dict()}"
    )
    assert per_level[69] == 0 and per_level[77] == 0
    assert per_level[5] > per_level[29] > per_level[53], per_level
    # Exactly one binding request per pod reached the API.
    bindings = _binding_calls(cluster)
    assert sorted(bindings.values()) == [1] * 200


@pytest.mark.system
async def test_stale_nodemetric_gets_no_pods(cluster: Cluster) -> None:
    """(b) the coldest node's NodeMetric goes stale mid-run: from then on it receives no pods."""
    now = time.time()
    level_of: dict[str, int] = {}
    _nodes, _metrics = await _populate(cluster, 10, now, level_of)
    _, extender_url = cluster.start_extender(cluster.extender_config())
    driver = driver_for(cluster.chart.kube_scheduler_config(), cluster.url, extender_url)
    async with driver, cluster.admin() as admin:
        for i in range(20):
            await create(admin, PODS_PATH, pod(f"before-{i:02d}"))
        await driver.wait_until(lambda: len(driver.bound()) == 20, HANG_BACKSTOP, "first 20 pods bound")
        before = Counter(driver.bound().values())
        assert before["node-00"] > 0, before  # the coldest node was taking pods while its metric was fresh

        stale = metric("node-00", CPU_MILLI * 5 // 100, 64 * GiB * 30 // 100, updated=now - 3600)
        resp = await admin.patch(
            f"{NODEMETRICS}/node-00/status",
            json={"status": {"updateTime": stale["status"]["updateTime"]}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert resp.status_code == 200, resp.text
        # Wait until the extender's own filter calls node-00 expired (the watch delivered the update).
        await _wait_extender_rejects(extender_url, "node-00", REASON_EXPIRED)
        first_new = len(driver.decisions)
        for i in range(20):
            await create(admin, PODS_PATH, pod(f"after-{i:02d}"))
        await driver.wait_until(
            lambda: len(driver.bound()) == 40 and not driver.binds_in_flight(), HANG_BACKSTOP, "all 40 pods bound"
        )
        final = await bound_pods(admin)

    print(f"\n(b) before {dict(before)}; after {dict(Counter(driver.bound().values()))}; {driver.stats.as_dict()}")
    after = [p for p in final if p["metadata"]["name"].startswith("after-")]
    assert len(after) == 20
    assert [p["metadata"]["name"] for p in after if p["spec"]["nodeName"] == "node-00"] == []
    later = driver.decisions[first_new:]
    assert later and all("node-00" in d.candidates for d in later)  # it still fits by requests
    assert all(d.failed.get("node-00") == REASON_EXPIRED for d in later)
    assert driver.stats.errors == {}


@pytest.mark.system
async def test_extender_killed_and_restarted(cluster: Cluster) -> None:
    """(c) SIGKILL the extender mid-run and restart it: failures while down, then exactly-once bindings."""
    now = time.time()
    level_of: dict[str, int] = {}
    nodes, metrics = await _populate(cluster, 30, now, level_of)
    config_path = cluster.extender_config()
    proc, extender_url = cluster.start_extender(config_path)
    config = SchedulerConfiguration.model_validate(yaml.safe_load(config_path.read_text()))
    driver = driver_for(cluster.chart.kube_scheduler_config(), cluster.url, extender_url)
    total = 150
    async with driver, cluster.admin() as admin:
        created = {}
        for i in range(100):
            raw = await create(admin, PODS_PATH, pod(f"job-{i:03d}"))
            created[raw["metadata"]["uid"]] = raw
        await driver.wait_until(lambda: len(driver.bound()) >= 40, HANG_BACKSTOP, "40 pods bound before the kill")
        proc.kill()
        bound_at_kill = len(driver.bound())
        errors_at_kill = sum(driver.stats.errors.values())
        for i in range(100, total):  # more pods arrive while the extender is down
            raw = await create(admin, PODS_PATH, pod(f"job-{i:03d}"))
            created[raw["metadata"]["uid"]] = raw
        await driver.wait_until(
            lambda: driver.stats.errors["filter"] >= 2,
            HANG_BACKSTOP,
            "the driver sees filter failures while the extender is down",
        )
        bound_while_down = len(driver.bound())
        await asyncio.sleep(1.0)
        cluster.restart(proc, extender_url + "/readyz")
        await driver.wait_until(
            lambda: len(driver.bound()) == total and not driver.binds_in_flight(),
            HANG_BACKSTOP,
            f"all {total} pods bound after the restart",
        )
        final = await bound_pods(admin)

    stats = driver.stats
    print(
        f"\n(c) bound at kill {bound_at_kill}, when failures seen {bound_while_down}; binding requests {sum(_binding_calls(cluster).values())}; "
        f"{stats.as_dict()}"
    )
    assert sum(stats.errors.values()) > errors_at_kill
    assert len(driver.bound()) > bound_while_down
    # Every pod bound exactly once: one node each, and no pod got two successful binding requests.
    assert len(final) == total
    assert len({p["metadata"]["uid"] for p in final}) == total
    ok_binds = Counter(d.uid for d in driver.decisions if d.bind_outcome == "ok")
    assert max(ok_binds.values()) == 1, ok_binds.most_common(3)
    bindings = _binding_calls(cluster)
    assert set(bindings) == {p["metadata"]["name"] for p in final}
    # A repeated binding request (the emulator answers 409 to it) only follows a bind the driver saw fail.
    assert sum(1 for n in bindings.values() if n > 1) <= stats.binds_failed
    # The restarted extender rebuilt its cache: its filter answers agree with the oracle before and after
    # the restart, and no node ends over its threshold.
    problems, checked = sandwich_violations(driver.decisions, created, nodes, metrics, config, time.time())
    assert problems == []
    assert checked >= total
    usage = final_usage(config, nodes, metrics, final, time.time())
    per_node = Counter(p["spec"]["nodeName"] for p in final)
    over = {name: u.over() for name, u in usage.items() if per_node[name] and u.over()}
    assert over == {}


@pytest.mark.system
async def test_agent_report_steers_the_extender(cluster: Cluster, tmp_path: Path) -> None:
    """(d) the agent (fabricated cgroup v2 tree + /proc) reports its node; when it turns hot, pods stop going there."""
    now = time.time()
    level_of: dict[str, int] = {}
    await _populate(cluster, 4, now, level_of)  # node-00..03 at 5..29 % from the test's own NodeMetrics
    async with cluster.admin() as admin:
        for name in level_of:  # raise the others to 40 %: the agent's node (10 %) is the coldest
            warm = metric(name, CPU_MILLI * 40 // 100, 64 * GiB * 30 // 100, updated=now)
            await set_metric_status(admin, warm)
        await create(admin, "/api/v1/nodes", node("node-agent"))
    cluster.start_manager({"nodeMetric": {"reportIntervalSeconds": 1, "aggregateDurationSeconds": 1}})
    busy = BusyProc(tmp_path / "proc", cpus=16, mem_total_kib=64 * 1024 * 1024, mem_avail_kib=48 * 1024 * 1024)
    ticker = asyncio.ensure_future(busy.run())
    try:
        start_agent(cluster, "node-agent", tmp_path, busy)
        _, extender_url = cluster.start_extender(cluster.extender_config())
        async with cluster.admin() as admin:
            # The agent's report (10 % of 16 cpu) reaches the API and the extender.
            await _wait_metric(admin, "node-agent", lambda cpu: cpu < 3000)
            driver = driver_for(cluster.chart.kube_scheduler_config(), cluster.url, extender_url)
            async with driver:
                for i in range(6):
                    await create(admin, PODS_PATH, pod(f"cold-{i}"))
                await driver.wait_until(
                    lambda: len(driver.bound()) == 6 and not driver.binds_in_flight(), HANG_BACKSTOP, "6 pods bound"
                )
                cold = Counter(driver.bound().values())
                assert cold["node-agent"] > 0, cold  # the coldest node, by the agent's own report

                busy.busy_fraction = 0.9  # the node turns hot: 14.4 of 16 cpu busy
                await _wait_metric(admin, "node-agent", lambda cpu: cpu > 12000)
                await _wait_extender_rejects(extender_url, "node-agent", "node(s) cpu usage exceed threshold")
                first_hot = len(driver.decisions)
                for i in range(6):
                    await create(admin, PODS_PATH, pod(f"hot-{i}"))
                await driver.wait_until(
                    lambda: len(driver.bound()) == 12 and not driver.binds_in_flight(), HANG_BACKSTOP, "12 pods bound"
                )
                final = await bound_pods(admin)
    finally:
        ticker.cancel()
    print(f"\n(d) cold phase {dict(cold)}; final {dict(Counter(p['spec']['nodeName'] for p in final))}")
    hot = [p for p in final if p["metadata"]["name"].startswith("hot-")]
    assert len(hot) == 6 and all(p["spec"]["nodeName"] != "node-agent" for p in hot)
    assert all(
        d.failed.get("node-agent") == "node(s) cpu usage exceed threshold"
        for d in driver.decisions[first_hot:]
        if "node-agent" in d.candidates
    )


async def _wait_metric(
    admin: httpx.AsyncClient, name: str, cpu_ok: Callable[[int], bool], timeout: float = HANG_BACKSTOP
) -> None:
    """Wait until the NodeMetric's reported cpu (millicores) satisfies ``cpu_ok``."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        resp = await admin.get(f"{NODEMETRICS}/{name}")
        if resp.status_code == 200:
            last = resp.json().get("status")
            usage = ((last or {}).get("nodeMetric") or {}).get("nodeUsage", {}).get("resources", {})
            if "cpu" in usage and cpu_ok(resource_value("cpu", usage["cpu"])):
                return
        await asyncio.sleep(0.2)
    raise AssertionError(f"NodeMetric {name}: cpu never matched; last status {last}")
