"""Memory limits and CPU requests on every container; the ingress NetworkPolicies (on by default)."""

from __future__ import annotations

from typing import Any

from helm_render import CHART, named, of_kind, render, render_scenario

from koordpy.model.quantity import parse_quantity

POD_KINDS = ("Deployment", "DaemonSet")
NETPOL = str(CHART / "ci" / "networkpolicy-values.yaml")
PEER = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
}


def containers(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``<workload>/<container>`` -> container, for every pod template."""
    out = {}
    for kind in POD_KINDS:
        for obj in of_kind(objects, kind):
            for container in obj["spec"]["template"]["spec"]["containers"]:
                out[f"{obj['metadata']['name']}/{container['name']}"] = container
    return out


def test_every_container_has_a_memory_limit_and_requests(scenario: str) -> None:
    found = containers(render_scenario(scenario))
    assert found, "no pod templates rendered"
    for name, container in found.items():
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        assert {"cpu", "memory"} <= set(requests), f"{name}: requests {requests}"
        assert "memory" in limits, f"{name}: no memory limit"
        assert parse_quantity(limits["memory"]) >= parse_quantity(requests["memory"]), name
        assert "cpu" not in limits, f"{name}: a CPU limit throttles the component when it is needed most"


def test_the_extender_keeps_its_sized_request_under_a_larger_limit() -> None:
    found = containers(render())
    extender = next(c for name, c in found.items() if name.endswith("/extender"))
    # request: 75 MiB + 5.5 KiB per pod, 256Mi by default; limit 1Gi ~ 2 x 340 MiB (50,000 pods) + requests in flight
    assert extender["resources"] == {"requests": {"cpu": "200m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}


TEST_PODS = {
    "podSelector": {
        "matchLabels": {
            "app.kubernetes.io/name": "koordpy",
            "app.kubernetes.io/instance": "koordpy",
            "app.kubernetes.io/component": "test",
        }
    }
}
"""The release's `helm test` pods (tests.enabled, on by default)."""


def test_network_policies_are_on_by_default_and_admit_prometheus_of_one_namespace_on_health_and_metrics_ports() -> None:
    policies = {p["metadata"]["name"]: p for p in of_kind(render(), "NetworkPolicy")}
    assert {name: policy_ports(p) for name, p in policies.items()} == {
        "koordpy-scheduler": [10259, 10263],  # kube-scheduler's secure port, the extender's ops port
        "koordpy-manager": [8080],  # /healthz and /metrics
        "koordpy-agent": [9316],
    }
    for policy in policies.values():
        assert policy["spec"]["policyTypes"] == ["Ingress"]
        # the namespace by the name label the API server sets (a pod label is anyone's to set)
        assert [rule["from"] for rule in policy["spec"]["ingress"]] == [[PEER], [TEST_PODS]]
        assert policy["spec"]["ingress"][0]["ports"] == policy["spec"]["ingress"][1]["ports"]
    assert of_kind(render("--set", "networkPolicy.enabled=false"), "NetworkPolicy") == []


def policy_ports(policy: dict[str, Any]) -> list[int]:
    """The ports the first rule (the scrapers') opens."""
    rules = policy["spec"]["ingress"]
    return [p["port"] for p in rules[0]["ports"]] if rules else []


def test_network_policies_admit_only_scrapers_on_the_metrics_ports() -> None:
    objects = render("-f", NETPOL)
    policies = {p["metadata"]["name"]: p for p in of_kind(objects, "NetworkPolicy")}
    assert sorted(policies) == ["koordpy-agent", "koordpy-manager", "koordpy-scheduler"]
    for component in ("scheduler", "manager", "agent"):
        policy = policies[f"koordpy-{component}"]
        assert policy["spec"]["policyTypes"] == ["Ingress"]
        workload = named(objects, "DaemonSet" if component == "agent" else "Deployment", f"-{component}")
        pod_labels = workload["spec"]["template"]["metadata"]["labels"]
        selector = policy["spec"]["podSelector"]["matchLabels"]
        assert selector.items() <= pod_labels.items(), f"{component}: the policy selects its own pods"
        assert selector["app.kubernetes.io/component"] == component
    scheduler, agent = policies["koordpy-scheduler"], policies["koordpy-agent"]
    # kube-scheduler's secure port and the extender's ops port; the verbs' port 10262 is loopback only
    assert policy_ports(scheduler) == [10259, 10263]
    assert policy_ports(agent) == [9316]
    assert policy_ports(policies["koordpy-manager"]) == [8080]
    for policy in policies.values():
        assert [rule["from"] for rule in policy["spec"]["ingress"]] == [[PEER], [TEST_PODS]]
    # the ports are the ones the containers listen on
    listening = {p["containerPort"] for c in containers(objects).values() for p in c.get("ports", [])}
    assert {port for policy in policies.values() for port in policy_ports(policy)} <= listening


def test_network_policies_follow_the_configured_ports_and_an_empty_peer_list() -> None:
    moved = render(
        "-f",
        NETPOL,
        "--set",
        "scheduler.config.extender.metricsPort=null",
        "--set",
        "agent.config.server.port=9400",
        "--set",
        "manager.config.health.port=8081",
    )
    policies = {p["metadata"]["name"]: p for p in of_kind(moved, "NetworkPolicy")}
    assert policy_ports(policies["koordpy-scheduler"]) == [10259]
    assert policy_ports(policies["koordpy-agent"]) == [9400]
    assert policy_ports(policies["koordpy-manager"]) == [8081]
    only_tests = render("--set-json", "networkPolicy.metricsFrom=[]")
    assert {
        p["metadata"]["name"]: [r["from"] for r in p["spec"]["ingress"]] for p in of_kind(only_tests, "NetworkPolicy")
    } == {
        "koordpy-scheduler": [[TEST_PODS]],
        "koordpy-manager": [[TEST_PODS]],
        "koordpy-agent": [[TEST_PODS]],
    }
    closed = render("--set-json", "networkPolicy.metricsFrom=[]", "--set", "tests.enabled=false")
    assert {p["metadata"]["name"]: p["spec"]["ingress"] for p in of_kind(closed, "NetworkPolicy")} == {
        "koordpy-scheduler": [],
        "koordpy-manager": [],
        "koordpy-agent": [],
    }
    assert [
        p["metadata"]["name"] for p in of_kind(render("-f", NETPOL, "--set", "agent.enabled=false"), "NetworkPolicy")
    ] == [
        "koordpy-scheduler",
        "koordpy-manager",
    ]
