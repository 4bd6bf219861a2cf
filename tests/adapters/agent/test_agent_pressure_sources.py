"""What the pressure rules read: each pod cgroup's PSI and its own-limit counters, and ``/proc/pressure``,
only for the resources the rules in force use. On a fabricated cgroup v2 tree (``koordpy_testkit.cgroupfs``,
the kernel's file formats; the same reads on a real kernel are in ``tests/guest/test_guest_pressure.py``).
"""

from __future__ import annotations

from pathlib import Path

from koordpy.agent.loop import Collector
from koordpy.agent.policy import AgentState, plan
from koordpy.agent.policy.pressure import PressureNeeds
from koordpy.agent.sources.cgroups import CgroupReader
from koordpy.agent.sources.procfs import ProcReader
from koordpy.model.objects import pod_from_dict
from koordpy_testkit.agent import qos_policy, rule, throttle_action
from koordpy_testkit.builders import PodBuilder
from koordpy_testkit.cgroupfs import FakeCgroupTree, write_procfs

WEB_UID = "00000000-0000-0000-0000-00000000000a"
BATCH_UID = "00000000-0000-0000-0000-00000000000b"


def _node(tmp_path: Path) -> tuple[FakeCgroupTree, Collector, dict[str, str]]:
    tree = FakeCgroupTree(tmp_path / "cgroup")
    rels = {
        WEB_UID: tree.add_pod(WEB_UID, qos="guaranteed", quota=50000),
        BATCH_UID: tree.add_pod(BATCH_UID, qos="besteffort"),
    }
    proc = tmp_path / "proc"
    write_procfs(proc, cpus=2, busy_jiffies=100, total_jiffies=200, mem_total_kib=1 << 20, mem_avail_kib=1 << 19)
    (proc / "pressure").mkdir()
    (proc / "pressure" / "cpu").write_text(
        "some avg10=12.50 avg60=3.00 avg300=1.00 total=999\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    )
    return tree, Collector(CgroupReader(str(tree.root)), ProcReader(str(proc)), "node-1"), rels


def _pods() -> list[object]:
    web = PodBuilder("web").uid(WEB_UID).requests(cpu="500m").limits(cpu="500m").priority(9000).label("app", "web")
    batch = PodBuilder("batch").uid(BATCH_UID)
    return [pod_from_dict(web.build()), pod_from_dict(batch.build())]


def test_own_cpu_limit_is_seen_when_throttled_usec_grows(tmp_path):
    tree, _, rels = _node(tmp_path)
    reader = CgroupReader(str(tree.root))
    assert reader.collect(10.0)[WEB_UID].cpu_limited_at is None  # first sight, never throttled
    tree.add_throttled(rels[WEB_UID], 40_000)
    assert reader.collect(11.0)[WEB_UID].cpu_limited_at == 11.0
    tree.advance_cpu(rels[WEB_UID], 0.5)  # it ran, but its own limit did not hold it back again
    usage = reader.collect(12.0)
    assert usage[WEB_UID].cpu_limited_at == 11.0
    assert usage[BATCH_UID].cpu_limited_at is None
    # A reader that starts (an agent's restart) and finds the pod throttled before: as if just now, since its
    # pressure may still carry that stall.
    assert CgroupReader(str(tree.root)).collect(20.0)[WEB_UID].cpu_limited_at == 20.0


def test_own_memory_limit_is_seen_when_memory_events_grow(tmp_path):
    tree, _, rels = _node(tmp_path)
    reader = CgroupReader(str(tree.root))
    tree.set_memory_events(rels[WEB_UID], high=0)
    assert reader.memory_limited_at(rels[WEB_UID], 1.0) is None  # first sight, never held back
    tree.set_memory_events(rels[WEB_UID], high=3)
    assert reader.memory_limited_at(rels[WEB_UID], 1.5) == 1.5
    tree.set_memory_events(rels[WEB_UID], high=3, top=1)  # memory.max reached once more
    assert reader.memory_limited_at(rels[WEB_UID], 2.0) == 2.0
    assert reader.memory_limited_at(rels[WEB_UID], 3.0) == 2.0
    assert CgroupReader(str(tree.root)).memory_limited_at(rels[WEB_UID], 4.0) == 4.0  # first sight, above 0
    assert reader.memory_limited_at(rels[BATCH_UID], 3.0) is None  # no memory.events file


def test_collector_reads_the_psi_the_rules_use_and_plans_on_it(tmp_path):
    tree, collector, rels = _node(tmp_path)
    tree.set_pressure(rels[WEB_UID], "cpu", some_avg10=35.0)
    tree.set_pressure(rels[WEB_UID], "memory", some_avg10=80.0)
    tree.set_pressure(rels[BATCH_UID], "cpu", some_avg10=1.0)
    pods = _pods()
    needs = PressureNeeds(node=frozenset({"cpu"}), pods=frozenset({"cpu"}))
    collector.collect(0.0, 0.0, pods, {}, None, pressure=needs)
    tree.advance_cpu(rels[BATCH_UID], 0.9)
    tree.advance_cpu(rels[WEB_UID], 0.2)
    node, samples, _ = collector.collect(1.0, 1.0, pods, {}, None, pressure=needs)
    web, batch = samples
    assert node.pressure["cpu_pressure_some_avg10"] == 12.5 and "memory_pressure_some_avg10" not in node.pressure
    assert web.pressure["cpu_pressure_some_avg10"] == 35.0 and web.pressure["cpu_pressure_some_avg60"] == 17.5
    assert "memory_pressure_some_avg10" not in web.pressure  # no memory rule: memory.pressure is not read
    assert web.own_limit_age == {} and batch.pressure["cpu_pressure_some_avg10"] == 1.0
    # The rule on web's pressure throttles the BestEffort batch pod (0.9 cores -> 0.45).
    pol = qos_policy(
        "p", rule("web", "pod_cpu_pressure_some_avg10", 20, "throttle", selector={"matchLabels": {"app": "web"}})
    )
    result = plan([pol], [throttle_action("throttle")], node, samples, AgentState(), now=1.0)
    assert [(a.pod, round(a.cpu_cap or 0, 3)) for a in result.actions] == [("default/batch", 0.45)]
    # Web's own cpu.max held it back since: its 35 % is its own doing, the same rule does nothing.
    tree.add_throttled(rels[WEB_UID], 80_000)
    tree.advance_cpu(rels[BATCH_UID], 0.9)
    node, samples, _ = collector.collect(2.0, 2.0, pods, {}, None, pressure=needs)
    assert samples[0].own_limit_age == {"cpu": 0.0}
    again = plan([pol], [throttle_action("throttle")], node, samples, AgentState(), now=2.0)
    assert again.actions == () and [e.reason for e in again.events] == ["OwnLimit"]


def test_without_pressure_rules_no_psi_file_is_read(tmp_path):
    tree, collector, rels = _node(tmp_path)
    tree.set_pressure(rels[WEB_UID], "cpu", some_avg10=35.0)
    node, samples, _ = collector.collect(0.0, 0.0, _pods(), {}, None)
    assert node.pressure == {} and all(s.pressure == {} and s.own_limit_age == {} for s in samples)
