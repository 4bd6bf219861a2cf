"""A manager stopped (SIGTERM) at any moment of its start-up, on the real control plane, under load: it ends
within the grace a process gets here and leaves the manager's Lease released (or, stopped while another
replica held it, untouched), so a standby takes over at its next try instead of waiting a lease out.

Each manager talks to the API server through a fault proxy, which holds a request at the moment wanted so
that the SIGTERM lands in it, and tells when it is there:

- **standing by**: another holder renews the Lease (the test writes it, an hour long); SIGTERM once the
  manager says it stands by;
- **taking the Lease**: its update of the free Lease is held 1 s by the proxy; SIGTERM while it is held
  (the update then reaches the API server: the manager holds the Lease without having seen the answer);
- **kopf starting**: SIGTERM when the manager logs that it took the Lease (kopf starts next);
- **kopf's discovery**: kopf's read of ``/api/v1`` (only kopf reads it) is held 2 s; SIGTERM while held
  (kopf's discovery requests then outlive their cancelled observer and wait for a login that never comes);
- **running**: SIGTERM once kopf watches CustomResourceDefinitions (its resource observation is over).

Every moment is taken :data:`REPEATS` times (``KOORDPY_STARTUP_STOP_REPEATS``, 2 by default), beside a
process that keeps one CPU busy. The bound is the
grace every process of this tier gets before SIGKILL (5 s, ``Proc.stop``; the chart's pods get 30 s): a
backstop against a hang, not a speed claim. The stop-to-exit times are printed.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

import pytest
from cluster_kit import RELEASE_NAMESPACE, Components, Kube, Release, wait_until

from koordpy_testkit.faultproxy import FaultProxy
from koordpy_testkit.guest.node import BURNER
from koordpy_testkit.processes import Proc

pytestmark = pytest.mark.cluster

GRACE = 5.0
"""Seconds between SIGTERM and SIGKILL: ``Proc.stop``'s default, which every test of this tier uses."""
REPEATS = int(os.environ.get("KOORDPY_STARTUP_STOP_REPEATS", "2"))
"""Each moment this many times (each a manager process started: about 2.5 CPU seconds of imports alone)."""
LEASE = "koordpy-manager"
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{RELEASE_NAMESPACE}/leases/{LEASE}"
OTHER = "koordpy-test-holder"
OVERRIDES = {"leaderElection": {"leaseDuration": "15s", "renewDeadline": "10s", "retryPeriod": "1s"}}
MOMENTS = ("standing by", "taking the Lease", "kopf starting", "kopf's discovery", "running")


@dataclass(frozen=True)
class Stopped:
    moment: str
    exit_code: int | None
    """None: still running at the end of the grace (then SIGKILLed)."""
    seconds: float
    lease: dict[str, Any]


def lease(kube: Kube) -> dict[str, Any]:
    return dict((kube.get("Lease", LEASE, RELEASE_NAMESPACE) or {}).get("spec") or {})


def held_by_another(kube: Kube) -> None:
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
    spec = {"holderIdentity": OTHER, "leaseDurationSeconds": 3600, "renewTime": now, "acquireTime": now}
    kube.patch("Lease", LEASE, {"spec": spec}, RELEASE_NAMESPACE)


def in_flight(proxy: FaultProxy, method: str, path: str, since: float) -> bool:
    """A ``method`` request for ``path`` received from ``since`` on is held or waits for its answer."""
    return any(m == method and p.split("?")[0] == path and at >= since for m, p, at in proxy.in_flight())


