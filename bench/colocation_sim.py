"""Simulator agreement (not a test): ``bench/colocation.py``'s agent cases replayed by ``koordpy simulate``'s engine.

For each agent case (``be-util``, ``be-psi``, ``bu-util``, ``bu-psi``) and round of a recorded run, a one-node
scenario is built from that round's measurements only:

* the node: the guest's vCPUs and memory; ``systemUsage``: the node's CPU in the class's ``noagent`` case
  minus its pods' (the kubelet, containerd, the agent, the guest's own work under TCG);
* the pods as in the guest (requests, limits, priorities); each one's demand: its CPU use when nothing
  capped it (the probes: ``alone``; the batch pods: ``noagent``);
* the QoS objects the case created in the guest (``qos_objects`` of ``bench/colocation.py``);
* ``qos.pressure.cpuContention``: the factor that makes the model's pressure of the probe equal the
  pressure measured in ``bu-noagent`` (second half of the burst), the one calibration.

The engine then runs the agent's ``plan`` every second for the burst. Compared with the guest: the throttle
steps during the burst (decreases of a batch pod's ``cpu.max``, sampled twice a second; the agent's steps
are at least its 2 s cool-down apart) and each batch pod's cap when the burst ends.

Tolerance (stated before looking): the total throttle steps of a case differ by at most one step per
batch pod, and each pod's cap at the burst's end is within one 50 % step (a factor of 2) of the guest's, or
both are uncapped. Sampling alignment alone can move a step by one tick.

Run: ``.venv/bin/python bench/colocation_sim.py [--results bench/results/colocation.json]``: adds
``simulator`` to the results file (the scenarios included, so the engine can replay them later) and prints the
comparison.

Not guaranteed: agreement on what the model leaves out (the guest's timer noise, its lost ``/proc/stat``
ticks, pressure beyond the calibrated contention).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from koordpy.config.errors import validate
from koordpy.config.scenario import Scenario
from koordpy.model.objects import pod_from_dict
from koordpy.sim import agentqos
from koordpy.sim.engine import Policy
from koordpy.sim.qos import PodUsage
from koordpy.sim.qospressure import PressureModel
from koordpy.sim.run import simulate

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from colocation import cpu_requests, qos_objects  # noqa: E402  # the guest's objects, one definition

RESULTS = BENCH / "results" / "colocation.json"
AGENT_CASES = ("be-util", "be-psi", "bu-util", "bu-psi")
REPLAY = Policy("replay", "least-allocated", "waterline")
"""The agent's plan on a node whose pods are all placed at once (the guest's pods were bound by name: no
scheduler decision to replay)."""
PODS: dict[str, dict[str, Any]] = {
    "probe": {
        "priority": 9000,
        "labels": {"app": "probe"},
        "requests": {"cpu": "500m", "memory": "160Mi"},
        "limits": {"cpu": "500m", "memory": "160Mi"},
    },
    "probe-mem": {
        "priority": 9000,
        "labels": {"app": "probe-mem"},
        "requests": {"cpu": "500m", "memory": "160Mi"},
        "limits": {"cpu": "500m", "memory": "160Mi"},
    },
    "be": {"priority": 5000},
    "bu": {"priority": 5000, "requests": {"cpu": "250m", "memory": "32Mi"}},
}


def _round(rows: list[dict[str, Any]], round_no: int) -> dict[str, Any] | None:
    return next((r for r in rows if r["round"] == round_no), None)


def _cores(row: dict[str, Any], pod: str) -> float:
    return row["pods_cpu_seconds"].get(pod, 0.0) / row["seconds"]


def _workload(name: str, count: int, millicores: float, cpus: int) -> dict[str, Any]:
    spec = json.loads(json.dumps(PODS[name]))
    requested = cpu_requests(cpus)  # the guest's requests on that many CPUs
    for key in ("requests", "limits"):
        if "cpu" in spec.get(key, {}):
            spec[key]["cpu"] = f"{requested['bu' if name == 'bu' else 'probe']}m"
    workload: dict[str, Any] = {
        "name": name,
        "namespace": "colocation",
        "priority": spec["priority"],
        "labels": spec.get("labels", {}),
        "arrivals": {"count": count, "end": 0},
        "usage": {"cpu": {"mean": f"{max(1, round(millicores))}m"}, "memory": {"mean": "64Mi"}},
    }
    for key in ("requests", "limits"):
        if key in spec:
            workload[key] = spec[key]
    return workload


def contention(scenario: Scenario, measured_avg10: float) -> float:
    """The ``cpuContention`` that makes the model's probe pressure equal ``measured_avg10``."""
    pods = []
    for i, w in enumerate(scenario.workloads):
        for n in range(w.arrivals.count):
            raw = {
                "metadata": {
                    "name": f"{w.name}-{n}",
                    "namespace": w.namespace,
                    "uid": f"u-{i}-{n}",
                    "labels": w.labels,
                },
                "spec": {
                    "priority": w.priority,
                    "containers": [
                        {
                            "name": "c",
                            "resources": {
                                "requests": {k: v for k, v in _quantities(w.requests).items()},
                                "limits": {k: v for k, v in _quantities(w.limits).items()},
                            },
                        }
                    ],
                },
            }
            demand = float(w.usage.cpu.mean)
            pods.append(PodUsage(len(pods), pod_from_dict(raw), demand, 0.0, None, 0.0, demand))
    model = PressureModel(contention=1.0)
    capacity = scenario.node_pools[0].allocatable["cpu"]
    model.step("n", 0.0, capacity, capacity, pods)
    _, figures, _ = model.step("n", 1e6, capacity, capacity, pods)  # long enough: the averages equal the instant
    unit = figures[0]["cpu_pressure_some_avg10"]
    return min(100.0, max(1e-3, measured_avg10 / unit)) if unit > 0 else 1.0


