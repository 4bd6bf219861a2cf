"""Fabricated cgroup trees with the real file layout (v1 or v2, cgroupfs or systemd driver).

Used by the node tier for cgroup v2 layouts without a guest, by the cluster tier's agent on kwok nodes and by
``bench/agent.py``; :func:`pod_rel` and :func:`container_name` also name the real cgroups of the guest tier.

Example::

    tree = FakeCgroupTree(tmp_path, version=2, driver="systemd")
    rel = tree.add_pod("1234-...", qos="burstable", containers=["abc..."], runtime="cri-containerd")
    tree.advance_cpu(rel, seconds=0.5)
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

__all__ = ["BusyProc", "FakeCgroupTree", "container_name", "pod_rel", "write_procfs"]

_TOPS = {"cgroupfs": "kubepods", "systemd": "kubepods.slice"}


def pod_rel(driver: str, uid: str, qos: str) -> str:
    """The kubelet's path of a pod cgroup (below the hierarchy root) for its cgroup driver and QoS class."""
    top = _TOPS[driver]
    if driver == "cgroupfs":
        name = f"pod{uid}"
        return f"{top}/{name}" if qos == "guaranteed" else f"{top}/{qos}/{name}"
    uid_ = uid.replace("-", "_")
    if qos == "guaranteed":
        return f"{top}/kubepods-pod{uid_}.slice"
    return f"{top}/kubepods-{qos}.slice/kubepods-{qos}-pod{uid_}.slice"


def container_name(driver: str, container_id: str, runtime: str) -> str:
    """The directory name of a container's cgroup below its pod's, as the runtime names it."""
    if driver == "cgroupfs":
        return f"crio-{container_id}" if runtime == "crio" else container_id
    return f"{runtime}-{container_id}.scope"


