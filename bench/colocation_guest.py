"""The guest side of ``bench/colocation.py``: calibrates the probe's unit and runs one case's timeline on the
node (the flag files that start and stop the batch pods' burst, a sample of every pod cgroup twice a
second, the probe's records of the window). Called through ``koordpy_testkit.guest.Guest.call``.

Not guaranteed: sampling exactly every half second under TCG (each sample carries its own time).
"""

from __future__ import annotations

import os
import struct
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path("/sys/fs/cgroup")
_offsets: dict[str, int] = {}
_records: dict[str, list[tuple[float, float]]] = {}


def calibrate(work_us: float, rounds: int = 15) -> dict[str, Any]:
    """Loop turns of the probe's unit that take ``work_us`` of CPU here, on a quiet node (median of rounds)."""
    turns = 20_000
    samples = []
    for _ in range(rounds):
        start = time.process_time()
        acc = 0
        for i in range(turns):
            acc += i ^ (acc >> 3)
        samples.append((time.process_time() - start) / turns)
    per_turn = sorted(samples)[len(samples) // 2]
    return {"iterations": max(1, round(work_us / 1e6 / per_turn)), "ns_per_turn": per_turn * 1e9}


def _stat(rel: str) -> dict[str, int]:
    out = {}
    for line in (ROOT / rel / "cpu.stat").read_text().splitlines():
        key, _, value = line.partition(" ")
        out[key] = int(value)
    return out


def _pressure(path: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    try:
        text = path.read_text()
    except OSError:
        return out
    for line in text.splitlines():
        degree, *fields = line.split()
        for field in fields:
            key, _, value = field.partition("=")
            out[f"{degree}_{key}"] = float(value)
    return out


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _sample(pods: dict[str, str]) -> dict[str, Any]:
    """Every watched pod cgroup and the node, at one instant."""
    now = time.monotonic()
    out: dict[str, Any] = {"t": now, "pods": {}}
    for name, rel in pods.items():
        if not (ROOT / rel).is_dir():
            out["pods"][name] = None
            continue
        stat = _stat(rel)
        out["pods"][name] = {
            "usage_usec": stat.get("usage_usec", 0),
            "throttled_usec": stat.get("throttled_usec", 0),
            "cpu_max": _read(ROOT / rel / "cpu.max"),
            "cpu_pressure": _pressure(ROOT / rel / "cpu.pressure"),
            "memory_pressure": _pressure(ROOT / rel / "memory.pressure"),
            "memory_current": int(_read(ROOT / rel / "memory.current") or 0),
        }
    head = Path("/proc/stat").read_text().splitlines()[0].split()
    values = [int(v) for v in head[1:9]]
    meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    out["node"] = {
        "busy_jiffies": sum(values) - values[3] - values[4],
        "total_jiffies": sum(values),
        "cpu_pressure": _pressure(Path("/proc/pressure/cpu")),
        "memory_pressure": _pressure(Path("/proc/pressure/memory")),
        "mem_total": int(meminfo["MemTotal"].split()[0]) * 1024,
        "mem_available": int(meminfo["MemAvailable"].split()[0]) * 1024,
    }
    return out


def _records_between(path: str, start: float, end: float) -> list[tuple[float, float]]:
    """The probe's (due, done) records due in [start, end), reading only what was appended since last time."""
    records = _records.setdefault(path, [])
    try:
        with open(path, "rb") as fh:
            fh.seek(_offsets.get(path, 0))
            data = fh.read()
    except OSError:
        return []
    whole = len(data) // 16 * 16
    _offsets[path] = _offsets.get(path, 0) + whole
    records.extend(struct.iter_unpack("dd", data[:whole]))
    # Keep the recent past only: a case never looks further back than its own start.
    _records[path] = [r for r in records if r[0] >= start - 5]
    return [r for r in _records[path] if start <= r[0] < end]


def agent_actions(url: str) -> dict[str, float]:
    """``koordpy_agent_actions_total`` by kind and ``koordpy_agent_throttled_pods`` from the agent's /metrics."""
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            text = resp.read().decode()
    except OSError:
        return {}
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("koordpy_agent_actions_total{"):
            kind = line.split('kind="', 1)[1].split('"', 1)[0]
            out[kind] = float(line.rsplit(" ", 1)[1])
        elif line.startswith("koordpy_agent_throttled_pods "):
            out["throttled_pods"] = float(line.rsplit(" ", 1)[1])
    return out


def run_case(
    pods: dict[str, str],
    flags: list[str],
    probes: dict[str, str],
    metrics_url: str,
    lead: float,
    burst: float,
    settle: float,
    every: float = 0.5,
) -> dict[str, Any]:
    """One case: ``lead`` seconds with the batch pods idle, ``burst`` seconds with ``flags`` present (the batch
    pods busy), then up to ``settle`` seconds for the agent to give every cap back (``throttled_pods`` 0).
    Times in the result are seconds from the burst's start."""
    for flag in flags:
        Path(flag).unlink(missing_ok=True)
    before = agent_actions(metrics_url)
    start = time.monotonic()
    samples = []
    burst_at = start + lead
    end_burst = burst_at + burst
    started = stopped = False
    while True:
        now = time.monotonic()
        if not started and now >= burst_at:
            for flag in flags:
                Path(flag).touch()
            started = True
            burst_at = now
            end_burst = now + burst
        if started and not stopped and now >= end_burst:
            for flag in flags:
                Path(flag).unlink(missing_ok=True)
            stopped = True
            end_burst = now
        samples.append(_sample(pods))
        if stopped:
            counters = agent_actions(metrics_url)
            if counters.get("throttled_pods", 0) == 0 or now >= end_burst + settle:
                break
        time.sleep(max(0.0, every - (time.monotonic() - now)))
    after = agent_actions(metrics_url)
    load = os.getloadavg()
    for sample in samples:
        sample["t"] -= burst_at
    return {
        "burst_at": burst_at,
        "burst_seconds": end_burst - burst_at,
        "samples": samples,
        "probes": {
            name: [(due - burst_at, done - due) for due, done in _records_between(path, start, time.monotonic())]
            for name, path in probes.items()
        },
        "actions": {k: after.get(k, 0) - before.get(k, 0) for k in ("throttle", "restore", "evict")},
        "guest_loadavg": list(load),
    }


def touch(path: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).touch()


def unlink(path: str) -> None:
    Path(path).unlink(missing_ok=True)
