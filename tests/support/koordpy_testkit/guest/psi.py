"""A running agent's pressure stall information (PSI) beside the kernel's files, read at the same moment.

:func:`beside_scrape` runs in the guest: it reads the PSI files of the node (``/proc/pressure/<resource>``)
and of the pod cgroups it is given, fetches the agent's ``/metrics`` while a thread keeps reading the files
(every 10 ms), and reads them once more when the answer is in. :func:`differences` runs on the host: every
PSI series the agent exposes for the node and those pods must lie within what the files said over that
time, since the agent reads the files while it answers the scrape. The kernel's ``total`` (microseconds)
only grows, and each average holds its value for 2 s between updates (a scrape under emulation can span
more than one update, which the readings in between catch), so the range is tight. The files are parsed
here, independently of the agent's own reader.

Not guaranteed: a series the agent exposes for a pod that is not passed in is not compared.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["RATIO_TOLERANCE", "SECONDS_TOLERANCE", "beside_scrape", "differences", "parse", "series"]

RESOURCES = ("cpu", "memory", "io")
WINDOWS = (("10s", "avg10"), ("60s", "avg60"), ("300s", "avg300"))
RATIO_TOLERANCE = 1e-9
"""The agent divides the kernel's percentage by 100; only the float's last digit may differ."""
SECONDS_TOLERANCE = 1e-6
"""The agent divides the kernel's microseconds by 10^6; one microsecond either way."""

Reading = dict[str, dict[str, dict[str, float]]]
"""resource -> degree (``some``/``full``) -> ``avg10``, ``avg60``, ``avg300`` (percent), ``total`` (us)."""


def parse(text: str) -> dict[str, dict[str, float]]:
    """One PSI file: ``some avg10=1.23 avg60=0.40 avg300=0.09 total=123456`` per degree."""
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        degree, *fields = line.split()
        out[degree] = {k: float(v) for k, v in (f.split("=", 1) for f in fields)}
    return out


def _read(cgroups: Mapping[str, str]) -> dict[str, Reading]:
    found: dict[str, Reading] = {"": {}}
    for resource in RESOURCES:
        path = Path(f"/proc/pressure/{resource}")
        if path.exists():
            found[""][resource] = parse(path.read_text())
    for key, rel in cgroups.items():
        found[key] = {}
        for resource in RESOURCES:
            path = Path("/sys/fs/cgroup") / rel / f"{resource}.pressure"
            if path.exists():
                found[key][resource] = parse(path.read_text())
    return found


def beside_scrape(url: str, cgroups: dict[str, str]) -> dict[str, Any]:
    """In the guest: the PSI files of the node and of ``cgroups`` (pod key ``namespace/name`` -> cgroup path
    relative to ``/sys/fs/cgroup``) read before the agent's ``/metrics`` at ``url`` is asked for, every
    10 ms while it answers (each distinct reading kept) and once it has answered; and the answer."""
    import threading
    import time
    import urllib.request

    readings = [_read(cgroups)]
    done = threading.Event()

    def poll() -> None:
        while not done.wait(0.01):
            found = _read(cgroups)
            if found != readings[-1]:
                readings.append(found)

    poller = threading.Thread(target=poll, daemon=True)
    started = time.monotonic()
    poller.start()
    try:
        with urllib.request.urlopen(url, timeout=60) as resp:
            text = resp.read().decode()
    finally:
        done.set()
        poller.join()
    seconds = time.monotonic() - started
    readings.append(_read(cgroups))
    return {"readings": readings, "metrics": text, "seconds": seconds}


def series(text: str) -> dict[tuple[str, str, str, str], float]:
    """The agent's PSI series: (pod key or "" for the node, resource, degree, window or ``total``) -> value
    (a ratio, or seconds for ``total``)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[tuple[str, str, str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            if sample.name in ("koordpy_agent_node_psi", "koordpy_agent_pod_psi"):
                window = labels["window"]
            elif sample.name in (
                "koordpy_agent_node_psi_stalled_seconds_total",
                "koordpy_agent_pod_psi_stalled_seconds_total",
            ):
                window = "total"
            else:
                continue
            key = f"{labels['namespace']}/{labels['pod']}" if "pod" in labels else ""
            out[(key, labels["resource"], labels["degree"], window)] = sample.value
    return out


def differences(snapshot: Mapping[str, Any]) -> list[str]:
    """Each PSI series of the node and of the snapshot's pods that is missing from ``/metrics`` or lies
    outside what the files said from before the scrape until after it (empty: the agent told the kernel's
    figures)."""
    exposed = series(snapshot["metrics"])
    readings = snapshot["readings"]
    before = readings[0]
    out: list[str] = []
    for key, reading in before.items():
        who = key or "the node"
        for resource, degrees in reading.items():
            for degree in degrees:
                seen = [r[key][resource][degree] for r in readings]
                checks = [(window, field, 100.0, RATIO_TOLERANCE) for window, field in WINDOWS]
                checks.append(("total", "total", 1e6, SECONDS_TOLERANCE))
                for window, field, scale, tolerance in checks:
                    low, high = min(f[field] for f in seen) / scale, max(f[field] for f in seen) / scale
                    value = exposed.get((key, resource, degree, window))
                    if value is None:
                        out.append(f"{who} {resource} {degree} {window}: not exposed")
                    elif not low - tolerance <= value <= high + tolerance:
                        out.append(f"{who} {resource} {degree} {window}: agent {value!r}, files {low!r}..{high!r}")
    for key, resource, degree, window in exposed:
        if key in before and degree not in before[key].get(resource, {}):
            out.append(f"{key or 'the node'} {resource} {degree} {window}: exposed, no such line in the file")
    return out
