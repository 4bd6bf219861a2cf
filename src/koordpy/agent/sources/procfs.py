"""Node CPU and memory from procfs (``/proc/stat``, ``/proc/meminfo``) under a configurable root.

CPU in use = (total - idle - iowait) jiffies delta / total delta x number of CPUs; the first
call yields ``None``. Memory in use = ``MemTotal - MemAvailable`` (Crane's memory_total_usage).
Pressure (PSI) comes from ``/proc/pressure/<resource>``.

Not guaranteed: steal time counts as busy; a container-limited agent still sees the host.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from koordpy.agent.sources.cgroups import Pressure, read_pressure

__all__ = ["NodeReading", "ProcReader"]


@dataclass(frozen=True, slots=True)
class NodeReading:
    cpu: float | None  # cores in use
    cpu_capacity: float | None  # CPUs
    memory: int | None  # bytes in use
    memory_capacity: int | None  # bytes


@dataclass
class ProcReader:
    root: str = "/proc"
    _prev: tuple[int, int] | None = field(default=None, repr=False)

    def _text(self, name: str) -> str | None:
        try:
            with open(os.path.join(self.root, name), encoding="ascii") as fh:
                return fh.read()
        except (OSError, UnicodeDecodeError):
            return None

    def pressure(self, resource: str) -> dict[str, Pressure] | None:
        """Node-wide PSI for ``resource`` (``/proc/pressure/<resource>``); ``None`` without PSI."""
        return read_pressure(os.path.join(self.root, "pressure", resource))

    def read(self) -> NodeReading:
        cpu: float | None = None
        cpus: float | None = None
        stat = self._text("stat")
        if stat is not None:
            lines = stat.splitlines()
            cpus = float(sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())) or None
            head = lines[0].split() if lines else []
            if head and head[0] == "cpu":
                try:
                    values = [int(v) for v in head[1:]]
                except ValueError:
                    values = []
                if len(values) >= 5:
                    # user nice system idle iowait irq softirq steal [guest guest_nice: already in user/nice]
                    total = sum(values[:8])
                    busy = total - values[3] - values[4]
                    prev, self._prev = self._prev, (total, busy)
                    if prev is not None and total > prev[0] and cpus:
                        cpu = (busy - prev[1]) / (total - prev[0]) * cpus
        mem_total = mem_avail = None
        meminfo = self._text("meminfo")
        if meminfo is not None:
            for line in meminfo.splitlines():
                key, _, rest = line.partition(":")
                if key in ("MemTotal", "MemAvailable"):
                    try:
                        value = int(rest.split()[0]) * 1024
                    except (ValueError, IndexError):
                        continue
                    if key == "MemTotal":
                        mem_total = value
                    else:
                        mem_avail = value
        used = mem_total - mem_avail if mem_total is not None and mem_avail is not None else None
        return NodeReading(cpu, cpus, used, mem_total)