class FakeCgroupTree:
    def __init__(self, root: Path, *, version: int = 2, driver: str = "systemd") -> None:
        self.root = root
        self.version = version
        self.driver = driver
        root.mkdir(parents=True, exist_ok=True)
        if version == 2:
            (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
        self._cpu_ns: dict[str, int] = {}
        self._throttled_usec: dict[str, int] = {}

    def _bases(self) -> list[Path]:
        if self.version == 2:
            return [self.root]
        return [self.root / c for c in ("cpu", "cpuacct", "memory")]

    def pod_rel(self, uid: str, qos: str) -> str:
        return pod_rel(self.driver, uid, qos)

    def container_name(self, container_id: str, runtime: str) -> str:
        return container_name(self.driver, container_id, runtime)

    def _make(self, rel: str, *, quota: int = -1, period: int = 100000, memory: int = 0, inactive: int = 0) -> None:
        for base in self._bases():
            (base / rel).mkdir(parents=True, exist_ok=True)
        self._cpu_ns[rel] = 0
        self.set_cpu_ns(rel, 0)
        self.set_memory(rel, memory, inactive)
        self.set_quota(rel, quota, period)

    def add_pod(
        self,
        uid: str,
        *,
        qos: str = "burstable",
        containers: list[str] | tuple[str, ...] = (),
        runtime: str = "cri-containerd",
        quota: int = -1,
        memory: int = 0,
        inactive: int = 0,
    ) -> str:
        rel = self.pod_rel(uid, qos)
        self._make(rel, quota=quota, memory=memory, inactive=inactive)
        for cid in containers:
            self._make(f"{rel}/{self.container_name(cid, runtime)}", quota=quota)
        return rel

    def remove(self, rel: str) -> None:
        for base in self._bases():
            path = base / rel
            for dirpath, _dirs, files in sorted(os.walk(path, topdown=False), key=lambda t: -len(t[0])):
                for f in files:
                    os.unlink(os.path.join(dirpath, f))
                os.rmdir(dirpath)

    def set_cpu_ns(self, rel: str, total_ns: int) -> None:
        self._cpu_ns[rel] = total_ns
        if self.version == 2:
            usec = total_ns // 1000
            (self.root / rel / "cpu.stat").write_text(
                f"usage_usec {usec}\nuser_usec {usec // 2}\nsystem_usec {usec - usec // 2}\n"
                f"nr_periods 0\nnr_throttled 0\nthrottled_usec {self._throttled_usec.get(rel, 0)}\n"
            )
        else:
            (self.root / "cpuacct" / rel / "cpuacct.usage").write_text(f"{total_ns}\n")

    def add_throttled(self, rel: str, usec: int) -> None:
        """The cgroup's own ``cpu.max`` held it back for ``usec`` more (v2 ``cpu.stat`` ``throttled_usec``)."""
        self._throttled_usec[rel] = self._throttled_usec.get(rel, 0) + usec
        self.set_cpu_ns(rel, self._cpu_ns.get(rel, 0))

    def set_pressure(self, rel: str, resource: str, some_avg10: float, full_avg10: float = 0.0) -> None:
        """The cgroup's ``<resource>.pressure`` (v2), in the kernel's format; totals follow the averages."""
        (self.root / rel / f"{resource}.pressure").write_text(
            f"some avg10={some_avg10:.2f} avg60={some_avg10 / 2:.2f} avg300=0.00 total={int(some_avg10 * 1000)}\n"
            f"full avg10={full_avg10:.2f} avg60=0.00 avg300=0.00 total={int(full_avg10 * 1000)}\n"
        )

    def set_memory_events(self, rel: str, *, high: int = 0, top: int = 0) -> None:
        """The cgroup's ``memory.events`` (v2): ``high`` and ``max`` counts (``top``)."""
        (self.root / rel / "memory.events").write_text(f"low 0\nhigh {high}\nmax {top}\noom 0\noom_kill 0\n")

    def advance_cpu(self, rel: str, seconds: float) -> None:
        self.set_cpu_ns(rel, self._cpu_ns.get(rel, 0) + int(seconds * 1e9))

    def set_memory(self, rel: str, usage: int, inactive: int) -> None:
        if self.version == 2:
            (self.root / rel / "memory.current").write_text(f"{usage}\n")
            (self.root / rel / "memory.stat").write_text(
                f"anon {usage - inactive}\nfile {inactive}\nactive_file 0\ninactive_file {inactive}\n"
            )
        else:
            base = self.root / "memory" / rel
            (base / "memory.usage_in_bytes").write_text(f"{usage}\n")
            (base / "memory.stat").write_text(
                f"cache {inactive}\nrss {usage - inactive}\ninactive_file {inactive}\n"
                f"total_cache {inactive}\ntotal_rss {usage - inactive}\ntotal_inactive_file {inactive}\n"
            )

    def set_quota(self, rel: str, quota: int, period: int = 100000) -> None:
        if self.version == 2:
            (self.root / rel / "cpu.max").write_text(f"{'max' if quota < 0 else quota} {period}\n")
        else:
            base = self.root / "cpu" / rel
            (base / "cpu.cfs_quota_us").write_text(f"{quota}\n")
            (base / "cpu.cfs_period_us").write_text(f"{period}\n")

    def quota(self, rel: str) -> str:
        if self.version == 2:
            return (self.root / rel / "cpu.max").read_text().strip()
        return (self.root / "cpu" / rel / "cpu.cfs_quota_us").read_text().strip()


def write_procfs(
    root: Path, *, cpus: int, busy_jiffies: int, total_jiffies: int, mem_total_kib: int, mem_avail_kib: int
) -> None:
    """A minimal ``/proc`` with ``stat`` and ``meminfo``: idle = total - busy (no iowait)."""
    root.mkdir(parents=True, exist_ok=True)
    idle = total_jiffies - busy_jiffies
    lines = [f"cpu  {busy_jiffies} 0 0 {idle} 0 0 0 0 0 0"]
    lines += [f"cpu{i} 0 0 0 0 0 0 0 0 0 0" for i in range(cpus)]
    (root / "stat").write_text("\n".join(lines) + "\nintr 0\n")
    (root / "meminfo").write_text(
        f"MemTotal:       {mem_total_kib} kB\nMemFree: 0 kB\nMemAvailable:   {mem_avail_kib} kB\n"
    )


class BusyProc:
    """A fabricated ``/proc`` whose cpu counters advance in the background at a settable busy fraction."""

    def __init__(self, root: Path, cpus: int, mem_total_kib: int, mem_avail_kib: int) -> None:
        self.root, self.cpus = root, cpus
        self.mem = (mem_total_kib, mem_avail_kib)
        self.busy_fraction = 0.1
        self.total = self.busy = 0
        self.tick()

    def tick(self) -> None:
        step = 100 * self.cpus  # one second of jiffies on every cpu
        self.total += step
        self.busy += int(step * self.busy_fraction)
        write_procfs(
            self.root,
            cpus=self.cpus,
            busy_jiffies=self.busy,
            total_jiffies=self.total,
            mem_total_kib=self.mem[0],
            mem_avail_kib=self.mem[1],
        )

    async def run(self) -> None:
        while True:
            await asyncio.sleep(0.1)
            self.tick()