def _quantities(resources: dict[str, int]) -> dict[str, str]:
    return {k: (f"{v}m" if k == "cpu" else str(v)) for k, v in resources.items()}


def scenario_for(results: dict[str, Any], case: str, round_no: int) -> dict[str, Any] | None:
    rows = results["rounds"]
    cls = case.split("-", maxsplit=1)[0]
    alone, noagent, this = (_round(rows.get(c, []), round_no) for c in ("alone", f"{cls}-noagent", case))
    bu_noagent = _round(rows.get("bu-noagent", []), round_no)
    if alone is None or noagent is None or this is None or bu_noagent is None:
        return None
    pods_now = sum(noagent["pods_cpu_seconds"].values()) / noagent["seconds"]
    system = max(0.0, noagent["node_cpu_seconds"] / noagent["seconds"] - pods_now)
    batch = [_cores(noagent, f"{cls}-{i}") for i in (1, 2)]
    cpus = results["guest_cpus"]
    results.setdefault("agent_interval", 2)
    objects = [obj for _, obj in qos_objects(case, results["psi_line"], results["mem_psi_line"])]
    raw: dict[str, Any] = {
        "apiVersion": "koordpy.io/v1alpha1",
        "kind": "Scenario",
        "name": f"colocation-{case}-r{round_no}",
        "description": f"bench/colocation.py {case}, round {round_no}: measured demands",
        "duration": f"{int(this['seconds'])}s",
        "step": "1s",
        "nodePools": [
            {
                "name": "guest",
                "count": 1,
                "allocatable": {"cpu": str(cpus), "memory": "1536Mi", "pods": "110"},
                "systemUsage": {"cpu": f"{round(system * 1000)}m"},
            }
        ],
        "workloads": [
            _workload("probe", 1, _cores(alone, "probe") * 1000, cpus),
            *(
                [_workload("probe-mem", 1, _cores(alone, "probe-mem") * 1000, cpus)]
                if "probe-mem" in alone["pods_cpu_seconds"]
                else []
            ),
            _workload(cls, 2, statistics.fmean(batch) * 1000, cpus),
        ],
        "qos": {
            "interval": f"{results['agent_interval']}s",
            "policies": [o for o in objects if o["kind"] == "NodeQOS"],
            "podQOS": [o for o in objects if o["kind"] == "PodQOS"],
            "actions": [o for o in objects if o["kind"] == "AvoidanceAction"],
        },
    }
    # The pressure calibration: the model's probe pressure in bu-noagent equals the measured one.
    bu_pods = [_cores(bu_noagent, f"bu-{i}") for i in (1, 2)]
    calib = {
        **raw,
        "workloads": [*raw["workloads"][:-1], _workload("bu", 2, statistics.fmean(bu_pods) * 1000, cpus)],
        "qos": {},
    }
    raw["qos"]["pressure"] = {
        "cpuContention": round(contention(validate(Scenario, calib), bu_noagent["probe_cpu_avg10"]), 4)
    }
    return raw


