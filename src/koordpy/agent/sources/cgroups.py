"""Read per-pod and per-container CPU and memory from cgroupfs (v1 or v2, cgroupfs or systemd driver).

Layouts understood (``<r>`` = the cgroup root, ``<c>`` = a v1 controller mount such as ``cpu``)::

    v1 cgroupfs:  <r>/<c>/kubepods[/burstable|/besteffort]/pod<uid>/<container-id>
    v1 systemd:   <r>/<c>/kubepods.slice[/kubepods-<qos>.slice]/kubepods[-<qos>]-pod<uid_>.slice/<runtime>-<id>.scope
    v2:           the same below <r> itself (no controller directory)

Container directories are ``<64-hex id>`` (docker/containerd via cgroupfs), ``cri-containerd-<id>.scope``,
``docker-<id>.scope``, ``crio-<id>.scope`` (``crio-conmon-*`` is skipped) or ``crio-<id>`` (cgroupfs).

CPU usage is a delta of the cumulative counter between two calls (the first call yields ``None``).
Memory is the working set: usage minus inactive file pages, as the kubelet reports it. A pod's own limit
holding it back is seen as its ``cpu.stat`` ``throttled_usec`` (read with the usage) or its
``memory.events`` ``high``/``max`` growing between two calls, or above 0 when first seen (v2).
Pressure (PSI) is read from ``cpu.pressure`` / ``memory.pressure`` / ``io.pressure`` (v2 only; see
:func:`read_pressure`).

Not guaranteed: a cgroup that vanishes or is half-created between the listing and the read yields
``None`` values for that pod or container; nothing raises for it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

__all__ = [
    "CgroupReader",
    "ContainerUsage",
    "PodCgroup",
    "PodUsage",
    "Pressure",
    "detect_version",
    "read_int",
    "read_pressure",
]

_POD_CGROUPFS = re.compile(r"^pod([0-9a-fA-F-]{8,})$")
_POD_SYSTEMD = re.compile(r"^kubepods(?:-(?:burstable|besteffort))?-pod([0-9a-fA-F_]{8,})\.slice$")
_CONTAINER = re.compile(r"^(?:(?:cri-containerd|docker|crio)-)?([0-9a-f]{12,})(?:\.scope)?$")
_QOS_DIRS = {
    "cgroupfs": ("kubepods", ("", "burstable", "besteffort")),
    "systemd": ("kubepods.slice", ("", "kubepods-burstable.slice", "kubepods-besteffort.slice")),
}


def detect_version(root: str) -> int:
    """2 when ``root`` is a unified (v2) mount, else 1."""
    return 2 if os.path.exists(os.path.join(root, "cgroup.controllers")) else 1


def read_int(path: str) -> int | None:
    """The integer in a one-value cgroup file; ``None`` if missing, unreadable or ``max``."""
    data = _read(path)
    if data is None:
        return None
    try:
        return int(data.split()[0])
    except (ValueError, IndexError):
        return None


def _read(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(fd, 65536)
    except OSError:
        return None
    finally:
        os.close(fd)


def _stat_value(data: bytes | None, key: bytes) -> int | None:
    """The value of ``key`` in a ``memory.stat``/``cpu.stat`` style file (``key value`` lines)."""
    if data is None:
        return None
    start = data.find(b"\n" + key + b" ")
    if start < 0:
        if not data.startswith(key + b" "):
            return None
        start = -1
    start += len(key) + 2
    end = data.find(b"\n", start)
    try:
        return int(data[start : end if end >= 0 else None])
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Pressure:
    """One line of a PSI file: the share of time some (or all: ``full``) runnable tasks were stalled on
    the resource, averaged over 10, 60 and 300 s (percent, as the kernel writes it), and the total stall
    time in microseconds (cumulative)."""

    avg10: float
    avg60: float
    avg300: float
    total_us: int


def read_pressure(path: str) -> dict[str, Pressure] | None:
    """``{"some": ..., "full": ...}`` from a PSI file (``/proc/pressure/cpu``, ``<cgroup>/memory.pressure``);
    ``None`` when the file is missing or unreadable (cgroup v1, a kernel without PSI). A line that does
    not parse is left out."""
    data = _read(path)
    if data is None:
        return None
    out: dict[str, Pressure] = {}
    for line in data.decode("ascii", "replace").splitlines():
        kind, _, rest = line.partition(" ")
        fields = dict(item.partition("=")[::2] for item in rest.split())
        try:
            out[kind] = Pressure(
                float(fields["avg10"]), float(fields["avg60"]), float(fields["avg300"]), int(fields["total"])
            )
        except (KeyError, ValueError):
            continue
    return out


@dataclass(frozen=True, slots=True)
class PodCgroup:
    uid: str
    rel: str  # path relative to the hierarchy root (v2) or to each controller mount (v1)
    containers: tuple[tuple[str, str], ...]  # (container id, rel path)


@dataclass(frozen=True, slots=True)
class ContainerUsage:
    container_id: str
    cpu: float | None  # cores
    memory: int | None  # working-set bytes


@dataclass(frozen=True, slots=True)
class PodUsage:
    uid: str
    rel: str
    cpu: float | None
    memory: int | None
    containers: tuple[ContainerUsage, ...] = ()
    cpu_limited_at: float | None = None
    """When (the caller's clock) the pod's ``cpu.stat`` ``throttled_usec`` was last seen to grow: its own
    ``cpu.max`` held it back (v2; ``None``: not seen since the reader started)."""


@dataclass
class CgroupReader:
    """Scans the kubepods tree and reads usage; keeps the previous CPU counters for deltas.

    ``now`` is passed in (monotonic seconds), so tests and the benchmark control time.
    """

    root: str = "/sys/fs/cgroup"
    version: int = 0  # 0: detect
    collect_containers: bool = True
    _prev: dict[str, tuple[float, int]] = field(default_factory=dict, repr=False)
    _path_cache: dict[str, tuple[str, str, str]] = field(default_factory=dict, repr=False)
    _limited: dict[str, tuple[int, float | None]] = field(default_factory=dict, repr=False)
    """cgroup -> (last counter of its own-limit stalls, when it last grew), for :meth:`limited_at`."""

    def __post_init__(self) -> None:
        if not self.version:
            self.version = detect_version(self.root)

    # -- paths -------------------------------------------------------------------------------
    def controller_dir(self, controller: str) -> str:
        """Directory the ``rel`` paths are relative to for ``controller`` (cpu, cpuacct, memory)."""
        if self.version == 2:
            return self.root
        for name in (controller, "cpu,cpuacct" if controller in ("cpu", "cpuacct") else controller):
            path = os.path.join(self.root, name)
            if os.path.isdir(path):
                return path
        return os.path.join(self.root, controller)

    def driver(self) -> str | None:
        base = self.controller_dir("cpu")
        for driver, (top, _) in _QOS_DIRS.items():
            if os.path.isdir(os.path.join(base, top)):
                return driver
        return None

    def pods(self, containers: bool | None = None) -> dict[str, PodCgroup]:
        """Pod UID -> its cgroup, found by listing the kubepods tree (three directory reads, plus
        one per pod when ``containers``; default: ``collect_containers``)."""
        if containers is None:
            containers = self.collect_containers
        base = self.controller_dir("cpu")
        out: dict[str, PodCgroup] = {}
        for driver, (top, qos_dirs) in _QOS_DIRS.items():
            if not os.path.isdir(os.path.join(base, top)):
                continue
            pattern = _POD_CGROUPFS if driver == "cgroupfs" else _POD_SYSTEMD
            for qos in qos_dirs:
                parent = os.path.join(top, qos) if qos else top
                try:
                    names = os.listdir(os.path.join(base, parent))
                except OSError:
                    continue
                for name in names:
                    match = pattern.match(name)
                    if match is None:
                        continue
                    uid = match.group(1).replace("_", "-")
                    rel = os.path.join(parent, name)
                    out[uid] = PodCgroup(uid, rel, self._containers(base, rel) if containers else ())
        return out

    @staticmethod
    def _containers(base: str, rel: str) -> tuple[tuple[str, str], ...]:
        try:
            names = os.listdir(os.path.join(base, rel))
        except OSError:
            return ()
        out = []
        for name in names:
            if name.startswith("crio-conmon-"):
                continue
            match = _CONTAINER.match(name)
            if match is not None:
                out.append((match.group(1), os.path.join(rel, name)))
        return tuple(sorted(out))

    # -- reads -------------------------------------------------------------------------------
    def _paths(self, rel: str) -> tuple[str, str, str]:
        """(cpu counter, memory usage, memory.stat) file paths of ``rel``, built once per cgroup."""
        paths = self._path_cache.get(rel)
        if paths is None:
            if self.version == 2:
                base = os.path.join(self.root, rel)
                paths = (f"{base}/cpu.stat", f"{base}/memory.current", f"{base}/memory.stat")
            else:
                cpu = os.path.join(self.controller_dir("cpuacct"), rel)
                mem = os.path.join(self.controller_dir("memory"), rel)
                paths = (f"{cpu}/cpuacct.usage", f"{mem}/memory.usage_in_bytes", f"{mem}/memory.stat")
            self._path_cache[rel] = paths
        return paths

    def cpu_usage_ns(self, rel: str) -> int | None:
        """Cumulative CPU time of the cgroup in nanoseconds."""
        path = self._paths(rel)[0]
        if self.version == 2:
            usec = _stat_value(_read(path), b"usage_usec")
            return None if usec is None else usec * 1000
        return read_int(path)

    def pressure(self, rel: str, resource: str) -> dict[str, Pressure] | None:
        """PSI of the cgroup for ``resource`` (``cpu``, ``memory``, ``io``); ``None`` on v1."""
        if self.version != 2:
            return None
        return read_pressure(os.path.join(self.root, rel, f"{resource}.pressure"))

    def _grew(self, key: str, count: int | None, now: float) -> float | None:
        """Remember ``count`` for ``key``; when it last grew (``None``: never seen growing). On first sight a
        count above 0 counts as growing now: it may have grown a moment ago, and a reader that starts (or a pod
        it first sees) must not take a limit's stall for contention."""
        if count is None:
            self._limited.pop(key, None)
            return None
        prev = self._limited.get(key)
        at = now if count > 0 else None  # first sight
        if prev is not None:
            at = now if count > prev[0] else prev[1]
        self._limited[key] = (count, at)
        return at

    def memory_limited_at(self, rel: str, now: float) -> float | None:
        """When the cgroup's ``memory.events`` ``high`` + ``max`` last grew: its own ``memory.high`` or
        ``memory.max`` held it back (v2; ``None``: not seen since the first call, or v1)."""
        if self.version != 2:
            return None
        data = _read(os.path.join(self.root, rel, "memory.events"))
        high, top = _stat_value(data, b"high"), _stat_value(data, b"max")
        count = None if high is None or top is None else high + top
        return self._grew(f"{rel}#memory", count, now)

    def working_set(self, rel: str) -> int | None:
        _, usage_path, stat_path = self._paths(rel)
        usage = read_int(usage_path)
        if usage is None:
            return None
        inactive = _stat_value(_read(stat_path), b"inactive_file" if self.version == 2 else b"total_inactive_file")
        return max(0, usage - (inactive or 0))

    def _cpu_cores(self, rel: str, now: float) -> float | None:
        total = self.cpu_usage_ns(rel)
        if total is None:
            self._prev.pop(rel, None)
            return None
        prev = self._prev.get(rel)
        self._prev[rel] = (now, total)
        if prev is None or now <= prev[0] or total < prev[1]:
            return None
        return (total - prev[1]) / 1e9 / (now - prev[0])

    def _sample(self, rel: str, now: float, limited: bool = False) -> tuple[float | None, int | None]:
        """CPU cores and working set of one cgroup: the hot path, three reads, no helper calls. ``limited``:
        also track its ``throttled_usec`` (v2) from the same read, for :meth:`cpu_limited_at`."""
        paths = self._path_cache.get(rel) or self._paths(rel)
        raw = _read(paths[0])
        total: int | None = None
        if raw is not None:
            if self.version == 2:
                usec = _stat_value(raw, b"usage_usec")
                total = None if usec is None else usec * 1000
                if limited:
                    self._grew(rel, _stat_value(raw, b"throttled_usec"), now)
            else:
                try:
                    total = int(raw)
                except ValueError:
                    total = None
        cpu: float | None = None
        if total is None:
            self._prev.pop(rel, None)
        else:
            prev = self._prev.get(rel)
            self._prev[rel] = (now, total)
            if prev is not None and now > prev[0] and total >= prev[1]:
                cpu = (total - prev[1]) / 1e9 / (now - prev[0])
        memory: int | None = None
        raw = _read(paths[1])
        if raw is not None:
            try:
                usage = int(raw)
            except ValueError:
                usage = -1
            if usage >= 0:
                inactive = _stat_value(
                    _read(paths[2]), b"inactive_file" if self.version == 2 else b"total_inactive_file"
                )
                memory = max(0, usage - (inactive or 0))
        return cpu, memory

    def collect(self, now: float, pods: dict[str, PodCgroup] | None = None) -> dict[str, PodUsage]:
        """Usage of every pod cgroup (pod UID ->). Counters of vanished cgroups are forgotten."""
        found = self.pods() if pods is None else pods
        out: dict[str, PodUsage] = {}
        seen: set[str] = set()
        for uid, cg in found.items():
            seen.add(cg.rel)
            containers = []
            for cid, rel in cg.containers:
                seen.add(rel)
                containers.append(ContainerUsage(cid, *self._sample(rel, now)))
            cpu, memory = self._sample(cg.rel, now, limited=True)
            limited = self._limited.get(cg.rel)
            out[uid] = PodUsage(uid, cg.rel, cpu, memory, tuple(containers), limited[1] if limited else None)
        # Forget counters of vanished cgroups (container counters live while their pod does, even
        # on calls that skip containers).
        for rel in [r for r in self._path_cache if r not in seen and r.rsplit("/", 1)[0] not in seen]:
            del self._path_cache[rel]
            self._prev.pop(rel, None)
        for key in [k for k in self._limited if k.partition("#")[0] not in seen]:
            del self._limited[key]
        return out
