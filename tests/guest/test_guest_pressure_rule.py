"""The pressure rule on real PSI: the agent's own tick (``koordpy_testkit.guest.agentrun``: collect, plan, write
``cpu.max``, every second) in the guest, on pods whose cgroups carry the kubelet's ``cpu.weight``.

* Contention: the protected pod ``web`` (Guaranteed, 500m: weight 20) runs bursts of 20 ms every 100 ms; a
  batch pod (Burstable, 10m: weight 1) burns the guest's one CPU from the burstable slice, whose weight (39)
  is what the kubelet writes when the node's Burstable pods request 1 CPU in all. ``web``'s ``cpu.pressure``
  rises past the line (``pod_cpu_pressure_some_avg10`` > 40, avoidanceThreshold 2); the agent throttles the
  batch pod step by step (50 % a step, every 2 s, never below its request); ``web``'s pressure falls back;
  after ``restoreThreshold`` (3) consecutive samples at or below the line the agent gives the CPU back.

The agent ticks every 2 s: under TCG a tick costs about a hundred times a real CPU's, and its own CPU is part
of what ``web`` competes with.
* Own limit: ``web`` is held by its own ``cpu.max`` (20 %, two busy processes) beside a light batch pod: its
  pressure is far above the line, but its ``throttled_usec`` grows, so the rule counts none of it and
  nothing is throttled.

The agent runs here without an API server (its Events are recorded, not posted); the cluster tier runs the
whole ``koordpy agent run``.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.builders import PodBuilder
from koordpy_testkit.guest import Guest, agentrun, node

pytestmark = pytest.mark.guest

LINE = 40  # percent of the last 10 s web's task waited for the CPU
# Measured on a host at load 21: web's pressure 65-70 % beside the busy batch pod, 17-37 % once the batch pod is
# capped at its floor (the rest is the agent's own tick under TCG and the host taking the guest's CPU away).
RULE = "protect.web"


def objects(restore: int = 3) -> list[dict[str, Any]]:
    policy = {
        "apiVersion": "ensurance.crane.io/v1alpha1",
        "kind": "NodeQOSEnsurancePolicy",
        "metadata": {"name": "protect"},
        "spec": {
            "objectiveEnsurances": [
                {
                    "name": "web",
                    "avoidanceThreshold": 2,
                    "restoreThreshold": restore,
                    "actionName": "throttle",
                    "metricRule": {
                        "name": "pod_cpu_pressure_some_avg10",
                        "value": LINE,
                        "selector": {"matchLabels": {"app": "web"}},
                    },
                }
            ]
        },
    }
    action = {
        "apiVersion": "ensurance.crane.io/v1alpha1",
        "kind": "AvoidanceAction",
        "metadata": {"name": "throttle"},
        "spec": {"coolDownSeconds": 2, "throttle": {"cpuThrottle": {"minCPURatio": 0, "stepCPURatio": 50}}},
    }
    return [policy, action]


def pods(guest: Guest, web_cpu_max: str | None = None) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """web (Guaranteed, 500m) and batch (Burstable, 10m) in the kubelet's layout, with its weights."""
    web_uid, batch_uid = str(uuid.uuid4()), str(uuid.uuid4())
    web = guest.call(node.make_pod, driver="cgroupfs", uid=web_uid, qos="guaranteed", containers=["a" * 64])
    batch = guest.call(node.make_pod, driver="cgroupfs", uid=batch_uid, qos="burstable", containers=["b" * 64])
    # The kubelet's cpu.weight: 500m -> 20, 10m -> 1; the burstable slice 39 (1 CPU of Burstable requests).
    guest.call(node.write, rel=web["pod"], name="cpu.weight", text="20")
    guest.call(node.write, rel="kubepods/burstable", name="cpu.weight", text="39")
    guest.call(node.write, rel=batch["pod"], name="cpu.weight", text="1")
    if web_cpu_max is not None:
        guest.call(node.write, rel=web["pod"], name="cpu.max", text=web_cpu_max)
    raw = [
        PodBuilder("web")
        .uid(web_uid)
        .requests(cpu="500m", memory="64Mi")
        .limits(cpu="500m", memory="64Mi")
        .priority(9000)
        .label("app", "web")
        .phase("Running")
        .build(),
        PodBuilder("batch").uid(batch_uid).requests(cpu="10m").priority(5000).phase("Running").build(),
    ]
    return raw, {
        "web": web["pod"],
        "web-container": web["containers"]["a" * 64],
        "batch": batch["pod"],
        "batch-container": batch["containers"]["b" * 64],
    }


