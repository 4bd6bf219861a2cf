"""koordpy's components under API faults on the real control plane: each component talks to the real
kube-apiserver through a fault proxy (``koordpy_testkit.faultproxy``, TLS on both sides, the component's
own ServiceAccount token) that answers chosen requests itself (429 with Retry-After, 5xx, 409), forwards
a write and loses its answer, cuts a watch or answers it 410 Gone. What each test asserts is the end
state the real API server holds and what each side recorded; nothing waits for a set time.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import httpx
import pytest
from bindings import one_binding_each
from cluster_kit import Components, Kube, Space, wait_until
from nodemetrics import FRESH_FOR_THE_RUN, populate
from promtext import total

from koordpy_testkit.controlplane import ControlPlane
from koordpy_testkit.faultproxy import (
    conflict,
    lost_response,
    server_error,
    too_many_requests,
    watch_gone,
)

pytestmark = pytest.mark.cluster

MANAGER_SA = "system:serviceaccount:koordpy-system:koordpy-manager"


def extender_view(koordpy: Components, nodes: list[str]) -> dict[str, list[str]]:
    """The pods the extender's cache counts on each node (``/debug/nodes/{name}``), as ``namespace/name``."""
    out = {}
    for node in nodes:
        resp = httpx.get(f"{koordpy.extender_base}/debug/nodes/{node}", timeout=60)
        assert resp.status_code == 200, resp.text
        out[node] = sorted(resp.json()["assignedPods"])
    return out


def api_view(kube: Kube, nodes: list[str]) -> dict[str, list[str]]:
    """The pods the API server has bound to each node, every namespace, as ``namespace/name``."""
    out: dict[str, list[str]] = {node: [] for node in nodes}
    for pod in kube.list("Pod"):
        node = pod["spec"].get("nodeName")
        if node in out and pod["status"].get("phase") not in ("Succeeded", "Failed"):
            out[node].append(f"{pod['metadata']['namespace']}/{pod['metadata']['name']}")
    return {node: sorted(pods) for node, pods in out.items()}


def caches_agree(koordpy: Components, kube: Kube, nodes: list[str]) -> dict[str, list[str]] | None:
    api = api_view(kube, nodes)
    return api if extender_view(koordpy, nodes) == api else None


def test_the_extender_binds_every_pod_once_through_binding_faults(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube
) -> None:
    """The first binding calls of the extender get 500 twice, 429, a lost answer twice (the binding happened;
    the extender cannot know) and 409; kube-scheduler retries each pod as upstream does. Every pod ends bound
    exactly once (one binding the API server accepted), a pod whose answer was lost stays on the node that
    binding named, the extender counted one bind failure per binding call that did not succeed, and its
    cache holds exactly what the API server holds (a failed bind's assumption taken back)."""
    nodes = sorted(populate(space, kube, [10, 10, 10, 10]))
    api = koordpy.api_proxy(seed=21, capture_bodies=True)
    binding = {"verbs": ["create"], "resource": "pods", "subresource": "binding", "namespace": space.namespace}
    api.inject(server_error(), count=2, **binding)
    api.inject(too_many_requests(1), count=1, **binding)
    api.inject(lost_response(), count=2, **binding)
    api.inject(conflict(), count=1, **binding)
    koordpy.start_extender(FRESH_FOR_THE_RUN, api=api)
    koordpy.start_scheduler()
    pods = [f"web-{i:02d}" for i in range(16)]
    for name in pods:
        space.create_pod(name, cpu="500m", memory="1Gi")
    bound = wait_until("every pod bound", lambda: space.count_bound(len(pods)))

    calls = api.calls("create", "pods", "binding")
    injected = Counter(str(e.fault) for e in calls if e.fault is not None)
    assert injected == {"500": 2, "429 Retry-After 1": 1, "lost_response": 2, "409": 1}, injected
    # Exactly one binding per pod accepted, all by the extender's identity.
    assert one_binding_each(control_plane, space.namespace, set(pods)) == []
    # A lost answer: the API server bound the pod; it stays where that binding put it.
    for lost in (e for e in calls if e.fault is not None and e.fault.kind == "lost_response"):
        assert lost.upstream_status == 201, lost
        body = lost.json()
        assert bound[body["metadata"]["name"]] == body["target"]["name"]
    # One bind failure counted per binding call that did not succeed (injected, or refused by the server).
    unsuccessful = sum(1 for e in calls if e.status != 201)
    assert unsuccessful >= 6
    assert total(koordpy.extender_metrics(), "koordpy_extender_bind_failures_total") == unsuccessful
    # The extender's cache agrees with the API server (no assumption of a failed bind left behind).
    wait_until("the extender's cache agrees with the API server", lambda: caches_agree(koordpy, kube, nodes))


