"""Pod events of pods in no gang: nothing is kept for them, and a member that drops its gang labels or
annotations leaves its gang (``GangCache.upsert_pod`` returns early only while no pod is in a gang)."""

from __future__ import annotations

from koordpy.config.gang import CoschedulingArgs
from koordpy.scheduler.plugins.gang import GangCache
from koordpy_testkit.gangs import T0, annotated, member

ARGS = CoschedulingArgs.model_validate({})


def test_pods_in_no_gang_leave_no_trace() -> None:
    cache = GangCache(ARGS)
    cache.upsert_pod(member("plain"))
    assert cache.gang_of("default/plain") is None and cache.views() == []
    assert cache.take_ready(T0) == [] and cache.take_releases(T0) == []


def test_a_member_that_drops_its_gang_annotations_leaves_the_gang() -> None:
    cache = GangCache(ARGS)
    cache.upsert_pod(member("p0", annotations=annotated("g", 2)))
    cache.upsert_pod(member("p1", annotations=annotated("g", 2)))
    cache.hold("default/p1", "u1", "n1", T0)
    cache.upsert_pod(member("p1"))  # no gang annotations any more
    (release,) = cache.take_releases(T0)
    assert (release.hold.pod, release.cause) == ("default/p1", "deleted")
    assert release.reason == "gang default/g: default/p1 left the gang (labels or annotations changed)"
    assert cache.gang_of("default/p1") is None
    view = cache.view("default/g")
    assert view is not None and view.children == ("default/p0",)
    # the last member leaving too: the annotation gang is forgotten, and pods in no gang stay untracked
    cache.upsert_pod(member("p0"))
    assert cache.view("default/g") is None and cache.gang_of("default/p0") is None