def reach(moment: str, manager: Proc, proxy: FaultProxy, since: float) -> None:
    """Wait until ``manager`` (started at ``since``) is at ``moment`` (see the module docstring)."""
    if moment == "standing by":
        manager.wait_for_log(f"standing by; held by {OTHER}", 120)
    elif moment == "taking the Lease":
        wait_until("its update of the Lease held", lambda: in_flight(proxy, "PUT", LEASE_PATH, since), interval=0.005)
    elif moment == "kopf starting":
        manager.wait_for_log("acquired as", 120)
    elif moment == "kopf's discovery":
        wait_until("kopf's discovery held", lambda: in_flight(proxy, "GET", "/api/v1", since), interval=0.005)
    else:
        wait_until(
            "kopf watches CRDs",
            lambda: any(e.received >= since for e in proxy.calls("watch", "customresourcedefinitions")),
            interval=0.02,
        )


def stop_at(moment: str, run: int, koordpy: Components, kube: Kube, proxy: FaultProxy) -> Stopped:
    if moment == "standing by":
        held_by_another(kube)
    elif moment == "taking the Lease":
        proxy.delay(LEASE_PATH, 1.0, body_contains=b'"holderIdentity":"stop-')
    elif moment == "kopf's discovery":
        proxy.delay("/api/v1", 2.0)
    slug = moment.replace(" ", "-").replace("'", "")
    name = f"manager-{slug}-{run}"
    since = time.monotonic()
    manager = koordpy.start_manager(
        OVERRIDES, name=name, api=proxy, env={"POD_ID": f"stop-{name}"}, wait=False, fresh_lease=moment != "standing by"
    )
    try:
        reach(moment, manager, proxy, since)
        manager._signal_group(signal.SIGTERM)
        sent = time.monotonic()
        assert manager.popen is not None
        try:
            code: int | None = manager.popen.wait(timeout=GRACE)
        except subprocess.TimeoutExpired:
            code = None
        seconds = time.monotonic() - sent
    finally:
        manager.stop()  # SIGKILL what is left
        proxy.delay(LEASE_PATH, 0, body_contains=b'"holderIdentity":"stop-')
        proxy.delay("/api/v1", 0)
    found = Stopped(moment, code, seconds, lease(kube))
    if moment == "standing by":
        kube.patch("Lease", LEASE, {"spec": {"holderIdentity": "", "leaseDurationSeconds": 1}}, RELEASE_NAMESPACE)
    return found


def test_a_manager_stopped_at_any_moment_of_its_start_up_ends_and_releases_the_lease(
    release: Release, koordpy: Components, kube: Kube
) -> None:
    assert kube.get("Lease", LEASE, RELEASE_NAMESPACE) is not None, "the chart's Lease is missing"
    koordpy._proc("cpu-burner", [sys.executable, "-S", str(BURNER), "1.0"])
    proxy = koordpy.api_proxy()
    stops = [stop_at(moment, run, koordpy, kube, proxy) for run in range(REPEATS) for moment in MOMENTS]
    for moment in MOMENTS:
        times = [s.seconds for s in stops if s.moment == moment]
        codes = [s.exit_code for s in stops if s.moment == moment]
        holders = [s.lease.get("holderIdentity") or "(released)" for s in stops if s.moment == moment]
        print(
            f"{moment}: exit codes {codes}, SIGTERM to exit median {statistics.median(times):.2f} s, "
            f"max {max(times):.2f} s; the Lease after: {[h.split('_')[0] for h in holders]}"
        )
    late = [(s.moment, round(s.seconds, 2)) for s in stops if s.exit_code is None]
    assert late == [], f"still running {GRACE} s after SIGTERM (then SIGKILLed): {late}"
    assert [(s.moment, s.exit_code) for s in stops if s.exit_code != 0] == []
    untouched = [s.lease.get("holderIdentity") for s in stops if s.moment == "standing by"]
    assert untouched == [OTHER] * REPEATS
    kept = [(s.moment, s.lease) for s in stops if s.moment != "standing by" and s.lease.get("holderIdentity") != ""]
    assert kept == [], f"the Lease still held after the manager ended: {kept}"
    assert {s.lease.get("leaseDurationSeconds") for s in stops if s.moment != "standing by"} == {1}
