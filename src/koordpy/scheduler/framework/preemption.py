"""Preemption back-off: a pod that preempted on a node and lost it does not preempt again for a while.

kube-scheduler's preemption evicts lower-priority pods on one node and *nominates* that node for the
preemptor (``status.nominatedNodeName``); only the same scheduler honours a nomination. When another
scheduler (the stock default scheduler next to the ``koordpy-scheduler`` profile) refills the room first,
the preemptor stays unschedulable, preempts again, and the two schedulers loop: each round evicts pods for
nothing. kube-scheduler calls the extender's preempt verb with the preemptor while its nomination is still
set; it never does so while victims on the nominated node are still terminating
(``PodEligibleToPreemptOthers``). So a preempt call for a pod whose ``nominatedNodeName`` is N means: it
preempted on N, the victims are gone, and N still does not fit: **N was lost**. From then on, for
``seconds``, the pod may not preempt at all: not on N, and not on any other node either, because a node
taken by another scheduler says that scheduler refills whatever room frees up, and with thousands of
candidate nodes a per-node back-off would still evict a node's worth of pods per retry. (The extender
exempts a node koordpy's taint holds for the pod: nobody else can refill that one.)

A lost node is charged once per preemption: the same nomination seen again is not charged again (the
back-off is not prolonged by kube-scheduler retrying), and is charged anew only after the pod was offered
candidates again (a new preemption may follow). Worked example (``seconds`` 120): at t=0 the pod preempts
on n1; at t=2 its preempt call says nominated n1 → lost, back-off until 122, nothing offered; at t=60 the
same nomination: still refused, not prolonged; at t=122 candidates are offered again; if it preempts on n2
and loses it, the call at t=125 starts a back-off until 245.

Not guaranteed: state is per process and bounded (:data:`MAX_PODS`, least recently seen forgotten first);
a nomination kube-scheduler set before this process started counts as lost at its first call.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["MAX_PODS", "PreemptionBackoff"]

MAX_PODS = 4096
"""Pods whose back-off is remembered (least recently seen forgotten first)."""


@dataclass
class _PodBackoff:
    until: float = 0.0
    """The instant the pod's back-off ends (0: none)."""
    lost: str = ""
    """The node it lost last."""
    charged: str = ""
    """The nomination already charged (not charged again until the pod is offered candidates again)."""


class PreemptionBackoff:
    """Per pod (by uid), the instant until which it may not preempt; ``seconds`` 0 disables it."""

    def __init__(self, seconds: float, max_pods: int = MAX_PODS) -> None:
        self.seconds = seconds
        self.max_pods = max_pods
        self._pods: OrderedDict[str, _PodBackoff] = OrderedDict()

    def _entry(self, uid: str) -> _PodBackoff:
        entry = self._pods.get(uid)
        if entry is None:
            entry = self._pods[uid] = _PodBackoff()
            while len(self._pods) > self.max_pods:
                self._pods.popitem(last=False)
        else:
            self._pods.move_to_end(uid)
        return entry

    def observe(self, uid: str, nominated: str, now: float) -> str | None:
        """A preempt call for pod ``uid`` whose nomination is ``nominated`` (may be empty): the node it
        lost and is now charged for (its back-off starts), or None."""
        if self.seconds <= 0 or not nominated or not uid:
            return None
        entry = self._entry(uid)
        if entry.charged == nominated:
            return None
        entry.charged = entry.lost = nominated
        entry.until = now + self.seconds
        return nominated

    def blocked(self, uid: str, now: float) -> tuple[float, str] | None:
        """(the instant the back-off ends, the node lost) while pod ``uid`` may not preempt, else None."""
        entry = self._pods.get(uid)
        if entry is None or now >= entry.until:
            return None
        return entry.until, entry.lost

    def offered(self, uid: str, nodes: Iterable[str]) -> None:
        """The pod was offered ``nodes`` as candidates: its next nomination is a new preemption."""
        entry = self._pods.get(uid)
        if entry is not None and entry.charged and any(True for _ in nodes):
            entry.charged = ""

    def forget(self, uid: str) -> None:
        """The pod was bound or deleted."""
        self._pods.pop(uid, None)

    def __len__(self) -> int:
        return len(self._pods)
