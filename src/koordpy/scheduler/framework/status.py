"""Plugin outcomes, with the Kubernetes scheduler framework's meanings.

* ``UNSCHEDULABLE``: this node fails now; preemption or a cluster change may help.
* ``UNSCHEDULABLE_AND_UNRESOLVABLE``: nothing on this node will help (preemption skips it).
* ``WAIT``: not yet (a gang waiting for quorum).
* ``ERROR``: an internal problem; the pod's attempt fails and is retried.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["Code", "Status"]


class Code(enum.IntEnum):
    SUCCESS = 0
    UNSCHEDULABLE = 1
    UNSCHEDULABLE_AND_UNRESOLVABLE = 2
    WAIT = 3
    ERROR = 4
    SKIP = 5


@dataclass(frozen=True, slots=True)
class Status:
    code: Code = Code.SUCCESS
    reason: str = ""
    plugin: str = ""
    detail: str = ""
    """The reason with the numbers behind it, for people; ``reason`` stays the fixed string."""

    @property
    def is_success(self) -> bool:
        return self.code in (Code.SUCCESS, Code.SKIP)

    @property
    def unresolvable(self) -> bool:
        return self.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
