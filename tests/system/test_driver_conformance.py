"""The driver against a scripted in-process extender and the real emulator: it behaves as kube-scheduler does.

Each test scripts one protocol situation (unknown node name, null NodeNames, one feasible node,
unclamped scores, bind timeout after a successful binding, bind error) and checks the driver's
reaction against ``extender-protocol-and-ecosystem.md`` §1.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import pytest
from aiohttp import web
from scenario_kit import PODS_PATH, create, node, pod
from system_cluster import Cluster
from system_harness import LOOPBACK, free_port

from koordpy_testkit.bounds import HANG_BACKSTOP, eventually
from koordpy_testkit.schedulerdriver import ExtenderConfig, SchedulerDriver

Handler = Callable[["FakeExtender", dict[str, Any]], Awaitable[Any]]


@dataclass
class FakeExtender:
    """A scripted extender: records every request body, answers with the test's handlers."""

    api_url: str
    on_filter: Handler | None = None
    on_prioritize: Handler | None = None
    on_bind: Handler | None = None
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    async def bind_in_api(self, args: dict[str, Any]) -> int:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": args["PodName"], "namespace": args["PodNamespace"], "uid": args["PodUID"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": args["Node"]},
        }
        async with httpx.AsyncClient(
            base_url=self.api_url, headers={"Authorization": "Bearer fake-extender"}, timeout=HANG_BACKSTOP
        ) as api:
            resp = await api.post(
                f"/api/v1/namespaces/{args['PodNamespace']}/pods/{args['PodName']}/binding", json=body
            )
        return resp.status_code

    async def _route(self, request: web.Request) -> web.Response:
        verb = request.match_info["verb"]
        args = orjson.loads(await request.read())
        self.requests.append((verb, args))
        handler = {"filter": self.on_filter, "prioritize": self.on_prioritize, "bind": self.on_bind}[verb]
        if handler is None:
            handler = _defaults[verb]
        reply = await handler(self, args)
        if isinstance(reply, web.Response):
            return reply
        return web.Response(body=orjson.dumps(reply), content_type="application/json")

    def verbs(self) -> list[str]:
        return [verb for verb, _ in self.requests]


async def _pass_all(ext: FakeExtender, args: dict[str, Any]) -> Any:
    return {
        "Nodes": None,
        "NodeNames": args["NodeNames"],
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {},
        "Error": "",
    }


async def _zero(ext: FakeExtender, args: dict[str, Any]) -> Any:
    return [{"Host": name, "Score": 0} for name in args["NodeNames"]]


async def _bind(ext: FakeExtender, args: dict[str, Any]) -> Any:
    status = await ext.bind_in_api(args)
    return {"Error": "" if status in (200, 201) else f"binding: {status}"}


_defaults: dict[str, Handler] = {"filter": _pass_all, "prioritize": _zero, "bind": _bind}


@pytest.fixture
async def fake(cluster: Cluster) -> AsyncIterator[tuple[FakeExtender, str]]:
    ext = FakeExtender(cluster.url)
    app = web.Application()
    app.router.add_post("/{verb}", ext._route)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, LOOPBACK, port)
    await site.start()
    try:
        yield ext, f"http://{LOOPBACK}:{port}"
    finally:
        await runner.cleanup()


def _driver(cluster: Cluster, url: str, timeout: str = "60s", weight: int = 1) -> SchedulerDriver:
    """A driver of ``url``. The default ``httpTimeout`` is a hang backstop; the tests of the timeout itself
    pass a short one and make the late answer wait for the driver's timeout (a condition, not a sleep)."""
    config = ExtenderConfig.from_dict(
        {
            "urlPrefix": url,
            "filterVerb": "filter",
            "prioritizeVerb": "prioritize",
            "bindVerb": "bind",
            "weight": weight,
            "httpTimeout": timeout,
            "nodeCacheCapable": True,
            "ignorable": False,
        }
    )
    return SchedulerDriver(cluster.url, "driver", config, seed=1)


async def _nodes(cluster: Cluster, *names: str) -> None:
    async with cluster.admin() as admin:
        resp = await admin.post(
            "/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}
        )
        assert resp.status_code in (200, 201, 409)
        for name in names:
            await create(admin, "/api/v1/nodes", node(name))


