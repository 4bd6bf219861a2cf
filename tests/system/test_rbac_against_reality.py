"""RBAC against reality: every API call each component made is allowed by its chart role.

Runs after the scenarios (``conftest.py`` orders it last) and checks the calls they recorded, plus
its own short run of every component, so it also holds when run alone. The chart is rendered by the
real helm; the rules come from the rendered (Cluster)Roles bound to each component's ServiceAccount.
``test_rbac_checker.py`` shows the checker failing when ``create pods/binding`` is removed.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest
from rbac_check import Call, Grant, check, rendered_grants, without_rule
from scenario_kit import (
    NODEMETRICS,
    PODS_PATH,
    BusyProc,
    create,
    create_metric,
    driver_for,
    metric,
    node,
    pod,
    start_agent,
)
from system_cluster import Cluster, RenderedChart

from koordpy.kube.resources import RESERVATIONS
from koordpy_testkit.bounds import HANG_BACKSTOP

PMJS = "/apis/scheduling.koordinator.sh/v1alpha1/podmigrationjobs"

SERVICE_ACCOUNT_SUFFIX = {"extender": "-scheduler", "manager": "-manager", "agent": "-agent"}
"""Component user → the suffix of its ServiceAccount in the chart."""


def _attrs(call: Call) -> tuple[str, str, str, str]:
    return (call.user, call.verb, call.resource, call.subresource)


def _grants(chart: RenderedChart) -> dict[str, list[Grant]]:
    by_sa = rendered_grants(chart.text)
    out: dict[str, list[Grant]] = {}
    for user, suffix in SERVICE_ACCOUNT_SUFFIX.items():
        names = [name for name in by_sa if name.endswith(suffix)]
        assert len(names) == 1, f"{user}: expected one ServiceAccount *{suffix}, got {sorted(by_sa)}"
        out[user] = by_sa[names[0]]
    return out


async def _short_run(cluster: Cluster) -> None:
    """Every component against one emulator; the driver schedules a few pods through the extender."""
    async with cluster.admin() as admin:
        resp = await admin.post(
            "/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}
        )
        assert resp.status_code in (200, 201, 409)
        for i in range(3):
            await create(admin, "/api/v1/nodes", node(f"rbac-{i}"))
            # With status: a NodeMetric without updateTime counts as expired and blocks its node.
            await create_metric(admin, metric(f"rbac-{i}", 1000, 8 * (1 << 30), updated=time.time()))
        _, extender_url = cluster.start_extender(cluster.extender_config())
        cluster.start_manager({"reservation": {"intervalSeconds": 1}})
        busy = BusyProc(cluster.workdir / "proc", cpus=16, mem_total_kib=64 << 20, mem_avail_kib=48 << 20)
        ticker = asyncio.ensure_future(busy.run())
        start_agent(cluster, "rbac-0", cluster.workdir, busy)
        driver = driver_for(cluster.chart.kube_scheduler_config(), cluster.url, extender_url)
        async with driver:
            for i in range(5):
                await create(admin, PODS_PATH, pod(f"rbac-{i}"))
            await driver.wait_until(lambda: len(driver.bound()) == 5, HANG_BACKSTOP, "5 pods bound")
        # A gang: the manager writes its PodGroup's status and posts an Event (1 of 2 members exist).
        await create(
            admin,
            "/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/default/podgroups",
            {
                "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": "rbac-gang", "namespace": "default"},
                "spec": {"minMember": 2},
            },
        )
        member = pod("rbac-gang-0")
        member["metadata"]["labels"] = {"pod-group.scheduling.sigs.k8s.io": "rbac-gang"}
        member["spec"]["schedulerName"] = "nobody"  # stays unbound: it waits for its gang
        await create(admin, PODS_PATH, member)
        # A node without a NodeMetric: the manager creates one with the collect policy.
        await create(admin, "/api/v1/nodes", node("rbac-new"))
        deadline = time.monotonic() + HANG_BACKSTOP
        while (await admin.get(f"{NODEMETRICS}/rbac-new")).status_code != 200:
            assert time.monotonic() < deadline, "the manager did not create the NodeMetric of a new node"
            await asyncio.sleep(0.1)
        # A PodMigrationJob: the manager arbitrates it and evicts its (controlled) pod.
        migrating = pod("rbac-migrating")
        migrating["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rbac", "uid": "rs-rbac", "controller": True}
        ]
        await create(admin, PODS_PATH, migrating)
        job = {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "PodMigrationJob",
            "metadata": {"name": "rbac-migration"},
            "spec": {"podRef": {"namespace": "default", "name": "rbac-migrating"}, "mode": "EvictDirectly"},
        }
        await create(admin, PMJS, job)
        while ((await admin.get(f"{PMJS}/rbac-migration")).json().get("status") or {}).get("phase") != "Succeeded":
            assert time.monotonic() < deadline, "the manager did not migrate the PodMigrationJob's pod"
            await asyncio.sleep(0.1)
        # A user's Reservation: the manager places it (list, then a status patch).
        await create(
            admin,
            RESERVATIONS.path(),
            {
                "apiVersion": RESERVATIONS.api_version,
                "kind": "Reservation",
                "metadata": {"name": "rbac-hold"},
                "spec": {
                    "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
                    "owners": [{"object": {"namespace": "default", "name": "rbac-owner"}}],
                },
            },
        )
        for wanted in (("patch", "podgroups", "status"), ("create", "events", ""), ("patch", "reservations", "status")):
            while not any(
                (c.user, c.verb, c.resource, c.subresource) == ("manager", *wanted) for c in cluster.recorded_calls()
            ):
                assert time.monotonic() < deadline, f"the manager never made {wanted}"
                await asyncio.sleep(0.1)
        # ... and the agent has reported its node at least once (its status write is in the record).
        while not any(c.user == "agent" and c.subresource == "status" for c in cluster.recorded_calls()):
            assert time.monotonic() < deadline, "the agent never wrote its NodeMetric status"
            await asyncio.sleep(0.1)
        ticker.cancel()


@pytest.mark.system
async def test_recorded_calls_are_allowed_by_the_chart(
    cluster: Cluster, chart: RenderedChart, session_calls: list[Call]
) -> None:
    await _short_run(cluster)
    calls = [c for c in [*session_calls, *cluster.recorded_calls()] if c.user in SERVICE_ACCOUNT_SUFFIX]
    per_user = Counter(c.user for c in calls)
    for user in SERVICE_ACCOUNT_SUFFIX:
        assert per_user[user] > 0, f"no API calls recorded for {user}: {per_user}"
    report = check(calls, _grants(chart))
    denied = sorted({str(c) for c in report.denied})
    assert not denied, "calls no chart rule allows:\n" + "\n".join(denied)
    assert not report.unused_without_why, f"granted, unused, no '# why:': {report.unused_without_why}"
    # The verbs that matter were really exercised, so "allowed" is not vacuous.
    used = {(c.user, c.verb, c.resource, c.subresource) for c in calls}
    assert ("extender", "create", "pods", "binding") in used
    assert ("extender", "watch", "pods", "") in used
    assert ("extender", "watch", "nodemetrics", "") in used
    # The same recorded calls against the chart minus `create pods/binding`: the check fails.
    weakened = _grants(RenderedChart(without_rule(chart.text, "pods/binding", "create"), chart.docs))
    without_binding = check(calls, weakened).denied
    assert {(c.user, c.verb, c.resource, c.subresource) for c in without_binding} - set(map(_attrs, report.denied)) == {
        ("extender", "create", "pods", "binding")
    }
    print(f"\nrecorded calls per user {dict(per_user)}; distinct {sorted(used)}")
    assert ("manager", "create", "nodemetrics", "") in used
    assert ("manager", "create", "pods", "eviction") in used
    assert ("manager", "patch", "podmigrationjobs", "status") in used
    assert ("manager", "patch", "podgroups", "status") in used
    assert ("manager", "create", "events", "") in used
    assert ("manager", "watch", "pods", "") in used
    assert ("manager", "list", "reservations", "") in used
    assert ("manager", "patch", "reservations", "status") in used
