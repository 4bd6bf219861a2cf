"""Agent overhead bench (not a test): the agent's own CPU per tick and its RSS at 50, 110 and 250 pods, on real
cgroup trees: this host's cgroup v1 (native speed) and a QEMU guest's cgroup v2 with PSI (the guest tier's
kernel; TCG emulation, so its times are also given scaled by a calibration loop run on both sides).

Per size, in a fresh process (so the RSS is that of an agent process at that size): a kubelet-shaped tree of
pod cgroups (a third each Guaranteed, Burstable, BestEffort; one container each) is made under the real
cgroupfs (v1: ``/sys/fs/cgroup/{cpu,cpuacct,memory}/koordpy-bench-<id>``, read through a directory of
links; v2: the guest's ``/sys/fs/cgroup/kubepods``), the agent's modules are imported (``koordpy.agent.loop``,
as ``koordpy agent run`` does) and ticks run back to back: collection (``Collector.collect``: every pod's
``cpu.stat``/``cpuacct.usage``, ``memory.current``, ``memory.stat``, and with the pressure rules in force its
``cpu.pressure``), the plan (``policy.plan``) and the state file the agent writes after each tick. The
policy is what a co-location user writes: a node CPU waterline that fires every tick, a memory waterline and
a rule on the protected pods' CPU pressure (``docs/agent.md``). The pods' cgroups hold no processes, so
nothing is throttled: the decision's own cost at these sizes is ``bench/agent.py``'s (a policy that acts on
every tick). CPU is the process's (``time.process_time``), so other load on the machine does not count.

Run: ``.venv/bin/python bench/agent_overhead.py [--ticks N] [--no-guest]`` (as root: it makes cgroups). Prints a
table and writes ``bench/results/agent_overhead.json``. The guest part boots the guest tier's QEMU guest
(``scripts/install-guest.sh`` must have run) and takes a few minutes.

Not guaranteed: figures at other sizes or on other kernels; the guest's scaled times are an estimate (TCG
slows file reads and Python differently).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "agent_overhead.json"
SIZES = (50, 110, 250)
V1_ROOT = Path("/sys/fs/cgroup")
V1_CONTROLLERS = ("cpu", "cpuacct", "memory")
CALIBRATION_LOOPS = 2_000_000
PUBLISHED = {
    "crane-agent": "about 2 cores at 217 pods, 893m at 119 pods, 20m at 13 pods (crane-agent v0.9.0, as its users reported)",
    "koordlet": "about 240 MB RSS with CPI and PSI collection on, against its 256 Mi limit (as koordlet users reported)",
}


def calibration_seconds() -> float:
    """CPU seconds of a fixed pure-Python loop (the same on both sides of the guest/host comparison)."""
    start = time.process_time()
    total = 0
    for i in range(CALIBRATION_LOOPS):
        total += i & 7
    assert total > 0
    return time.process_time() - start


def _pod_dirs(base: Path, i: int, uid: str) -> tuple[str, str]:
    qos = ("guaranteed", "burstable", "besteffort")[i % 3]
    parent = "kubepods" if qos == "guaranteed" else f"kubepods/{qos}"
    rel = f"{parent}/pod{uid}"
    return rel, f"{rel}/{uuid.UUID(int=i + 1).hex * 2}"


def _tree(version: int, pods: int) -> tuple[str, list[Path], list[dict[str, Any]]]:
    """Make the pod cgroups; (reader root, directories to remove deepest first, pod objects)."""
    made: list[Path] = []
    raws: list[dict[str, Any]] = []
    if version == 1:
        top = f"koordpy-bench-{uuid.uuid4().hex[:8]}"
        links = Path(tempfile.mkdtemp(prefix="koordpy-bench-root-"))
        for controller in V1_CONTROLLERS:
            (V1_ROOT / controller / top).mkdir()
            made.append(V1_ROOT / controller / top)
            (links / controller).symlink_to(V1_ROOT / controller / top)
        bases = [V1_ROOT / c / top for c in V1_CONTROLLERS]
        root = str(links)
    else:
        bases = [Path("/sys/fs/cgroup")]
        root = "/sys/fs/cgroup"
        for level in ("kubepods", "kubepods/burstable", "kubepods/besteffort"):
            path = bases[0] / level
            path.mkdir(exist_ok=True)
            (path / "cgroup.subtree_control").write_text("+cpu +memory +pids +io")
    for base in bases:
        for level in ("kubepods", "kubepods/burstable", "kubepods/besteffort"):
            path = base / level
            if not path.exists():
                path.mkdir()
            made.append(path)
    for i in range(pods):
        uid = str(uuid.UUID(int=(i + 1) << 64))
        rel, container = _pod_dirs(bases[0], i, uid)
        for base in bases:
            for d in (rel, container):
                (base / d).mkdir()
                made.append(base / d)
        qos = ("guaranteed", "burstable", "besteffort")[i % 3]
        res: dict[str, Any] = {}
        if qos != "besteffort":
            res["requests"] = {"cpu": "100m", "memory": "64Mi"}
        if qos == "guaranteed":
            res["limits"] = {"cpu": "100m", "memory": "64Mi"}
        labels = {"app": "web"} if i % 10 == 0 else {"app": f"batch-{i % 7}"}
        raws.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"pod-{i}", "namespace": f"ns-{i % 7}", "uid": uid, "labels": labels},
                "spec": {
                    "nodeName": "node-1",
                    "priority": 9000 if i % 10 == 0 else 5000,
                    "containers": [{"name": "main", "resources": res}],
                },
                "status": {"phase": "Running"},
            }
        )
    made.reverse()
    return root, made, raws


def _remove(made: list[Path], root: str) -> None:
    for path in sorted(set(made), key=lambda p: -len(p.parts)):
        if path.exists():
            path.rmdir()
    if root != "/sys/fs/cgroup":
        shutil.rmtree(root, ignore_errors=True)


def rss_kib() -> tuple[int, int]:
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields["VmRSS"], fields["VmHWM"]


def child(version: int, pods: int, ticks: int) -> dict[str, Any]:
    """One size in this (fresh) process: the tree, the agent's imports, the ticks."""
    rss_start = rss_kib()[0]
    import koordpy.agent.loop  # noqa: F401  # what `koordpy agent run` imports
    from koordpy.agent.loop import Collector
    from koordpy.agent.policy import BUILTIN, AgentState, plan
    from koordpy.agent.policy.pressure import pressure_needs
    from koordpy.agent.policy.report import UsageHistory
    from koordpy.agent.sources.cgroups import CgroupReader
    from koordpy.agent.sources.procfs import ProcReader
    from koordpy.model.objects import pod_from_dict
    from koordpy_testkit.agent import evict_action, qos_policy, rule, throttle_action

    rss_imported = rss_kib()[0]
    root, made, raws = _tree(version, pods)
    try:
        infos = [pod_from_dict(r) for r in raws]
        policies = [
            qos_policy(
                "colocation",
                rule("cpu", "cpu_total_usage", 1, "throttle"),  # fires every tick
                rule("memory", "memory_total_utilization", 95, "evict"),
                rule("web", "pod_cpu_pressure_some_avg10", 20, "throttle", selector={"matchLabels": {"app": "web"}}),
            )
        ]
        actions = [throttle_action("throttle", step=20, cool_down=1), evict_action("evict", cool_down=1)]
        needs = pressure_needs(policies, BUILTIN)
        collector = Collector(CgroupReader(root, collect_containers=True), ProcReader("/proc"), "node-1")
        history = UsageHistory(horizon=300)
        state = AgentState()
        state_file = Path(tempfile.mkdtemp(prefix="koordpy-bench-state-")) / "policy-state.json"
        per_tick: list[float] = []
        collect_ms: list[float] = []
        for tick in range(ticks + 2):
            now = 1_795_000_000.0 + tick
            start = time.process_time()
            node, samples, _ = collector.collect(
                now, float(tick), infos, {}, history, containers=tick % 10 == 9, pressure=needs
            )
            mid = time.process_time()
            result = plan(policies, actions, node, samples, state, now=now)
            state = result.state
            tmp = state_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(state.to_dict(), sort_keys=True))
            os.replace(tmp, state_file)
            history.prune(now)
            elapsed = time.process_time() - start
            if tick >= 2:
                per_tick.append(elapsed * 1000)
                collect_ms.append((mid - start) * 1000)
        shutil.rmtree(state_file.parent, ignore_errors=True)
        psi_files = sum(1 for s in samples if s.pressure)
        rss, hwm = rss_kib()
        return {
            "pods": pods,
            "cgroup_version": version,
            "ticks": len(per_tick),
            "cpu_ms_per_tick_median": round(statistics.median(per_tick), 3),
            "cpu_ms_per_tick_p90": round(sorted(per_tick)[int(0.9 * (len(per_tick) - 1))], 3),
            "of_which_collection_ms_median": round(statistics.median(collect_ms), 3),
            "pods_with_psi_read": psi_files,
            "rss_mib_interpreter": round(rss_start / 1024, 1),
            "rss_mib_agent_imported": round(rss_imported / 1024, 1),
            "rss_mib_after_ticks": round(rss / 1024, 1),
            "rss_hwm_mib": round(hwm / 1024, 1),
            "calibration_s": round(calibration_seconds(), 4),
        }
    finally:
        _remove(made, root)