@pytest.mark.system
async def test_requests_are_exactly_kube_schedulers(cluster: Cluster, fake: tuple[FakeExtender, str]) -> None:
    ext, url = fake
    await _nodes(cluster, "n1", "n2")
    async with _driver(cluster, url) as driver, cluster.admin() as admin:
        created = await create(admin, PODS_PATH, pod("p"))
        await driver.wait_until(lambda: len(driver.bound()) == 1, HANG_BACKSTOP, "pod bound")
    verbs = ext.verbs()
    assert verbs == ["filter", "prioritize", "bind"]
    filter_args = ext.requests[0][1]
    assert list(filter_args) == ["Pod", "Nodes", "NodeNames"]
    assert filter_args["Nodes"] is None and sorted(filter_args["NodeNames"]) == ["n1", "n2"]
    assert filter_args["Pod"]["metadata"]["uid"] == created["metadata"]["uid"]
    assert filter_args["Pod"]["spec"] == created["spec"]  # the whole pod, as the informer has it
    bind_args = ext.requests[2][1]
    assert bind_args == {
        "PodName": "p",
        "PodNamespace": "default",
        "PodUID": created["metadata"]["uid"],
        "Node": bind_args["Node"],
    }


@pytest.mark.system
async def test_unknown_node_name_is_a_filter_error_with_backoff(
    cluster: Cluster, fake: tuple[FakeExtender, str]
) -> None:
    ext, url = fake
    await _nodes(cluster, "n1", "n2")

    async def liar(ext: FakeExtender, args: dict[str, Any]) -> Any:
        return {"NodeNames": ["n1", "ghost"], "FailedNodes": {}, "Error": ""}

    ext.on_filter = liar
    async with _driver(cluster, url) as driver, cluster.admin() as admin:
        await create(admin, PODS_PATH, pod("p"))
        await driver.wait_until(lambda: driver.stats.errors["filter"] >= 3, HANG_BACKSTOP, "three failed attempts")
        times = [d.filter_sent for d in driver.decisions]
    assert all(d.outcome == "filter-error" and "not found in the input node list" in d.error for d in driver.decisions)
    assert "bind" not in ext.verbs() and "prioritize" not in ext.verbs()
    # Backoff 1 s, then 2 s between attempts (podInitialBackoffSeconds 1, doubling).
    gaps = [b - a for a, b in itertools.pairwise(times) if a is not None and b is not None]
    assert gaps[0] >= 0.95 and gaps[1] >= 1.95, gaps


@pytest.mark.system
async def test_null_node_names_means_no_node_and_one_node_skips_prioritize(
    cluster: Cluster, fake: tuple[FakeExtender, str]
) -> None:
    ext, url = fake
    await _nodes(cluster, "n1", "n2", "n3")
    answers = iter(
        [
            {"NodeNames": None, "FailedNodes": {"n1": "x", "n2": "x", "n3": "x"}, "Error": ""},
            {
                "NodeNames": ["n2"],
                "FailedNodes": {"n1": "x"},
                "FailedAndUnresolvableNodes": {"n1": "y", "n3": "z"},
                "Error": "",
            },
        ]
    )

    async def scripted(ext: FakeExtender, args: dict[str, Any]) -> Any:
        return next(answers)

    ext.on_filter = scripted
    async with _driver(cluster, url) as driver, cluster.admin() as admin:
        await create(admin, PODS_PATH, pod("p"))
        await driver.wait_until(lambda: driver.stats.unschedulable == 1, HANG_BACKSTOP, "first attempt unschedulable")
        # An unschedulable pod waits for a cluster event: add a node.
        await create(admin, "/api/v1/nodes", node("n4"))
        await driver.wait_until(lambda: len(driver.bound()) == 1, HANG_BACKSTOP, "pod bound")
    first, second = driver.decisions[0], driver.decisions[1]
    assert first.outcome == "unschedulable" and first.passed == [] and first.error == ""
    assert second.node == "n2" and second.unresolvable == {"n1": "y", "n3": "z"} and second.failed == {}
    assert driver.stats.prioritize_skipped == 1
    assert ext.verbs() == ["filter", "filter", "bind"]
    assert driver.stats.errors == {}


