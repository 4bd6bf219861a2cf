"""The agent's one cgroup writer on real cgroup v2, in both kubelet layouts: a planned ``cpu.max`` holds a
busy container to the measured share, the restore writes back exactly what was there, a quota someone
else changed meanwhile (the kubelet resizing the pod in place) is left alone, and a new agent process
restores a cap from the state file of one that died mid-throttle.

The busy container is a burner that would use the whole CPU (duty 1.0). Shares are measured from the pod
cgroup's ``cpu.stat`` over a window of the guest's clock.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from koordpy.agent.policy import AgentState, plan
from koordpy_testkit.agent import node_sample, pod_sample, qos_policy, rule, throttle_action
from koordpy_testkit.builders import PodBuilder
from koordpy_testkit.guest import Guest, node

pytestmark = pytest.mark.guest

STATE_DIR = "/run/koordpy-agent-test"  # a tmpfs of the guest


def _cid() -> str:
    return uuid.uuid4().hex + uuid.uuid4().hex


class Pod:
    """A kubelet-shaped pod cgroup in the guest with one container; its burners and cgroups go afterwards."""

    def __init__(self, guest: Guest, driver: str, cpu_max: str) -> None:
        self.guest = guest
        self.uid = str(uuid.uuid4())
        self.cid = _cid()
        made = guest.call(node.make_pod, driver=driver, uid=self.uid, containers=[self.cid], cpu_max=cpu_max)
        self.rel: str = made["pod"]
        self.container: str = made["containers"][self.cid]
        self.state = f"{STATE_DIR}/{self.uid}.json"

    def cpu_max(self) -> str:
        return str(self.guest.call(node.read, rel=self.rel, name="cpu.max")).strip()

    def share(self, seconds: float) -> dict[str, float]:
        result: dict[str, float] = self.guest.call(node.share, rel=self.rel, seconds=seconds)
        return result

    def close(self) -> None:
        self.guest.call(node.stop)
        self.guest.call(node.remove_pod, rel=self.rel)


@pytest.fixture
def pods(guest: Guest) -> Iterator[list[Pod]]:
    made: list[Pod] = []
    yield made
    for pod in made:
        pod.close()


def _planned_cap(usage: float) -> float:
    """The waterline policy's cap for a pod using ``usage`` cores on a node above a 0.1-core line:
    step 70 % -> usage x 0.3, floored at the pod's 100m request."""
    raw = PodBuilder("busy").requests(cpu="100m").build()
    result = plan(
        [qos_policy("p", rule("cpu", "cpu_total_usage", 100, "throttle"))],
        [throttle_action("throttle", step=70)],
        node_sample(cpu=usage + 0.05, cores=1),
        [pod_sample(raw, cpu=usage)],
        AgentState(),
        now=0.0,
    )
    (action,) = result.actions
    assert action.cpu_cap is not None
    return action.cpu_cap


@pytest.mark.parametrize(("driver", "original"), [("systemd", "max 100000"), ("cgroupfs", "250000 50000")])
def test_a_planned_cap_holds_the_share_and_the_restore_writes_back_exactly(
    guest: Guest, pods: list[Pod], driver: str, original: str
) -> None:
    pod = Pod(guest, driver, original)
    pods.append(pod)
    guest.call(node.start, rel=pod.container, duty=1.0)
    free = pod.share(1.5)
    cap = _planned_cap(free["share"])
    assert cap == pytest.approx(max(free["share"] * 0.3, 0.1))
    step: dict[str, Any] = guest.call(node.set_cap, rel=pod.rel, key=pod.uid, cores=cap, state_file=pod.state)
    period = int(original.split()[1])
    assert step["quota"] == round(cap * period)
    assert step["cpu_max"] == f"{step['quota']} {period}"
    held = pod.share(3.0)
    target = step["quota"] / period
    print(
        f"\n{driver}: unthrottled {free['share'] * 100:.1f} %, cap {target * 100:.1f} %, measured "
        f"{held['share'] * 100:.1f} % of a CPU, {held['nr_throttled']:.0f} of {held['nr_periods']:.0f} periods throttled"
    )
    assert abs(held["share"] - target) <= 0.03, (held, target)
    assert held["nr_throttled"] > 0
    restored = guest.call(node.restore, rel=pod.rel, key=pod.uid, state_file=pod.state)
    assert restored == {"restored": True, "superseded": 0, "cpu_max": original}
    assert pod.share(1.0)["share"] > target + 0.2


def test_a_quota_someone_else_wrote_is_not_overwritten(guest: Guest, pods: list[Pod]) -> None:
    """The kubelet resizes a pod in place by writing its ``cpu.max``. The agent's rule: a restore does not
    write over a quota it did not write last, and a further step takes that quota as the new original."""
    pod = Pod(guest, "systemd", "200000 100000")  # a 2-CPU limit
    pods.append(pod)

    def cap(cores: float) -> str:
        return str(guest.call(node.set_cap, rel=pod.rel, key=pod.uid, cores=cores, state_file=pod.state)["cpu_max"])

    def kubelet(value: str) -> None:
        guest.call(node.write, rel=pod.rel, name="cpu.max", text=value)

    def restore() -> dict[str, Any]:
        result: dict[str, Any] = guest.call(node.restore, rel=pod.rel, key=pod.uid, state_file=pod.state)
        return result

    # Resized to 3 CPUs while throttled: the restore leaves the kubelet's value.
    assert cap(0.3) == "30000 100000"
    kubelet("300000 100000")
    assert restore() == {"restored": True, "superseded": 1, "cpu_max": "300000 100000"}
    # Resized while throttled, then the agent steps again: the restore writes the kubelet's value back.
    assert cap(0.3) == "30000 100000"
    kubelet("350000 100000")
    assert cap(0.2) == "20000 100000"
    assert restore() == {"restored": True, "superseded": 0, "cpu_max": "350000 100000"}
    # Resized below the agent's cap: a step up never lifts the quota above the kubelet's new limit.
    assert cap(0.5) == "50000 100000"
    kubelet("40000 100000")
    assert cap(0.6) == "40000 100000"
    assert restore() == {"restored": True, "superseded": 0, "cpu_max": "40000 100000"}
    assert pod.cpu_max() == "40000 100000"


def test_a_new_agent_process_restores_the_cap_of_one_that_died(guest: Guest, pods: list[Pod]) -> None:
    pod = Pod(guest, "systemd", "max 100000")
    pods.append(pod)
    guest.call(node.start, rel=pod.container, duty=1.0)
    agent = guest.call(node.capping_process, rel=pod.rel, key=pod.uid, cores=0.2, state_file=pod.state)
    assert pod.cpu_max() == "20000 100000"
    assert abs(pod.share(2.0)["share"] - 0.2) <= 0.03
    guest.call(node.stop, pids=[agent])  # SIGKILL mid-throttle: nothing restored on the way out
    assert pod.cpu_max() == "20000 100000"
    assert guest.call(node.reconciling_process, state_file=pod.state) == [pod.uid]
    assert pod.cpu_max() == "max 100000"
    assert pod.share(1.0)["share"] > 0.5
