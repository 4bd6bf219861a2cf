"""kube-scheduler's calls to the extender, as the recording proxy between them saw them, grouped into
scheduling cycles.

kube-scheduler runs one scheduling cycle at a time: a cycle calls ``filter`` with the nodes its in-tree
filters passed, then ``prioritize`` when more than one node passed, and hands the pod to a binding cycle
that calls ``bind`` concurrently with later cycles. So a ``filter`` call opens a cycle for its pod, the
next ``prioritize`` of that pod belongs to it, and so does the next ``bind`` of that pod.

Times are the proxy's: ``*_sent`` when it forwarded the call, ``*_done`` when the extender's answer was
read whole; so the extender received a call after ``*_sent`` and answered before ``*_done``.

:func:`filter_probe` asks the extender directly, as kube-scheduler would, for one node.

Not guaranteed: cycles of a pod whose filter call never reached the proxy (kube-scheduler did not call).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from koordpy_testkit.faultproxy import Exchange

__all__ = ["Decision", "decisions_from", "filter_probe"]


@dataclass
class Decision:
    """One scheduling cycle of one pod, as far as the extender was involved."""

    uid: str
    pod: str
    cycle: int
    candidates: list[str]
    filter_sent: float | None
    filter_done: float | None
    outcome: str = "filtered"
    """``filtered``, or ``filter-error`` when the call failed or the extender answered an ``Error``."""
    passed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    unresolvable: dict[str, str] = field(default_factory=dict)
    prioritize_sent: float | None = None
    prioritize_done: float | None = None
    extender_scores: dict[str, int] = field(default_factory=dict)
    node: str | None = None
    bind_sent: float | None = None
    bind_done: float | None = None
    bind_outcome: str | None = None
    """``ok``, ``error`` (the extender answered an ``Error``) or ``lost`` (no answer: the call failed)."""
    bind_error: str = ""


def _verb(exchange: Exchange) -> str:
    return exchange.path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]


def _answer(exchange: Exchange) -> Any:
    if exchange.status != 200 or not exchange.response_body:
        return None
    return exchange.answer_json()


def decisions_from(exchanges: Iterable[Exchange]) -> list[Decision]:
    """The cycles in the order their filter calls arrived."""
    decisions: list[Decision] = []
    latest: dict[str, Decision] = {}
    cycles: dict[str, int] = {}
    for exchange in sorted(exchanges, key=lambda e: e.seq):
        verb = _verb(exchange)
        body = exchange.json()
        if verb == "filter":
            pod = body["Pod"]
            uid = pod["metadata"]["uid"]
            cycles[uid] = cycles.get(uid, 0) + 1
            decision = Decision(
                uid=uid,
                pod=f"{pod['metadata']['namespace']}/{pod['metadata']['name']}",
                cycle=cycles[uid],
                candidates=list(body.get("NodeNames") or []),
                filter_sent=exchange.forwarded,
                filter_done=exchange.answered,
            )
            answer = _answer(exchange)
            if answer is None or answer.get("Error"):
                decision.outcome = "filter-error"
            else:
                decision.passed = list(answer.get("NodeNames") or [])
                decision.failed = dict(answer.get("FailedNodes") or {})
                decision.unresolvable = dict(answer.get("FailedAndUnresolvableNodes") or {})
            decisions.append(decision)
            latest[uid] = decision
        elif verb == "prioritize":
            decision = latest[body["Pod"]["metadata"]["uid"]]
            decision.prioritize_sent = exchange.forwarded
            decision.prioritize_done = exchange.answered
            answer = _answer(exchange)
            if answer is not None:
                decision.extender_scores = {row["Host"]: int(row["Score"]) for row in answer}
        elif verb == "bind":
            decision = latest[body["PodUID"]]
            decision.node = body["Node"]
            decision.bind_sent = exchange.forwarded
            answer = _answer(exchange)
            if answer is None:
                decision.bind_outcome = "lost"
            else:
                decision.bind_done = exchange.answered
                decision.bind_error = str(answer.get("Error") or "")
                decision.bind_outcome = "error" if decision.bind_error else "ok"
    return decisions


def filter_probe(extender: str, node: str, cpu: str = "800m", memory: str = "2Gi") -> dict[str, Any]:
    """The extender's /filter answer for a probe pod requesting ``cpu`` / ``memory`` and ``node`` alone, asked
    directly at ``extender`` (its base URL) as kube-scheduler would (not through the recording proxy)."""
    probe = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe", "namespace": "probe", "uid": "probe-uid"},
        "spec": {
            "schedulerName": "koordpy-scheduler",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
        },
    }
    body = orjson.dumps({"Pod": probe, "Nodes": None, "NodeNames": [node]})
    resp = httpx.post(extender + "/filter", content=body, headers={"Content-Type": "application/json"}, timeout=60)
    assert resp.status_code == 200, resp.text
    answer: dict[str, Any] = resp.json()
    return answer
