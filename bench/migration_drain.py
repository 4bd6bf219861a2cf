"""Three nodes drained at once: arbitration + lifecycle against evicting everything together.

A discrete-time model (0.5 s steps, the arbitration interval) built on the real pure code: each step runs
:func:`koordpy.descheduler.arbitration.arbitrate` on the waiting jobs (or passes them all, for the
"evict all" baseline) and :func:`koordpy.descheduler.lifecycle.decide` on every job. An evicted pod is
gone at once; its ReplicaSet replaces it on another node, Ready ``STARTUP`` seconds later. Measured per
mode: the most replicas of one workload unavailable at the same time, the workloads that went above
their implicit budget (Koordinator's per-workload rule, as a stand-in for a PodDisruptionBudget), and the
time until every job finished and every replacement was Ready. Prints and writes
``bench/results/migration_drain.json``. Not modelled: scheduling delays, node capacity, Jobs' pods.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from koordpy.config.migration import MigrationControllerArgs
from koordpy.descheduler.arbitration import arbitrate
from koordpy.descheduler.lifecycle import (
    ANNOTATION_PASSED_ARBITRATION,
    Evict,
    Finish,
    LifecycleSettings,
    ObjectLimiter,
    PodView,
    Start,
    TokenBucket,
    Wait,
    decide,
)
from koordpy.descheduler.limits import workload_limit
from koordpy.descheduler.objects import job_from_dict, pod_from_dict, workload_from_dict
from koordpy.model.durations import format_rfc3339

STEP = 0.5
STARTUP = 10.0
T0 = 1795255200.0
NODES = [f"n{i}" for i in range(12)]
DRAINED = NODES[:3]
SIZES = [2, 3, 3, 4, 5, 6, 8, 10, 12, 16, 20, 30, 40, 60]  # replicas per Deployment


def build() -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], list[dict[str, Any]]]:
    pods: dict[str, dict[str, Any]] = {}
    workloads: dict[str, dict[str, Any]] = {}
    jobs: list[dict[str, Any]] = []
    slot = 0
    for w, replicas in enumerate(SIZES * 6):
        name = f"app{w}"
        workloads[f"rs-{name}"] = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": "shop", "uid": f"rs-{name}"},
            "spec": {"replicas": replicas},
        }
        for r in range(replicas):
            node = NODES[slot % len(NODES)]
            slot += 1
            pod_name = f"{name}-{r}"
            pods[pod_name] = pod(pod_name, name, node, T0 - 3600)
            if node in DRAINED:
                jobs.append(
                    {
                        "metadata": {
                            "name": f"pmj-{pod_name}",
                            "creationTimestamp": format_rfc3339(T0),
                            "annotations": {},
                        },
                        "spec": {
                            "mode": "EvictDirectly",
                            "ttl": "30m",
                            "podRef": {"namespace": "shop", "name": pod_name},
                        },
                        "status": {},
                    }
                )
    return pods, workloads, jobs


def pod(name: str, owner: str, node: str, ready_at: float) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": f"uid-{name}",
            "labels": {"app": owner},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "uid": f"rs-{owner}", "controller": True}
            ],
            "creationTimestamp": format_rfc3339(T0 - 3600),
        },
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "app"}]},
        "status": {"phase": "Running", "conditions": []},
        "_ready_at": ready_at,
    }


def run(mode: str) -> dict[str, Any]:
    pods, workloads, jobs = build()
    args = MigrationControllerArgs.model_validate(
        {"defaultJobMode": "EvictDirectly", "arbitrationArgs": {"enabled": mode == "arbitration"}}
    )
    settings = LifecycleSettings(default_job_mode="EvictDirectly")
    bucket = TokenBucket(args.evict_qps, args.evict_burst) if mode == "arbitration" else None
    limiter = ObjectLimiter(0.0)  # objectLimiters left out: arbitration limits alone are compared
    replicas = {uid: w["spec"]["replicas"] for uid, w in workloads.items()}
    budget = {uid: workload_limit(n, None) for uid, n in replicas.items()}
    peak = dict.fromkeys(replicas, 0)
    above_budget: set[str] = set()
    spare = 0
    now = T0
    finished_at = None
    for _ in range(20000):
        for p in pods.values():
            ready = p["_ready_at"] <= now
            p["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
        unavailable = dict.fromkeys(replicas, 0)
        present = dict.fromkeys(replicas, 0)
        for p in pods.values():
            uid = p["metadata"]["ownerReferences"][0]["uid"]
            present[uid] += 1
            if p["_ready_at"] > now:
                unavailable[uid] += 1
        for uid, expected in replicas.items():
            unavailable[uid] += expected - present[uid]
            peak[uid] = max(peak[uid], unavailable[uid])
            if unavailable[uid] > budget[uid]:
                above_budget.add(uid)
        waiting = [j for j in jobs if not j["status"].get("phase") and not j["metadata"]["annotations"]]
        if waiting:
            parsed = [job_from_dict(j) for j in jobs]
            mpods = {
                f"shop/{n}": pod_from_dict({k: v for k, v in p.items() if k != "_ready_at"}) for n, p in pods.items()
            }
            mworkloads = {uid: workload_from_dict(w) for uid, w in workloads.items()}
            result = arbitrate(parsed, mpods, mworkloads, args, now)
            for name in result.names("pass"):
                job = next(j for j in jobs if j["metadata"]["name"] == name)
                job["metadata"]["annotations"][ANNOTATION_PASSED_ARBITRATION] = "true"
        for job in jobs:
            ref = job["spec"]["podRef"]["name"]
            raw = pods.get(ref)
            view = PodView.from_object(raw) if raw is not None else None
            decision = decide(job, view, now, settings, evict_tokens=bucket, object_limiter=limiter)
            if isinstance(decision, Start):
                job["spec"]["podRef"]["uid"] = decision.pod_uid
                job["status"] = decision.status
            elif isinstance(decision, Evict):
                job["status"] = decision.status
                evicted = pods.pop(ref)
                owner = evicted["metadata"]["ownerReferences"][0]["name"]
                spare += 1
                target = NODES[len(DRAINED) + spare % (len(NODES) - len(DRAINED))]
                pods[f"{owner}-r{spare}"] = pod(f"{owner}-r{spare}", owner, target, now + STARTUP)
            elif isinstance(decision, Finish | Wait) and decision.status is not None:
                job["status"] = decision.status
        done = all(j["status"].get("phase") in ("Succeeded", "Failed") for j in jobs)
        if done and all(p["_ready_at"] <= now for p in pods.values()):
            finished_at = now
            break
        now += STEP
    worst = max(peak, key=lambda uid: (peak[uid], replicas[uid]))
    return {
        "mode": mode,
        "jobs": len(jobs),
        "workloads": len(replicas),
        "succeeded": sum(1 for j in jobs if j["status"].get("phase") == "Succeeded"),
        "max_unavailable_of_one_workload": peak[worst],
        "that_workload_replicas": replicas[worst],
        "workloads_above_budget": len(above_budget),
        "seconds_to_finish": None if finished_at is None else finished_at - T0,
    }


def main() -> None:
    results = [run("arbitration"), run("evict-all")]
    for r in results:
        print(json.dumps(r))
    out = Path(__file__).parent / "results" / "migration_drain.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"step_seconds": STEP, "startup_seconds": STARTUP, "results": results}, indent=2) + "\n")
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
