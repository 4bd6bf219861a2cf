"""Hostile quantities end to end: NodeMetrics and node annotations carrying 1e99999999 and 1e400, in the extender's
first list and then over its watch. The extender process stays ready, /healthz keeps answering (polled
throughout), the whole run costs the extender a bounded number of CPU seconds (an exact 10**99999999 costs
minutes of CPU), /prioritize stays valid JSON, and every bad node is reported (a Warning Event in the
emulator, the koordpy_extender_invalid_nodes gauge) and filtered as unknown usage. No wall-clock bound: a
loaded machine may delay an answer, never make the extender compute more.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import orjson
import psutil
import pytest
from scenario_kit import create, create_metric, metric, node, pod, set_metric_status
from system_cluster import Cluster

from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.processes import Proc

GiB = 1 << 30
HUGE = ("1e99999999", "1e400")
RAW_ALLOCATABLE = "node.koordinator.sh/raw-allocatable"
REASON_METRIC = "node(s) nodeMetric invalid"
REASON_NODE = "node(s) Node object invalid"
CPU_BOUND = 60.0
"""CPU seconds the extender may use from its first /readyz to the end of the run (a few when healthy)."""


def _cpu_seconds(proc: Proc) -> float:
    """User + system CPU seconds of the process so far."""
    assert proc.popen is not None
    times = psutil.Process(proc.popen.pid).cpu_times()
    return float(times.user + times.system)


def _bad_metric(name: str, cpu: str, now: float) -> dict[str, Any]:
    raw = metric(name, 1000, 8 * GiB, updated=now)
    raw["status"]["nodeMetric"]["nodeUsage"]["resources"]["cpu"] = cpu
    return raw


def _annotated(name: str, cpu: str) -> dict[str, Any]:
    raw = node(name)
    raw["metadata"].setdefault("annotations", {})[RAW_ALLOCATABLE] = orjson.dumps({"cpu": cpu}).decode()
    return raw


class HealthPoller:
    """GET /healthz every 100 ms until stopped; a non-200 answer, or none within the per-request backstop
    (30 s: far beyond a loaded machine's delay, far below a frozen event loop's minutes), is a failure."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.answers = 0
        self.failures: list[str] = []
        self._stop = asyncio.Event()

    async def run(self) -> None:
        async with httpx.AsyncClient(timeout=30.0) as client:
            while not self._stop.is_set():
                try:
                    resp = await client.get(self.url)
                    if resp.status_code == 200:
                        self.answers += 1
                    else:
                        self.failures.append(f"HTTP {resp.status_code}")
                except httpx.HTTPError as exc:
                    self.failures.append(type(exc).__name__)
                await asyncio.sleep(0.1)

    def stop(self) -> None:
        self._stop.set()


async def _filter(client: httpx.AsyncClient, names: list[str]) -> dict[str, Any]:
    probe = pod("probe")
    probe["metadata"]["uid"] = "probe-uid"
    body = orjson.dumps({"Pod": probe, "Nodes": None, "NodeNames": names})
    resp = await client.post("/filter", content=body, headers={"Content-Type": "application/json"})
    assert resp.status_code == 200, resp.text
    answer: dict[str, Any] = orjson.loads(resp.content)
    return answer


async def _prioritize(client: httpx.AsyncClient, names: list[str]) -> list[dict[str, Any]]:
    probe = pod("probe")
    probe["metadata"]["uid"] = "probe-uid"
    body = orjson.dumps({"Pod": probe, "Nodes": None, "NodeNames": names})
    resp = await client.post("/prioritize", content=body, headers={"Content-Type": "application/json"})
    assert resp.status_code == 200, resp.text
    rows: list[dict[str, Any]] = orjson.loads(resp.content)  # raises on `[{...}, 0 ]`
    return rows


async def _until_failed(client: httpx.AsyncClient, expected: dict[str, str], timeout: float = HANG_BACKSTOP) -> None:
    names = sorted(expected)
    deadline = time.monotonic() + timeout
    failed: dict[str, str] = {}
    while time.monotonic() < deadline:
        failed = (await _filter(client, names))["FailedNodes"]
        if all(failed.get(name) == reason for name, reason in expected.items()):
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"extender did not fail {expected}; last FailedNodes {failed}")


