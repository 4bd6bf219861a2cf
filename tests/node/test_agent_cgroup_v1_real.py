"""Real cgroup v1: a busy process is throttled to the planned quota, measured, and restored exactly.

Needs a writable cgroup v1 hierarchy at /sys/fs/cgroup/{cpu,cpuacct} (the CI machine has one).
When it is missing or read-only the tests FAIL with the reason; they never skip.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

from koordpy.agent.actuators.cgroup import CgroupWriter
from koordpy.agent.policy import AgentState, plan
from koordpy.agent.sources.cgroups import CgroupReader
from koordpy_testkit.agent import node_sample, pod_sample, qos_policy, rule, throttle_action
from koordpy_testkit.builders import PodBuilder

pytestmark = pytest.mark.cgroup

ROOT = "/sys/fs/cgroup"
CONTROLLERS = ("cpu", "cpuacct")


def _require_v1() -> None:
    for c in CONTROLLERS:
        path = os.path.join(ROOT, c)
        if not os.path.isfile(os.path.join(path, "cgroup.procs")):
            pytest.fail(
                f"cgroup v1 controller {c!r} is not mounted at {path}: the node tier needs a writable cgroup v1 hierarchy"
            )
        if not os.access(path, os.W_OK):
            pytest.fail(f"{path} is not writable (run as root with a writable cgroup v1 hierarchy)")


@pytest.fixture
def pod_cgroup() -> Iterator[tuple[str, str, subprocess.Popen[bytes]]]:
    """A pod-like cgroup ``koordpy-nodetest-<id>/pod`` with a container ``ctr`` running a busy loop."""
    _require_v1()
    top = f"koordpy-nodetest-{uuid.uuid4().hex[:8]}"
    rel = f"{top}/pod"
    ctr = f"{rel}/ctr"
    made: list[str] = []
    proc: subprocess.Popen[bytes] | None = None
    try:
        for c in CONTROLLERS:
            for r in (top, rel, ctr):
                os.mkdir(os.path.join(ROOT, c, r))
                made.append(os.path.join(ROOT, c, r))
        # The container starts with its own quota (1.5 cores) so the v1 parent/child rule is exercised.
        with open(os.path.join(ROOT, "cpu", ctr, "cpu.cfs_quota_us"), "w") as fh:
            fh.write("150000")
        # The measurements compare CPU time with wall-clock time, so the loop must get the CPU it asks for
        # however loaded the machine is. Across cgroups CFS shares by cpu.shares (nice counts only inside a
        # group): at the maximum, 262144 against 1024 per ordinary process, the test's group gets most of
        # a core even next to a dozen busy processes, and what is measured is the quota.
        with open(os.path.join(ROOT, "cpu", top, "cpu.shares"), "w") as fh:
            fh.write("262144")
        proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for c in CONTROLLERS:
            with open(os.path.join(ROOT, c, ctr, "cgroup.procs"), "w") as fh:
                fh.write(str(proc.pid))
        yield rel, ctr, proc
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
        time.sleep(0.05)
        for path in reversed(made):
            try:
                os.rmdir(path)
            except OSError as exc:  # pragma: no cover - leave a message, the cgroup is then visible
                print(f"could not remove {path}: {exc}", file=sys.stderr)


def _share(reader: CgroupReader, rel: str, seconds: float) -> float:
    start_ns, start = reader.cpu_usage_ns(rel), time.monotonic()
    time.sleep(seconds)
    end_ns, end = reader.cpu_usage_ns(rel), time.monotonic()
    assert start_ns is not None and end_ns is not None
    return (end_ns - start_ns) / 1e9 / (end - start)


def _quota(rel: str) -> int:
    with open(os.path.join(ROOT, "cpu", rel, "cpu.cfs_quota_us")) as fh:
        return int(fh.read())


def test_throttle_to_planned_quota_then_restore_exactly(pod_cgroup, tmp_path):
    rel, ctr, _proc = pod_cgroup
    reader = CgroupReader(ROOT, version=1)
    usage = _share(reader, rel, 1.0)
    # ~1 core on an idle machine; with the group's cpu.shares at the maximum, other load takes little of it.
    assert usage > 0.25, (
        f"busy loop should get a good part of a core unthrottled, measured {usage:.2f} (machine overloaded?)"
    )

    # The policy plans the cap: line 0.1 cores, step 90 % -> usage x 0.1, floored at the pod's
    # request of 100m: cap = 0.1 cores, well below what the loop gets even on a busy machine.
    pol = qos_policy("p", rule("cpu", "cpu_total_usage", 100, "throttle"))
    raw = PodBuilder("busy").requests(cpu="100m").build()
    p = plan(
        [pol],
        [throttle_action("throttle", step=90)],
        node_sample(cpu=usage + 0.1, cores=os.cpu_count()),
        [pod_sample(raw, cpu=usage)],
        AgentState(),
        now=0.0,
    )
    assert len(p.actions) == 1
    cap = p.actions[0].cpu_cap
    assert cap is not None and cap == pytest.approx(max(usage * 0.1, 0.1))

    writer = CgroupWriter(ROOT, version=1, state_file=str(tmp_path / "throttle.json"))
    quota = writer.set_cap(p.actions[0].uid, rel, cap)
    assert _quota(rel) == quota == round(cap * 100000)
    # The container had 1.5 cores > the new pod cap: it was lowered first (else EINVAL).
    assert _quota(ctr) == quota

    measured = _share(reader, rel, 2.5)
    target = quota / 100000
    print(
        f"\nreal cgroup v1: unthrottled {usage * 100:.1f} %, cap {target * 100:.1f} %, measured {measured * 100:.1f} % of a core"
    )
    assert abs(measured - target) * 100 <= 5, f"measured {measured * 100:.1f} % of a core, target {target * 100:.1f} %"

    assert writer.restore(p.actions[0].uid)
    assert _quota(rel) == -1
    assert _quota(ctr) == 150000
    recovered = _share(reader, rel, 1.0)
    assert recovered > target + 0.1, f"after restore the loop should get more than the cap, measured {recovered:.2f}"


def test_restart_restores_orphaned_quota_from_the_state_file(pod_cgroup, tmp_path):
    rel, ctr, _proc = pod_cgroup
    state = str(tmp_path / "throttle.json")
    first = CgroupWriter(ROOT, version=1, state_file=state)
    first.set_cap("uid-1", rel, 0.2)
    assert _quota(rel) == 20000
    # The agent dies; a new one starts, re-adopts nothing: every remembered original goes back.
    second = CgroupWriter(ROOT, version=1, state_file=state)
    assert second.reconcile(adopt=()) == ["uid-1"]
    assert (_quota(rel), _quota(ctr)) == (-1, 150000)
    # A re-adopted entry is kept as is.
    third = CgroupWriter(ROOT, version=1, state_file=state)
    third.set_cap("uid-1", rel, 0.3)
    fourth = CgroupWriter(ROOT, version=1, state_file=state)
    assert fourth.reconcile(adopt=("uid-1",)) == []
    assert _quota(rel) == 30000
    assert fourth.restore("uid-1") and _quota(rel) == -1


def test_real_v1_working_set_of_a_process_holding_memory():
    _require_v1()
    if not os.access(os.path.join(ROOT, "memory"), os.W_OK):
        pytest.fail(f"{ROOT}/memory is not writable: the node tier needs a writable cgroup v1 memory controller")
    rel = f"koordpy-nodetest-mem-{uuid.uuid4().hex[:8]}"
    path = os.path.join(ROOT, "memory", rel)
    os.mkdir(path)
    # On v1, memory stays charged where it was allocated: the shell joins the cgroup first, then
    # becomes a Python that touches 64 MiB of anonymous memory and waits to be killed.
    script = "import time; b = bytearray(64 << 20); print('ok', flush=True); time.sleep(60)"
    proc = subprocess.Popen(
        ["/bin/sh", "-c", f'echo $$ > {path}/cgroup.procs && exec {sys.executable} -c "{script}"'],
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ok"
        ws = CgroupReader(ROOT, version=1).working_set(rel)
        assert ws is not None and 60 << 20 <= ws <= 200 << 20, f"working set {ws}"
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        time.sleep(0.05)
        os.rmdir(path)
