"""The RBAC checker itself: HTTP → verb mapping, rule matching, and that it fails when a rule is missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from rbac_check import Call, Grant, Rule, allows, call_from_http, check, rendered_grants, without_rule

from koordpy_testkit.bounds import HANG_BACKSTOP

ROOT = Path(__file__).resolve().parents[2]
HELM = Path(sys.executable).parent / "helm"
CHART = ROOT / "charts" / "koordpy"


@pytest.mark.parametrize(
    ("method", "url", "expected"),
    [
        ("GET", "/api/v1/pods", ("list", "", "pods", "", "", "")),
        ("GET", "/api/v1/pods?watch=true&resourceVersion=5", ("watch", "", "pods", "", "", "")),
        ("GET", "/api/v1/pods?watch=1", ("watch", "", "pods", "", "", "")),
        ("GET", "/api/v1/namespaces/a/pods/p", ("get", "", "pods", "", "a", "p")),
        ("POST", "/api/v1/namespaces/a/pods/p/binding", ("create", "", "pods", "binding", "a", "p")),
        ("POST", "/api/v1/namespaces/a/pods/p/eviction", ("create", "", "pods", "eviction", "a", "p")),
        (
            "PUT",
            "/apis/slo.koordinator.sh/v1alpha1/nodemetrics/n1/status",
            ("update", "slo.koordinator.sh", "nodemetrics", "status", "", "n1"),
        ),
        (
            "PATCH",
            "/apis/slo.koordinator.sh/v1alpha1/nodemetrics/n1",
            ("patch", "slo.koordinator.sh", "nodemetrics", "", "", "n1"),
        ),
        ("DELETE", "/api/v1/namespaces/a/pods/p", ("delete", "", "pods", "", "a", "p")),
        ("DELETE", "/api/v1/namespaces/a/pods", ("deletecollection", "", "pods", "", "a", "")),
        ("POST", "/apis/events.k8s.io/v1/namespaces/a/events", ("create", "events.k8s.io", "events", "", "a", "")),
        ("GET", "/api/v1/namespaces/kube-system", ("get", "", "namespaces", "", "kube-system", "kube-system")),
    ],
)
def test_http_requests_map_to_kubernetes_verbs(method: str, url: str, expected: tuple[str, ...]) -> None:
    call = call_from_http("u", method, url)
    assert call is not None
    assert (call.verb, call.group, call.resource, call.subresource, call.namespace, call.name) == expected


@pytest.mark.parametrize("url", ["/api", "/apis", "/version", "/apis/slo.koordinator.sh/v1alpha1", "/api/v1"])
def test_discovery_is_not_a_resource_request(url: str) -> None:
    assert call_from_http("u", "GET", url) is None


def _rule(**kw: object) -> Rule:
    base: dict[str, object] = {
        "api_groups": ("",),
        "resources": ("pods",),
        "verbs": ("get",),
        "resource_names": (),
        "why": "",
        "source": "ClusterRole/x#0",
    }
    base.update(kw)
    return Rule(**base)  # type: ignore[arg-type]


def test_rule_matching_follows_rbac() -> None:
    binding = Call("u", "create", "", "pods", "binding", "a", "p")
    assert allows(Grant(_rule(resources=("pods/binding",), verbs=("create",)), None), binding)
    # "pods" does not cover the subresource; "pods/*" and "*/binding" do.
    assert not allows(Grant(_rule(resources=("pods",), verbs=("create",)), None), binding)
    assert allows(Grant(_rule(resources=("pods/*",), verbs=("create",)), None), binding)
    assert allows(Grant(_rule(resources=("*/binding",), verbs=("create",)), None), binding)
    # A RoleBinding only grants in its namespace; resourceNames restrict by name.
    assert not allows(Grant(_rule(resources=("pods/binding",), verbs=("create",)), "b"), binding)
    lease = Call("u", "update", "coordination.k8s.io", "leases", "", "ns", "other")
    named = _rule(
        api_groups=("coordination.k8s.io",), resources=("leases",), verbs=("update",), resource_names=("mine",)
    )
    assert not allows(Grant(named, "ns"), lease)
    assert allows(Grant(named, "ns"), Call("u", "update", "coordination.k8s.io", "leases", "", "ns", "mine"))


def test_unused_rule_needs_a_why_comment() -> None:
    used = _rule(verbs=("list",), source="ClusterRole/x#0")
    unused = _rule(verbs=("delete",), source="ClusterRole/x#1")
    explained = _rule(verbs=("patch",), why="needed later", source="ClusterRole/x#2")
    grants = {"u": [Grant(used, None), Grant(unused, None), Grant(explained, None)]}
    report = check([Call("u", "list", "", "pods")], grants)
    assert report.denied == []
    assert report.unused_without_why == [("u", "ClusterRole/x#1", ("delete", "", "pods"))]


def render_chart() -> str:
    """``helm template`` of the chart's defaults with the real helm binary (fails loudly without it)."""
    assert HELM.is_file(), f"{HELM} missing: run scripts/install-helm.sh {HELM.parent.parent}"
    out = subprocess.run(
        [str(HELM), "template", "koordpy", str(CHART), "--namespace", "koordpy-system"],
        check=True,
        capture_output=True,
        text=True,
        timeout=HANG_BACKSTOP,
    )
    return out.stdout


def _service_account(grants: dict[str, list[Grant]], suffix: str) -> str:
    names = [name for name in grants if name.endswith(suffix)]
    assert len(names) == 1, f"expected one ServiceAccount ending in {suffix!r}, got {sorted(grants)}"
    return names[0]


@pytest.mark.chart
def test_checker_reports_a_missing_binding_rule() -> None:
    """The checker fails on a missing rule: drop ``create pods/binding`` from the extender's role → violation."""
    rendered = render_chart()
    binding = Call("extender", "create", "", "pods", "binding", "default", "web-1")
    grants = rendered_grants(rendered)
    extender_sa = _service_account(grants, "-scheduler")
    assert check([binding], {"extender": grants[extender_sa]}).denied == []

    # Remove exactly that rule (the "- apiGroups" item whose resources are [pods/binding]) from the rendered text.
    stripped = without_rule(rendered, "pods/binding", "create")
    weakened = rendered_grants(stripped)
    report = check([binding], {"extender": weakened[extender_sa]})
    assert report.denied == [binding]


@pytest.mark.chart
def test_every_rendered_rule_is_parsed_with_its_why() -> None:
    grants = rendered_grants(render_chart())
    rules = [g.rule for gs in grants.values() for g in gs]
    assert rules, "no rules rendered"
    for rule in rules:
        assert "*" not in rule.verbs and "*" not in rule.resources, rule
