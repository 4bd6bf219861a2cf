"""Runs inside the test guest: kubelet-shaped pod cgroups on real cgroup v2, real processes in them, and
measurements over windows of the guest's own clock.

The host calls these through :meth:`koordpy_testkit.guest.Guest.call`; they return JSON values and keep
the processes they started in this module (the runner is one interpreter per boot). Paths are relative to
the cgroup2 mount (``/sys/fs/cgroup``), as the agent's ``rel`` paths are.

Not guaranteed: that a window's share is exact; the host's tolerances say how close it must be.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from koordpy_testkit.cgroupfs import container_name, pod_rel

__all__ = [
    "ROOT",
    "cpu_stat",
    "make_pod",
    "read",
    "read_json",
    "remove_pod",
    "remove_tree",
    "start",
    "stop",
    "window",
    "write",
]

ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = "+cpu +cpuset +io +memory +pids"
BURNER = Path(__file__).with_name("burner.py")
_procs: dict[int, subprocess.Popen[bytes]] = {}


def _enable(rel: str) -> None:
    """``rel`` and every ancestor exist with the controllers enabled for their children (as the kubelet and
    systemd set up ``kubepods``)."""
    parts = rel.split("/")
    for depth in range(len(parts)):
        path = ROOT.joinpath(*parts[: depth + 1])
        path.mkdir(exist_ok=True)
        (path / "cgroup.subtree_control").write_text(CONTROLLERS)


def make_pod(
    driver: str,
    uid: str,
    qos: str = "burstable",
    containers: tuple[str, ...] | list[str] = (),
    runtime: str = "cri-containerd",
    cpu_max: str | None = None,
) -> dict[str, Any]:
    """A pod cgroup in the kubelet's layout for ``driver`` with one child cgroup per container id;
    ``cpu_max`` (``"max 100000"``, ``"250000 100000"``) is written to the pod's ``cpu.max``."""
    rel = pod_rel(driver, uid, qos)
    _enable(rel)
    made = {}
    for cid in containers:
        child = f"{rel}/{container_name(driver, cid, runtime)}"
        (ROOT / child).mkdir()
        made[cid] = child
    if cpu_max is not None:
        (ROOT / rel / "cpu.max").write_text(cpu_max)
    return {"pod": rel, "containers": made}


def start(
    rel: str, duty: float = 0.0, anon_mib: int = 0, read_path: str = "", copies: int = 1, wait: bool = True
) -> list[int]:
    """``copies`` burner processes in the cgroup ``rel`` (they join it before they run a line of Python);
    returns their pids once each has its memory in place (``wait``) or at once."""
    procs_file = ROOT / rel / "cgroup.procs"
    # The shell joins the cgroup, then becomes the burner (same pid): not one instruction runs outside.
    script = f'echo $$ > "{procs_file}" && exec "$0" -S "$@"'
    pids = []
    for _ in range(copies):
        proc = subprocess.Popen(
            ["/bin/sh", "-c", script, sys.executable, str(BURNER), str(duty), str(anon_mib), read_path],
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
        )
        assert proc.stdout is not None
        if wait and proc.stdout.readline().strip() != b"ready":
            proc.kill()
            raise RuntimeError(f"burner in {rel} did not start (exit {proc.wait()})")
        _procs[proc.pid] = proc
        pids.append(proc.pid)
    return pids


def stop(pids: list[int] | None = None) -> None:
    """Kill the given burners (all of them by default) and reap them."""
    for pid in list(_procs) if pids is None else pids:
        proc = _procs.pop(pid, None)
        if proc is not None:
            proc.kill()
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


def remove_pod(rel: str) -> None:
    """Remove a pod cgroup and its children, killing what still runs in them (``cgroup.kill``)."""
    base = ROOT / rel
    if base.is_dir():
        (base / "cgroup.kill").write_text("1")
    for child in sorted((p for p in base.iterdir() if p.is_dir()), reverse=True):
        _rmdir(child)
    _rmdir(base)


