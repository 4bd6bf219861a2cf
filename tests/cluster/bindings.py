"""Bindings as the audit log records them: who bound each pod, and how often the API server accepted it.

kube-apiserver writes a request's ``ResponseComplete`` audit event after it answered the request, so a pod
can show as bound before its binding is in the log: :func:`one_binding_each` waits for every pod's
accepted binding first (a hang backstop, not a bound on time).
"""

from __future__ import annotations

from typing import Any

from cluster_kit import bindings_by_pod, wait_until

from koordpy_testkit.controlplane import ControlPlane

__all__ = ["SCHEDULER_SA", "one_binding_each"]

SCHEDULER_SA = "system:serviceaccount:koordpy-system:koordpy-scheduler"
"""The extender's identity (the chart's scheduler ServiceAccount), the binder of the koordpy profile."""


def _accepted(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["responseStatus"]["code"] == 201]


def one_binding_each(
    control_plane: ControlPlane, namespace: str, pods: set[str], binder: str = SCHEDULER_SA
) -> list[str]:
    """Problems with "every pod bound exactly once by ``binder``": per pod exactly one binding the API server
    accepted (201), every other attempt refused (the pod was already bound, or the binder's call failed)."""

    def logged() -> dict[str, list[dict[str, Any]]] | None:
        bindings = bindings_by_pod(control_plane, namespace)
        return bindings if all(_accepted(bindings.get(pod, [])) for pod in pods) else None

    bindings: dict[str, list[dict[str, Any]]] = wait_until("an accepted binding of every pod in the audit log", logged)
    problems = []
    if set(bindings) != pods:
        problems.append(f"pods with bindings {sorted(set(bindings) ^ pods)[:10]} differ from the pods")
    for pod, events in sorted(bindings.items()):
        accepted = _accepted(events)
        if len(accepted) != 1:
            problems.append(f"{pod}: {len(accepted)} accepted bindings")
        users = {e["user"]["username"] for e in accepted}
        if users - {binder}:
            problems.append(f"{pod}: bound by {users}")
    return problems
