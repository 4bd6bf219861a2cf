"""The chart's roles checked by the real authorizer: every request koordpy's components made in this pytest session
(the audit log records every request of the release namespace's ServiceAccounts, reads included) was
allowed, and a role with one rule removed makes the component fail visibly.

``test_no_component_request_was_denied`` runs last in the session (see ``conftest.py``), so it covers
every scenario that ran before it.
"""

from __future__ import annotations

import copy
import time

import httpx
import pytest
from cluster_kit import Components, Kube, Release, Space, poll, wait_until

from koordpy.model.durations import format_rfc3339
from koordpy_testkit.controlplane import ControlPlane

pytestmark = pytest.mark.cluster

SA_PREFIX = "system:serviceaccount:koordpy-system:"


def denied(control_plane: ControlPlane) -> list[tuple[str, str, str, str, int]]:
    """Requests of the release's ServiceAccounts the authorizer refused (``authorization.k8s.io/decision:
    forbid``); a 403 from admission, such as a write into a namespace being deleted, is not a denial."""
    return [
        (
            e["user"]["username"].removeprefix(SA_PREFIX),
            e["verb"],
            (e.get("objectRef") or {}).get("resource", ""),
            (e.get("objectRef") or {}).get("subresource", ""),
            e["responseStatus"]["code"],
        )
        for e in control_plane.audit_events()
        if e["user"]["username"].startswith(SA_PREFIX)
        and (e.get("annotations") or {}).get("authorization.k8s.io/decision") == "forbid"
    ]


def test_a_removed_role_rule_makes_the_extender_fail_visibly(
    control_plane: ControlPlane, release: Release, koordpy: Components, space: Space, kube: Kube
) -> None:
    """Without ``list/watch nodemetrics`` (granted by the chart's scheduler ClusterRole alone) the API server
    refuses the extender's list (403, in the audit log), the extender stays not ready and the pod is not
    bound; with the rule back the extender's list is retried, it becomes ready and binds the pod."""
    role_name = f"{release.name}-scheduler"
    role = kube.get("ClusterRole", role_name)
    assert role is not None
    original = copy.deepcopy(role["rules"])
    trimmed = [r for r in original if r.get("resources") != ["nodemetrics"]]
    assert len(trimmed) == len(original) - 1, original
    node = space.node("n0", cpu="4", memory="16Gi")
    kube.create(
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeMetric",
            "metadata": {"name": node},
            "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
        }
    )
    usage = {"nodeUsage": {"resources": {"cpu": "100m", "memory": "1Gi"}}}
    kube.patch(
        "NodeMetric",
        node,
        {"status": {"updateTime": format_rfc3339(time.time()), "nodeMetric": usage}},
        subresource="status",
    )
    space.wait_nodes_ready()
    before = len(denied(control_plane))
    kube.patch("ClusterRole", role_name, {"rules": trimmed})
    try:
        koordpy.start_extender(wait_ready=False)
        koordpy.start_scheduler()
        space.create_pod("web-0")
        refusals = wait_until("the NodeMetric list refused", lambda: denied(control_plane)[before:])
        assert ("koordpy-scheduler", "list", "nodemetrics", "", 403) in refusals, refusals
        assert httpx.get(koordpy.extender_base + "/readyz", timeout=30).status_code == 503
        assert space.bound() == {}
    finally:
        kube.patch("ClusterRole", role_name, {"rules": original})
    wait_until("extender ready", lambda: httpx.get(koordpy.extender_base + "/readyz", timeout=30).status_code == 200)
    # kube-scheduler retries the pod after its backoff; the extender now places and binds it.
    assert poll("bound after the rule is back", space.bound, timeout=330) == {"web-0": node}


EXPECTED_REFUSALS = {
    ("koordpy-scheduler", "list", "nodemetrics"),  # the removed role rule above
    ("koordpy-manager", "delete", "pods"),  # the Delete evictor the chart does not grant (test_cluster_migrations)
}


def test_no_component_request_was_denied(control_plane: ControlPlane, release: Release) -> None:
    """Every request of the components' ServiceAccounts in the session, except the negative tests'."""
    refusals = [d for d in denied(control_plane) if d[:3] not in EXPECTED_REFUSALS]
    assert refusals == []
    users = {e["user"]["username"] for e in control_plane.audit_events() if e["user"]["username"].startswith(SA_PREFIX)}
    assert users, "no request of a component ServiceAccount was audited: the audit policy does not cover them"
