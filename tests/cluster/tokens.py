"""Tokens as kubelet hands them to a pod, on the real control plane: each one from the TokenRequest API,
bound to an object the test owns (a Secret; for an agent a Pod on its node, since the agent's token must
name its node), written into a directory laid out as kubelet writes a projected volume
(``koordpy_testkit.projected``). Deleting the bound object makes the API server refuse the token at once.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster_kit import RELEASE_NAMESPACE, Kube, wait_until

from koordpy_testkit.controlplane import ControlPlane
from koordpy_testkit.projected import ProjectedVolume

__all__ = ["RotatingToken", "refused", "revoke_all"]

_SERIAL = itertools.count()


@dataclass
class RotatingToken:
    """One component's token in a projected volume, each one bound to an object of its own."""

    plane: ControlPlane
    kube: Kube
    service_account: str
    volume: ProjectedVolume
    node: str | None = None
    """Bind to a Pod on this node (the agent's token must name its node); None: to a Secret."""
    bound: list[tuple[str, str, str]] = field(default_factory=list)
    """(kind, name, token) of every token issued, oldest first."""

    @property
    def path(self) -> Path:
        return self.volume.path()

    def _bound_object(self) -> dict[str, Any]:
        name = f"{self.service_account}-token-{next(_SERIAL)}-{time.time_ns() % 100000}"
        meta = {"name": name, "namespace": RELEASE_NAMESPACE}
        if self.node is None:
            return self.kube.create({"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque"})
        return self.kube.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": meta,
                "spec": {
                    "nodeName": self.node,
                    "serviceAccountName": self.service_account,
                    "automountServiceAccountToken": False,
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "holder", "image": "registry.invalid/holder:1"}],
                },
            }
        )

    def write_fresh(self) -> str:
        """A new token bound to a new object, written into the volume the way kubelet does."""
        obj = self._bound_object()
        meta = obj["metadata"]
        ref = {"apiVersion": "v1", "kind": obj["kind"], "name": meta["name"], "uid": meta["uid"]}
        resp = self.kube.client.post(
            f"/api/v1/namespaces/{RELEASE_NAMESPACE}/serviceaccounts/{self.service_account}/token",
            json={
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 3600, "boundObjectRef": ref},
            },
        )
        assert resp.status_code == 201, resp.text[:300]
        token: str = resp.json()["status"]["token"]
        self.bound.append((obj["kind"], meta["name"], token))
        self.volume.write(token=token)
        return token

    def revoke(self, keep_newest: bool) -> list[tuple[str, str]]:
        """Delete the objects the tokens are bound to (all but the newest with ``keep_newest``); the (object
        name, token) of each, for :func:`wait_refused`."""
        doomed = self.bound[:-1] if keep_newest else self.bound
        for kind, name, _ in doomed:
            self.kube.delete(kind, name, RELEASE_NAMESPACE, grace=0)
        self.bound = self.bound[-1:] if keep_newest else []
        return [(name, token) for _, name, token in doomed]


def revoke_all(tokens: dict[str, RotatingToken], keep_newest: bool) -> None:
    """:meth:`RotatingToken.revoke` for every component at once; returns when the API server refuses each
    revoked token."""
    plane = next(iter(tokens.values())).plane
    doomed = [pair for rotating in tokens.values() for pair in rotating.revoke(keep_newest)]
    for name, token in doomed:
        wait_until(f"token bound to {name} refused", lambda t=token: refused(plane, t))


def refused(plane: ControlPlane, token: str) -> bool:
    with plane.client(token) as api:
        return api.get("/api").status_code == 401
