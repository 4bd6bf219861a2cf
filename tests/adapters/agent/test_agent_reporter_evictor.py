"""NodeMetric reporter and evictor against the API emulator."""

from __future__ import annotations

import pytest

from koordpy.agent.actuators.evictor import Evictor, EvictOutcome
from koordpy.agent.policy.report import CollectPolicy, UsageHistory, nodemetric_status
from koordpy.agent.reporter import NodeMetricReporter
from koordpy.config.scheduler import SchedulerConfiguration
from koordpy.kube import resources
from koordpy.model.objects import nodemetric_from_dict, pod_from_dict
from koordpy.scheduler.explain import explain
from koordpy_testkit.builders import PodBuilder, make_node

GiB = 1 << 30
T0 = 1_795_000_000.0  # 2026-11-18


def history_for(pods, seconds: int = 900, step: int = 10) -> UsageHistory:
    h = UsageHistory(horizon=1800)
    for i, t in enumerate(range(0, seconds + 1, step)):
        # node cpu ramps 2.0 .. 2.9 cores (i % 10 / 10), memory constant 8 GiB
        h.add_node(T0 + t, 2.0 + (i % 10) / 10, 8 * GiB)
        for pod in pods:
            h.add_pod(pod.uid, T0 + t, 0.5, 1 * GiB)
    return h


async def test_reporter_creates_then_updates_and_explain_reads_it(apiserver, api_client):
    raw_pods = [PodBuilder("a").node("node-1").build(), PodBuilder("b").node("node-1").build()]
    pods = [pod_from_dict(p) for p in raw_pods]
    reporter = NodeMetricReporter(api_client, "node-1", CollectPolicy())
    policy = await reporter.refresh_policy()
    assert policy == CollectPolicy()  # no object yet: defaults 60 s / 300 s
    status = nodemetric_status(history_for(pods, seconds=600), pods, T0 + 600, policy)
    await reporter.report(status)
    stored = await api_client.get(resources.NODEMETRICS, "node-1")
    info = nodemetric_from_dict(stored)  # the extender's reader, no conversion
    assert info.node_usage is not None
    assert info.node_usage["memory"] == 8 * GiB
    # last 300 s = 31 samples of the 0..0.9 ramp: mean cpu in millicores
    assert 2400 <= info.node_usage["cpu"] <= 2500
    # 600 s of history: the 30 min window needs at least half of it (900 s), so it is not reported yet.
    assert [a.duration for a in info.aggregated] == [300.0, 600.0]
    assert set(info.aggregated[0].usage) == {"avg", "p50", "p90", "p95", "p99"}
    assert info.aggregated[0].usage["p99"]["cpu"] >= info.aggregated[0].usage["p50"]["cpu"]
    assert [(p.namespace, p.name, p.usage["cpu"], p.priority, p.qos) for p in info.pods] == [
        ("default", "a", 500, "koord-batch", "BE"),
        ("default", "b", 500, "koord-batch", "BE"),
    ]
    assert info.system_usage["memory"] == 6 * GiB  # 8 GiB node - 2 x 1 GiB pods

    # The manager sets a collect policy: the reporter honours it and never touches spec.
    await api_client.patch(
        resources.NODEMETRICS,
        "node-1",
        {
            "spec": {
                "metricCollectPolicy": {
                    "reportIntervalSeconds": 30,
                    "aggregateDurationSeconds": 60,
                    "nodeAggregatePolicy": {"durations": ["1m0s"]},
                }
            }
        },
    )
    policy = await reporter.refresh_policy()
    assert policy == CollectPolicy(report_interval=30, aggregate_duration=60, durations=(60.0,))
    await reporter.report(nodemetric_status(history_for(pods), pods, T0 + 900, policy))
    stored = await api_client.get(resources.NODEMETRICS, "node-1")
    assert stored["spec"]["metricCollectPolicy"]["reportIntervalSeconds"] == 30
    info = nodemetric_from_dict(stored)
    assert [a.duration for a in info.aggregated] == [60.0]

    # `koordpy scheduler explain` accepts the object exactly as stored.
    node = make_node("node-1", cpu="8", memory="32Gi")
    incoming = PodBuilder("new").requests(cpu="1", memory="1Gi").build()
    result, _ = explain(
        [("dump", node), ("dump", stored), ("dump", incoming), *[("dump", p) for p in raw_pods]],
        "default/new",
        SchedulerConfiguration(),
        T0 + 905,
    )
    assert result["nodes"][0]["name"] == "node-1"
    assert result["nodes"][0]["feasible"] is True
    assert result["nodes"][0]["scores"]["LoadAwareScheduling"] > 0


