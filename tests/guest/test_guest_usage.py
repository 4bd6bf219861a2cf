"""What the agent reads on real cgroup v2, in both kubelet layouts, against real processes whose use is
known: per-pod and per-container CPU, the working set as the kubelet computes it, and the node from the
guest's own ``/proc``.

Each pod is a kubelet-shaped cgroup (systemd driver: ``kubepods.slice/kubepods-burstable.slice/
kubepods-burstable-pod<uid_>.slice/cri-containerd-<id>.scope``; cgroupfs driver:
``kubepods/burstable/pod<uid>/<id>``) whose containers run duty-cycle burners
(:mod:`koordpy_testkit.guest.burner`). The reference for "what the burners used" is each burner's own
scheduler counter (``/proc/<pid>/schedstat``), read over the same window of the guest's clock.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from koordpy_testkit.guest import Guest, node

pytestmark = pytest.mark.guest

DRIVERS = ("systemd", "cgroupfs")
DUTIES = (0.30, 0.15)
WINDOW_SECONDS = 4.0
MiB = 1 << 20


def _cid() -> str:
    return uuid.uuid4().hex + uuid.uuid4().hex  # 64 hex digits, as containerd's ids


@pytest.fixture(scope="module")
def windows(guest: Guest) -> Iterator[dict[str, dict[str, Any]]]:
    """One measurement window per driver: a pod with two containers burning 30 % and 15 % of a CPU."""
    out: dict[str, dict[str, Any]] = {}
    for driver in DRIVERS:
        uid, cids = str(uuid.uuid4()), [_cid(), _cid()]
        made = guest.call(node.make_pod, driver=driver, uid=uid, containers=cids)
        try:
            pids = [
                guest.call(node.start, rel=made["containers"][c], duty=d)[0] for c, d in zip(cids, DUTIES, strict=True)
            ]
            measured = guest.call(
                node.window, seconds=WINDOW_SECONDS, pids=pids, cgroups=[made["pod"], *made["containers"].values()]
            )
        finally:
            guest.call(node.stop)
            guest.call(node.remove_pod, rel=made["pod"])
        out[driver] = {"uid": uid, "cids": cids, "pids": pids, "made": made, **measured}
    yield out


def _within(value: float | None, reference: float, relative: float) -> bool:
    return value is not None and abs(value - reference) <= relative * reference


@pytest.mark.parametrize("driver", DRIVERS)
def test_pod_and_container_cpu_match_the_burners(windows: dict[str, dict[str, Any]], driver: str) -> None:
    w = windows[driver]
    pod = w["pods"][w["uid"]]
    assert pod["rel"] == w["made"]["pod"]
    used = [w["burners"][str(pid)] for pid in w["pids"]]
    containers = [pod["containers"][cid]["cpu"] for cid in w["cids"]]
    print(
        f"\n{driver}: burners used {used[0]:.4f} + {used[1]:.4f} cores (duty {DUTIES[0]} + {DUTIES[1]}); "
        f"agent read containers {containers[0]:.4f} + {containers[1]:.4f}, pod {pod['cpu']:.4f}"
    )
    for measured, reference in zip(containers, used, strict=True):
        assert _within(measured, reference, 0.05), (measured, reference)
    assert _within(pod["cpu"], sum(used), 0.05), (pod["cpu"], used)
    # The burners did burn about what they were built for (else the comparison above would prove little).
    # A host that takes the CPU from qemu mid-burst makes them overshoot (the guest charges the lost time to
    # whatever ran): 0.28 cores for a duty of 0.15 at a host load average of 10. Both counters see it.
    for reference, duty in zip(used, DUTIES, strict=True):
        assert 0.5 * duty <= reference <= 2.0 * duty, (reference, duty)


def _busy_share(first: str, second: str, cpus: float) -> float:
    """CPUs in use between two ``cpu`` lines of /proc/stat: busy jiffies (all but idle and iowait, the
    first eight fields) over all jiffies."""
    a, b = ([int(v) for v in line.split()[1:9]] for line in (first, second))
    total = sum(b) - sum(a)
    idle = (b[3] + b[4]) - (a[3] + a[4])
    return (total - idle) / total * cpus


def test_node_cpu_and_memory_from_the_guests_proc(windows: dict[str, dict[str, Any]]) -> None:
    """The agent's node reading is the guest's /proc: CPU from /proc/stat (read beside it by the test) and
    memory as MemTotal - MemAvailable. /proc/stat counts busy time by timer ticks: a guest whose host takes
    its CPU away loses ticks (busy time then reads low), so the burners are a lower bound only loosely."""
    w = windows["systemd"]
    n = w["node"]
    burners = sum(w["burners"].values())
    by_test = _busy_share(*n["proc_stat"], n["cpus"])
    print(f"\nnode cpu: agent {n['cpu']:.4f} cores, /proc/stat by the test {by_test:.4f}; burners {burners:.4f}")
    assert n["cpus"] == 1.0  # -smp 1
    assert n["cpu"] is not None and abs(n["cpu"] - by_test) <= 0.02 * by_test + 0.005, (n["cpu"], by_test)
    assert 0.5 * burners <= n["cpu"] <= 1.0, (n["cpu"], burners)
    meminfo = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in n["meminfo"].splitlines()}
    assert n["memory_capacity"] == meminfo["MemTotal"]
    assert 512 * MiB < n["memory_capacity"] <= 1024 * MiB  # the guest's -m 1024 less the kernel's own
    assert abs(n["memory"] - (meminfo["MemTotal"] - meminfo["MemAvailable"])) <= 4 * MiB, n["memory"]


def test_working_set_as_the_kubelet_computes_it(guest: Guest, page_cache_file: str) -> None:
    """A container holds 40 MiB of anonymous memory and has read a 32 MiB file: the kubelet's working set
    (``memory.current`` minus ``inactive_file``) counts the first and not the file pages the kernel could
    drop; the agent reports exactly that, for the pod and for the container."""
    for driver in DRIVERS:
        uid, cid = str(uuid.uuid4()), _cid()
        made = guest.call(node.make_pod, driver=driver, uid=uid, containers=[cid])
        guest.call(node.drop_caches)  # the file's pages are read again, into this container's cgroup
        try:
            guest.call(node.start, rel=made["containers"][cid], anon_mib=40, read_path=page_cache_file)
            got = guest.call(node.memory, rel=made["pod"], child=made["containers"][cid])
        finally:
            guest.call(node.stop)
            guest.call(node.remove_pod, rel=made["pod"])
        print(f"\n{driver}: {got}")
        for scope in ("pod", "container"):
            m = got[scope]
            kubelet = m["current"] - m["inactive_file"]
            assert abs(m["agent"] - kubelet) <= 1 * MiB, (scope, m)
            assert m["inactive_file"] >= 16 * MiB, m  # most of the file's pages: the subtraction matters
            assert 40 * MiB <= m["agent"] <= m["current"] - 16 * MiB, m
