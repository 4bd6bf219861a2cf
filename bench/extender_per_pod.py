"""The koordpy extender's own work per scheduled pod, in process (not a test): what one pod of
``bench/scheduler_throughput.py`` makes it do, without HTTP and without the API server.

Per pod, in the order a real cluster delivers them: the pod's ``ADDED`` watch event (pending), the
``/filter`` and ``/prioritize`` bodies kube-scheduler sends (the pod as its informer holds it, every node
name; prioritize the names the filter passed), the ``/bind`` body (with a binder that answers at once),
the ``MODIFIED`` event of the bound pod (``spec.nodeName`` and the ``PodScheduled`` condition) and its
``DELETED`` event. Watch lines are decoded as the reflector decodes them (orjson of the event line).
Nodes are those of the throughput bench (16 cpu, NodeMetrics at 5..85 % cpu).

Reports CPU microseconds per pod (``time.process_time``) for the whole sequence and per step, median
over ``--repeat`` runs of ``--pods`` pods each; ``--profile`` prints cProfile's top functions instead.

Run: ``.venv/bin/python bench/extender_per_pod.py --nodes 100`` (also ``--nodes 5000``). Writes
``bench/results/extender_per_pod.json`` with ``--out``.

Not guaranteed: the costs HTTP adds (uvicorn's protocol, kube-scheduler's connections) or the API
client's (TLS, aiohttp): ``bench/scheduler_throughput.py`` measures those with the rest.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import os
import platform
import pstats
import statistics
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from koordpy.config import SchedulerConfiguration, validate
from koordpy.model.durations import format_rfc3339
from koordpy.runtime.logging import configure_logging
from koordpy.scheduler.extender.server import build_extender
from koordpy_testkit import FakeClock

RESULTS = Path(__file__).resolve().parent / "results" / "extender_per_pod.json"
NOW = FakeClock().now()
LOG_SINK = open(os.devnull, "w")  # noqa: SIM115  # the extender's log lines, written and dropped
STEPS = ("added", "filter", "prioritize", "bind", "bound", "deleted")


class InstantBinder:
    async def create_binding(
        self, namespace: str, name: str, uid: str, node: str, *, annotations: Mapping[str, str] | None = None
    ) -> Any:
        return {}


def node(index: int) -> dict[str, Any]:
    name = f"node-{index:05d}"
    resources = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "resourceVersion": str(1000 + index),
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
        },
        "spec": {},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def node_metric(index: int) -> dict[str, Any]:
    name = f"node-{index:05d}"
    cpu = 16 * 10 * (5 + (37 * index) % 81)
    return {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric",
        "metadata": {"name": name, "resourceVersion": str(9000 + index)},
        "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
        "status": {
            "updateTime": format_rfc3339(NOW - 20),
            "nodeMetric": {"nodeUsage": {"resources": {"cpu": f"{cpu}m", "memory": "19660Mi"}}},
        },
    }


def pending_pod(index: int, version: int) -> dict[str, Any]:
    """A pod of the throughput bench as the API server sends it (managed fields included)."""
    name = f"r001-koordpy-{index:04d}"
    created = format_rfc3339(NOW - 1)
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "namespace": "bench",
            "uid": f"0b5c{index:04d}-1b2c-4d5e-8f90-123456789abc",
            "resourceVersion": str(version),
            "creationTimestamp": created,
            "labels": {"app": "bench"},
            "managedFields": [
                {
                    "manager": "python-httpx",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": created,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                        "f:spec": {
                            "f:containers": {
                                'k:{"name":"main"}': {
                                    ".": {},
                                    "f:image": {},
                                    "f:imagePullPolicy": {},
                                    "f:name": {},
                                    "f:resources": {".": {}, "f:requests": {".": {}, "f:cpu": {}, "f:memory": {}}},
                                    "f:terminationMessagePath": {},
                                    "f:terminationMessagePolicy": {},
                                }
                            },
                            "f:dnsPolicy": {},
                            "f:enableServiceLinks": {},
                            "f:restartPolicy": {},
                            "f:schedulerName": {},
                            "f:securityContext": {},
                            "f:terminationGracePeriodSeconds": {},
                        },
                    },
                }
            ],
        },
        "spec": {
            "volumes": [
                {
                    "name": "kube-api-access-x7k2p",
                    "projected": {
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                            {
                                "downwardAPI": {
                                    "items": [
                                        {
                                            "path": "namespace",
                                            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                        }
                                    ]
                                }
                            },
                        ],
                        "defaultMode": 420,
                    },
                }
            ],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/bench:1",
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                    "volumeMounts": [
                        {
                            "name": "kube-api-access-x7k2p",
                            "readOnly": True,
                            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                        }
                    ],
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 0,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "securityContext": {},
            "schedulerName": "koordpy-scheduler",
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }


def bound_pod(raw: dict[str, Any], node_name: str, version: int) -> dict[str, Any]:
    out: dict[str, Any] = orjson.loads(orjson.dumps(raw))
    out["metadata"]["resourceVersion"] = str(version)
    out["spec"]["nodeName"] = node_name
    out["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": format_rfc3339(NOW)}
    ]
    return out


def scheduler_view(raw: dict[str, Any]) -> dict[str, Any]:
    """The pod as kube-scheduler's informer holds it (it trims managedFields)."""
    out: dict[str, Any] = orjson.loads(orjson.dumps(raw))
    out["metadata"].pop("managedFields", None)
    return out