@pytest.mark.system
async def test_extender_scores_are_not_clamped(cluster: Cluster, fake: tuple[FakeExtender, str]) -> None:
    ext, url = fake
    await _nodes(cluster, "n1", "n2")
    async with cluster.admin() as admin:
        # Fill n2 so LeastAllocated prefers n1 (score gap < 100 × weight × 10).
        filler = pod("filler", cpu="8")
        filler["spec"]["nodeName"] = "n2"
        filler["spec"]["schedulerName"] = "default-scheduler"
        await create(admin, PODS_PATH, filler)

    async def loud(ext: FakeExtender, args: dict[str, Any]) -> Any:
        return [{"Host": "n2", "Score": 100}, {"Host": "n1", "Score": 0}, {"Host": "elsewhere", "Score": 10}]

    ext.on_prioritize = loud
    async with _driver(cluster, url) as driver, cluster.admin() as admin:
        await create(admin, PODS_PATH, pod("p"))
        await driver.wait_until(lambda: len(driver.bound()) == 1, HANG_BACKSTOP, "pod bound")
    decision = driver.decisions[0]
    assert decision.node == "n2"
    assert decision.totals["n2"] - decision.totals["n1"] > 900  # 100 × 1 × 10 minus the LeastAllocated gap
    assert "elsewhere" not in decision.totals
    assert driver.stats.extender_scores_out_of_range == 1


@pytest.mark.system
async def test_bind_timeout_after_binding_is_not_requeued(cluster: Cluster, fake: tuple[FakeExtender, str]) -> None:
    ext, url = fake
    await _nodes(cluster, "n1")

    async def slow(ext: FakeExtender, args: dict[str, Any]) -> Any:
        await ext.bind_in_api(args)
        await eventually(lambda: driver.stats.timeouts["bind"] == 1, "the driver gave up on the bind")
        return {"Error": ""}  # answered after httpTimeout, however long that took

    ext.on_bind = slow
    # httpTimeout 5 s: the one wall-clock margin here is the watch delivering the binding to the driver
    # within it (as kube-scheduler's informer must); the late answer itself waits for the timeout.
    async with _driver(cluster, url, timeout="5s") as driver, cluster.admin() as admin:
        await create(admin, PODS_PATH, pod("p"))
        await driver.wait_until(lambda: driver.stats.binds_failed == 1, HANG_BACKSTOP, "bind timed out")
    # The requeue decision is taken when the bind fails (counted there): not requeued, already bound.
    assert driver.stats.timeouts["bind"] == 1
    assert driver.stats.bind_failed_already_bound == 1 and driver.stats.requeued_after_bind_failure == 0
    assert ext.verbs().count("bind") == 1 and ext.verbs().count("filter") == 1
    assert len(driver.bound()) == 1


@pytest.mark.system
async def test_bind_error_forgets_and_requeues(cluster: Cluster, fake: tuple[FakeExtender, str]) -> None:
    ext, url = fake
    await _nodes(cluster, "n1")
    failures = [1]

    async def flaky(ext: FakeExtender, args: dict[str, Any]) -> Any:
        if failures:
            failures.pop()
            return {"Error": "simulated failure"}
        return await _bind(ext, args)

    ext.on_bind = flaky
    started = time.monotonic()
    async with _driver(cluster, url) as driver, cluster.admin() as admin:
        await create(admin, PODS_PATH, pod("p"))
        await driver.wait_until(
            lambda: len(driver.bound()) == 1 and driver.stats.binds_ok == 1,
            HANG_BACKSTOP,
            "pod bound on the second try",
        )
    assert driver.stats.requeued_after_bind_failure == 1 and driver.stats.binds_ok == 1
    assert [d.bind_outcome for d in driver.decisions] == ["error", "ok"]
    assert driver.assumed == {}
    assert time.monotonic() - started >= 1.0  # the retry waited out the backoff


