"""The fault proxy's rules, without a network: which requests match, skip and count, the seeded draw, and
the Status bodies it answers with (the proxy itself runs in the real-cluster tier)."""

from __future__ import annotations

import pytest

from koordpy_testkit.faultproxy import (
    Fault,
    FaultProxy,
    conflict,
    lost_response,
    server_error,
    too_many_requests,
    watch_gone,
)
from koordpy_testkit.requestinfo import call_from_http


def choose(proxy: FaultProxy, method: str, url: str) -> str | None:
    fault = proxy.choose(call_from_http("", method, url))
    return None if fault is None else str(fault)


def test_a_rule_matches_verb_resource_and_subresource() -> None:
    proxy = FaultProxy("http://upstream.invalid")
    proxy.inject(server_error(), verbs=["create"], resource="pods", subresource="binding", count=None)
    assert choose(proxy, "POST", "/api/v1/namespaces/a/pods/p/binding") == "500"
    assert choose(proxy, "POST", "/api/v1/namespaces/a/pods") is None  # the pod, not its binding
    assert choose(proxy, "GET", "/api/v1/namespaces/a/pods/p") is None
    assert choose(proxy, "GET", "/version") is None  # not a resource request: never matched


def test_write_names_every_writing_verb_and_subresource_empty_means_the_resource_itself() -> None:
    proxy = FaultProxy("http://upstream.invalid")
    proxy.inject(conflict(), verbs=["write"], resource="nodemetrics", subresource="", count=None)
    base = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"
    assert [
        choose(proxy, m, u)
        for m, u in [
            ("POST", base),
            ("PUT", f"{base}/n"),
            ("PATCH", f"{base}/n"),
            ("DELETE", f"{base}/n"),
            ("PATCH", f"{base}/n/status"),
            ("GET", f"{base}/n"),
        ]
    ] == ["409", "409", "409", "409", None, None]


def test_skip_then_count_then_spent() -> None:
    proxy = FaultProxy("http://upstream.invalid")
    rule = proxy.inject(too_many_requests(3), verbs=["list"], resource="nodes", skip=2, count=2)
    got = [choose(proxy, "GET", "/api/v1/nodes") for _ in range(6)]
    assert got == [None, None, "429 Retry-After 3", "429 Retry-After 3", None, None]
    assert (rule.matched, rule.injected, rule.spent) == (4, 2, True)  # a spent rule stops counting


def test_the_first_live_rule_decides() -> None:
    proxy = FaultProxy("http://upstream.invalid")
    proxy.inject(lost_response(), resource="pods", count=1)
    proxy.inject(server_error(503), resource="pods", count=None)
    got = [choose(proxy, "GET", "/api/v1/pods/x") for _ in range(3)]
    assert got == ["lost_response", "503", "503"]


def test_probability_draws_from_the_seeded_generator() -> None:
    def draws(seed: int) -> list[str | None]:
        proxy = FaultProxy("http://upstream.invalid", seed=seed)
        proxy.inject(server_error(), resource="pods", probability=0.3, count=None)
        return [choose(proxy, "GET", "/api/v1/pods") for _ in range(200)]

    first = draws(7)
    assert first == draws(7)  # the same seed, the same faults
    assert first != draws(8)
    hits = sum(f is not None for f in first)
    assert 30 <= hits <= 90, hits  # 200 draws at 0.3: mean 60, sd 6.5


@pytest.mark.parametrize(
    ("fault", "code", "reason", "details"),
    [
        (too_many_requests(2), 429, "TooManyRequests", {"retryAfterSeconds": 2}),
        (server_error(), 500, "InternalError", None),
        (server_error(503), 503, "ServiceUnavailable", None),
        (conflict(), 409, "Conflict", None),
        (watch_gone(), 410, "Expired", None),
    ],
)
def test_status_bodies_are_what_kube_apiserver_sends(
    fault: Fault, code: int, reason: str, details: dict[str, int] | None
) -> None:
    body = fault.status_body()
    assert (body["kind"], body["apiVersion"], body["status"], body["code"], body["reason"]) == (
        "Status",
        "v1",
        "Failure",
        code,
        reason,
    )
    assert body.get("details") == details
