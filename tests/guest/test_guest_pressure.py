"""Pressure stall information (PSI) on real cgroup v2: the agent reads ``cpu.pressure`` and
``memory.pressure`` of each pod and ``/proc/pressure/*`` of the node and exposes them on ``/metrics``
(koordlet collects PSI; Crane does not). Here the agent's collector runs in the guest's test process, wired
as the agent wires it; ``tests/cluster/test_cluster_guest_node.py`` compares a running agent's series with
the kernel's files read at the same moment.

Two pods make real pressure: one runs two busy processes under a 20 % CPU cap (runnable tasks wait for
the CPU), the other allocates 64 MiB under a 24 MiB ``memory.high`` (the kernel makes it stall in
reclaim; the guest has no swap, so the memory is only slowed, not taken).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from koordpy_testkit.guest import Guest, node

pytestmark = pytest.mark.guest

MiB = 1 << 20


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def _total_us(text: str, degree: str) -> int:
    line = next(line for line in text.splitlines() if line.startswith(degree + " "))
    return int(line.rsplit("total=", 1)[1])


def test_pod_and_node_pressure_are_agent_metrics(guest: Guest) -> None:
    made: list[str] = []
    cpu_uid, mem_uid = str(uuid.uuid4()), str(uuid.uuid4())
    try:
        cpu_pod = guest.call(
            node.make_pod, driver="systemd", uid=cpu_uid, containers=["c" * 64], cpu_max="20000 100000"
        )
        made.append(cpu_pod["pod"])
        mem_pod = guest.call(node.make_pod, driver="cgroupfs", uid=mem_uid, containers=["d" * 64])
        made.append(mem_pod["pod"])
        guest.call(node.write, rel=mem_pod["pod"], name="memory.high", text=str(24 * MiB))
        guest.call(node.start, rel=cpu_pod["containers"]["c" * 64], duty=1.0, copies=2)
        guest.call(node.start, rel=mem_pod["containers"]["d" * 64], anon_mib=64, wait=False)
        got: dict[str, Any] = guest.call(
            node.pressure_metrics,
            pods=[
                {"uid": cpu_uid, "namespace": "batch", "name": "busy"},
                {"uid": mem_uid, "namespace": "batch", "name": "hungry"},
            ],
            settle_seconds=6.0,
        )
    finally:
        guest.call(node.stop)
        for rel in made:
            guest.call(node.remove_pod, rel=rel)
    samples = _samples(got["text"])

    def pod(name: str, metric: str, resource: str, degree: str, window: str | None = None) -> float:
        labels = {"namespace": "batch", "pod": name, "resource": resource, "degree": degree}
        if window:
            labels["window"] = window
        return samples[(metric, tuple(sorted(labels.items())))]

    busy_cpu = pod("busy", "koordpy_agent_pod_psi", "cpu", "some", "10s")
    hungry_memory = pod("hungry", "koordpy_agent_pod_psi", "memory", "some", "10s")
    print(
        f"\ncpu pressure of the capped pod (some, 10 s) {busy_cpu:.2f}; memory pressure of the squeezed pod {hungry_memory:.2f}"
    )
    assert busy_cpu > 0.2  # two busy tasks under a 20 % cap wait most of the time
    assert hungry_memory > 0.01
    # The stall totals are the kernel's, in seconds: at least what the files said just before the scrape.
    files = got["files"]
    for name, uid, resource in (("busy", cpu_uid, "cpu"), ("hungry", mem_uid, "memory")):
        total = pod(name, "koordpy_agent_pod_psi_stalled_seconds_total", resource, "some")
        assert total >= _total_us(files["pods"][uid][resource], "some") / 1e6 > 0
    # Both degrees, every window, for both pods and each resource the kernel has.
    for name in ("busy", "hungry"):
        for resource in ("cpu", "memory", "io"):
            for degree in ("some", "full"):
                for window in ("10s", "60s", "300s"):
                    assert 0.0 <= pod(name, "koordpy_agent_pod_psi", resource, degree, window) <= 1.0
    # The node's pressure: the guest's /proc/pressure/*.
    node_cpu = samples[("koordpy_agent_node_psi_stalled_seconds_total", (("degree", "some"), ("resource", "cpu")))]
    assert node_cpu >= _total_us(files["node"]["cpu"], "some") / 1e6 > 0
    node_memory = samples[
        ("koordpy_agent_node_psi_stalled_seconds_total", (("degree", "some"), ("resource", "memory")))
    ]
    assert node_memory >= _total_us(files["node"]["memory"], "some") / 1e6 > 0
