"""Fencing on the real control plane, while PodMigrationJobs keep arriving:

1. the leading manager cut off from the API server while a standby waits: the standby takes over once the
   Lease runs out; the old leader sends no write from its renew deadline on, neither while it is cut off
   nor once the network is back;
2. then the new leader frozen (SIGSTOP) past its lease: the first manager takes over again; thawed, the
   frozen one resumes with rounds due and watch events queued before it could renew anything, and its
   fence refuses every write they make (its log says so): the audit log has none from its renew deadline on.

The first manager (``partition-a``) reaches the API server only through a fault proxy; the second
(``partition-b``) directly. Each has a ServiceAccount token of its own, so the audit log tells their
writes apart by the token's credential id (``JTI=<jti>``). :meth:`FaultProxy.cut` partitions the first:
nothing passes either way; what its client still waits for when the path is back goes on (as TCP would
deliver it), what it gave up on is dropped. Its Lease renewals are read from the proxy's record (the
audit log leaves Leases out), the frozen one's last renewal from the Lease; every other figure comes from
the audit log.

Printed, in seconds from the cut: the old leader's last successful renewal and its renew deadline, its last
write, the Lease's expiry (that renewal plus ``leaseDuration``), the standby's taking the Lease and its
first write, the writes of the old leader the cut held and dropped; from the freeze: the frozen leader's
last renewal and deadline, and the writes its fence refused once thawed.
"""

from __future__ import annotations

import base64
import json
import signal
import threading
import time
from typing import Any

import pytest
from cluster_kit import RELEASE_NAMESPACE, Components, Kube, Release, Space, wait_until
from test_cluster_migrations import deployment, running_pods, status

from koordpy.model.durations import parse_rfc3339
from koordpy_testkit.controlplane import ControlPlane
from koordpy_testkit.faultproxy import FaultProxy
from koordpy_testkit.requestinfo import WRITE_VERBS

pytestmark = pytest.mark.cluster

MANAGER_SA = f"system:serviceaccount:{RELEASE_NAMESPACE}:koordpy-manager"
CREDENTIAL = "authentication.kubernetes.io/credential-id"
LEASE_SECONDS, RENEW_DEADLINE = 6.0, 4.0
CONFIG = {
    "leaderElection": {"leaseDuration": "6s", "renewDeadline": "4s", "retryPeriod": "1s"},
    "migrationController": {
        "defaultJobMode": "EvictDirectly",
        "arbitrationArgs": {"interval": "200ms"},
        "objectLimiters": {"workload": {"duration": "0s"}},
        "maxMigratingPerNode": 4,
        "maxMigratingPerWorkload": 4,
        "maxUnavailablePerWorkload": 4,
    },
}
CUT_SECONDS = 12.0
"""Long enough for the standby to take over (the lease, 6 s, counted from its last sight of a renewal) and
act for a while, shorter than the old leader's request timeout (30 s): a write it still waited for would be
delivered when the path is back."""
AFTER_SECONDS = 4.0
"""Jobs keep arriving this long after the path is back."""
JOB_EVERY = 0.5


def credential_of(token: str) -> str:
    """The audit log's credential id of a ServiceAccount token: its JWT ``jti``."""
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return f"JTI={claims['jti']}"


def writes_of(plane: ControlPlane, credential: str) -> list[tuple[float, str]]:
    """(time received, what) of every write made with ``credential``, oldest first."""
    out = []
    for event in plane.audit_events():
        user = event["user"]
        if user["username"] != MANAGER_SA or event["verb"] not in WRITE_VERBS:
            continue
        if (user.get("extra") or {}).get(CREDENTIAL) != [credential]:
            continue
        ref = event.get("objectRef") or {}
        what = f"{event['verb']} {ref.get('resource')}/{ref.get('subresource', '')} {ref.get('name')}"
        out.append((parse_rfc3339(event["requestReceivedTimestamp"]), what))
    return sorted(out)


def jobs_written(plane: ControlPlane, credential: str) -> set[str]:
    """The PodMigrationJobs ``credential`` wrote (status or spec)."""
    return {what.rsplit(" ", 1)[1] for _, what in writes_of(plane, credential) if " podmigrationjobs/" in what}


def lease(kube: Kube) -> dict[str, Any]:
    return dict((kube.get("Lease", "koordpy-manager", RELEASE_NAMESPACE) or {}).get("spec") or {})


