"""Building blocks of the system tier: cluster objects and their creation through the emulator's API."""

from __future__ import annotations

from typing import Any

import httpx

from koordpy_testkit.builders import NodeBuilder, PodBuilder

__all__ = ["PODS_PATH", "create", "node", "pod"]

PODS_PATH = "/api/v1/namespaces/default/pods"
Raw = dict[str, Any]


def node(name: str, cpu: int = 16, memory_gi: int = 64) -> Raw:
    return NodeBuilder(name).allocatable(cpu=str(cpu), memory=f"{memory_gi}Gi", pods="110").build()


def pod(name: str, cpu: str = "800m", memory: str = "2Gi", namespace: str = "default") -> Raw:
    raw = PodBuilder(name, namespace).requests(cpu=cpu, memory=memory).build()
    # The API server assigns uids; let it (a builder uid would collide across re-created pods).
    raw["metadata"].pop("uid", None)
    return raw


async def create(admin: httpx.AsyncClient, path: str, body: Raw) -> Raw:
    resp = await admin.post(path, json=body)
    assert resp.status_code in (200, 201), f"POST {path}: {resp.status_code} {resp.text[:300]}"
    created: Raw = resp.json()
    return created
