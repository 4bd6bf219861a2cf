"""ApiClient against the emulator over loopback: CRUD, error mapping, selectors, chunking, subresources."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from koordpy.kube import errors
from koordpy.kube.client import ApiClient
from koordpy.kube.connection import ConnectionInfo
from koordpy.kube.resources import ALL, EVENTS, NODEMETRICS, NODES, PDBS, PODMIGRATIONJOBS, PODS
from koordpy_testkit.apiserver import ApiServerEmulator
from koordpy_testkit.bounds import HANG_BACKSTOP


def pod(name: str, ns: str = "default", labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec},
    }


def rv(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


async def test_crud_roundtrip_assigns_identity_and_bumps_resource_version(api_client: ApiClient) -> None:
    created = await api_client.create(PODS, pod("web-1"))
    meta = created["metadata"]
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert created["status"]["phase"] == "Pending"  # defaulted like the API server does
    fetched = await api_client.get(PODS, "web-1", "default")
    assert fetched == created

    patched = await api_client.patch(PODS, "web-1", {"metadata": {"labels": {"tier": "web"}}}, namespace="default")
    assert patched["metadata"]["labels"] == {"tier": "web"}
    assert rv(patched) > rv(created)

    json_patched = await api_client.patch(
        PODS,
        "web-1",
        [
            {"op": "test", "path": "/metadata/labels/tier", "value": "web"},
            {"op": "add", "path": "/metadata/labels/x", "value": "1"},
        ],
        namespace="default",
        patch_type="json",
    )
    assert json_patched["metadata"]["labels"] == {"tier": "web", "x": "1"}
    assert rv(json_patched) > rv(patched)

    body = dict(json_patched)
    body["spec"] = {**body["spec"], "priority": 5}
    replaced = await api_client.replace(PODS, body)
    assert replaced["spec"]["priority"] == 5
    assert replaced["metadata"]["uid"] == meta["uid"]
    assert replaced["metadata"]["generation"] == 2  # spec changed

    # a no-op patch does not create a new version
    same = await api_client.patch(PODS, "web-1", {"metadata": {"labels": {"x": "1"}}}, namespace="default")
    assert rv(same) == rv(replaced)

    await api_client.delete(PODS, "web-1", "default")  # unbound pod: deleted at once
    with pytest.raises(errors.NotFound):
        await api_client.get(PODS, "web-1", "default")


async def test_error_mapping_404_409_422(api_client: ApiClient) -> None:
    with pytest.raises(errors.NotFound) as nf:
        await api_client.get(NODES, "missing")
    assert nf.value.status == 404 and nf.value.reason == "NotFound"
    assert nf.value.details["name"] == "missing"

    node = await api_client.create(NODES, {"metadata": {"name": "n1"}})
    with pytest.raises(errors.Conflict) as exists:
        await api_client.create(NODES, {"metadata": {"name": "n1"}})
    assert exists.value.already_exists

    await api_client.patch(NODES, "n1", {"metadata": {"labels": {"a": "b"}}})
    with pytest.raises(errors.Conflict) as stale:
        await api_client.replace(NODES, node)  # carries the old resourceVersion
    assert not stale.value.already_exists and stale.value.reason == "Conflict"

    with pytest.raises(errors.Conflict):  # a merge patch carrying a stale resourceVersion is a conflict too
        await api_client.patch(NODES, "n1", {"metadata": {"resourceVersion": node["metadata"]["resourceVersion"]}})

    with pytest.raises(errors.UnprocessableEntity) as invalid:
        await api_client.create(NODES, {"metadata": {"name": "Not_A_DNS_Name"}})
    assert invalid.value.details["causes"][0]["field"] == "metadata.name"

    with pytest.raises(errors.UnprocessableEntity):  # a failed JSON-patch test op
        await api_client.patch(
            NODES, "n1", [{"op": "test", "path": "/metadata/labels/a", "value": "other"}], patch_type="json"
        )

    with pytest.raises(errors.BadRequest):
        await api_client.list(PODS, field_selector="spec.notIndexed=x")


async def test_error_mapping_410_429_5xx_and_connection(apiserver: ApiServerEmulator, api_client: ApiClient) -> None:
    for i in range(5):
        await api_client.create(PODS, pod(f"p{i}"))
    first = await api_client.list_page(PODS, limit=2)
    apiserver.state.expire_continue_tokens()
    with pytest.raises(errors.Gone) as gone:
        await api_client.list_page(PODS, limit=2, continue_token=first["metadata"]["continue"])
    assert gone.value.reason == "Expired"

    apiserver.inject_error(500, verb="list", resource="nodes")
    with pytest.raises(errors.ServerError) as server_error:
        await api_client.list(NODES)
    assert errors.is_temporary(server_error.value)
    assert (await api_client.list(NODES)).items == []  # the injected failure was used up

    apiserver.inject_error(429, verb="get", resource="pods")
    with pytest.raises(errors.TooManyRequests) as throttled:
        await api_client.get(PODS, "p0", "default")
    assert errors.is_temporary(throttled.value)

    async with ApiClient(ConnectionInfo.for_url("http://127.0.0.1:9"), None) as dead:
        with pytest.raises(errors.ApiConnectionError) as refused:
            await dead.get(NODES, "n1")
    assert refused.value.status == 0 and errors.is_temporary(refused.value)


def test_is_temporary_table() -> None:
    cases: list[tuple[BaseException, bool]] = [
        (errors.error_from_status(429, {}), True),
        (errors.error_from_status(500, {}), True),
        (errors.error_from_status(503, {}), True),
        (errors.error_from_status(404, {}), False),
        (errors.error_from_status(409, {"reason": "Conflict"}), False),
        (errors.error_from_status(410, {}), False),
        (errors.error_from_status(422, {}), False),
        (errors.ApiConnectionError("reset"), True),
        (ConnectionResetError(), True),
        (TimeoutError(), True),
        (ValueError(), False),
    ]
    assert [errors.is_temporary(exc) for exc, _ in cases] == [want for _, want in cases]
    assert isinstance(errors.error_from_status(503, {}), errors.ServerError)
    throttled = errors.error_from_response(429, b'{"kind":"Status","details":{"retryAfterSeconds":3}}')
    assert isinstance(throttled, errors.TooManyRequests) and throttled.retry_after == 3.0
    assert errors.error_from_response(429, b"", retry_after="7").retry_after == 7.0  # type: ignore[attr-defined]
    garbage = errors.error_from_response(502, b"<html>bad gateway</html>")
    assert isinstance(garbage, errors.ServerError) and "bad gateway" in garbage.message


async def test_label_and_field_selectors(api_client: ApiClient) -> None:
    await api_client.create(PODS, pod("a", labels={"app": "web", "tier": "front"}, schedulerName="koordpy-scheduler"))
    await api_client.create(PODS, pod("b", labels={"app": "web"}))
    await api_client.create(PODS, pod("c", ns="other", labels={"app": "db"}))
    await api_client.create(NODES, {"metadata": {"name": "n1"}})
    created = await api_client.get(PODS, "b", "default")
    await api_client.create_binding("default", "b", created["metadata"]["uid"], "n1")

    async def names(**kw: Any) -> list[str]:
        return sorted(i["metadata"]["name"] for i in (await api_client.list(PODS, **kw)).items)

    assert await names(label_selector="app=web") == ["a", "b"]
    assert await names(label_selector="app!=web") == ["c"]
    assert await names(label_selector="app in (db, cache)") == ["c"]
    assert await names(label_selector="app notin (db)") == ["a", "b"]
    assert await names(label_selector="tier") == ["a"]
    assert await names(label_selector="!tier") == ["b", "c"]
    assert await names(label_selector="app=web,tier=front") == ["a"]
    assert await names(field_selector="spec.nodeName=n1") == ["b"]
    assert await names(field_selector="spec.nodeName=") == ["a", "c"]  # unbound pods
    assert await names(field_selector="spec.schedulerName=koordpy-scheduler") == ["a"]
    assert await names(field_selector="status.phase=Pending,metadata.namespace=other") == ["c"]
    assert await names(field_selector="metadata.name!=a", namespace="default") == ["b"]


async def test_chunked_list_follows_continue_over_a_consistent_snapshot(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    for i in range(7):
        await api_client.create(PODS, pod(f"p{i}"))
    full = await api_client.list(PODS, page_size=3)
    assert full.pages == 3
    assert [i["metadata"]["name"] for i in full.items] == [f"p{i}" for i in range(7)]
    assert all(i["kind"] == "Pod" and i["apiVersion"] == "v1" for i in full.items)

    page1 = await api_client.list_page(PODS, limit=3)
    assert len(page1["items"]) == 3 and page1["metadata"]["remainingItemCount"] == 4
    await api_client.delete(PODS, "p6", "default")  # after the first page: not visible in this list
    page2 = await api_client.list_page(PODS, limit=3, continue_token=page1["metadata"]["continue"])
    page3 = await api_client.list_page(PODS, limit=3, continue_token=page2["metadata"]["continue"])
    assert [i["metadata"]["name"] for i in page3["items"]] == ["p6"]
    assert "continue" not in page3["metadata"]
    assert page3["metadata"]["resourceVersion"] == page1["metadata"]["resourceVersion"]
    assert len((await api_client.list(PODS, page_size=0)).items) == 6


async def test_status_subresource_rules_for_custom_resources(api_client: ApiClient) -> None:
    created = await api_client.create(
        NODEMETRICS, {"metadata": {"name": "n1"}, "spec": {"x": 1}, "status": {"nodeMetric": {"cpu": "9"}}}
    )
    assert "status" not in created  # status is dropped on create when a status subresource exists

    with_status = await api_client.patch_status(
        NODEMETRICS, "n1", {"spec": {"x": 2}, "status": {"updateTime": "2026-01-01T00:00:00Z"}}
    )
    assert with_status["status"] == {"updateTime": "2026-01-01T00:00:00Z"}
    assert with_status["spec"] == {"x": 1}  # /status only touches status

    main = await api_client.patch(NODEMETRICS, "n1", {"spec": {"x": 3}, "status": {"updateTime": "never"}})
    assert main["spec"] == {"x": 3}
    assert main["status"] == {"updateTime": "2026-01-01T00:00:00Z"}  # main resource writes ignore status

    replaced = await api_client.replace_status(NODEMETRICS, {**main, "status": {"updateTime": "later"}})
    assert replaced["status"] == {"updateTime": "later"}
    with pytest.raises(errors.Conflict):
        await api_client.replace_status(NODEMETRICS, {**main, "status": {"updateTime": "stale"}})


async def test_binding_sets_node_and_condition_and_rejects_conflicts(api_client: ApiClient) -> None:
    created = await api_client.create(PODS, pod("p"))
    uid = created["metadata"]["uid"]
    with pytest.raises(errors.Conflict):
        await api_client.create_binding("default", "p", "not-the-uid", "n1")
    status = await api_client.create_binding("default", "p", uid, "n1")
    assert status["status"] == "Success"
    bound = await api_client.get(PODS, "p", "default")
    assert bound["spec"]["nodeName"] == "n1"
    assert next(c for c in bound["status"]["conditions"] if c["type"] == "PodScheduled")["status"] == "True"
    with pytest.raises(errors.Conflict):
        await api_client.create_binding("default", "p", uid, "n2")
    with pytest.raises(errors.NotFound):
        await api_client.create_binding("default", "ghost", None, "n1")


async def test_a_bindings_annotations_land_on_the_pod_with_its_node(api_client: ApiClient) -> None:
    body = pod("p")
    body["metadata"]["annotations"] = {"kept": "yes"}
    created = await api_client.create(PODS, body)
    record = '{"name":"r","uid":"u"}'
    await api_client.create_binding(
        "default",
        "p",
        created["metadata"]["uid"],
        "n1",
        annotations={"scheduling.koordinator.sh/reservation-allocated": record},
    )
    bound = await api_client.get(PODS, "p", "default")
    assert bound["spec"]["nodeName"] == "n1"
    assert bound["metadata"]["annotations"] == {
        "kept": "yes",
        "scheduling.koordinator.sh/reservation-allocated": record,
    }


async def _running_pod(api: ApiClient, name: str, labels: dict[str, str], node: str = "n1") -> dict[str, Any]:
    created = await api.create(PODS, pod(name, labels=labels, terminationGracePeriodSeconds=30))
    await api.create_binding("default", name, created["metadata"]["uid"], node)
    return await api.patch_status(PODS, name, {"status": {"phase": "Running"}}, namespace="default")


async def test_eviction_honours_pdb_and_grace(api_client: ApiClient, eventually: Any) -> None:
    for i in range(3):
        await _running_pod(api_client, f"web-{i}", {"app": "web"})
    pdb = await api_client.create(
        PDBS,
        {
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    # 3 healthy, minAvailable 2 -> 1 disruption allowed, as the disruption controller writes it (the
    # API server charges evictions against the status; it never computes a budget itself)
    status = {"observedGeneration": 1, "disruptionsAllowed": 1, "desiredHealthy": 2, "currentHealthy": 3}
    await api_client.replace_status(PDBS, {**pdb, "status": status})
    await api_client.evict("default", "web-0", grace_period_seconds=5)
    marked = await api_client.get(PODS, "web-0", "default")
    assert marked["metadata"]["deletionTimestamp"] and marked["metadata"]["deletionGracePeriodSeconds"] == 5

    async def gone() -> bool:
        try:
            await api_client.get(PODS, "web-0", "default")
        except errors.NotFound:
            return True
        return False

    deleted = asyncio.Event()

    async def poll() -> None:
        while not await gone():
            await asyncio.sleep(0.02)
        deleted.set()

    await asyncio.wait_for(poll(), HANG_BACKSTOP)
    assert deleted.is_set()

    # 2 healthy, minAvailable 2 -> 0 allowed -> 429 with a Status body naming the budget
    with pytest.raises(errors.TooManyRequests) as refused:
        await api_client.evict("default", "web-1")
    assert refused.value.body["details"]["causes"][0]["reason"] == "DisruptionBudget"
    assert "web" in refused.value.body["details"]["causes"][0]["message"]
    await api_client.get(PODS, "web-1", "default")  # still there


async def test_eviction_uses_pdb_status_and_max_unavailable(api_client: ApiClient) -> None:
    for i in range(2):
        await _running_pod(api_client, f"db-{i}", {"app": "db"})
    pdb = await api_client.create(
        PDBS,
        {
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {"maxUnavailable": "50%", "selector": {"matchLabels": {"app": "db"}}},
        },
    )
    await api_client.replace_status(PDBS, {**pdb, "status": {"observedGeneration": 1, "disruptionsAllowed": 1}})
    await api_client.evict("default", "db-0", grace_period_seconds=0)
    with pytest.raises(errors.NotFound):
        await api_client.get(PODS, "db-0", "default")
    after = await api_client.get(PDBS, "db", "default")
    assert after["status"]["disruptionsAllowed"] == 0  # charged like the API server does
    with pytest.raises(errors.TooManyRequests):
        await api_client.evict("default", "db-1")

    # a Pending pod ignores budgets; a pod without a budget is simply deleted
    await api_client.create(PODS, pod("pending", labels={"app": "db"}))
    await api_client.evict("default", "pending")
    await _running_pod(api_client, "free", {"app": "free"})
    await api_client.evict("default", "free", grace_period_seconds=0)
    names = [i["metadata"]["name"] for i in (await api_client.list(PODS)).items]
    assert names == ["db-1"]


async def test_delete_with_finalizers_waits_for_their_removal(api_client: ApiClient) -> None:
    await api_client.create(PODMIGRATIONJOBS, {"metadata": {"name": "j", "finalizers": ["koordpy.io/x"]}})
    marked = await api_client.delete(PODMIGRATIONJOBS, "j")
    assert marked["metadata"]["deletionTimestamp"]
    await api_client.patch(PODMIGRATIONJOBS, "j", {"metadata": {"finalizers": None}})
    with pytest.raises(errors.NotFound):
        await api_client.get(PODMIGRATIONJOBS, "j")


async def test_create_event_for_cluster_scoped_object(api_client: ApiClient) -> None:
    node = await api_client.create(NODES, {"metadata": {"name": "n1"}})
    event = await api_client.create_event(
        node, reason="Evicted", message="cpu above waterline", event_type="Warning", component="koordpy-agent"
    )
    assert event["metadata"]["namespace"] == "default"
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Node",
        "name": "n1",
        "uid": node["metadata"]["uid"],
        "resourceVersion": node["metadata"]["resourceVersion"],
    }
    listed = await api_client.list(EVENTS, namespace="default", field_selector="involvedObject.name=n1,reason=Evicted")
    assert [e["type"] for e in listed.items] == ["Warning"]


async def test_watch_streams_events_and_raises_gone(apiserver: ApiServerEmulator, api_client: ApiClient) -> None:
    start = await api_client.list(NODES)
    await api_client.create(NODES, {"metadata": {"name": "n1"}})
    await api_client.patch(NODES, "n1", {"metadata": {"labels": {"a": "1"}}})
    await api_client.delete(NODES, "n1")
    seen: list[tuple[str, str]] = []
    async for etype, obj in api_client.watch(NODES, resource_version=start.resource_version, timeout_seconds=1):
        seen.append((etype, obj["metadata"].get("name", "")))
    assert [e for e in seen if e[0] != "BOOKMARK"] == [("ADDED", "n1"), ("MODIFIED", "n1"), ("DELETED", "n1")]
    assert seen[-1][0] == "BOOKMARK"  # the final bookmark at timeoutSeconds

    apiserver.state.history_size = 1
    await api_client.create(NODES, {"metadata": {"name": "n2"}})
    await api_client.create(NODES, {"metadata": {"name": "n3"}})
    with pytest.raises(errors.Gone):  # as an ERROR event
        async for _ in api_client.watch(NODES, resource_version=start.resource_version, timeout_seconds=1):
            pass
    apiserver.watch_gone = "http"
    with pytest.raises(errors.Gone):  # as an HTTP 410
        async for _ in api_client.watch(NODES, resource_version=start.resource_version, timeout_seconds=1):
            pass


async def test_watch_with_selector_reports_objects_leaving_and_entering(api_client: ApiClient) -> None:
    await api_client.create(PODS, pod("p", labels={"app": "a"}))
    start = (await api_client.list(PODS)).resource_version
    await api_client.patch(PODS, "p", {"metadata": {"labels": {"app": "b"}}}, namespace="default")
    await api_client.patch(PODS, "p", {"metadata": {"labels": {"app": "a"}}}, namespace="default")
    seen = [
        etype
        async for etype, _ in api_client.watch(
            PODS, label_selector="app=a", resource_version=start, timeout_seconds=1, allow_bookmarks=False
        )
    ]
    assert seen == ["DELETED", "ADDED"]


async def test_requests_are_recorded_per_user(apiserver: ApiServerEmulator, tmp_path: Any) -> None:
    await apiserver.stop()
    apiserver.record_path = str(tmp_path / "calls.jsonl")
    await apiserver.start()
    async with ApiClient(ConnectionInfo.for_url(apiserver.url, "extender")) as ext:
        created = await ext.create(PODS, pod("p"))
        await ext.create_binding("default", "p", created["metadata"]["uid"], "n1")
        await ext.list(NODEMETRICS)
    await apiserver.close()
    import json

    lines = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    triples = [(r["user"], r["verb"], r["group"], r["resource"], r["subresource"]) for r in lines]
    assert triples == [
        ("extender", "create", "", "pods", None),
        ("extender", "create", "", "pods", "binding"),
        ("extender", "list", "slo.koordinator.sh", "nodemetrics", None),
    ]
    assert apiserver.requests == lines


async def test_discovery_serves_every_known_resource(api_client: ApiClient) -> None:
    core = await api_client.request("GET", "/api/v1")
    core_names = {r["name"] for r in core["resources"]}
    assert {"pods", "pods/binding", "pods/eviction", "pods/status", "nodes", "namespaces", "events"} <= core_names
    groups = {g["name"] for g in (await api_client.request("GET", "/apis"))["groups"]}
    for ref in ALL:
        if ref.group:
            assert ref.group in groups
            listing = await api_client.request("GET", f"/apis/{ref.group}/{ref.version}")
            assert ref.plural in {r["name"] for r in listing["resources"]}
    with pytest.raises(errors.NotFound):
        await api_client.request("GET", "/apis/nope.example.com")


async def test_watch_reassembles_events_larger_than_a_chunk(api_client: ApiClient) -> None:
    start = (await api_client.list(NODES)).resource_version
    big = "x" * 300_000  # several TCP reads / stream chunks for one JSON line
    await api_client.create(NODES, {"metadata": {"name": "big", "annotations": {"blob": big}}})
    await api_client.create(NODES, {"metadata": {"name": "small"}})
    got = [
        (etype, obj["metadata"]["name"], len(obj["metadata"].get("annotations", {}).get("blob", "")))
        async for etype, obj in api_client.watch(
            NODES, resource_version=start, timeout_seconds=1, allow_bookmarks=False
        )
    ]
    assert got == [("ADDED", "big", 300_000), ("ADDED", "small", 0)]


async def test_unauthenticated_requests_get_401_when_auth_is_required(apiserver: ApiServerEmulator) -> None:
    apiserver.require_auth = True
    async with ApiClient(ConnectionInfo.for_url(apiserver.url)) as anonymous:
        with pytest.raises(errors.Unauthorized) as denied:
            await anonymous.list(NODES)
    assert denied.value.status == 401 and not errors.is_temporary(denied.value)
    async with ApiClient(ConnectionInfo.for_url(apiserver.url, "agent")) as agent:
        assert (await agent.list(NODES)).items == []


async def test_delete_collection_by_selector_and_method_not_allowed(api_client: ApiClient) -> None:
    for name, app in (("a", "x"), ("b", "x"), ("c", "y")):
        await api_client.create(PODS, pod(name, labels={"app": app}))
    await api_client.request("DELETE", PODS.path("default"), params={"labelSelector": "app=x"})
    assert [p["metadata"]["name"] for p in (await api_client.list(PODS)).items] == ["c"]
    with pytest.raises(errors.ApiError) as not_allowed:
        await api_client.request("GET", "/api/v1/namespaces/default/bindings")
    assert not_allowed.value.status == 405


@pytest.mark.parametrize("name", ["web-1/status", "..", ".", "", "web%2F1"])
def test_a_name_that_is_not_one_path_segment_never_reaches_a_request(name: str) -> None:
    # the API server's IsValidPathSegmentName: "web-1/status" would address pod web-1's status
    with pytest.raises(ValueError, match="path"):
        PODS.path("shop", name)
    with pytest.raises(ValueError, match="path"):
        PODS.path(name, "web-1")
    assert PODS.path("shop", "web-1", "status") == "/api/v1/namespaces/shop/pods/web-1/status"