class Arrivals:
    """A PodMigrationJob every :data:`JOB_EVERY` seconds, from a thread, each for a running pod of ``app``
    that no job named yet."""

    def __init__(self, kube: Kube, space: Space, app: str) -> None:
        self.kube, self.space, self.app = kube, space, app
        self.jobs: list[str] = []
        self.targeted: set[str] = set()
        self.stopped = threading.Event()
        self.errors: list[str] = []
        self.thread = threading.Thread(target=self._run, name="job arrivals", daemon=True)

    def _run(self) -> None:
        while not self.stopped.wait(JOB_EVERY):
            try:
                pods = self.space.pods()
                free = sorted(
                    name
                    for name, pod in pods.items()
                    if name not in self.targeted
                    and pod["metadata"].get("labels", {}).get("app") == self.app
                    and not pod["metadata"].get("deletionTimestamp")
                    and pod.get("status", {}).get("phase") == "Running"
                )
                if not free:
                    continue
                name = f"{self.space.namespace}-{self.app}-{len(self.jobs)}"
                self.kube.create(
                    {
                        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
                        "kind": "PodMigrationJob",
                        "metadata": {"name": name},
                        "spec": {
                            "mode": "EvictDirectly",
                            "ttl": "5m",
                            "podRef": {"namespace": self.space.namespace, "name": free[0]},
                        },
                    }
                )
                self.targeted.add(free[0])
                self.jobs.append(name)
            except Exception as exc:  # reported by the test: the arrivals must not stop silently
                self.errors.append(repr(exc))

    def __enter__(self) -> Arrivals:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join(60)


