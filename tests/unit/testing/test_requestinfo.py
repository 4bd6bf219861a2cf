"""HTTP request → Kubernetes request attributes, as kube-apiserver's request-info resolver derives them."""

from __future__ import annotations

import pytest

from koordpy_testkit.requestinfo import call_from_http


@pytest.mark.parametrize(
    ("method", "url", "expected"),
    [
        ("GET", "/api/v1/pods", ("list", "", "pods", "", "", "")),
        ("GET", "/api/v1/pods?watch=true&resourceVersion=5", ("watch", "", "pods", "", "", "")),
        ("GET", "/api/v1/pods?watch=1", ("watch", "", "pods", "", "", "")),
        ("GET", "/api/v1/pods?watch=false", ("list", "", "pods", "", "", "")),
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


@pytest.mark.parametrize(
    "url", ["/api", "/apis", "/version", "/apis/slo.koordinator.sh/v1alpha1", "/api/v1", "/healthz"]
)
def test_discovery_is_not_a_resource_request(url: str) -> None:
    assert call_from_http("u", "GET", url) is None


def test_an_unknown_method_is_not_a_resource_request() -> None:
    assert call_from_http("u", "OPTIONS", "/api/v1/pods") is None
