"""Pressure stall information (PSI) of the node and its pods as Prometheus metrics, read when scraped.

``koordpy_agent_node_psi{resource,degree,window}`` and ``koordpy_agent_pod_psi{namespace,pod,...}`` are the
kernel's running averages as a ratio (0.25 = stalled 25 % of the window); ``..._psi_stalled_seconds_total``
is the kernel's cumulative stall time. ``degree`` is ``some`` (at least one task stalled) or ``full`` (all
non-idle tasks stalled); ``window`` is ``10s``, ``60s`` or ``300s``.

Not guaranteed: a series for a pod whose cgroup vanished since the last tick, or on cgroup v1 (no PSI files
there): such pods have none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from koordpy.agent.sources.cgroups import CgroupReader, Pressure
from koordpy.agent.sources.procfs import ProcReader
from koordpy.model.objects import PodInfo

__all__ = [
    "PSI_RESOURCES",
    "PressureMetrics",
    "PressureReading",
    "node_pressure",
    "pod_pressure",
    "pressure_figures",
]

PSI_RESOURCES = ("cpu", "memory", "io")
PSI_WINDOWS = (("10s", "avg10"), ("60s", "avg60"), ("300s", "avg300"))

PressureReading = tuple[tuple[str, ...], str, Mapping[str, Pressure]]
"""(extra label values, resource, {"some"|"full": Pressure})."""


def pressure_figures(resource: str, lines: Mapping[str, Pressure] | None) -> dict[str, float]:
    """A PSI file's averages keyed as the pressure rules name them (``cpu_pressure_some_avg10`` -> percent)."""
    out: dict[str, float] = {}
    for degree, line in (lines or {}).items():
        for _, attr in PSI_WINDOWS:
            out[f"{resource}_pressure_{degree}_{attr}"] = getattr(line, attr)
    return out


def node_pressure(proc: ProcReader) -> Iterator[PressureReading]:
    """The node's PSI, one reading per resource the kernel has."""
    for resource in PSI_RESOURCES:
        lines = proc.pressure(resource)
        if lines:
            yield (), resource, lines


def pod_pressure(
    reader: CgroupReader, pods: Mapping[str, PodInfo], cgroups: Mapping[str, str]
) -> Iterator[PressureReading]:
    """PSI of each pod in ``pods`` (uid -> pod) whose cgroup ``cgroups`` (uid -> path) names."""
    for uid, rel in sorted(cgroups.items()):
        pod = pods.get(uid)
        if pod is None:
            continue
        for resource in PSI_RESOURCES:
            lines = reader.pressure(rel, resource)
            if lines:
                yield (pod.namespace, pod.name), resource, lines


class PressureMetrics(Collector):
    """The node's and the pods' PSI, read from the kernel at each scrape (the ticks read only what the
    pressure rules use, :func:`pressure_figures`)."""

    def __init__(
        self, node: Callable[[], Iterable[PressureReading]], pods: Callable[[], Iterable[PressureReading]]
    ) -> None:
        self._node = node
        self._pods = pods

    def describe(self) -> list[Metric]:
        return []  # nothing is read at registration

    def collect(self) -> Iterator[Metric]:
        for scope, labels, source in (("node", [], self._node), ("pod", ["namespace", "pod"], self._pods)):
            ratio = GaugeMetricFamily(
                f"koordpy_agent_{scope}_psi",
                f"Pressure stall information of the {scope}: share of the window in which tasks were stalled.",
                labels=[*labels, "resource", "degree", "window"],
            )
            stalled = CounterMetricFamily(
                f"koordpy_agent_{scope}_psi_stalled_seconds",
                f"Pressure stall information of the {scope}: cumulative stall time.",
                labels=[*labels, "resource", "degree"],
            )
            for values, resource, lines in source():
                for degree, line in sorted(lines.items()):
                    for window, attr in PSI_WINDOWS:
                        ratio.add_metric([*values, resource, degree, window], getattr(line, attr) / 100.0)
                    stalled.add_metric([*values, resource, degree], line.total_us / 1e6)
            yield ratio
            yield stalled
