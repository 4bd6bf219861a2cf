"""Preemption back-off: a pod that preempted on a node and lost it does not preempt there again for a while.

kube-scheduler's preemption evicts lower-priority pods on one node and *nominates* that node for the
preemptor (``status.nominatedNodeName``); only the same scheduler honours a nomination. When another
scheduler (the stock default scheduler next to the ``koordpy-scheduler`` profile) refills the room first,
the preemptor stays unschedulable, preempts again, and the two schedulers loop: each round evicts pods for
nothing. kube-scheduler calls the extender's preempt verb with the preemptor while its nomination is still
set; it never does so while victims on the nominated node are still terminating
(``PodEligibleToPreemptOthers``). So a preempt call for a pod whose ``nominatedNodeName`` is N means: it
preempted on N, the victims are gone, and N still does not fit: **N was lost**. From then on, for
``seconds``, N is dropped from that pod's preemption candidates.

A lost node is charged once per preemption: the same nomination seen again is not charged again (the
back-off is not prolonged by kube-scheduler retrying), and a node is charged anew only after it was offered
as a candidate again (a new preemption there may follow). Worked example (``seconds`` 120): at t=0 the pod
preempts on n1; at t=2 its preempt call says nominated n1 → n1 lost until 122, n2 offered; at t=4 nominated
n2 → n2 lost until 124; at t=6 nothing is offered (no preemption); at t=122 n1 is offered again.

Not guaranteed: state is per process and bounded (:data:`MAX_PODS`, least recently seen forgotten first);
a nomination kube-scheduler set before this process started counts as lost at its first call.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["MAX_PODS", "PreemptionBackoff"]

MAX_PODS = 4096
"""Pods whose back-off is remembered (least recently seen forgotten first)."""


@dataclass
class _PodBackoff:
    until: dict[str, float] = field(default_factory=dict)
    """node -> the instant its back-off ends."""
    charged: str = ""
    """The nomination already charged (not charged again until that node is offered again)."""


class PreemptionBackoff:
    """Per pod (by uid), the nodes it may not preempt on until their instant; ``seconds`` 0 disables it."""

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
        lost and is now charged for, or None."""
        if self.seconds <= 0 or not nominated or not uid:
            return None
        entry = self._entry(uid)
        if entry.charged == nominated:
            return None
        entry.charged = nominated
        entry.until[nominated] = now + self.seconds
        return nominated

    def blocked(self, uid: str, node: str, now: float) -> float | None:
        """The instant ``node``'s back-off for pod ``uid`` ends, or None when it may preempt there."""
        entry = self._pods.get(uid)
        if entry is None:
            return None
        until = entry.until.get(node)
        if until is None:
            return None
        if now >= until:
            del entry.until[node]
            return None
        return until

    def offered(self, uid: str, nodes: Iterable[str]) -> None:
        """``nodes`` were offered as candidates: a nomination of one of them is a new preemption."""
        entry = self._pods.get(uid)
        if entry is not None and entry.charged and entry.charged in set(nodes):
            entry.charged = ""

    def forget(self, uid: str) -> None:
        """The pod was bound or deleted."""
        self._pods.pop(uid, None)

    def __len__(self) -> int:
        return len(self._pods)