def test_a_leader_cut_off_or_frozen_writes_nothing_after_its_renew_deadline(
    control_plane: ControlPlane, release: Release, koordpy: Components, space: Space, kube: Kube
) -> None:
    nodes = [space.node(f"n{i}", cpu="16", memory="64Gi") for i in range(2)]
    space.wait_nodes_ready()
    for i, node in enumerate(nodes):
        kube.create(deployment(space, f"web{i}", 6, node))
    for i in range(2):
        running_pods(space, f"web{i}", 6)
    proxy: FaultProxy = koordpy.api_proxy()
    token_a, token_b = release.token("manager"), release.token("manager")
    old, new = credential_of(token_a), credential_of(token_b)
    leader = koordpy.start_manager(
        CONFIG,
        name="manager-a",
        kubeconfig=koordpy.kubeconfig("manager-a", token_a, proxy),
        env={"POD_ID": "partition-a"},
    )
    wait_until("partition-a leads", lambda: str(lease(kube).get("holderIdentity", "")).startswith("partition-a_"))
    standby = koordpy.start_manager(
        CONFIG, name="manager-b", kubeconfig=koordpy.kubeconfig("manager-b", token_b), env={"POD_ID": "partition-b"}
    )
    standby.wait_for_log("standing by; held by partition-a_", 120)
    offset = time.time() - time.monotonic()  # the proxy's monotonic times as wall-clock times

    arrivals: list[Arrivals] = []
    with Arrivals(kube, space, "web0") as first, Arrivals(kube, space, "web1") as second:
        arrivals = [first, second]
        # 1. the leader cut off from the API server while the standby waits
        wait_until("the leader acted on three jobs", lambda: len(jobs_written(control_plane, old)) >= 3)
        cut = proxy.cut() + offset
        wait_until("partition-b leads", lambda: str(lease(kube).get("holderIdentity", "")).startswith("partition-b_"))
        took_over = parse_rfc3339(lease(kube)["acquireTime"])
        time.sleep(max(0.0, cut + CUT_SECONDS - time.time()))
        restored = proxy.restore() + offset
        time.sleep(AFTER_SECONDS)
        # 2. the new leader frozen (SIGSTOP) past its lease: the first one takes over; thawed, the frozen one
        # resumes with rounds due and watch events queued before it has renewed anything
        standby._signal_group(signal.SIGSTOP)
        frozen = time.time()
        try:
            last_seen = held_by_b = lease(kube)
            while not str(last_seen.get("holderIdentity", "")).startswith("partition-a_"):
                held_by_b = last_seen
                time.sleep(0.1)
                last_seen = lease(kube)
            b_renewed = parse_rfc3339(held_by_b["renewTime"])
            time.sleep(2.0)  # partition-a acts meanwhile
        finally:
            standby._signal_group(signal.SIGCONT)
        thawed = time.time()
        standby.wait_for_log("stopped acting: the Lease was lost; standing by", 60)
        time.sleep(AFTER_SECONDS)
    jobs = [name for a in arrivals for name in a.jobs]
    assert [e for a in arrivals for e in a.errors] == []
    wait_until("every job ended", lambda: all(status(kube, j).get("phase") in ("Succeeded", "Failed") for j in jobs))
    assert {j: status(kube, j).get("phase") for j in jobs} == dict.fromkeys(jobs, "Succeeded")
    leader.wait_for_log("stopped acting: the Lease was lost; standing by", 60)

    renewals = [e for e in proxy.calls("update", "leases") if e.upstream_status == 200 and e.received + offset < cut]
    assert renewals, "no renewal of the old leader's through the proxy before the cut"
    renewed = renewals[-1].received + offset  # its start: the fence's deadline counts from it
    deadline = renewed + RENEW_DEADLINE
    expiry = renewed + LEASE_SECONDS  # as the old leader wrote it: renewTime (its clock, this host's) + duration
    wait_until("the new leader's writes in the audit log", lambda: writes_of(control_plane, new))
    old_writes, new_writes = writes_of(control_plane, old), writes_of(control_plane, new)
    held = [e for e in proxy.exchanges() if e.fault is not None and e.fault.kind == "cut" and e.call is not None]
    held_writes = [f"{e.method} {e.path}" for e in held if e.call and e.call.verb in WRITE_VERBS]
    b_deadline = b_renewed + RENEW_DEADLINE
    cut_off = [(t, w) for t, w in old_writes if t < frozen]  # the first manager's writes until the freeze
    refused = [line for line in standby.log.read_text().splitlines() if "not sent: not leading" in line]
    print(
        f"from the cut (s): old leader's last renewal {renewed - cut:+.2f}, its renew deadline {deadline - cut:+.2f}, "
        f"its last write {cut_off[-1][0] - cut:+.2f} ({cut_off[-1][1]}), Lease expiry {expiry - cut:+.2f}, "
        f"new leader took the Lease {took_over - cut:+.2f}, its first write {new_writes[0][0] - cut:+.2f} "
        f"({new_writes[0][1]}); path restored {restored - cut:+.2f}; old leader's writes after its deadline "
        f"{sum(deadline < t < frozen for t, _ in old_writes)}, after the restore "
        f"{sum(restored < t < frozen for t, _ in old_writes)} (until the freeze); "
        f"its writes the cut held and dropped: {len(held_writes)} {held_writes[:2]}"
    )
    print(
        f"from the freeze (s): frozen leader's last renewal {b_renewed - frozen:+.2f}, its renew deadline "
        f"{b_deadline - frozen:+.2f}, thawed {thawed - frozen:+.2f}; its writes after its deadline "
        f"{sum(t > b_deadline for t, _ in new_writes)}, refused by its fence once thawed {len(refused)}; "
        f"jobs {len(jobs)}, writes of the first manager {len(old_writes)}, of the second {len(new_writes)}"
    )
    # 1. the cut-off leader sent nothing from its renew deadline on, while cut off nor once the path was back
    assert [w for t, w in old_writes if t > deadline and t < frozen] == [], (
        "the cut-off leader wrote after its deadline"
    )
    forwarded_late = [
        f"{e.method} {e.path}"
        for e in proxy.exchanges()
        if e.call is not None
        and e.call.verb in WRITE_VERBS
        and e.call.resource != "leases"
        and e.forwarded is not None
        and deadline < e.forwarded + offset < frozen
    ]
    assert forwarded_late == [], "the proxy passed writes of the cut-off leader's after its renew deadline"
    assert new_writes[0][0] > deadline and took_over > deadline
    assert new_writes[0][0] >= expiry - 0.01  # the standby waited the lease out (same host clock)
    assert [t for t, _ in new_writes if restored < t < frozen], "the new leader did not act after the restore"
    # 2. the frozen leader, thawed, sent nothing: its rounds and watch events came due before it could renew,
    # and its fence refused what they wrote
    assert [w for t, w in new_writes if t > b_deadline] == [], "the thawed leader wrote after its deadline"
    assert refused, "the thawed leader attempted no write: the fence was not exercised"
    assert [t for t, _ in old_writes if t > thawed], "the first manager did not act again after the freeze"
