"""Gang requeue bench (not a test): 10,000 members refused at quorum, then the last one arrives.

What waking a 10,000-member gang costs the extender and the API server, through the extender's own
``GangBarrier`` (the gang model and the paced ``Requeuer``) with a real API client against the API
emulator (``koordpy_testkit.apiserver``, in this process): the members' ``/filter`` quorum tests (each
refused and parked), the last member's arrival (one evaluation of the gang, 10,000 wake-ups), then the
writes of the requeue signal (``gang.requeueSignal``, a CSIStorageCapacity), paced by
``gang.requeueQPS``/``requeueBurst``; each write asks for every member waiting when it goes out. Measured:
CPU seconds of the refusals and of the wake-up decision, signal writes sent and answered, members asked
for, and the time until the last write.

Run: ``.venv/bin/python bench/gang_requeue.py [--members N] [--qps Q --burst B ...]`` (defaults: 10,000
members at the chart's 50/s burst 100). Prints the figures and writes ``bench/results/gang_requeue.json``.
Under a minute.

Not guaranteed: stable figures on a shared machine; the emulator is not kube-apiserver (its patch costs
differ; ``bench/gang_real_scheduler.py`` measures a 1,000-member gang on the real one).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import datetime as dt
import json
import os
import platform
import resource
import sys
import time
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from koordpy.config.gang import CoschedulingArgs
from koordpy.kube.client import ApiClient
from koordpy.kube.connection import ConnectionInfo
from koordpy.model.objects import pod_from_dict
from koordpy.runtime.clock import SystemClock
from koordpy.runtime.logging import get_logger
from koordpy.scheduler.extender.gangs import GangBarrier, GangMetrics
from koordpy_testkit import PodBuilder
from koordpy_testkit.apiserver import running_apiserver

RESULTS = Path(__file__).resolve().parent / "results" / "gang_requeue.json"
LABEL = "pod-group.scheduling.sigs.k8s.io"


def member(i: int) -> dict[str, Any]:
    return PodBuilder(f"w{i:05d}", "train").label(LABEL, "big").requests(cpu="100m", memory="64Mi").build()


async def run(members: int, qps: float, burst: int) -> dict[str, Any]:
    async with running_apiserver() as api:
        raws = [member(i) for i in range(members + 1)]
        for raw in raws:
            api.seed(raw)
        podgroup = {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "big", "namespace": "train"},
            "spec": {"minMember": members + 1},
        }
        api.seed(podgroup)
        signal = {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSIStorageCapacity",
            "metadata": {"name": "koordpy-gang-requeue", "namespace": "koordpy-system"},
            "storageClassName": "koordpy-gang-requeue",
        }
        api.seed(signal)
        pods = [pod_from_dict(raw) for raw in raws]
        client = ApiClient(ConnectionInfo.for_url(api.url, token="bench"))
        await client.open()
        sent_at: list[float] = []

        class Timed:
            """The client's patch, each call's start time recorded."""

            async def patch(self, *a: Any, **kw: Any) -> Any:
                sent_at.append(time.monotonic())
                return await client.patch(*a, **kw)

        timed = Timed()
        args = CoschedulingArgs.model_validate(
            {"requeueQPS": qps, "requeueBurst": burst, "requeueSignal": "koordpy-system/koordpy-gang-requeue"}
        )
        holder: dict[str, GangBarrier] = {}
        barrier = GangBarrier(
            args,
            clock=SystemClock(),
            log=get_logger("bench"),
            metrics=GangMetrics(CollectorRegistry(), lambda: holder.get("b")),
            binder=lambda: None,
            patcher=lambda: timed,
        )
        holder["b"] = barrier
        barrier.podgroup_handler("scheduling.sigs.k8s.io")("ADDED", podgroup)

        cpu0 = time.process_time()
        for pod in pods[:members]:  # each reaches /filter before the watch showed it, and is refused
            assert not barrier.admit(pod).ok
        cpu_refusals = time.process_time() - cpu0
        requests_before = len(api.requests)
        cpu0 = time.process_time()
        t0 = time.monotonic()
        barrier.on_pod("ADDED", pods[members], None)  # the last member: the gang passes, all are woken
        cpu_wakeup = time.process_time() - cpu0
        queued = len(barrier.requeuer.pending)

        def patched(resource: str) -> int:
            return sum(
                1 for r in api.requests[requests_before:] if r.get("verb") == "patch" and r.get("resource") == resource
            )

        def asked() -> float:
            found = barrier.metrics.requeue.outcomes.labels("patched")._value.get()
            return float(found)

        while asked() < members:
            await asyncio.sleep(0.01)
        duration = time.monotonic() - t0
        per_second = collections.Counter(int(t - t0) for t in sent_at)
        outcomes = {
            s.labels["outcome"]: s.value
            for m in barrier.metrics.requeue.outcomes.collect()
            for s in m.samples
            if s.name.endswith("_total")
        }
        await barrier.close()
        await client.close()
        return {
            "members": members,
            "requeueQPS": qps,
            "requeueBurst": burst,
            "cpuSecondsRefusals": round(cpu_refusals, 3),
            "cpuSecondsWakeupDecision": round(cpu_wakeup, 4),
            "queuedAtOnce": queued,
            "signalWritesAnswered": patched("csistoragecapacities"),
            "podPatches": patched("pods"),
            "outcomes": outcomes,
            "secondsToLastWrite": round(duration, 3),
            "peakWritesInOneSecond": max(per_second.values()) if per_second else None,
            "peakInFlight": barrier.requeuer.peak_in_flight,
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--members", type=int, default=10_000)
    parser.add_argument("--qps", type=float, nargs="*", default=[50.0])
    parser.add_argument("--burst", type=int, nargs="*", default=[100])
    args = parser.parse_args()
    runs = []
    for qps, burst in zip(args.qps, args.burst, strict=True):
        result = asyncio.run(run(args.members, qps, burst))
        print(json.dumps(result), flush=True)
        runs.append(result)
    out = {
        "bench": "gang_requeue",
        "when": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "loadavg": os.getloadavg()},
        "maxRssMiB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "runs": runs,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
