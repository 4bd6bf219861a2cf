"""Repeat moves: the loops the threshold contract rules out, made visible should one happen anyway.

A move that undoes or repeats a recent one is the symptom users of other descheduling stacks report ("evicted every
five minutes"). koordpy counts two kinds, both in ``koordpy_descheduler_repeat_moves_total`` (label ``cause``), each
with an Event ``RepeatMove`` on the workload:

* ``moved_again`` (the manager): a balance plugin moves a pod of a workload off node ``N`` less than ``window``
  seconds after it moved a pod of the same workload, when the pod was created at or after that move (it is the
  replacement, or another pod of the workload started since) and that move's destination was ``N`` or is not known
  (an ``EvictDirectly`` job names none). A workload is a pod's controller followed up its chain (ReplicaSet to
  Deployment), so the replacement, which has another name, is recognised;
* ``agent_eviction`` (the agent): the agent evicts a pod from its node less than ``window`` seconds after the pod
  was placed there (``PodScheduled``, else its creation). Whoever placed it (the scheduler after a move, or for a
  new pod), the scheduler put a pod where the agent then finds the node too hot.

Both are judged by who acts, from what it already reads, so neither needs another permission: the manager knows the
moves it filed, and the agent knows the pods of its node and when each was placed.

Not guaranteed: that each count is a loop (a workload scaled up and then balanced again within the window counts as
well); that every loop is counted (a pod moved by a job someone else filed is not in the manager's history).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

__all__ = [
    "CAUSE_AGENT_EVICTION",
    "CAUSE_MOVED_AGAIN",
    "EVENT_REASON",
    "MoveHistory",
    "WorkloadMove",
    "evicted_after_placement",
]

CAUSE_MOVED_AGAIN = "moved_again"
CAUSE_AGENT_EVICTION = "agent_eviction"
EVENT_REASON = "RepeatMove"
"""The reason of the Event a repeat move posts on its workload."""


@dataclass(frozen=True, slots=True)
class WorkloadMove:
    """A pod of ``workload`` (its UID) moved off ``source`` at ``at`` by job ``job``, towards ``destination``."""

    workload: str
    job: str
    pod: str
    """``namespace/name`` of the pod moved."""
    source: str
    destination: str | None
    at: float


class MoveHistory:
    """The moves of the last ``window`` seconds, by workload; see the module docstring. Time is passed in."""

    def __init__(self, window: float) -> None:
        self.window = window
        self._by_job: dict[str, WorkloadMove] = {}
        self._by_workload: dict[str, list[str]] = {}

    def __len__(self) -> int:
        return len(self._by_job)

    def record(self, move: WorkloadMove) -> None:
        self.forget(move.job)
        self._by_job[move.job] = move
        self._by_workload.setdefault(move.workload, []).append(move.job)

    def landed(self, job: str, node: str) -> None:
        """The move of ``job`` placed its pod on ``node`` (a PodMigrationJob's ``status.nodeName``)."""
        move = self._by_job.get(job)
        if move is not None and move.destination != node:
            self._by_job[job] = dataclasses.replace(move, destination=node)

    def forget(self, job: str) -> None:
        """``job`` moved nothing (it failed, or was deleted before it evicted): it is no earlier move."""
        move = self._by_job.pop(job, None)
        if move is None:
            return
        jobs = self._by_workload.get(move.workload, [])
        if job in jobs:
            jobs.remove(job)
        if not jobs:
            self._by_workload.pop(move.workload, None)

    def repeat_of(self, workload: str, pod_created: float | None, node: str, now: float) -> WorkloadMove | None:
        """The earlier move a move off ``node`` now, of a pod of ``workload`` created at ``pod_created``, repeats
        (the latest one), or None. A pod created before a move is not that move's replacement (creation times
        are whole seconds: a pod created in the second of the move counts as created after it)."""
        latest: WorkloadMove | None = None
        for job in self._by_workload.get(workload, ()):
            move = self._by_job[job]
            if now - move.at >= self.window or move.at > now:
                continue
            if pod_created is None or pod_created < int(move.at):
                continue
            if move.destination is not None and move.destination != node:
                continue
            if latest is None or move.at > latest.at:
                latest = move
        return latest

    def prune(self, now: float) -> None:
        """Drop the moves older than the window."""
        for job in [job for job, move in self._by_job.items() if now - move.at >= self.window]:
            self.forget(job)


def evicted_after_placement(placed_at: float | None, now: float, window: float) -> bool:
    """Whether evicting a pod placed on its node at ``placed_at`` (None: unknown) is a repeat move at ``now``."""
    return placed_at is not None and 0 <= now - placed_at < window
