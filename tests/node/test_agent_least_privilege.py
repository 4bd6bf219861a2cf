"""The agent's cgroup writes and reads with exactly the privileges the chart gives its container, on real
cgroups of this machine's kernel.

The agent container's ``securityContext`` is rendered by the real helm and turned into the process's
identity (``koordpy_testkit.confined``: uid and gid, capability sets, ``no_new_privs``); the process runs
in its own cgroup, mount, PID and cgroup namespaces with the host's cgroupfs bind-mounted as the
DaemonSet's ``hostPath`` volume mounts it. In there koordpy's own cgroup writer caps a pod-like cgroup
(v1 ``cpu.cfs_quota_us``), a memory limit is written (``memory.limit_in_bytes``: the agent writes none
today; this is what a memory actuator would need), and the procfs reader reads node CPU and memory from
the namespace's own ``/proc``. The same run as a non-root uid is refused: uid 0, the owner of the cgroup
files, is what makes the writes work, with no capability at all.

cgroup v2: the kernel applies the same permission check (the file's mode bits, plus the rule that a
cgroup namespace's root is not writable from inside) to every interface file. The v2 hierarchy of this
machine has no controllers enabled (its controllers are on v1), so the write is to ``cgroup.max.descendants``
of a sibling cgroup, from a cgroup namespace rooted at the process's own cgroup, as a containerd container's.
``tests/guest/test_guest_identity.py`` writes ``cpu.max`` and ``memory.high`` the same way on a v2 hierarchy
with its controllers (in a QEMU guest).

Needs root, a writable cgroup v1 hierarchy (cpu, cpuacct, memory) and a cgroup2 mount; fails loudly without.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koordpy_testkit.confined import Confinement, agent_container_identity

pytestmark = pytest.mark.cgroup

ROOT = Path(__file__).resolve().parents[2]
HELM = Path(sys.executable).parent / "helm"
CGROUP = Path("/sys/fs/cgroup")
CONTROLLERS = ("cpu", "cpuacct", "memory")

# Runs inside the confinement: koordpy's writer and readers, the answers as one JSON line.
PROBE = r"""
import json, os, sys
from koordpy.agent.actuators.cgroup import ActuatorError, CgroupWriter
from koordpy.agent.sources.cgroups import CgroupReader
from koordpy.agent.sources.procfs import ProcReader
root, rel, state, memory_file, v2_file = sys.argv[1:6]
status = dict(line.split(":\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\t" in line)
out = {"uid": os.getuid(), "cap_eff": status["CapEff"].strip(), "no_new_privs": status["NoNewPrivs"].strip()}
out["cgroup_ns_path"] = open("/proc/self/cgroup").read().splitlines()[-1]
writer = CgroupWriter(root, version=1, state_file=state)
try:
    out["quota_written"] = writer.set_cap("pod-uid", rel, 0.25)
    out["quota_read_back"] = writer.read_quota(rel)[0]
    out["restored"] = writer.restore("pod-uid")
except ActuatorError as exc:
    out["writer_error"] = str(exc)
for key, path, text in (("memory", memory_file, str(256 << 20)), ("v2", v2_file, "7")):
    try:
        with open(path, "w") as fh:
            fh.write(text)
        out[key + "_written"] = open(path).read().strip()
    except OSError as exc:
        out[key + "_error"] = f"{exc.strerror}"
reader = CgroupReader(root, version=1)
out["usage_readable"] = reader.cpu_usage_ns(rel) is not None and reader.working_set(rel) is not None
reading = ProcReader("/proc").read()
out["proc"] = [reading.cpu_capacity, reading.memory_capacity]
out["proc_pids_seen"] = sum(name.isdigit() for name in os.listdir("/proc"))
print(json.dumps(out))
"""


def _agent_security_context() -> tuple[dict[str, Any], str, str]:
    """The agent container's securityContext, its cgroup hostPath and where the container mounts it."""
    try:
        return agent_container_identity(HELM)
    except FileNotFoundError as exc:
        pytest.fail(str(exc))


def _cgroup2_mount() -> Path:
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        before, _, after = line.partition(" - ")
        if after.split()[0] == "cgroup2":
            return Path(before.split()[4])
    pytest.fail("no cgroup2 hierarchy is mounted: the node tier needs one (hybrid or unified)")


@pytest.fixture
def cgroups() -> Iterator[dict[str, Path]]:
    """A pod-like cgroup and a container cgroup for the confined process, in cpu, cpuacct, memory (v1)
    and on the cgroup2 mount; removed afterwards."""
    if os.geteuid() != 0:
        pytest.fail("the node tier runs as root (it creates cgroups and namespaces)")
    for c in CONTROLLERS:
        if not os.access(CGROUP / c / "cgroup.procs", os.W_OK):
            pytest.fail(f"{CGROUP / c} is not a writable cgroup v1 controller: the node tier needs one")
    unified = _cgroup2_mount()
    top = f"koordpy-nodetest-priv-{uuid.uuid4().hex[:8]}"
    made: list[Path] = []
    paths: dict[str, Path] = {}
    try:
        for base in [*(CGROUP / c for c in CONTROLLERS), unified]:
            for rel in (top, f"{top}/pod", f"{top}/ctr"):
                (base / rel).mkdir()
                made.append(base / rel)
        paths = {"top": Path(top), "unified": unified}
        yield paths
    finally:
        time.sleep(0.05)  # the confined process has exited; let the kernel release its cgroup
        for path in reversed(made):
            try:
                path.rmdir()
            except OSError as exc:  # pragma: no cover - leave a message, the cgroup is then visible
                print(f"could not remove {path}: {exc}", file=sys.stderr)


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A directory every uid may enter (pytest's tmp_path is 0700: a non-root uid could not even reach the
    cgroup mount there, which would make the control below pass for the wrong reason)."""
    path = Path(tempfile.mkdtemp(prefix="koordpy-nodetest-priv-", dir="/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _run_probe(confinement: Confinement, cgroups: dict[str, Path], workdir: Path) -> dict[str, Any]:
    top, unified = cgroups["top"], cgroups["unified"]
    _, host_path, mount_path = _agent_security_context()
    # the container's mount point, below a directory of the test's (mkdir is not namespaced)
    target = workdir / "container" / mount_path.lstrip("/")
    join = [str(CGROUP / c / top / "ctr" / "cgroup.procs") for c in CONTROLLERS]
    join.append(str(unified / top / "ctr" / "cgroup.procs"))
    state = workdir / "state"
    state.mkdir()
    state.chmod(0o777)
    args = [
        str(target),
        f"{top}/pod",
        str(state / "throttle-originals.json"),
        str(target / "memory" / top / "pod" / "memory.limit_in_bytes"),
        str(target / unified.relative_to(CGROUP) / top / "pod" / "cgroup.max.descendants"),
    ]
    command = confinement.command(
        [sys.executable, "-c", PROBE, *args],
        binds={host_path: str(target)},
        join=join,
        checkout_at=str(workdir / "checkout"),
    )
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _host_meminfo_total() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no MemTotal in /proc/meminfo")


def test_the_charts_agent_identity_throttles_reads_and_writes_limits_with_no_capability(
    cgroups: dict[str, Path], workdir: Path
) -> None:
    ctx, _, _ = _agent_security_context()
    confinement = Confinement.from_security_context(ctx)
    assert (confinement.uid, confinement.capabilities, confinement.no_new_privs) == (0, (), True)
    out = _run_probe(confinement, cgroups, workdir)
    assert (out["uid"], out["cap_eff"], out["no_new_privs"]) == (0, "0000000000000000", "1")
    assert out["cgroup_ns_path"] == "0::/"  # its own cgroup namespace, rooted at its container cgroup
    # 0.25 cores of the 100 ms period, read back through the mount and restored to unlimited
    assert (out.get("quota_written"), out.get("quota_read_back"), out.get("restored")) == (25000, 25000, True), out
    pod = CGROUP / "cpu" / cgroups["top"] / "pod"
    assert (pod / "cpu.cfs_quota_us").read_text().strip() == "-1"
    assert out.get("memory_written") == str(256 << 20), out
    assert out.get("v2_written") == "7", out
    assert out["usage_readable"] is True
    # /proc/stat and /proc/meminfo of a new PID namespace (which sees only its own processes) are node-wide
    assert out["proc"] == [float(os.cpu_count() or 0), _host_meminfo_total()]
    assert out["proc_pids_seen"] <= 3


def test_the_same_writes_are_refused_to_a_non_root_uid(cgroups: dict[str, Path], workdir: Path) -> None:
    """The control: uid 0's ownership of the cgroup files is what lets the agent write them."""
    ctx, _, mount_path = _agent_security_context()
    out = _run_probe(Confinement.from_security_context({**ctx, "runAsUser": 65532}), cgroups, workdir)
    assert (out["uid"], out["cap_eff"]) == (65532, "0000000000000000")
    # it read the quota and saved the original (the state directory is its own), then the write was refused
    quota_file = workdir / "container" / mount_path.lstrip("/") / "cpu" / cgroups["top"] / "pod" / "cpu.cfs_quota_us"
    assert out["writer_error"] == f"{quota_file}: cannot write '25000': Permission denied"
    assert (out["memory_error"], out["v2_error"]) == ("Permission denied", "Permission denied")
    assert out["usage_readable"] is True  # reading needs nothing