def _rmdir(path: Path) -> None:
    # A killed process leaves its cgroup a moment after it is reaped: wait until it is unpopulated.
    for _ in range(500):
        if "populated 0" in (path / "cgroup.events").read_text():
            break
        time.sleep(0.01)
    path.rmdir()


def read(rel: str, name: str) -> str:
    return (ROOT / rel / name).read_text()


def write(rel: str, name: str, text: str) -> None:
    (ROOT / rel / name).write_text(text)


def cpu_stat(rel: str) -> dict[str, int]:
    return {k: int(v) for k, v in (line.split() for line in read(rel, "cpu.stat").splitlines())}


def _on_cpu_ns(pid: int) -> int:
    """The process's CPU time from the scheduler (``/proc/<pid>/schedstat``: ns on a CPU)."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


def window(seconds: float, pids: list[int], cgroups: list[str]) -> dict[str, Any]:
    """One measurement window of ``seconds`` of the guest's clock: what the agent's readers say (pods and
    their containers through :class:`CgroupReader`, the node through :class:`ProcReader`), and beside
    them what the burners used by their own scheduler counters and each cgroup's ``cpu.stat``."""
    from koordpy.agent.sources.cgroups import CgroupReader
    from koordpy.agent.sources.procfs import ProcReader

    reader = CgroupReader(str(ROOT), collect_containers=True)
    proc = ProcReader("/proc")
    found = reader.pods()

    def snapshot(base: CgroupReader) -> tuple[CgroupReader, dict[str, Any], dict[int, int], float]:
        """The agent's reading at one instant with the burners' counters read right before and right after
        it; repeated while a burner ran in between (it woke and took the CPU from this process), so that
        both sides describe the same instant."""
        for _ in range(100):
            attempt = copy.deepcopy(base)
            before = {pid: _on_cpu_ns(pid) for pid in pids}
            now = time.monotonic()
            usage = attempt.collect(now, found)
            after = {pid: _on_cpu_ns(pid) for pid in pids}
            if before == after:
                break
        return attempt, usage, after, now

    stats0 = {rel: cpu_stat(rel) for rel in ["", *cgroups]} if cgroups else {}
    reader, _, burners0, t0 = snapshot(reader)
    proc.read()
    raw0 = Path("/proc/stat").read_text().splitlines()[0]
    time.sleep(seconds)
    reader, usage, burners1, t1 = snapshot(reader)
    node = proc.read()
    raw1 = Path("/proc/stat").read_text().splitlines()[0]
    meminfo = Path("/proc/meminfo").read_text()
    elapsed = t1 - t0
    burners = {str(pid): (burners1[pid] - burners0[pid]) / 1e9 / elapsed for pid in pids}
    stats1 = {rel: cpu_stat(rel) for rel in stats0}
    stats = {
        rel: {k: stats1[rel][k] - stats0[rel][k] for k in stats1[rel] if k in stats0[rel]} | {"seconds": elapsed}
        for rel in stats0
    }
    return {
        "seconds": elapsed,
        "pods": {
            uid: {
                "rel": u.rel,
                "cpu": u.cpu,
                "memory": u.memory,
                "containers": {c.container_id: {"cpu": c.cpu, "memory": c.memory} for c in u.containers},
            }
            for uid, u in usage.items()
        },
        "node": {
            "cpu": node.cpu,
            "cpus": node.cpu_capacity,
            "memory": node.memory,
            "memory_capacity": node.memory_capacity,
            "proc_stat": [raw0, raw1],
            "meminfo": meminfo,
        },
        "burners": burners,
        "cpu_stat": stats,
    }


def kill_pid(pid: int, sig: int = signal.SIGKILL) -> None:
    """Signal a process this module did not start (an agent run in its own process)."""
    os.kill(pid, sig)


