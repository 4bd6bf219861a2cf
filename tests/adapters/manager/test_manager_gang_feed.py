"""The migration round's gangs, kept from the manager cache's stores by their listeners (no API calls)."""

from __future__ import annotations

from typing import Any, cast

from koordpy.manager.cache import ManagerCache
from koordpy.manager.gangs import GangFeed

NS = "ml"


def pod(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    rv: int = 1,
    phase: str = "Running",
    node: str = "n1",
    deleting: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": NS,
        "uid": f"uid-{name}",
        "resourceVersion": str(rv),
        "labels": labels or {},
        "annotations": annotations or {},
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-12-06T10:00:00Z"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": phase},
    }


def podgroup(name: str, min_member: int, rv: int = 1) -> dict[str, Any]:
    # a list item: no apiVersion (the store's own is used)
    return {"metadata": {"name": name, "namespace": NS, "resourceVersion": str(rv)}, "spec": {"minMember": min_member}}


SIG = {"pod-group.scheduling.sigs.k8s.io": "train"}


def cache() -> ManagerCache:
    return ManagerCache(cast(Any, None), ("pods", "podgroups"))


def test_the_feed_replays_what_the_stores_hold_and_follows_their_changes() -> None:
    stores = cache()
    stores.pods.handle("ADDED", pod("w0", labels=SIG))
    stores.podgroups_sigs.handle("ADDED", podgroup("train", 2))
    feed = GangFeed(stores)  # built after the first objects: they are replayed
    stores.pods.handle("ADDED", pod("w1", labels=SIG))
    stores.pods.handle("ADDED", pod("w2", labels=SIG, phase="Pending", node=""))
    stores.pods.handle("ADDED", pod("web-0"))  # in no gang
    table = feed.table([f"{NS}/w0", f"{NS}/web-0"])
    gang = table.of(f"{NS}/w0")
    assert gang is not None
    assert (gang.min_member, sorted(gang.running), gang.members) == (2, ["ml/w0", "ml/w1"], 3)
    assert table.of(f"{NS}/web-0") is None

    stores.pods.handle("MODIFIED", pod("w1", labels=SIG, rv=2, deleting=True))  # being evicted: no longer runs
    stores.podgroups_sigs.handle("MODIFIED", podgroup("train", 3, rv=2))
    gang = feed.table([f"{NS}/w0"]).of(f"{NS}/w0")
    assert gang is not None and (gang.min_member, sorted(gang.running)) == (3, ["ml/w0"])

    stores.pods.handle("DELETED", pod("w1", labels=SIG, rv=3))
    stores.podgroups_sigs.handle("DELETED", podgroup("train", 3, rv=3))
    gang = feed.table([f"{NS}/w0"]).of(f"{NS}/w0")
    assert gang is not None and gang.members == 2
    # PodGroup gone: its parameters are unknown, so its jobs are held (GangUnknown), not let through
    assert gang.unknown == "gang ml/train: PodGroup ml/train (scheduling.sigs.k8s.io) not found"


def test_volcano_and_annotation_gangs() -> None:
    stores = cache()
    feed = GangFeed(stores)
    stores.podgroups_volcano.handle("ADDED", podgroup("vc", 2))
    stores.pods.handle("ADDED", pod("v0", annotations={"scheduling.k8s.io/group-name": "vc"}))
    koord = {"gang.scheduling.koordinator.sh/name": "kg", "gang.scheduling.koordinator.sh/min-available": "3"}
    stores.pods.handle("ADDED", pod("k0", annotations=koord))
    table = feed.table([f"{NS}/v0", f"{NS}/k0"])
    found = {gid: (g.source, g.min_member) for gid, g in table.gangs.items()}
    assert found == {"ml/vc": ("scheduling.volcano.sh", 2), "ml/kg": ("annotations", 3)}


def test_a_pod_leaving_its_gang_by_a_label_change_is_no_longer_a_member() -> None:
    stores = cache()
    feed = GangFeed(stores)
    stores.podgroups_sigs.handle("ADDED", podgroup("train", 2))
    stores.pods.handle("ADDED", pod("w0", labels=SIG))
    stores.pods.handle("MODIFIED", pod("w0", rv=2))
    assert feed.table([f"{NS}/w0"]).of(f"{NS}/w0") is None


def test_a_native_podgroup_reaches_the_feed_with_its_disruption_mode() -> None:
    """Kubernetes' own PodGroup (a ``scheduling.k8s.io`` list item, no apiVersion) and members joined by
    ``spec.schedulingGroup``: the feed's gang has the PodGroup's minCount and ``disruptionMode``."""
    stores = cache()
    feed = GangFeed(stores)
    native = {
        "metadata": {"name": "sim", "namespace": NS, "resourceVersion": "1"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, "disruptionMode": {"all": {}}},
    }
    stores.podgroups_native.handle("ADDED", native)
    for index in range(2):
        member = pod(f"s{index}")
        member["spec"]["schedulingGroup"] = {"podGroupName": "sim"}
        stores.pods.handle("ADDED", member)
    view = feed.gangs.view(f"{NS}/sim")
    assert view is not None
    assert (view.spec.ref.source, view.spec.min_member, view.spec.disruption) == ("scheduling.k8s.io", 2, "all")
    assert view.children == (f"{NS}/s0", f"{NS}/s1")