@pytest.fixture
def clean(guest: Guest) -> Any:
    # The agent's modules are imported before any load starts (under TCG the import takes tens of seconds, and
    # longer beside a busy process); a generous backstop: it is the machine's load, not a hang.
    seconds = guest.call(agentrun.load, backstop=3 * HANG_BACKSTOP)
    print(f"\nthe agent's modules imported in the guest in {seconds:.0f} s")
    yield guest
    guest.call(node.clear)


def test_pressure_rule_throttles_the_batch_pod_and_restores_after_restore_threshold(
    clean: Guest, tmp_path: Any
) -> None:
    guest = clean
    raw, rels = pods(guest)
    guest.call(node.start, rel=rels["web-container"], duty=0.2)
    guest.call(node.start, rel=rels["batch-container"], duty=1.0)
    run = guest.call(
        agentrun.agent_ticks,
        pods=raw,
        objects=objects(restore=3),
        watch={"web": rels["web"], "batch": rels["batch"]},
        seconds=180.0,
        interval=2.0,
        state_dir=str(guest.job / "state-contention"),
        stop_after_restore=True,
        backstop=3 * HANG_BACKSTOP,
    )
    ticks = run["ticks"]
    for tick in ticks:
        print(
            f"t={tick['t']:5.1f} web avg10 {tick['pods']['web']['avg10']:5.1f} "
            f"batch {tick['pods']['batch']['cpu_max']:>14} rule {tick['rules'].get(RULE)} {tick['actions']}"
        )
    throttles = [i for i, t in enumerate(ticks) if any(a["kind"] == "throttle" for a in t["actions"])]
    assert throttles, "the agent never throttled the batch pod"
    first = throttles[0]
    # It fired on real pressure: web's avg10 above the line for the two samples before the first step.
    assert ticks[first]["rules"][RULE][0] >= 2 and ticks[first]["pods"]["web"]["avg10"] > LINE
    assert all(a["pod"] == "batch" for t in ticks for a in t["actions"])  # never web
    # The cap landed in the batch pod's cpu.max.
    assert ticks[first]["pods"]["batch"]["cpu_max"] != "max 100000"
    # Web's pressure fell back under the line once the batch pod was capped ...
    under = [i for i in range(first, len(ticks)) if ticks[i]["pods"]["web"]["avg10"] <= LINE]
    assert under, "web's pressure never fell back under the line"
    # ... and the first restore came on the third consecutive sample at or below it, not before.
    restored = run["restored_at"]
    assert restored is not None, "no restore within the run"
    assert ticks[restored]["rules"][RULE][1] == 3
    assert all(ticks[i]["rules"][RULE][1] < 3 for i in range(first, restored))
    step_up = next(a for a in ticks[restored]["actions"] if a["kind"] == "restore")
    before = ticks[restored - 1]["pods"]["batch"]["cpu_max"]
    assert step_up["pod"] == "batch" and ticks[restored]["pods"]["batch"]["cpu_max"] != before
    print(f"\nfirst throttle at t={ticks[first]['t']:.0f} s, first restore at t={ticks[restored]['t']:.0f} s")


def test_a_pod_held_by_its_own_cpu_max_triggers_nothing(clean: Guest) -> None:
    guest = clean
    raw, rels = pods(guest, web_cpu_max="20000 100000")
    guest.call(node.start, rel=rels["web-container"], duty=1.0, copies=2)
    guest.call(node.start, rel=rels["batch-container"], duty=0.3)
    run = guest.call(
        agentrun.agent_ticks,
        pods=raw,
        objects=objects(),
        watch={"web": rels["web"], "batch": rels["batch"]},
        seconds=16.0,
        interval=2.0,
        state_dir=str(guest.job / "state-own-limit"),
        backstop=3 * HANG_BACKSTOP,
    )
    ticks = run["ticks"]
    peak = max(t["pods"]["web"]["avg10"] for t in ticks)
    print(f"\nweb's own-limit pressure peaked at avg10 {peak:.1f} % over {len(ticks)} ticks")
    assert peak > 2 * LINE  # the rule would have fired on this pressure ...
    assert ticks[-1]["pods"]["web"]["throttled_usec"] > ticks[0]["pods"]["web"]["throttled_usec"]
    assert [a for t in ticks for a in t["actions"]] == []  # ... but it came from web's own cpu.max
    assert all(t["rules"][RULE][0] == 0 for t in ticks)  # not one sample counted above the line
    assert all(t["pods"]["batch"]["cpu_max"] == "max 100000" for t in ticks)
    reasons = {e["reason"] for e in run["events"]}
    assert "OwnLimit" in reasons and "AvoidanceTriggered" not in reasons