def run_scenario(raw: dict[str, Any]) -> dict[str, Any]:
    """The engine's throttle steps and end caps for a scenario built by :func:`scenario_for`."""
    scenario = validate(Scenario, raw)
    objects = agentqos.load_qos(scenario)
    planner = agentqos.AgentQosPlanner(
        "waterline",
        objects.policies,
        objects.actions,
        agentqos.PLAN_FUNCTIONS["waterline"],
        pod_qos=objects.pod_qos,
        pressure=agentqos.pressure_model(scenario, objects),
        record=True,
    )
    (run,) = simulate(scenario, scenario.seed, [REPLAY], lambda s, p: planner)
    assert run.summary["binds"] == sum(w.arrivals.count for w in scenario.workloads), "every pod runs from the start"
    start = scenario.start
    caps: dict[str, float | None] = {}
    steps: dict[str, int] = {}
    restores: dict[str, int] = {}
    for action in planner.log:
        if action.time - start >= scenario.duration:
            continue
        pod = action.pod.split("/")[1]
        if action.kind == "throttle":
            steps[pod] = steps.get(pod, 0) + 1
            caps[pod] = action.cap
        elif action.kind == "restore":
            restores[pod] = restores.get(pod, 0) + 1
            caps[pod] = None if action.original else action.cap
    return {"throttle_steps": steps, "restore_steps": restores, "end_caps": caps}


def _cap(text: str | None) -> float | None:
    if not text:
        return None
    quota, period = text.split()
    return None if quota == "max" else int(quota) / int(period)


def guest_steps(timeline: list[dict[str, Any]], cls: str, burst: float) -> dict[str, Any]:
    """The guest's throttle and restore steps of each batch pod during the burst, and its cap at the end."""
    steps: dict[str, int] = {}
    restores: dict[str, int] = {}
    caps: dict[str, float | None] = {}
    for i, sim_name in ((1, f"{cls}-0"), (2, f"{cls}-1")):
        name = f"{cls}-{i}"
        previous: float | None = None
        for row in timeline:
            if not 0 <= row["t"] < burst or row.get(name) is None:
                continue
            cap = _cap(row[name]["cpu_max"])
            current = float("inf") if cap is None else cap
            before = float("inf") if previous is None else previous
            if current < before - 1e-9:
                steps[sim_name] = steps.get(sim_name, 0) + 1
            elif current > before + 1e-9:
                restores[sim_name] = restores.get(sim_name, 0) + 1
            previous = cap
            caps[sim_name] = cap
    return {"throttle_steps": steps, "restore_steps": restores, "end_caps": caps}


def agree(guest: dict[str, Any], sim: dict[str, Any], pods: int = 2) -> tuple[bool, dict[str, Any]]:
    """The stated tolerance: total throttle steps within one per pod; each end cap within a factor of 2."""
    g, s = sum(guest["throttle_steps"].values()), sum(sim["throttle_steps"].values())
    caps_ok = True
    for pod in set(guest["end_caps"]) | set(sim["end_caps"]):
        a, b = guest["end_caps"].get(pod), sim["end_caps"].get(pod)
        if (a is None) != (b is None) or (a is not None and b is not None and not 0.5 <= a / b <= 2.0):
            caps_ok = False
    steps_ok = abs(g - s) <= pods
    return steps_ok and caps_ok, {"guest_steps": g, "sim_steps": s, "steps_ok": steps_ok, "caps_ok": caps_ok}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    results = json.loads(args.results.read_text())
    compared = []
    for case in AGENT_CASES:
        for index, run in enumerate(results["rounds"].get(case, [])):
            raw = scenario_for(results, case, run["round"])
            if raw is None:
                continue
            timeline = results["timelines"][case][index]["timeline"]
            guest = guest_steps(timeline, case.split("-")[0], run["seconds"])
            sim = run_scenario(raw)
            ok, detail = agree(guest, sim)
            compared.append(
                {
                    "case": case,
                    "round": run["round"],
                    "scenario": raw,
                    "guest": guest,
                    "sim": sim,
                    "agree": ok,
                    **detail,
                }
            )
    results["simulator"] = {
        "tolerance": "total throttle steps within one per batch pod; each batch pod's cap at the burst's end within "
        "a factor of 2 (one 50 % step) of the guest's, or both uncapped",
        "command": ".venv/bin/python bench/colocation_sim.py",
        "cases": compared,
        "agreeing": sum(1 for c in compared if c["agree"]),
    }
    args.results.write_text(json.dumps(results, indent=1) + "\n")
    print(f"{'case':<9} {'round':>5} {'steps guest':>11} {'sim':>4} {'end caps guest':>26} {'sim':>26} {'agree':>6}")
    for c in compared:

        def caps(found: dict[str, float | None]) -> str:
            return " ".join(f"{'max' if v is None else f'{v:.2f}'}" for _, v in sorted(found.items())) or "-"

        print(
            f"{c['case']:<9} {c['round']:>5} {c['guest_steps']:>11} {c['sim_steps']:>4} {caps(c['guest']['end_caps']):>26} "
            f"{caps(c['sim']['end_caps']):>26} {'yes' if c['agree'] else 'NO':>6}"
        )
    print(f"{results['simulator']['agreeing']} of {len(compared)} within the tolerance")


if __name__ == "__main__":
    main()
