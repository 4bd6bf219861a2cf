"""Invariants of the bind-barrier bookkeeping under long random event sequences (fixed seeds, so a failure
replays): every bind request is answered at most once (one release or one batch), a batch never holds
fewer members of a not-yet-satisfied gang than its min, and nothing overdue stays held."""

from __future__ import annotations

import random

import pytest

from koordpy.config.gang import CoschedulingArgs
from koordpy.scheduler.plugins.gang import GangCache, Hold
from koordpy_testkit.gangs import T0, annotated, member

ARGS = CoschedulingArgs.model_validate({"binderHttpTimeoutSeconds": 40, "binderAnswerMarginSeconds": 5})
GANGS = {
    # gang: (namespace, min, mode, policy, members, group)
    "a": ("default", 3, "Strict", "only-waiting", 4, ["default/a", "default/b"]),
    "b": ("default", 2, "NonStrict", "only-waiting", 3, ["default/a", "default/b"]),
    "c": ("default", 2, "Strict", "only-waiting", 3, None),
    "d": ("default", 2, "NonStrict", "only-waiting", 2, None),
}


def _pods() -> list[tuple[str, str]]:
    return [(f"default/{g}{i}", g) for g, spec in GANGS.items() for i in range(spec[4])]


def _member(pod: str, gang: str, node: str | None = None):  # type: ignore[no-untyped-def]
    _, min_member, mode, policy, _, group = GANGS[gang]
    return member(
        pod.split("/")[1],
        annotations=annotated(gang, min_member, mode=mode, policy=policy, wait="30s", groups=group),
        node=node,
    )


@pytest.mark.parametrize("seed", range(12))
def test_random_event_sequences_keep_the_invariants(seed: int) -> None:
    rng = random.Random(seed)
    cache = GangCache(ARGS)
    pods = _pods()
    alive: set[str] = set()
    bound: set[str] = set()
    answered: set[int] = set()  # hold ids released or handed out
    handed: dict[str, Hold] = {}  # pod -> hold handed out, not yet bound
    now = T0
    seen = {"batches": 0, "releases": 0}

    def check_batches() -> None:
        for batch in cache.take_ready(now):
            seen["batches"] += 1
            for hold in batch.holds:
                assert hold.hold_id not in answered, "a request answered twice"
                answered.add(hold.hold_id)
                handed[hold.pod] = hold
            # All-or-nothing: each gang of the group (only-waiting) has ≥ min members waiting, counting
            # the ones handed out earlier and not yet bound.
            gang_ids = {h.gang_id for h in batch.holds}
            for gang_id in gang_ids:
                min_member = GANGS[gang_id.split("/")[1]][1]
                waiting = sum(1 for h in handed.values() if h.gang_id == gang_id)
                assert waiting >= min_member, (gang_id, waiting, min_member)

    def check_releases() -> None:
        for release in cache.take_releases(now):
            seen["releases"] += 1
            assert release.hold.hold_id not in answered, "a request answered twice"
            answered.add(release.hold.hold_id)
        deadline = cache.next_deadline()
        assert deadline is None or deadline > now, "an overdue hold stayed held"

    for _ in range(400):
        pod, gang = rng.choice(pods)
        action = rng.random()
        if pod not in alive:
            cache.upsert_pod(_member(pod, gang))
            alive.add(pod)
        elif pod in bound:
            if action < 0.1:
                cache.delete_pod("default", pod.split("/")[1])
                alive.discard(pod)
                bound.discard(pod)
        elif action < 0.45:
            hold, _ = cache.hold(pod, pod, rng.choice(["n1", "n2"]), now)
            assert hold is not None
            handed.pop(pod, None)
        elif action < 0.55:
            cache.scheduling_failed(pod, "Insufficient cpu")
            view = cache.view(f"default/{gang}")
            assert view is not None
            if GANGS[gang][2] == "Strict" and not view.once_satisfied:
                # Strict: no member of the whole group is left held (handed-out ones are past Permit).
                group = set(view.spec.group)
                assert not [h for h in cache.holds() if h.gang_id in group and h.pod not in handed]
        elif action < 0.65 and pod in handed:
            cache.bound(pod, handed.pop(pod).node)
            bound.add(pod)
        elif action < 0.7 and pod in handed:
            cache.bind_failed(pod, "conflict")
            handed.pop(pod)
        elif action < 0.75:
            cache.delete_pod("default", pod.split("/")[1])
            alive.discard(pod)
            handed.pop(pod, None)
        else:
            now += rng.choice([1.0, 5.0, 20.0])
        check_batches()
        check_releases()
    # Something happened in every run: requests were answered both ways.
    assert seen["batches"] > 0 and seen["releases"] > 0, seen
