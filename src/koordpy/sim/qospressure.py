"""CPU pressure (PSI) of the simulated nodes and pods, for the agent's pressure rules.

The simulator shares CPU as a fluid (``koordpy.sim.engine``); pressure is about waiting, which a fluid does
not have, so this is a model with one calibration factor, stated here and in ``docs/simulate.md``:

* **A pod's instantaneous CPU pressure** (``some``, percent), while it has demand:
  ``100 × min(1, k × Σ_others (u_o / C) × ρ(o, p) + unmet_p)``. ``u_o`` is another pod's CPU use, ``C``
  the node's cores, ``ρ(o, p) = w_o / (w_o + w_p)`` how much the kernel favours ``o`` over ``p``: the
  ``cpu.weight`` of the two entities where their cgroup paths part (the kubelet's tree: Guaranteed pods
  under ``kubepods``, the others in the ``burstable`` and ``besteffort`` slices; a pod's weight from its
  CPU request, a slice's from the sum of its pods' requests, BestEffort's the minimum), by the kubelet's
  conversion ``1 + (shares − 2) × 9999 / 262142``. ``unmet_p = (demand − use) / demand`` is the part of
  its demand the pod did not get (its own limit, the agent's cap, or a full node). ``k`` is
  ``qos.pressure.cpuContention`` (1 by default).
* **The node's** (``/proc/pressure/cpu`` ``some``): ``100 × min(1, max(0, Σ wanted − C) / C)``, wanted =
  demand cut at each pod's cap, plus the system's use.
* **Averages**: the kernel's exponential averages over 10, 60 and 300 s, advanced at each QoS tick
  (``avg ← avg × e^(−dt/W) + now × (1 − e^(−dt/W))``), starting at 0.
* **Own limit**: a pod whose demand exceeds its cap in force (CPU limit or the agent's cap) is held back by
  its own ``cpu.max``: its ``own_limit_age`` is the time since that was last so.

Not modelled: ``full`` CPU pressure, memory and io pressure (their rules read no value and do nothing,
``MetricMissing``), pressure of pods without demand (0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from koordpy.model.objects import PodInfo
from koordpy.model.priority import KubeQoS
from koordpy.sim.qos import PodUsage

__all__ = ["PressureModel", "cpu_weight"]

WINDOWS = (("avg10", 10.0), ("avg60", 60.0), ("avg300", 300.0))
MIN_SHARES, MAX_SHARES = 2, 262144


def _shares(millis: float) -> int:
    """The kubelet's ``MilliCPUToShares``: ``millis × 1024 / 1000``, at least 2, at most 262144."""
    if millis <= 0:
        return MIN_SHARES
    return max(MIN_SHARES, min(MAX_SHARES, int(millis * 1024 // 1000)))


def cpu_weight(millis: float) -> int:
    """The ``cpu.weight`` the kubelet writes for a CPU request of ``millis`` (cgroup v2)."""
    return 1 + ((_shares(millis) - 2) * 9999) // 262142


def _request(pod: PodInfo) -> float:
    return float(pod.requests.get("cpu", 0))


@dataclass
class PressureModel:
    """The pressure of every simulated node and pod; one instance per run (it keeps the averages)."""

    contention: float = 1.0
    _avg: dict[str, tuple[float, ...]] = field(default_factory=dict)
    """``node/<name>`` or ``pod/<id>`` -> the three averages (percent)."""
    _last: dict[str, float] = field(default_factory=dict)
    _held: dict[int, float] = field(default_factory=dict)
    _on: dict[str, set[int]] = field(default_factory=dict)

    def step(
        self, node: str, now: float, capacity_millis: float, node_millis: float, pods: Sequence[PodUsage]
    ) -> tuple[dict[str, float], dict[int, dict[str, float]], dict[int, dict[str, float]]]:
        """Advance ``node`` to ``now``: its pressure figures, each pod's (by pod id) and each pod's own-limit
        age (by pod id; only pods whose own limit has held them back)."""
        dt = now - self._last.get(node, now)
        self._last[node] = now
        cores = capacity_millis / 1000 if capacity_millis > 0 else 1.0
        slices = {
            KubeQoS.BURSTABLE: cpu_weight(sum(_request(p.pod) for p in pods if p.pod.qos is KubeQoS.BURSTABLE)),
            KubeQoS.BEST_EFFORT: cpu_weight(0),
        }
        own = {p.pod_id: cpu_weight(_request(p.pod)) for p in pods}

        def entity(p: PodUsage) -> tuple[str, int]:
            """The pod's ancestor right below ``kubepods`` and its weight."""
            if p.pod.qos is KubeQoS.GUARANTEED:
                return f"pod/{p.pod_id}", own[p.pod_id]
            return f"slice/{p.pod.qos}", slices[p.pod.qos]

        figures: dict[int, dict[str, float]] = {}
        ages: dict[int, dict[str, float]] = {}
        wanted = used = 0.0
        for p in pods:
            cap = p.cap_millis if p.cap_millis is not None else math.inf
            wanted += min(p.demand_millis, cap)
            used += p.cpu_millis
            if p.demand_millis > cap * (1 + 1e-9):
                self._held[p.pod_id] = now
            if p.pod_id in self._held:
                ages[p.pod_id] = {"cpu": now - self._held[p.pod_id]}
            instant = 0.0
            if p.demand_millis > 0:
                mine = entity(p)
                contention = 0.0
                for o in pods:
                    if o.pod_id == p.pod_id or o.cpu_millis <= 0:
                        continue
                    theirs = entity(o)
                    w_o, w_p = (own[o.pod_id], own[p.pod_id]) if theirs[0] == mine[0] else (theirs[1], mine[1])
                    contention += o.cpu_millis / 1000 / cores * w_o / (w_o + w_p)
                unmet = max(0.0, p.demand_millis - p.cpu_millis) / p.demand_millis
                instant = 100 * min(1.0, self.contention * contention + unmet)
            figures[p.pod_id] = self._average(f"pod/{p.pod_id}", instant, dt)
        here = {p.pod_id for p in pods}
        for gone in self._on.get(node, set()) - here:
            self._avg.pop(f"pod/{gone}", None)
            self._held.pop(gone, None)
        self._on[node] = here
        system = max(0.0, node_millis - used)
        node_instant = 100 * min(1.0, max(0.0, (wanted + system) / 1000 - cores) / cores)
        return self._average(f"node/{node}", node_instant, dt), figures, ages

    def _average(self, key: str, instant: float, dt: float) -> dict[str, float]:
        before = self._avg.get(key, (0.0,) * len(WINDOWS))
        after = tuple(
            avg * math.exp(-dt / window) + instant * (1 - math.exp(-dt / window))
            for avg, (_, window) in zip(before, WINDOWS, strict=True)
        )
        self._avg[key] = after
        return {f"cpu_pressure_some_{name}": value for (name, _), value in zip(WINDOWS, after, strict=True)}
