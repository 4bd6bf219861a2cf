"""cgroup v2 (and v1 layouts) through fabricated trees with the real file names and formats."""

from __future__ import annotations

import json

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from koordpy.agent.actuators.cgroup import CgroupWriter
from koordpy.agent.pressure import PressureMetrics, node_pressure, pod_pressure
from koordpy.agent.sources.cgroups import CgroupReader, detect_version
from koordpy.agent.sources.procfs import ProcReader
from koordpy.model.objects import pod_from_dict
from koordpy_testkit.builders import PodBuilder
from koordpy_testkit.cgroupfs import FakeCgroupTree, write_procfs

UID = "0f6c1c1e-6d5b-4c3a-9a2e-1f2e3d4c5b6a"
CID = "a" * 64
GiB = 1 << 30


@pytest.mark.parametrize(
    ("version", "driver", "runtime", "qos"),
    [
        (2, "systemd", "cri-containerd", "burstable"),
        (2, "systemd", "crio", "besteffort"),
        (2, "systemd", "docker", "guaranteed"),
        (2, "cgroupfs", "cri-containerd", "burstable"),
        (1, "cgroupfs", "docker", "besteffort"),
        (1, "cgroupfs", "crio", "guaranteed"),
        (1, "systemd", "cri-containerd", "burstable"),
    ],
)
def test_reader_finds_pods_and_containers_in_every_layout(tmp_path, version, driver, runtime, qos):
    tree = FakeCgroupTree(tmp_path, version=version, driver=driver)
    rel = tree.add_pod(UID, qos=qos, containers=[CID], runtime=runtime, memory=3 * GiB, inactive=1 * GiB)
    reader = CgroupReader(str(tmp_path))
    assert reader.version == version == detect_version(str(tmp_path))
    assert reader.driver() == driver
    pods = reader.pods()
    assert list(pods) == [UID]
    assert pods[UID].rel == rel
    assert [c for c, _ in pods[UID].containers] == [CID]
    first = reader.collect(now=100.0)
    assert first[UID].cpu is None  # a delta needs two samples
    assert first[UID].memory == 2 * GiB  # working set = usage 3 GiB - inactive file 1 GiB
    # 1.5 s of CPU over 3 s of wall time = 0.5 cores
    tree.advance_cpu(rel, 1.5)
    second = reader.collect(now=103.0)
    assert second[UID].cpu == pytest.approx(0.5)


def test_systemd_pod_usage_is_not_zero_crane_issue_326(tmp_path):
    # Crane (cAdvisor) dropped the pod-level series under the systemd driver: pod usage read 0.
    tree = FakeCgroupTree(tmp_path, version=1, driver="systemd")
    rel = tree.add_pod(UID, containers=[CID])
    reader = CgroupReader(str(tmp_path))
    reader.collect(now=0.0)
    tree.advance_cpu(rel, 2.0)
    assert reader.collect(now=1.0)[UID].cpu == pytest.approx(2.0)


def test_vanished_and_half_created_cgroups_never_crash(tmp_path):
    tree = FakeCgroupTree(tmp_path, version=2, driver="systemd")
    rel = tree.add_pod(UID, containers=[CID])
    other = tree.add_pod("11111111-2222-3333-4444-555555555555")
    reader = CgroupReader(str(tmp_path))
    reader.collect(now=0.0)
    # half-created: the directory exists, the files do not yet
    (tmp_path / rel / "cpu.stat").unlink()
    (tmp_path / rel / "memory.current").unlink()
    listed = reader.pods()
    tree.remove(other)  # vanishes between listing and reading
    out = reader.collect(now=1.0, pods=listed)
    assert out[UID].cpu is None and out[UID].memory is None
    assert out["11111111-2222-3333-4444-555555555555"].cpu is None
    # garbage content is not a crash either
    (tmp_path / rel / "cpu.stat").write_text("usage_usec notanumber\n")
    assert reader.collect(now=2.0)[UID].cpu is None


def test_v2_writer_caps_cpu_max_and_restores_exactly(tmp_path):
    tree = FakeCgroupTree(tmp_path / "cg", version=2, driver="systemd")
    rel = tree.add_pod(UID, containers=[CID], quota=250000, runtime="cri-containerd")
    tree.set_quota(rel, 250000, period=50000)
    writer = CgroupWriter(str(tmp_path / "cg"), version=2, state_file=str(tmp_path / "state" / "t.json"))
    assert writer.set_cap(UID, rel, 0.75) == 37500  # 0.75 x 50 000 us
    assert tree.quota(rel) == "37500 50000"
    writer.set_cap(UID, rel, 0.5)  # a second step keeps the first original
    assert tree.quota(rel) == "25000 50000"
    assert writer.restore(UID)
    assert tree.quota(rel) == "250000 50000"
    # unlimited original -> "max" again (Crane never went back to unlimited)
    tree.set_quota(rel, -1)
    writer.set_cap(UID, rel, 0.001)  # below the kernel minimum -> 1000 us
    assert tree.quota(rel) == "1000 100000"
    writer.restore(UID)
    assert tree.quota(rel) == "max 100000"