def test_the_extender_relists_after_a_410_and_forgets_what_it_missed(
    koordpy: Components, space: Space, kube: Kube
) -> None:
    """The extender's pod watch is cut and every attempt to resume it fails (503) while pods are deleted
    and created; then the resume is answered 410 Gone, as for a compacted resourceVersion. The extender
    lists pods again and its cache drops the pods deleted meanwhile and counts the new ones: it holds
    exactly what the API server holds."""
    nodes = [space.node("n0"), space.node("n1")]
    space.wait_nodes_ready()
    api = koordpy.api_proxy()
    koordpy.start_extender(api=api)

    def bound_pod(name: str, node: str) -> None:
        space.create_pod(name, cpu="1", memory="1Gi", extra_spec={"nodeName": node})

    for i in range(4):
        bound_pod(f"old-{i}", nodes[i % 2])
    wait_until("the extender counts the first pods", lambda: caches_agree(koordpy, kube, nodes))
    relists = total(koordpy.extender_metrics(), "koordpy_extender_watch_relists_total", resource="pods")
    assert 'koordpy_extender_watch_relists_total{resource="pods"}' in koordpy.extender_metrics()

    blind = api.inject(server_error(503), verbs=["watch"], resource="pods", count=None)
    assert api.cut_watches("pods") >= 1
    wait_until("the extender's watch resumes fail", lambda: blind.injected >= 1)
    for i in (0, 1):
        assert kube.delete("Pod", f"old-{i}", space.namespace, grace=0) == 200
    for i in range(2):
        bound_pod(f"new-{i}", nodes[0])
    wait_until("the deleted pods gone", lambda: kube.get("Pod", "old-0", space.namespace) is None)
    gone = api.inject(watch_gone(), verbs=["watch"], resource="pods", count=1)
    api.remove(blind)

    agreed = wait_until("the extender's cache agrees with the API server", lambda: caches_agree(koordpy, kube, nodes))
    assert f"{space.namespace}/old-0" not in agreed[nodes[0]] and f"{space.namespace}/new-1" in agreed[nodes[0]]
    assert gone.injected == 1
    answered_gone = next(e for e in api.injected() if e.fault is not None and e.fault.kind == "watch_gone")
    relisted = [e for e in api.calls("list", "pods") if e.seq > answered_gone.seq]
    assert relisted and relisted[0].status == 200
    assert total(koordpy.extender_metrics(), "koordpy_extender_watch_relists_total", resource="pods") > relists


def test_the_manager_keeps_one_nodemetric_per_node_through_write_faults(
    control_plane: ControlPlane, koordpy: Components, kube: Kube, space: Space
) -> None:
    """The manager's NodeMetric creates get 500 twice, a lost answer (created; the retry meets 409
    AlreadyExists) and 429 with Retry-After 2; a delete gets 500. Every new node ends with exactly one
    NodeMetric carrying the chart's collect policy (one create accepted per node), the retry after the 429
    waited at least its Retry-After, and a deleted node's NodeMetric goes."""
    api = koordpy.api_proxy(capture_bodies=True)
    koordpy.start_manager(api=api)
    wait_until("the manager settled (a NodeMetric for the system node)", lambda: kube.get("NodeMetric", "system-0"))
    creates = {"verbs": ["create"], "resource": "nodemetrics"}
    api.inject(server_error(), count=2, **creates)
    api.inject(lost_response(), count=1, **creates)
    api.inject(too_many_requests(2), count=1, **creates)
    api.inject(server_error(), verbs=["delete"], resource="nodemetrics", count=1)
    names = [space.node(f"m{i}") for i in range(5)]

    def every_node_has_one() -> list[dict[str, Any]] | None:
        found = [kube.get("NodeMetric", name) for name in names]
        return [m for m in found if m is not None] if all(found) else None

    metrics = wait_until("a NodeMetric for every new node", every_node_has_one)
    policy = koordpy.release.component_config("manager")["nodeMetric"]
    for metric in metrics:
        assert metric["spec"]["metricCollectPolicy"]["reportIntervalSeconds"] == policy["reportIntervalSeconds"]
    injected = Counter(str(e.fault) for e in api.calls("create", "nodemetrics") if e.fault is not None)
    assert injected == {"500": 2, "lost_response": 1, "429 Retry-After 2": 1}, injected

    def accepted_creates() -> Counter[str] | None:
        """Creates of NodeMetrics by the manager the API server accepted, by name, once the audit log has one
        for every new node (an audit event is written after its answer)."""
        accepted = Counter(
            e["objectRef"].get("name")
            for e in control_plane.audit_events()
            if e["user"]["username"] == MANAGER_SA
            and e["verb"] == "create"
            and (e.get("objectRef") or {}).get("resource") == "nodemetrics"
            and e["responseStatus"]["code"] == 201
        )
        return accepted if all(accepted[name] for name in names) else None

    accepted = wait_until("the manager's accepted creates in the audit log", accepted_creates)
    assert {name: accepted[name] for name in names} == dict.fromkeys(names, 1)
    # The request refused with Retry-After 2 was sent again no sooner than that.
    creates_seen = api.calls("create", "nodemetrics")
    throttled = next(e for e in creates_seen if e.fault is not None and e.fault.status == 429)
    name = throttled.json()["metadata"]["name"]
    retry = next(e for e in creates_seen if e.seq > throttled.seq and e.json()["metadata"]["name"] == name)
    assert retry.received - throttled.received >= 2.0

    assert kube.delete("Node", names[0]) == 200
    wait_until("the deleted node's NodeMetric deleted", lambda: kube.get("NodeMetric", names[0]) is None)
    assert [str(e.fault) for e in api.calls("delete", "nodemetrics") if e.fault is not None] == ["500"]
    assert httpx.get(koordpy.manager_base + "/healthz", timeout=60).status_code == 200
