"""The PodMigrationJobs of the manager's cache by stage, kept from the store's change events
(:class:`JobIndex`), so a round costs nothing for a finished job until the scavenger's time comes.
"""

from __future__ import annotations

import heapq
from collections import Counter
from typing import Any

from koordpy.descheduler.job_facts import JobFacts, examine
from koordpy.descheduler.lifecycle_inputs import LifecycleSettings
from koordpy.descheduler.objects import MigrationJob
from koordpy.manager.cache import JobViews, ObjectStore

__all__ = [
    "JobIndex",
]

Raw = dict[str, Any]


def _phase_of(facts: JobFacts) -> str:
    return facts.phase if facts.phase else "Pending"


class JobIndex:
    """The PodMigrationJobs of a store by stage (:func:`~koordpy.descheduler.job_facts.examine` on every
    change), the arbitration value of each waiting or active one (read once per version), and a heap of
    the finished ones by scavenge time."""

    def __init__(self, store: ObjectStore, settings: LifecycleSettings, views: JobViews | None = None) -> None:
        self.store = store
        self.views = views if views is not None else JobViews(store)
        self.settings = settings
        self.facts: dict[str, JobFacts] = {}
        self.waiting: dict[str, None] = {}
        self.active: dict[str, None] = {}
        self.invalid: dict[str, None] = {}
        self.phases: Counter[str] = Counter()
        self._finished: list[tuple[float, str]] = []
        store.add_listener(self._changed)
        for key, obj in list(store.objects.items()):
            self._changed(key, None, obj)

    def _drop(self, name: str) -> None:
        old = self.facts.pop(name, None)
        if old is not None:
            self.phases[_phase_of(old)] -= 1
            if not self.phases[_phase_of(old)]:
                del self.phases[_phase_of(old)]
        self.waiting.pop(name, None)
        self.active.pop(name, None)
        self.invalid.pop(name, None)

    def _changed(self, name: str, old: Raw | None, new: Raw | None) -> None:
        self._drop(name)
        if new is None:
            return
        facts = examine(new, self.settings)
        self.facts[name] = facts
        self.phases[_phase_of(facts)] += 1
        if facts.stage == "waiting":
            self.waiting[name] = None
        elif facts.stage == "active":
            self.active[name] = None
        elif facts.stage == "invalid":
            self.invalid[name] = None
        elif facts.stage == "finished" and facts.scavenge_at is not None:
            heapq.heappush(self._finished, (facts.scavenge_at, name))

    def parsed(self, name: str) -> MigrationJob | None:
        """The typed view of job ``name`` (None when it cannot be read), converted once per stored version and
        shared with the other readers of the store (:class:`~koordpy.manager.cache.JobViews`)."""
        return self.views.get(name)

    def due_for_scavenge(self, now: float, limit: int) -> list[str]:
        """Up to ``limit`` finished jobs whose scavenge time has come (taken off the heap)."""
        out: list[str] = []
        heap = self._finished
        while heap and heap[0][0] <= now and len(out) < limit:
            at, name = heapq.heappop(heap)
            facts = self.facts.get(name)
            if facts is not None and facts.stage == "finished" and facts.scavenge_at == at:
                out.append(name)
        return out

    def requeue_scavenge(self, name: str, at: float) -> None:
        heapq.heappush(self._finished, (at, name))