# ---- the one cgroup writer on real v2 ---------------------------------------------------------------


def _writer(state_file: str) -> Any:
    from koordpy.agent.actuators.cgroup import CgroupWriter

    return CgroupWriter(str(ROOT), version=2, state_file=state_file)


def share(rel: str, seconds: float) -> dict[str, Any]:
    """The cgroup's CPU share (cores) over ``seconds``, how many periods were throttled meanwhile and its
    ``cpu.max`` at both ends of the window."""
    before = read(rel, "cpu.max").strip()
    s0, t0 = cpu_stat(rel), time.monotonic()
    time.sleep(seconds)
    s1, t1 = cpu_stat(rel), time.monotonic()
    return {
        "share": (s1["usage_usec"] - s0["usage_usec"]) / 1e6 / (t1 - t0),
        "nr_periods": s1.get("nr_periods", 0) - s0.get("nr_periods", 0),
        "nr_throttled": s1.get("nr_throttled", 0) - s0.get("nr_throttled", 0),
        "cpu_max": [before, read(rel, "cpu.max").strip()],
    }


def set_cap(rel: str, key: str, cores: float, state_file: str) -> dict[str, Any]:
    """One throttle step by the agent's writer (a new writer each call: its memory is the state file)."""
    quota = _writer(state_file).set_cap(key, rel, cores)
    return {"quota": quota, "cpu_max": read(rel, "cpu.max").strip()}


def restore(rel: str, key: str, state_file: str) -> dict[str, Any]:
    writer = _writer(state_file)
    restored = writer.restore(key)
    return {"restored": restored, "superseded": writer.superseded, "cpu_max": read(rel, "cpu.max").strip()}


AGENT_WRITER = """
import sys, time
from koordpy.agent.actuators.cgroup import CgroupWriter
root, rel, key, cores, state = sys.argv[1:6]
CgroupWriter(root, version=2, state_file=state).set_cap(key, rel, float(cores))
print("capped", flush=True)
time.sleep(3600)
"""
AGENT_RECONCILE = """
import json, sys
from koordpy.agent.actuators.cgroup import CgroupWriter
root, state = sys.argv[1:3]
print(json.dumps(CgroupWriter(root, version=2, state_file=state).reconcile(adopt=())))
"""


def capping_process(rel: str, key: str, cores: float, state_file: str) -> int:
    """An agent-like process that caps ``rel`` through the writer and stays up (until :func:`stop`)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", AGENT_WRITER, str(ROOT), rel, key, str(cores), state_file],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != b"capped":
        raise RuntimeError(f"the capping process failed (exit {proc.wait()})")
    _procs[proc.pid] = proc
    return proc.pid


def reconciling_process(state_file: str) -> list[str]:
    """A new agent-like process: reads the state file, restores what it does not re-adopt (nothing)."""
    out = subprocess.run(
        [sys.executable, "-c", AGENT_RECONCILE, str(ROOT), state_file], capture_output=True, text=True, check=True
    )
    restored: list[str] = json.loads(out.stdout)
    return restored


def drop_caches() -> None:
    """Drop the guest's clean page cache (so a file read next is charged to the reader's cgroup)."""
    Path("/proc/sys/vm/drop_caches").write_text("1")


def memory(rel: str, child: str) -> dict[str, dict[str, int | None]]:
    """The agent's working set of the pod ``rel`` and its container ``child`` beside the kernel's figures,
    each read twice around the agent's read (the figures of an idle process do not move)."""
    from koordpy.agent.sources.cgroups import CgroupReader

    reader = CgroupReader(str(ROOT))
    out: dict[str, dict[str, int | None]] = {}
    for scope, path in (("pod", rel), ("container", child)):
        stat = dict(line.split() for line in read(path, "memory.stat").splitlines())
        current = int(read(path, "memory.current"))
        out[scope] = {
            "agent": reader.working_set(path),
            "current": current,
            "inactive_file": int(stat["inactive_file"]),
            "anon": int(stat["anon"]),
            "file": int(stat["file"]),
        }
    return out