def _pdb(name: str, app: str) -> dict:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}},
    }


def _running(builder: PodBuilder) -> dict:
    raw = builder.node("node-1").phase("Running").build()
    raw["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return raw


async def test_evictor_uses_policy_v1_eviction_with_the_action_grace(apiserver, api_client):
    victim = _running(PodBuilder("victim"))
    apiserver.seed(victim)
    outcome, _ = await Evictor(api_client).evict("default", "victim", victim["metadata"]["uid"], 7)
    assert outcome is EvictOutcome.EVICTED
    pod = await api_client.get(resources.PODS, "victim", "default")
    # Crane bug 1.1: the action's terminationGracePeriodSeconds never reached the call.
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 7
    verbs = [(r["verb"], r["resource"], r["subresource"]) for r in apiserver.requests]
    assert ("create", "pods", "eviction") in verbs
    assert not any(v == "delete" and res == "pods" for v, res, _ in verbs)


async def test_evictor_never_evicts_a_pod_recreated_under_the_same_name(apiserver, api_client):
    # the policy planned to evict the pod with uid "old"; a StatefulSet made "web-0" again meanwhile
    apiserver.seed(_running(PodBuilder("web-0").uid("new")))
    outcome, detail = await Evictor(api_client).evict("default", "web-0", "old", None)
    assert outcome is EvictOutcome.GONE
    assert "replaced under the same name" in detail and "does not match the UID in record" in detail
    pod = await api_client.get(resources.PODS, "web-0", "default")
    assert pod["metadata"].get("deletionTimestamp") is None


async def test_evictor_retries_429_later_and_never_deletes(apiserver, api_client):
    # A PDB that allows no disruption: the Eviction API answers 429 every time.
    apiserver.seed(_running(PodBuilder("guarded").label("app", "g")), _pdb("pdb", "g"))
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    evictor = Evictor(api_client, retries=2, retry_delay=5.0, sleep=fake_sleep)
    outcome, detail = await evictor.evict("default", "guarded", PodBuilder("guarded").build()["metadata"]["uid"], None)
    assert outcome is EvictOutcome.REFUSED
    assert "disruption budget" in detail
    assert slept == [5.0, 5.0]  # retried twice, after the delay, then gave up for now
    attempts = [r for r in apiserver.requests if r["subresource"] == "eviction"]
    assert len(attempts) == 3
    assert not any(r["verb"] == "delete" and r["resource"] == "pods" for r in apiserver.requests)
    assert (await api_client.get(resources.PODS, "guarded", "default"))["metadata"].get("deletionTimestamp") is None


async def test_evictor_pod_gone_is_not_an_error(apiserver, api_client):
    outcome, _ = await Evictor(api_client).evict("default", "nobody", "u", None)
    assert outcome is EvictOutcome.GONE


@pytest.mark.parametrize("status", [500, 403])
async def test_evictor_other_errors_are_failures(apiserver, api_client, status):
    pod = _running(PodBuilder("x"))
    apiserver.seed(pod)
    apiserver.inject_error(status, subresource="eviction")
    outcome, detail = await Evictor(api_client, retries=0).evict("default", "x", pod["metadata"]["uid"], None)
    assert outcome is EvictOutcome.FAILED and str(status) in detail
