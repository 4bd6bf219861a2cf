"""Evicts pods through the ``policy/v1`` Eviction subresource, never a plain delete.

Each eviction names the UID of the pod the policy planned for (``deleteOptions.preconditions.uid``):
a pod deleted and created again under the same name between the plan and the call (a StatefulSet's)
is a different pod, and the API server refuses to evict it (409); that counts as the planned pod being
gone, as a pod not found does.

A 429 (PodDisruptionBudget or API throttling) is retried after its ``Retry-After`` (else
``retry_delay``) up to ``retries`` times; then the eviction is reported as refused so the policy
can forget it and pick again later.

Not guaranteed: an accepted eviction only starts graceful termination; the pod stays listed
until the kubelet is done (the policy's in-flight ledger covers that time).
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable

from koordpy.kube import errors
from koordpy.kube.client import ApiClient

__all__ = ["EvictOutcome", "Evictor"]


class EvictOutcome(enum.StrEnum):
    EVICTED = "evicted"
    GONE = "gone"
    REFUSED = "refused"
    FAILED = "failed"


class Evictor:
    def __init__(
        self,
        client: ApiClient,
        *,
        retries: int = 3,
        retry_delay: float = 5.0,
        max_delay: float = 60.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.client = client
        self.retries = retries
        self.retry_delay = retry_delay
        self.max_delay = max_delay
        self.sleep = sleep

    async def evict(self, namespace: str, name: str, uid: str, grace_seconds: int | None) -> tuple[EvictOutcome, str]:
        """Evict pod ``namespace/name`` only while it is the pod with ``uid``: ``(outcome, detail)``;
        never raises for API errors."""
        options = {"preconditions": {"uid": uid}}
        for attempt in range(self.retries + 1):
            try:
                await self.client.evict(namespace, name, grace_period_seconds=grace_seconds, delete_options=options)
            except errors.NotFound:
                return EvictOutcome.GONE, "pod already gone"
            except errors.Conflict as exc:
                return EvictOutcome.GONE, f"pod replaced under the same name: {exc.message}"
            except errors.TooManyRequests as exc:
                if attempt == self.retries:
                    return EvictOutcome.REFUSED, exc.message or "429 Too Many Requests"
                await self.sleep(min(self.max_delay, exc.retry_after or self.retry_delay))
            except errors.ApiError as exc:
                return EvictOutcome.FAILED, f"{exc.status} {exc.reason}: {exc.message}"
            else:
                return EvictOutcome.EVICTED, ""
        return EvictOutcome.REFUSED, "retries exhausted"  # pragma: no cover - the loop always returns
