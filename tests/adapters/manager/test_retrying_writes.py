"""``RetryingWrites``: the NodeMetric and PodGroup writes' retry policy (kopf's client's, on koordpy's client),
and its end with the leadership the write began in.

A scripted client stands in for the API (fault injection: each call answers the next scripted outcome);
the leader is a real ``LeaseElector`` on the API emulator. The same writes against the real API server
under a fault proxy are in tests/cluster/test_cluster_faults.py, and under a cut network in
tests/cluster/test_cluster_manager_partition.py.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from koordpy.kube import errors
from koordpy.kube.client import ApiClient
from koordpy.kube.leaderelection import LeaseElector, NotLeading
from koordpy.manager.api import BACKOFFS, NodeMetricWriter, RetryingWrites
from koordpy.manager.policy import Create, Delete
from koordpy_testkit.apiserver.fixture import api_client, apiserver
from koordpy_testkit.bounds import HANG_BACKSTOP

__all__ = ["api_client", "apiserver"]


class ScriptedClient:
    def __init__(self, *outcomes: Exception | None) -> None:
        self.outcomes = list(outcomes)
        self.calls: list[tuple[str, str, Any, str]] = []

    async def request(self, method: str, path: str, *, body: Any = None, content_type: str = "") -> dict[str, Any]:
        self.calls.append((method, path, body, content_type))
        outcome = self.outcomes.pop(0) if self.outcomes else None
        if outcome is not None:
            raise outcome
        return {}


def writes(client: ScriptedClient, sleeps: list[float]) -> RetryingWrites:
    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    return RetryingWrites(client, logging.getLogger("test"), sleep=sleep)  # type: ignore[arg-type]


async def test_temporary_failures_are_retried_with_kopfs_backoffs_and_a_longer_retry_after() -> None:
    client = ScriptedClient(
        errors.ServerError(500, "InternalError"),
        errors.ApiConnectionError("reset"),
        errors.TooManyRequests(429, "TooManyRequests", retry_after=7.0),
        errors.TooManyRequests(429, "TooManyRequests", retry_after=0.5),
        None,
    )
    sleeps: list[float] = []
    await writes(client, sleeps).request("POST", "/x", {"a": 1})
    # 1, 1, max(2, 7) = 7, max(3, 0.5) = 3
    assert sleeps == [1, 1, 7, 3]
    assert [c[:3] for c in client.calls] == [("POST", "/x", {"a": 1})] * 5


async def test_a_refusal_is_raised_at_once() -> None:
    client = ScriptedClient(errors.Forbidden(403, "Forbidden"))
    sleeps: list[float] = []
    with pytest.raises(errors.Forbidden):
        await writes(client, sleeps).request("DELETE", "/x")
    assert (sleeps, len(client.calls)) == ([], 1)


async def test_the_last_temporary_failure_is_raised_after_every_backoff() -> None:
    client = ScriptedClient(*[errors.ServerError(503, "ServiceUnavailable")] * (len(BACKOFFS) + 1))
    sleeps: list[float] = []
    with pytest.raises(errors.ServerError):
        await writes(client, sleeps).request("PATCH", "/x", {}, "application/merge-patch+json")
    assert sleeps == list(BACKOFFS) and len(client.calls) == len(BACKOFFS) + 1


@pytest.mark.parametrize(
    ("action", "failure", "outcome"),
    [
        (Create("n1", {"metadata": {"name": "n1"}}), errors.Conflict(409, "AlreadyExists"), "exists"),
        (Delete("n1"), errors.NotFound(404, "NotFound"), "gone"),
    ],
)
async def test_a_lost_race_of_a_nodemetric_write_is_an_outcome(action: Any, failure: Exception, outcome: str) -> None:
    client = ScriptedClient(errors.ApiConnectionError("answer lost"), failure)
    writer = NodeMetricWriter(writes(client, []))
    assert await writer.apply(action) == outcome
    assert len(client.calls) == 2  # the lost answer's retry met the write that had taken effect


def leader(client: ApiClient) -> LeaseElector:
    return LeaseElector(
        client, namespace="koordpy-system", name="koordpy-manager", identity="a", lease_duration=15, renew_deadline=10
    )


async def test_a_retry_loop_ends_the_moment_its_term_does(api_client: ApiClient) -> None:
    """The write fails with 503 and waits its first backoff (1 s, made endless here); the Lease is released
    meanwhile: the wait ends at once and the write is never sent again."""
    client = ScriptedClient(*[errors.ServerError(503, "ServiceUnavailable")] * (len(BACKOFFS) + 1))
    elector = leader(api_client)
    await elector.acquire()
    waiting = asyncio.Event()

    async def endless(seconds: float) -> None:
        waiting.set()
        await asyncio.Event().wait()

    writes = RetryingWrites(client, logging.getLogger("test"), sleep=endless, leader=elector)  # type: ignore[arg-type]
    write = asyncio.create_task(writes.request("PATCH", "/x", {}, "application/merge-patch+json"))
    await asyncio.wait_for(waiting.wait(), HANG_BACKSTOP)
    assert await elector.release()
    with pytest.raises(NotLeading, match="term 1"):
        await asyncio.wait_for(write, HANG_BACKSTOP)
    assert len(client.calls) == 1


async def test_a_standby_sends_no_write_at_all(api_client: ApiClient) -> None:
    client = ScriptedClient()
    writes = RetryingWrites(client, logging.getLogger("test"), leader=leader(api_client))  # type: ignore[arg-type]
    with pytest.raises(NotLeading):
        await writes.request("POST", "/x", {"a": 1})
    assert client.calls == []
