"""When a hot node counts as abnormal: a state machine, value in and value out, with the time passed in.

Koordinator's ``anomaly.BasicDetector`` (pkg/descheduler/utils/anomaly, v1.8) per node and kind (node usage,
Prod usage), one observation per round:

* **ok**: a hot round adds one to ``abnormal`` (and zeroes ``normal``); when ``abnormal`` exceeds
  ``consecutiveAbnormalities`` the node turns **abnormal** for ``timeout`` seconds, its counters cleared.
  With ``consecutiveAbnormalities: 1`` a hot node is acted on in its first hot round (upstream skips the
  detector then): 1 acts at once, N >= 2 in the (N+1)-th consecutive hot round, as upstream;
* **abnormal**: acted on while it is hot; it turns **ok** (counters cleared) when ``timeout`` has passed since
  it turned abnormal, or after more than ``consecutiveNormalities`` consecutive rounds that were not hot;
* an idle round (the node is under its low thresholds) resets it to **ok**, and so does a move that brings it
  back under its high thresholds (upstream's ``Reset``);
* a state not observed for ``detectorCacheTimeout`` is forgotten (upstream's cache expiry; 0: never).

Difference from upstream, on purpose: "consecutive" is consecutive. Upstream marks a node only in rounds where
it is hot (and resets it only when it is idle), so hot rounds separated by merely-normal rounds add up to an
anomaly; here a round in which the node's NodeMetric is fresh and it is neither hot nor idle counts as normal
(``abnormal`` back to 0). A round that cannot judge the node (no fresh NodeMetric) changes nothing. Upstream's
``tryMarkNodesAsNormal`` after each eviction pass is left out: it always follows a hot mark of the same round,
so its normality can never accumulate.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from koordpy.config.lownodeload import AnomalyCondition

__all__ = ["AnomalyState", "Observation", "acts", "observe", "reset"]


class Observation(Enum):
    """What one round saw of a node (for one kind: node usage or Prod usage)."""

    HOT = "hot"
    NORMAL = "normal"
    IDLE = "idle"


@dataclass(frozen=True, slots=True)
class AnomalyState:
    """One node's detector. ``abnormal_until`` is set while abnormal; ``seen`` is when it was last observed."""

    abnormal_until: float | None
    abnormal: int
    """Consecutive hot rounds (counted anew when the state changes)."""
    normal: int
    """Consecutive rounds that were not hot (counted anew when the state changes)."""
    seen: float

    @property
    def is_abnormal(self) -> bool:
        return self.abnormal_until is not None


def _current(state: AnomalyState | None, now: float, condition: AnomalyCondition, cache_timeout: float) -> AnomalyState:
    """The state as of ``now``, before this round's observation (expired entries and timeouts applied)."""
    if state is None or (cache_timeout > 0 and now - state.seen > cache_timeout):
        return AnomalyState(None, 0, 0, now)
    if state.abnormal_until is not None and (
        state.abnormal_until < now or state.normal > condition.consecutive_normalities
    ):
        return AnomalyState(None, 0, 0, now)
    return state


def observe(
    state: AnomalyState | None,
    seen: Observation,
    now: float,
    condition: AnomalyCondition,
    cache_timeout: float,
) -> AnomalyState | None:
    """The state after one round's observation; None for a pristine ok state (nothing to keep)."""
    current = _current(state, now, condition, cache_timeout)
    if seen is Observation.IDLE:
        return None
    if seen is Observation.HOT:
        abnormal, normal = current.abnormal + 1, 0
        if current.abnormal_until is None and abnormal > condition.consecutive_abnormalities:
            return AnomalyState(now + condition.timeout, 0, 0, now)
        return AnomalyState(current.abnormal_until, abnormal, normal, now)
    abnormal, normal = 0, current.normal + 1
    if current.abnormal_until is None:
        return None  # ok and not hot: the consecutive count starts over, nothing else to keep
    if normal > condition.consecutive_normalities:
        return None
    return AnomalyState(current.abnormal_until, abnormal, normal, now)


def acts(state: AnomalyState | None, condition: AnomalyCondition) -> bool:
    """Whether a node that is hot this round (``state`` after :func:`observe`) is acted on."""
    return condition.consecutive_abnormalities == 1 or (state is not None and state.is_abnormal)


def reset() -> AnomalyState | None:
    """A move brought the node back under its high thresholds: it is ok again (nothing to keep)."""
    return None
