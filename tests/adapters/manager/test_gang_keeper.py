"""``GangStatusKeeper`` without kopf: status at once, Events only from the Event pass, memory released on delete."""

from __future__ import annotations

import logging
from typing import Any

from koordpy.config.manager import PodGroupSettings
from koordpy.manager.api import GangWriter, RetryingWrites
from koordpy.manager.gang_status import GangEvent, StatusPatch
from koordpy.manager.operator import GangStatusKeeper

LABEL = "pod-group.scheduling.sigs.k8s.io"


class RecordingWriter(GangWriter):
    def __init__(self) -> None:
        self.patches: list[StatusPatch] = []
        self.events: list[GangEvent] = []

    async def patch_status(self, patch: StatusPatch) -> bool:
        self.patches.append(patch)
        return True

    async def post_event(self, event: GangEvent, now: str) -> bool:
        self.events.append(event)
        return True


def pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}", "labels": {LABEL: "g"}},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Pending"},
    }


PG = {
    "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
    "kind": "PodGroup",
    "metadata": {"name": "g", "namespace": "ns", "uid": "pg"},
    "spec": {"minMember": 3},
}


async def test_status_at_once_events_from_the_pass_and_memory_released() -> None:
    writer = RecordingWriter()
    keeper = GangStatusKeeper(PodGroupSettings.model_validate({"podEventsPerGang": 5}), writer, lambda: 1e9)
    await keeper.reconcile(keeper.on_podgroup("scheduling.sigs.k8s.io", "ADDED", PG))
    for name in ("a", "b"):
        await keeper.reconcile(keeper.on_pod("ADDED", pod(name)))
    # Status is written at once; Events wait for the pass (a burst ends in one settled message).
    assert writer.patches[0].status["phase"] == "Pending"
    assert writer.events == []
    await keeper.post_events()
    assert {(e.kind, e.name, e.message) for e in writer.events} == {
        ("PodGroup", "g", "gang ns/g: 2 of 3 members exist"),
        ("Pod", "a", "gang ns/g: 2 of 3 members exist"),
        ("Pod", "b", "gang ns/g: 2 of 3 members exist"),
    }
    # Nothing changed: the next pass posts nothing.
    await keeper.post_events()
    assert len(writer.events) == 3
    # A pod that is not in a gang is not kept at all.
    stranger = pod("x")
    stranger["metadata"]["labels"] = {}
    assert keeper.on_pod("ADDED", stranger) == []
    assert "ns/x" not in keeper.pod_uids
    # Deleting members and the PodGroup releases the throttle's memory of them.
    assert len(keeper.throttle) == 3
    for name in ("a", "b"):
        await keeper.reconcile(keeper.on_pod("DELETED", pod(name)))
    await keeper.reconcile(keeper.on_podgroup("scheduling.sigs.k8s.io", "DELETED", PG))
    assert len(keeper.throttle) == 0
    assert keeper.pod_uids == {} and keeper.owners == {}


async def test_a_native_gang_gets_no_status_and_no_event_and_a_native_patch_is_never_sent() -> None:
    """A ``scheduling.k8s.io`` PodGroup's status is kube-scheduler's: its members (``spec.schedulingGroup``,
    here with a CRD PodGroup label too) are not kept, nothing is written or posted for them, and the writer
    refuses a native status patch whatever asks for it (no request is made)."""
    writer = RecordingWriter()
    keeper = GangStatusKeeper(PodGroupSettings.model_validate({}), writer, lambda: 1e9)
    await keeper.reconcile(keeper.on_podgroup("scheduling.sigs.k8s.io", "ADDED", PG))
    for name in ("a", "b"):
        member = pod(name)
        member["spec"]["schedulingGroup"] = {"podGroupName": "g"}
        assert keeper.on_pod("ADDED", member) == []
    await keeper.post_events()
    assert keeper.pod_uids == {}
    assert [e for e in writer.events if e.kind == "Pod"] == []
    assert all(p.api == "scheduling.sigs.k8s.io" for p in writer.patches)

    class Unreachable:
        """The API client: never used, as no request is made."""

    refusing = GangWriter(RetryingWrites(Unreachable(), logging.getLogger("test")))  # type: ignore[arg-type]
    assert await refusing.patch_status(StatusPatch("scheduling.k8s.io", "ns", "g", {"phase": "Running"})) is False
