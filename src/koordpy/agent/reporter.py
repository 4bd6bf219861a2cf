"""Writes this node's ``slo.koordinator.sh/v1alpha1`` NodeMetric and reads its collect policy.

The object is created (empty spec) when missing; the status is written through the ``status``
subresource with a merge patch, so the manager's ``spec.metricCollectPolicy`` is never touched.

Not guaranteed: two agents for the same node would overwrite each other's status.
"""

from __future__ import annotations

import contextlib
from typing import Any

from koordpy.agent.policy.report import CollectPolicy, policy_from_spec
from koordpy.kube import errors, resources
from koordpy.kube.client import ApiClient

__all__ = ["NodeMetricReporter"]


class NodeMetricReporter:
    def __init__(self, client: ApiClient, node: str, defaults: CollectPolicy) -> None:
        self.client = client
        self.node = node
        self.defaults = defaults
        self.policy = defaults
        self.reports = 0
        self.failures = 0

    async def refresh_policy(self) -> CollectPolicy:
        """Re-read ``spec.metricCollectPolicy`` (missing object or field: the agent's defaults)."""
        try:
            obj = await self.client.get(resources.NODEMETRICS, self.node)
        except errors.NotFound:
            self.policy = self.defaults
        else:
            self.policy = policy_from_spec(obj.get("spec"), self.defaults)
        return self.policy

    async def report(self, status: dict[str, Any]) -> dict[str, Any]:
        """Write ``status``; creates the NodeMetric first when it does not exist."""
        try:
            try:
                out = await self.client.patch_status(resources.NODEMETRICS, self.node, {"status": status})
            except errors.NotFound:
                body = {
                    "apiVersion": resources.NODEMETRICS.api_version,
                    "kind": "NodeMetric",
                    "metadata": {"name": self.node},
                    "spec": {},
                }
                with contextlib.suppress(errors.Conflict):  # created concurrently: fine, patch it
                    await self.client.create(resources.NODEMETRICS, body)
                out = await self.client.patch_status(resources.NODEMETRICS, self.node, {"status": status})
        except errors.ApiError:
            self.failures += 1
            raise
        self.reports += 1
        return out
