"""Warning Events on a Node whose Node or NodeMetric object the extender cannot read.

The cache reports synchronously from a watch handler (:meth:`NodeEventReporter.report`); the reports
wait in a bounded queue and one task posts them through the API client, so a flood of bad objects
never blocks the watch or grows memory. The cache reports a node once each time it turns unreadable.

Not guaranteed: delivery. A full queue drops the report (counted in ``dropped``), and a failed POST
is logged and not retried; the metric ``koordpy_extender_invalid_nodes`` and the log line stay.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

__all__ = ["REASONS", "EventSink", "NodeEventReporter"]

REASONS = {"nodes": "KoordpyInvalidNode", "nodemetrics": "KoordpyInvalidNodeMetric"}
"""Event ``reason`` per resource that could not be read."""
_WHAT = {"nodes": "Node object", "nodemetrics": "NodeMetric"}


class EventSink(Protocol):
    """What posting needs from the API client (``koordpy.kube.client.ApiClient`` has it)."""

    async def create_event(
        self, involved_object: Any, *, reason: str, message: str, event_type: Any = ..., component: str = ...
    ) -> Any: ...


class NodeEventReporter:
    def __init__(self, log: Any, capacity: int = 256, timeout_seconds: float = 10.0) -> None:
        self.log = log
        self.queue: asyncio.Queue[tuple[str, str, str]] = asyncio.Queue(maxsize=capacity)
        self.timeout_seconds = timeout_seconds
        self.posted = 0
        self.dropped = 0
        self.failed = 0

    def report(self, resource: str, node: str, error: str) -> None:
        """Queue one Event (called from a watch handler; never blocks, never raises)."""
        try:
            self.queue.put_nowait((resource, node, error))
        except asyncio.QueueFull:
            self.dropped += 1

    async def run(self, sink: EventSink) -> None:
        """Post queued Events until cancelled."""
        while True:
            resource, node, error = await self.queue.get()
            message = f"koordpy extender cannot read this node's {_WHAT[resource]}; node filtered: {error}"
            try:
                async with asyncio.timeout(self.timeout_seconds):
                    await sink.create_event(
                        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}},
                        reason=REASONS[resource],
                        message=message,
                        event_type="Warning",
                        component="koordpy-extender",
                    )
                self.posted += 1
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # an API error must not end the reporter
                self.failed += 1
                self.log.warning(
                    "event.failed", node=node, reason=REASONS[resource], error=f"{type(exc).__name__}: {exc}"
                )