@pytest.mark.system
async def test_filter_timeout_fails_the_attempt_and_prioritize_errors_are_ignored(
    cluster: Cluster, fake: tuple[FakeExtender, str]
) -> None:
    ext, url = fake
    await _nodes(cluster, "n1", "n2")
    slow_once = [1]

    async def slow_filter(ext: FakeExtender, args: dict[str, Any]) -> Any:
        if slow_once:
            slow_once.pop()
            await eventually(lambda: driver.stats.timeouts["filter"] == 1, "the driver gave up on the filter")
        return await _pass_all(ext, args)

    async def broken(ext: FakeExtender, args: dict[str, Any]) -> Any:
        return web.Response(status=500, text="boom")

    ext.on_filter = slow_filter
    ext.on_prioritize = broken
    async with _driver(cluster, url, timeout="5s") as driver, cluster.admin() as admin:
        await create(admin, PODS_PATH, pod("p"))
        await driver.wait_until(
            lambda: len(driver.bound()) == 1 and driver.stats.binds_ok == 1,
            HANG_BACKSTOP,
            "pod bound on the second attempt",
        )
    first, second = driver.decisions
    assert first.outcome == "filter-error" and "timeout" in first.error and first.node is None
    assert second.node is not None and second.extender_scores == {}  # prioritize failed: in-tree scores decide
    assert driver.stats.timeouts == {"filter": 1}
    assert driver.stats.errors == {"filter": 1, "prioritize": 1}
    assert ext.verbs() == ["filter", "filter", "prioritize", "bind"]


def _tried_and_backed_off(driver: SchedulerDriver, pod: str) -> bool:
    """``pod`` had a cycle and its backoff is over: the next move puts it in activeQ at once, ahead of a
    pod whose bind fails now (that one starts a new backoff)."""
    tried = [d for d in driver.decisions if d.pod == pod and d.outcome]
    queued = driver.queue.pods.get(tried[0].uid) if tried else None
    if queued is None:
        return False
    return driver.queue.clock() >= queued.timestamp + driver.queue.backoff_duration(queued.attempts)


@pytest.mark.system
async def test_assumed_pod_holds_its_resources_until_its_bind_fails(
    cluster: Cluster, fake: tuple[FakeExtender, str]
) -> None:
    """While a's bind is in flight a is assumed: b does not fit; a's failed bind releases the room to b."""
    ext, url = fake
    async with cluster.admin() as admin:
        resp = await admin.post(
            "/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}
        )
        assert resp.status_code in (200, 201, 409)
        await create(admin, "/api/v1/nodes", node("n1", cpu=2, memory_gi=8))

    async def hold_then_fail_a(ext: FakeExtender, args: dict[str, Any]) -> Any:
        if args["PodName"] == "a":  # held until b was tried while a was assumed and b's backoff is over
            await eventually(lambda: _tried_and_backed_off(driver, "default/b"), "b tried and its backoff over")
            return {"Error": "gang did not assemble"}
        return await _bind(ext, args)

    ext.on_bind = hold_then_fail_a
    async with _driver(cluster, url) as driver, cluster.admin() as admin:
        await create(admin, PODS_PATH, pod("a", cpu="1500m", memory="1Gi"))
        await driver.wait_until(lambda: any(d.bind_sent for d in driver.decisions), HANG_BACKSTOP, "a's bind sent")
        await create(admin, PODS_PATH, pod("b", cpu="1500m", memory="1Gi"))
        await driver.wait_until(
            lambda: len(driver.bound()) == 1 and not driver.binds_in_flight(),
            HANG_BACKSTOP,
            "b bound after a's bind failed",
        )
        await driver.wait_until(
            lambda: sum(d.pod == "default/a" for d in driver.decisions) >= 2, HANG_BACKSTOP, "a retried"
        )
    by_pod: dict[str, list[Any]] = {}
    for d in driver.decisions:
        by_pod.setdefault(d.pod, []).append(d)
    a, b = by_pod["default/a"], by_pod["default/b"]
    # b's first cycle ran while a was assumed: NodeResourcesFit (1500m + 1500m > 2000m) left no candidate,
    # so the extender was not asked.
    assert b[0].outcome == "unschedulable" and b[0].candidates == [] and b[0].filter_sent is None
    assert b[0].started < a[0].bind_done  # type: ignore[operator]
    assert a[0].bind_outcome == "error" and b[-1].node == "n1" and b[-1].bind_outcome == "ok"
    # a came back after its backoff and no longer fits next to b.
    assert a[1].outcome == "unschedulable" and a[1].candidates == []
    assert list(driver.bound().values()) == ["n1"] and driver.assumed == {}