def line(event_type: str, raw: dict[str, Any]) -> bytes:
    return orjson.dumps({"type": event_type, "object": raw})


def run(nodes: int, pods: int, profile: cProfile.Profile | None) -> dict[str, float]:
    config = validate(SchedulerConfiguration, {})
    configure_logging(config.extender.log_level, LOG_SINK)  # as the CLI does, into a file instead of stdout
    extender = build_extender(config, None, clock=FakeClock(NOW))
    service = extender.service
    service.binder = InstantBinder()
    cache = extender.cache
    on_node, on_pod, on_metric = cache.handler("nodes"), cache.handler("pods"), cache.handler("nodemetrics")
    for i in range(nodes):
        on_node("ADDED", orjson.loads(orjson.dumps(node(i))))
        on_metric("ADDED", orjson.loads(orjson.dumps(node_metric(i))))
    names = [f"node-{i:05d}" for i in range(nodes)]
    # Everything a pod brings, encoded beforehand (as the wire delivers it).
    inputs = []
    for i in range(pods):
        raw = pending_pod(i, 20000 + 3 * i)
        args = {"Pod": scheduler_view(raw), "Nodes": None, "NodeNames": names}
        inputs.append((raw, line("ADDED", raw), orjson.dumps(args)))
    gc.collect()
    gc.freeze()
    loop = asyncio.new_event_loop()
    spent = dict.fromkeys(STEPS, 0.0)
    clock = time.process_time
    if profile is not None:
        profile.enable()
    for i, (raw, added, filter_body) in enumerate(inputs):
        t0 = clock()
        event = orjson.loads(added)
        on_pod(event["type"], event["object"])
        t1 = clock()
        answer = service.filter(filter_body)
        t2 = clock()
        passed = orjson.loads(answer.body)["NodeNames"]
        prioritize_body = orjson.dumps({"Pod": scheduler_view(raw), "Nodes": None, "NodeNames": passed})
        t3 = clock()
        scores = service.prioritize(prioritize_body)
        t4 = clock()
        best = max(orjson.loads(scores.body), key=lambda row: row["Score"])["Host"]
        bind_body = orjson.dumps(
            {
                "PodName": raw["metadata"]["name"],
                "PodNamespace": "bench",
                "PodUID": raw["metadata"]["uid"],
                "Node": best,
            }
        )
        bound = line("MODIFIED", bound_pod(raw, best, 20000 + 3 * i + 1))
        deleted = line("DELETED", bound_pod(raw, best, 20000 + 3 * i + 2))
        t5 = clock()
        reply = loop.run_until_complete(service.bind(bind_body))
        assert reply.body == b'{"Error":""}', reply.body
        t6 = clock()
        event = orjson.loads(bound)
        on_pod(event["type"], event["object"])
        t7 = clock()
        event = orjson.loads(deleted)
        on_pod(event["type"], event["object"])
        t8 = clock()
        for step, took in zip(STEPS, (t1 - t0, t2 - t1, t4 - t3, t6 - t5, t7 - t6, t8 - t7), strict=True):
            spent[step] += took
    if profile is not None:
        profile.disable()
    loop.close()
    gc.unfreeze()
    per_pod = {step: round(total * 1e6 / pods, 1) for step, total in spent.items()}
    per_pod["total"] = round(sum(spent.values()) * 1e6 / pods, 1)
    return per_pod


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="100", help="comma-separated node counts (default 100)")
    parser.add_argument("--pods", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="print cProfile's top functions instead")
    parser.add_argument("--out", type=Path, help=f"write JSON here (e.g. {RESULTS.relative_to(Path.cwd())})")
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.nodes.split(",")]
    if args.profile:
        profile = cProfile.Profile()
        run(sizes[0], args.pods, profile)
        pstats.Stats(profile).sort_stats("tottime").print_stats(35)
        return 0
    out: dict[str, Any] = {
        "bench": "extender_per_pod",
        "command": "python bench/extender_per_pod.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "python": platform.python_version(),
        "sizes": {},
    }
    for size in sizes:
        runs = [run(size, args.pods, None) for _ in range(args.repeat)]
        median = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
        out["sizes"][str(size)] = {"cpu_us_per_pod_median": median, "runs": runs}
        steps = "  ".join(f"{k} {v:.0f}" for k, v in median.items())
        print(f"{size:>5} nodes  cpu us/pod: {steps}")
    if args.out:
        args.out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