@pytest.mark.system
async def test_hostile_quantities_in_first_list_and_over_the_watch(cluster: Cluster) -> None:
    now = time.time()
    first = {"m-huge": HUGE[0], "m-400": HUGE[1]}  # NodeMetric usage out of range
    annotated = {"a-huge": HUGE[0], "a-400": HUGE[1]}  # raw-allocatable annotation out of range
    good = ["good", "later-m", "later-a"]
    async with cluster.admin() as admin:
        resp = await admin.post(
            "/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}
        )
        assert resp.status_code in (200, 201, 409), resp.text
        for name in [*first, *good]:
            await create(admin, "/api/v1/nodes", node(name))
        for name, cpu in annotated.items():
            await create(admin, "/api/v1/nodes", _annotated(name, cpu))
        for name in [*annotated, *good]:
            await create_metric(admin, metric(name, 1000, 8 * GiB, updated=now))
        for name, cpu in first.items():
            await create_metric(admin, _bad_metric(name, cpu, now))

    config = cluster.extender_config()
    extender, extender_url = cluster.start_extender(config)  # waits for /readyz: the first list did not freeze it
    cpu_before = _cpu_seconds(extender)
    poller = HealthPoller(extender_url + "/healthz")
    polling = asyncio.create_task(poller.run())
    try:
        async with httpx.AsyncClient(base_url=extender_url, timeout=HANG_BACKSTOP) as client, cluster.admin() as admin:
            expected = {"good": "", **dict.fromkeys(first, REASON_METRIC), **dict.fromkeys(annotated, REASON_NODE)}
            answer = await _filter(client, sorted(expected))
            assert answer["NodeNames"] == ["good"], answer
            assert answer["FailedNodes"] == {k: v for k, v in expected.items() if v}
            rows = await _prioritize(client, sorted(expected))
            assert not {row["Host"] for row in rows} & set(first)  # score 0: left out of the answer

            # Now over the watch: a NodeMetric turns hostile, a node's annotation turns hostile.
            await set_metric_status(admin, _bad_metric("later-m", HUGE[0], time.time()))
            resp = await admin.patch(
                "/api/v1/nodes/later-a",
                json={"metadata": {"annotations": {RAW_ALLOCATABLE: orjson.dumps({"cpu": HUGE[1]}).decode()}}},
                headers={"Content-Type": "application/merge-patch+json"},
            )
            assert resp.status_code == 200, resp.text
            await _until_failed(client, {"later-m": REASON_METRIC, "later-a": REASON_NODE})
            # Keep the watch busy with hostile updates while /healthz is polled: 20 rounds, both values.
            for round_ in range(20):
                await set_metric_status(admin, _bad_metric("later-m", HUGE[round_ % 2], time.time()))
                await asyncio.sleep(0.1)
            await _until_failed(client, {"later-m": REASON_METRIC, "later-a": REASON_NODE})
            all_names = sorted([*expected, "later-m", "later-a"])
            rows = await _prioritize(client, all_names)
            assert {row["Host"] for row in rows} <= set(all_names)
            assert (await client.get("/readyz")).status_code == 200

            metrics = (await client.get("/metrics")).text
            assert 'koordpy_extender_invalid_nodes{resource="nodemetrics"} 3.0' in metrics, metrics[-2000:]
            assert 'koordpy_extender_invalid_nodes{resource="nodes"} 3.0' in metrics

            # One Warning Event per bad node, on the Node, visible in the API.
            reported: dict[str, str] = {}
            deadline = time.monotonic() + HANG_BACKSTOP
            wanted = {**dict.fromkeys([*first, "later-m"], "KoordpyInvalidNodeMetric")}
            wanted |= dict.fromkeys([*annotated, "later-a"], "KoordpyInvalidNode")
            while time.monotonic() < deadline:
                resp = await admin.get("/api/v1/namespaces/default/events")
                assert resp.status_code == 200, resp.text
                reported = {
                    e["involvedObject"]["name"]: e["reason"]
                    for e in resp.json()["items"]
                    if e["involvedObject"].get("kind") == "Node" and e.get("type") == "Warning"
                }
                if all(reported.get(k) == v for k, v in wanted.items()):
                    break
                await asyncio.sleep(0.2)
            assert {k: reported.get(k) for k in wanted} == wanted
    finally:
        poller.stop()
        await polling
    cpu_used = _cpu_seconds(extender) - cpu_before
    print(f"\n/healthz answered {poller.answers} times, failures {poller.failures}; extender CPU {cpu_used:.1f} s")
    assert poller.answers >= 10 and poller.failures == []
    assert cpu_used < CPU_BOUND, f"the extender used {cpu_used:.1f} CPU seconds on the hostile run"