def pressure_metrics(pods: list[dict[str, str]], settle_seconds: float) -> dict[str, Any]:
    """The agent's pressure metrics (:class:`koordpy.agent.pressure.PressureMetrics`, wired as the agent
    wires it) after ``settle_seconds`` (PSI averages move every 2 s), for ``pods`` (``uid``, ``namespace``,
    ``name``) found in the cgroup tree; beside them the kernel's PSI files read just before the scrape."""
    from prometheus_client import CollectorRegistry, generate_latest

    from koordpy.agent.pressure import PSI_RESOURCES, PressureMetrics, node_pressure, pod_pressure
    from koordpy.agent.sources.cgroups import CgroupReader
    from koordpy.agent.sources.procfs import ProcReader
    from koordpy.model.objects import pod_from_dict
    from koordpy_testkit.builders import PodBuilder

    reader, proc = CgroupReader(str(ROOT)), ProcReader("/proc")
    infos = {p["uid"]: pod_from_dict(PodBuilder(p["name"], p["namespace"]).uid(p["uid"]).build()) for p in pods}
    cgroups = {uid: cg.rel for uid, cg in reader.pods(containers=False).items()}
    registry = CollectorRegistry()
    registry.register(PressureMetrics(lambda: node_pressure(proc), lambda: pod_pressure(reader, infos, cgroups)))
    time.sleep(settle_seconds)
    files = {
        "node": {r: Path(f"/proc/pressure/{r}").read_text() for r in PSI_RESOURCES},
        "pods": {uid: {r: read(cgroups[uid], f"{r}.pressure") for r in PSI_RESOURCES} for uid in infos},
    }
    return {"text": generate_latest(registry).decode(), "files": files}


# ---- the chart's identity ---------------------------------------------------------------------------

IDENTITY_PROBE = r"""
import json, os, sys
from koordpy.agent.actuators.cgroup import ActuatorError, CgroupWriter
from koordpy.agent.sources.cgroups import CgroupReader
from koordpy.agent.sources.procfs import ProcReader
root, rel, own, state = sys.argv[1:5]
status = dict(line.split(":\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\t" in line)
out = {"uid": os.getuid(), "cap_eff": status["CapEff"].strip(), "no_new_privs": status["NoNewPrivs"].strip()}
out["cgroup_ns_path"] = open("/proc/self/cgroup").read().strip()
writer = CgroupWriter(root, version=2, state_file=state)
try:
    out["quota_written"] = writer.set_cap("pod-uid", rel, 0.25)
    out["quota_read_back"] = writer.read_quota(rel)[0]
    out["restored"] = writer.restore("pod-uid")
except ActuatorError as exc:
    out["writer_error"] = str(exc)
for key, path, text in (("memory", f"{root}/{rel}/memory.high", str(256 << 20)), ("own", f"{root}/{own}/cpu.max", "50000 100000")):
    try:
        with open(path, "w") as fh:
            fh.write(text)
        out[key + "_written"] = open(path).read().strip()
    except OSError as exc:
        out[key + "_error"] = exc.strerror
reader = CgroupReader(root)
out["usage_readable"] = reader.cpu_usage_ns(rel) is not None and reader.working_set(rel) is not None
out["pressure_readable"] = reader.pressure(rel, "cpu") is not None and reader.pressure(rel, "memory") is not None
proc = ProcReader("/proc")
out["proc"] = [proc.read().cpu_capacity, proc.read().memory_capacity, proc.pressure("cpu") is not None]
print(json.dumps(out))
"""


