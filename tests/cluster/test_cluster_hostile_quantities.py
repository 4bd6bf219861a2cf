"""Quantities no parser should expand, stored by the real API server and served to the extender: NodeMetric
usage of ``1e99999999`` and ``1e400`` (the CRD's quantity pattern admits both: the API server stores what
matches it and never parses it) and the same values in a Node's ``node.koordinator.sh/raw-allocatable``
annotation (a free string), first in the extender's initial list, then over its watch.

The extender becomes ready, keeps answering /healthz throughout, its /prioritize stays valid JSON, every bad
node is reported (a Warning Event on the Node, the ``koordpy_extender_invalid_nodes`` gauge) and filtered as
unknown usage, and the whole hostile phase costs the extender a bounded amount of CPU time (expanding one
of these numbers would take minutes and hundreds of MB).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import orjson
import psutil
import pytest
from cluster_kit import Components, Kube, Space, wait_until
from nodemetrics import GiB, report

from koordpy.model.durations import format_rfc3339

pytestmark = pytest.mark.cluster

HUGE = ("1e99999999", "1e400")
RAW_ALLOCATABLE = "node.koordinator.sh/raw-allocatable"
REASON_METRIC = "node(s) nodeMetric invalid"
REASON_NODE = "node(s) Node object invalid"
CPU_SECONDS_BOUND = 60.0
"""CPU seconds the extender may spend from its start to the end of the hostile phase (it takes a few)."""


def hostile_report(kube: Kube, node: str, cpu: str) -> None:
    """A fresh report whose cpu usage is ``cpu`` (the NodeMetric created first when missing)."""
    if kube.get("NodeMetric", node) is None:
        report(kube, node, 1000, memory=8 * GiB)
    usage = {"nodeUsage": {"resources": {"cpu": cpu, "memory": str(8 * GiB)}}}
    status = {"updateTime": format_rfc3339(time.time()), "nodeMetric": usage}
    kube.patch("NodeMetric", node, {"status": status}, subresource="status")


class HealthPoller(threading.Thread):
    """GET /healthz every 100 ms until stopped; an error or a non-200 answer is a failure (the timeout is a
    hang backstop, not a latency bound)."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.answers = 0
        self.failures: list[str] = []
        self.halt = threading.Event()

    def run(self) -> None:
        with httpx.Client(timeout=60) as client:
            while not self.halt.wait(0.1):
                try:
                    resp = client.get(self.url)
                    if resp.status_code == 200:
                        self.answers += 1
                    else:
                        self.failures.append(f"HTTP {resp.status_code}")
                except httpx.HTTPError as exc:
                    self.failures.append(type(exc).__name__)


def verb(koordpy: Components, name: str, nodes: list[str]) -> Any:
    probe = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe", "namespace": "probe", "uid": "probe-uid"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]},
    }
    resp = httpx.post(
        f"{koordpy.extender_base}/{name}",
        content=orjson.dumps({"Pod": probe, "Nodes": None, "NodeNames": nodes}),
        headers={"Content-Type": "application/json"},
        timeout=60,
    )
    assert resp.status_code == 200, resp.text
    return orjson.loads(resp.content)  # raises on anything but valid JSON


def failed_as(koordpy: Components, expected: dict[str, str]) -> bool:
    failed = verb(koordpy, "filter", sorted(expected))["FailedNodes"]
    return all(failed.get(name) == reason for name, reason in expected.items())


def test_hostile_quantities_in_the_first_list_and_over_the_watch(koordpy: Components, space: Space, kube: Kube) -> None:
    first = {space.node("m-huge"): HUGE[0], space.node("m-400"): HUGE[1]}  # NodeMetric usage out of range
    annotated = {
        space.node(f"a-{i}", annotations={RAW_ALLOCATABLE: orjson.dumps({"cpu": v}).decode()}): v
        for i, v in enumerate(HUGE)
    }
    good, later_m, later_a = space.node("good"), space.node("later-m"), space.node("later-a")
    space.wait_nodes_ready()
    for name in [*annotated, good, later_m, later_a]:
        report(kube, name, 1000, memory=8 * GiB)
    for name, cpu in first.items():
        hostile_report(kube, name, cpu)
        stored = kube.get("NodeMetric", name)
        assert stored is not None and stored["status"]["nodeMetric"]["nodeUsage"]["resources"]["cpu"] == cpu

    extender = koordpy.start_extender()  # waits for /readyz: the first list did not freeze it
    process = psutil.Process(extender.pid)
    poller = HealthPoller(koordpy.extender_base + "/healthz")
    poller.start()
    try:
        expected = {good: "", **dict.fromkeys(first, REASON_METRIC), **dict.fromkeys(annotated, REASON_NODE)}
        answer = verb(koordpy, "filter", sorted(expected))
        assert answer["NodeNames"] == [good], answer
        assert answer["FailedNodes"] == {k: v for k, v in expected.items() if v}
        rows = verb(koordpy, "prioritize", sorted(expected))
        assert not {row["Host"] for row in rows} & set(first)  # score 0: left out of the answer

        # Now over the watch: a NodeMetric turns hostile, a Node's annotation turns hostile.
        hostile_report(kube, later_m, HUGE[0])
        kube.patch(
            "Node", later_a, {"metadata": {"annotations": {RAW_ALLOCATABLE: orjson.dumps({"cpu": HUGE[1]}).decode()}}}
        )
        wait_until(
            "both later nodes failed", lambda: failed_as(koordpy, {later_m: REASON_METRIC, later_a: REASON_NODE})
        )
        # Keep the watch busy with hostile updates while /healthz is polled: 20 rounds, both values.
        for round_ in range(20):
            hostile_report(kube, later_m, HUGE[round_ % 2])
        wait_until("still failed", lambda: failed_as(koordpy, {later_m: REASON_METRIC, later_a: REASON_NODE}))
        everything = sorted([*expected, later_m, later_a])
        assert {row["Host"] for row in verb(koordpy, "prioritize", everything)} <= set(everything)
        assert httpx.get(koordpy.extender_base + "/readyz", timeout=60).status_code == 200
        answered = poller.answers
        wait_until("/healthz answers after the hostile rounds", lambda: poller.answers > answered)
        cpu = process.cpu_times()
        spent = cpu.user + cpu.system
    finally:
        poller.halt.set()
        poller.join()

    metrics = koordpy.extender_metrics()
    assert 'koordpy_extender_invalid_nodes{resource="nodemetrics"} 3.0' in metrics, metrics[-2000:]
    assert 'koordpy_extender_invalid_nodes{resource="nodes"} 3.0' in metrics

    # One Warning Event per bad node, on the Node, visible in the API.
    wanted = {**dict.fromkeys([*first, later_m], "KoordpyInvalidNodeMetric")}
    wanted |= dict.fromkeys([*annotated, later_a], "KoordpyInvalidNode")

    def reported() -> dict[str, str] | None:
        found = {
            e["involvedObject"]["name"]: e["reason"]
            for e in kube.list("Event", "default")
            if e["involvedObject"].get("kind") == "Node" and e.get("type") == "Warning"
        }
        return found if all(found.get(k) == v for k, v in wanted.items()) else None

    wait_until("a Warning Event on every bad node", reported)
    print(f"\n/healthz answered {poller.answers} times, failures {poller.failures}; extender cpu {spent:.1f} s")
    assert answered > 0 and poller.failures == []
    assert spent < CPU_SECONDS_BOUND