def test_writer_restart_drops_entries_whose_cgroup_vanished(tmp_path):
    tree = FakeCgroupTree(tmp_path / "cg", version=2)
    rel = tree.add_pod(UID)
    state = str(tmp_path / "t.json")
    CgroupWriter(str(tmp_path / "cg"), version=2, state_file=state).set_cap(UID, rel, 0.5)
    tree.remove(rel)
    again = CgroupWriter(str(tmp_path / "cg"), version=2, state_file=state)
    assert again.reconcile(adopt=()) == []
    assert again.originals == {}


def test_procfs_node_usage(tmp_path):
    proc = tmp_path / "proc"
    write_procfs(proc, cpus=4, busy_jiffies=100, total_jiffies=400, mem_total_kib=8 << 20, mem_avail_kib=6 << 20)
    reader = ProcReader(str(proc))
    first = reader.read()
    assert first.cpu is None and first.cpu_capacity == 4
    assert (first.memory, first.memory_capacity) == (2 * GiB, 8 * GiB)
    # +300 busy of +400 total jiffies on 4 CPUs = 3 cores
    write_procfs(proc, cpus=4, busy_jiffies=400, total_jiffies=800, mem_total_kib=8 << 20, mem_avail_kib=6 << 20)
    assert reader.read().cpu == pytest.approx(3.0)


def test_v1_writer_leaves_quotas_someone_else_wrote_pod_and_container(tmp_path):
    """The kubelet's in-place resize writes the pod's and the container's quota: a restore keeps both."""
    tree = FakeCgroupTree(tmp_path / "cg", version=1, driver="cgroupfs")
    rel = tree.add_pod(UID, containers=[CID], quota=200000)
    child = f"{rel}/{CID}"
    writer = CgroupWriter(str(tmp_path / "cg"), version=1, state_file=str(tmp_path / "t.json"))
    assert writer.set_cap(UID, rel, 0.5) == 50000
    assert (tree.quota(rel), tree.quota(child)) == ("50000", "50000")  # the container lowered first
    tree.set_quota(rel, 300000)
    tree.set_quota(child, 300000)
    assert writer.restore(UID)
    assert (tree.quota(rel), tree.quota(child), writer.superseded) == ("300000", "300000", 1)


def test_a_state_file_without_the_written_quota_restores_as_before(tmp_path):
    tree = FakeCgroupTree(tmp_path / "cg", version=2)
    rel = tree.add_pod(UID)
    tree.set_quota(rel, 30000)  # the cap an older agent wrote
    state = tmp_path / "t.json"
    state.write_text(json.dumps({UID: {"rel": rel, "quota": -1, "period": 100000, "children": {}}}))
    writer = CgroupWriter(str(tmp_path / "cg"), version=2, state_file=str(state))
    assert writer.reconcile(adopt=()) == [UID]
    assert tree.quota(rel) == "max 100000"


PSI = "some avg10=12.50 avg60=3.00 avg300=0.75 total=4200000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"


def test_pressure_files_become_metrics_for_known_pods_only(tmp_path):
    tree = FakeCgroupTree(tmp_path / "cg", version=2)
    rel = tree.add_pod(UID)
    other = tree.add_pod("11111111-2222-3333-4444-555555555555")
    for path in (tmp_path / "cg" / rel, tmp_path / "cg" / other):
        (path / "cpu.pressure").write_text(PSI)
        (path / "memory.pressure").write_text("some avg10=1 avg60=oops avg300=0 total=5\n")  # unparsable: left out
    (tmp_path / "proc" / "pressure").mkdir(parents=True)
    (tmp_path / "proc" / "pressure" / "cpu").write_text(PSI)
    reader, proc = CgroupReader(str(tmp_path / "cg")), ProcReader(str(tmp_path / "proc"))
    pods = {UID: pod_from_dict(PodBuilder("web", "shop").uid(UID).build())}  # the other pod is not this node's
    cgroups = {uid: cg.rel for uid, cg in reader.pods().items()}
    registry = CollectorRegistry()
    registry.register(PressureMetrics(lambda: node_pressure(proc), lambda: pod_pressure(reader, pods, cgroups)))
    text = generate_latest(registry).decode()
    labels = 'degree="some",namespace="shop",pod="web",resource="cpu"'
    assert f'koordpy_agent_pod_psi{{{labels},window="10s"}} 0.125' in text
    assert f'koordpy_agent_pod_psi{{{labels},window="300s"}} 0.0075' in text
    assert f"koordpy_agent_pod_psi_stalled_seconds_total{{{labels}}} 4.2" in text
    assert 'koordpy_agent_node_psi{degree="full",resource="cpu",window="60s"} 0.0' in text
    assert 'resource="memory"' not in text and "5555" not in text
    assert reader.pressure(rel, "io") is None  # no file: no series
    assert CgroupReader(str(tmp_path / "cg"), version=1).pressure(rel, "cpu") is None