def confined_probe(context: dict[str, Any], host_path: str, mount_path: str, target: str) -> dict[str, Any]:
    """Run the agent's writer and readers as the container ``context`` would (its uid, no capabilities,
    ``no_new_privs``), in a container cgroup of its own with its own cgroup, mount and PID namespaces, the
    host's cgroupfs bind-mounted at ``mount_path`` as the DaemonSet's hostPath; against the pod ``target``."""
    import shutil
    import tempfile

    from koordpy_testkit.confined import Confinement

    agent = make_pod("systemd", str(uuid.uuid4()), "besteffort", containers=["e" * 64])
    work = Path(tempfile.mkdtemp(prefix="koordpy-identity-", dir="/run"))
    work.chmod(0o755)
    state = work / "state"
    state.mkdir()
    state.chmod(0o777)
    mount = work / "container" / mount_path.lstrip("/")
    try:
        command = Confinement.from_security_context(context).command(
            [
                sys.executable,
                "-c",
                IDENTITY_PROBE,
                str(mount),
                target,
                agent["containers"]["e" * 64],
                str(state / "t.json"),
            ],
            binds={host_path: str(mount)},
            join=[str(ROOT / agent["containers"]["e" * 64] / "cgroup.procs")],
            checkout_at=str(work / "checkout"),
        )
        proc = subprocess.run(command, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"the confined probe failed ({proc.returncode}): {proc.stderr}")
        result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
        result["target_cpu_max"] = read(target, "cpu.max").strip()
        return result
    finally:
        remove_pod(agent["pod"])
        shutil.rmtree(work, ignore_errors=True)


# ---- whole processes (the agent itself) ------------------------------------------------------------


def spawn(argv: list[str], log: str, env: dict[str, str] | None = None) -> int:
    """Start ``argv`` (in the guest's root cgroup) logging to ``log``; returns its pid (:func:`stop` ends it)."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})}
        )
    _procs[proc.pid] = proc
    return proc.pid


def terminate(pid: int) -> int | None:
    """SIGTERM a process started by :func:`spawn` and reap it; its exit code."""
    proc = _procs.pop(pid)
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def alive(pid: int) -> bool:
    proc = _procs.get(pid)
    return proc is not None and proc.poll() is None


def http_get(url: str) -> list[Any] | None:
    """``[status, body]`` of a GET inside the guest, or None when nothing answers."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return [resp.status, resp.read().decode()]
    except urllib.error.HTTPError as exc:
        return [exc.code, exc.read().decode()]
    except OSError:
        return None


def cpu_seconds(pid: int) -> float:
    """CPU time the process has used so far (the scheduler's count)."""
    return _on_cpu_ns(pid) / 1e9


def meminfo() -> dict[str, int]:
    """``/proc/meminfo`` in bytes."""
    return {line.split(":")[0]: int(line.split()[1]) * 1024 for line in Path("/proc/meminfo").read_text().splitlines()}


def clear() -> list[str]:
    """End every process this module started and remove every pod cgroup of both layouts; the removed paths."""
    from koordpy.agent.sources.cgroups import CgroupReader

    stop()
    removed = []
    for pod in CgroupReader(str(ROOT)).pods(containers=False).values():
        remove_pod(pod.rel)
        removed.append(pod.rel)
    return removed


def sh(command: str) -> list[Any]:
    """A shell command in the guest: ``[exit code, output]`` (for diagnostics)."""
    out = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, check=False)
    return [out.returncode, out.stdout + out.stderr]


def remove_tree(path: str) -> None:
    """Remove a directory in the guest with everything in it (nothing when it is not there)."""
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def touch(path: str) -> None:
    """Create an empty file (and its directory) in the guest."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).touch()


def unlink(path: str) -> None:
    Path(path).unlink(missing_ok=True)


def exists(rel: str) -> bool:
    """Whether the cgroup ``rel`` exists."""
    return (ROOT / rel).is_dir()


def read_json(path: str) -> Any:
    """A JSON file in the guest (the agent's state files under its ``stateDir``)."""
    return json.loads(Path(path).read_text())