def run_sizes(version: int, ticks: int) -> list[dict[str, Any]]:
    """Each size in a fresh interpreter (this file as a script)."""
    rows = []
    for pods in SIZES:
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(version), str(pods), str(ticks)],
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return rows


def guest_rows(ticks: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    import agent_overhead  # this file by its module name: the guest's runner imports it (PYTHONPATH)

    from koordpy_testkit.guest import Guest

    work = Path(tempfile.mkdtemp(prefix="koordpy-bench-guest-"))
    guest = Guest(work, env={"PYTHONPATH": str(Path(__file__).resolve().parent)})
    guest.start()
    try:
        rows = guest.call(agent_overhead.run_sizes, version=2, ticks=ticks, backstop=3600)
        uptime = guest.call(agent_overhead.loadavg)
    finally:
        guest.stop()
    return rows, {"boot_seconds": guest.boot_seconds, "qemu_cpu_seconds": guest.cpu_seconds, "loadavg": uptime}


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ticks", type=int, default=40)
    parser.add_argument("--no-guest", action="store_true")
    parser.add_argument("--child", nargs=3, type=int, metavar=("VERSION", "PODS", "TICKS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    load_before = os.getloadavg()
    host = run_sizes(1, args.ticks)
    host_calibration = statistics.median(calibration_seconds() for _ in range(3))
    guest: list[dict[str, Any]] = []
    guest_info: dict[str, Any] = {}
    if not args.no_guest:
        guest, guest_info = guest_rows(args.ticks)
        for row in guest:
            factor = row["calibration_s"] / host_calibration
            row["tcg_slowdown"] = round(factor, 1)
            row["cpu_ms_per_tick_scaled"] = round(row["cpu_ms_per_tick_median"] / factor, 3)
    out = {
        "benchmark": "agent overhead per tick and RSS on real cgroup trees",
        "command": " ".join([".venv/bin/python", "bench/agent_overhead.py", *sys.argv[1:]]),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "host_cgroup_v1": host,
        "guest_cgroup_v2": guest,
        "guest": guest_info,
        "host_calibration_s": round(host_calibration, 4),
        "published": PUBLISHED,
    }
    print(f"{'tree':<14} {'pods':>5} {'CPU ms/tick':>12} {'p90':>8} {'scaled':>8} {'RSS MiB':>8} {'imports':>8}")
    for name, rows in (("host v1", host), ("guest v2+PSI", guest)):
        for row in rows:
            scaled = row.get("cpu_ms_per_tick_scaled")
            print(
                f"{name:<14} {row['pods']:>5} {row['cpu_ms_per_tick_median']:>12.2f} {row['cpu_ms_per_tick_p90']:>8.2f} "
                f"{'' if scaled is None else f'{scaled:.2f}':>8} {row['rss_mib_after_ticks']:>8.1f} "
                f"{row['rss_mib_agent_imported']:>8.1f}"
            )
    print(f"load average before {out['loadavg_before']}, after {out['loadavg_after']}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
