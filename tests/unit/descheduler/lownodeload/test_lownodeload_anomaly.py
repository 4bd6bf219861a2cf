"""The anomaly state machine: value in, value out, time passed in.

Translated from Koordinator v1.8.0 (``low_node_load_test.go``): ``Test_filterRealAbnormalNodes`` (its four cases),
``Test_resetNodesAsNormal`` and ``Test_tryMarkNodesAsNormal`` (the normal rounds an abnormal node needs; upstream
marks them after its eviction pass, here a round that finds the node not hot marks one).
"""

from __future__ import annotations

import pytest

from koordpy.config.lownodeload import AnomalyCondition
from koordpy.descheduler.lownodeload.anomaly import AnomalyState, Observation, acts, observe, reset

HOT, NORMAL, IDLE = Observation.HOT, Observation.NORMAL, Observation.IDLE
T0 = 1000.0
CACHE = 300.0


def rounds(seen: list[Observation], condition: AnomalyCondition, start: AnomalyState | None = None) -> list[bool]:
    """Whether the node is acted on in each round (10 s apart), hot or not."""
    state = start
    out = []
    for i, observation in enumerate(seen):
        state = observe(state, observation, T0 + 10 * i, condition, CACHE)
        out.append(observation is HOT and acts(state, condition))
    return out


@pytest.mark.parametrize(
    ("abnormalities", "acted"),
    [
        # consecutiveAbnormalities 1: acted on at once (upstream skips the detector).
        pytest.param(1, [True, True, True], id="1 acts at once"),
        # 2: abnormal when the count exceeds 2, the third hot round ("2 times and detect 2 times" + 1).
        pytest.param(2, [False, False, True], id="2 acts in the third round"),
        # 5 (the default): the sixth.
        pytest.param(5, [False] * 5 + [True], id="5 acts in the sixth round"),
    ],
)
def test_consecutive_hot_rounds(abnormalities: int, acted: list[bool]) -> None:
    condition = AnomalyCondition(60.0, abnormalities, 3)
    assert rounds([HOT] * len(acted), condition) == acted


def test_mix_of_abnormal_and_normal_nodes() -> None:
    # Test_filterRealAbnormalNodes "mix": node-2 was hot twice before, node-1 never; both hot now (2 abnormalities):
    # only node-2 is acted on.
    condition = AnomalyCondition(60.0, 2, 1)
    node2 = observe(observe(None, HOT, T0, condition, CACHE), HOT, T0 + 10, condition, CACHE)
    node1 = observe(None, HOT, T0 + 20, condition, CACHE)
    node2 = observe(node2, HOT, T0 + 20, condition, CACHE)
    assert (acts(node1, condition), acts(node2, condition)) == (False, True)


def test_a_normal_round_breaks_the_count() -> None:
    # koordpy: hot, hot, normal, hot, hot: the count starts over after the normal round (upstream: the five rounds
    # give four hot marks in a row as far as its detector sees, abnormal at the third).
    condition = AnomalyCondition(60.0, 2, 3)
    assert rounds([HOT, HOT, NORMAL, HOT, HOT], condition) == [False, False, False, False, False]
    assert rounds([HOT, HOT, NORMAL, HOT, HOT, HOT], condition)[-1] is True


def test_idle_round_resets_and_a_move_resets() -> None:
    # Test_resetNodesAsNormal: abnormal after 2 + 1 hot rounds; a reset (the node went idle, or a move brought it
    # under its high thresholds) and it is not acted on in its next hot round.
    condition = AnomalyCondition(60.0, 2, 3)
    state = None
    for i in range(3):
        state = observe(state, HOT, T0 + 10 * i, condition, CACHE)
    assert acts(state, condition)
    assert observe(state, IDLE, T0 + 30, condition, CACHE) is None
    assert reset() is None
    assert not acts(observe(reset(), HOT, T0 + 40, condition, CACHE), condition)


def test_abnormal_until_more_than_consecutive_normalities() -> None:
    # Test_tryMarkNodesAsNormal: consecutiveNormalities 2: two normal rounds keep it abnormal, the third makes it ok.
    condition = AnomalyCondition(600.0, 2, 2)
    state = None
    for i in range(3):
        state = observe(state, HOT, T0 + 10 * i, condition, CACHE)
    assert state is not None and state.is_abnormal
    state = observe(state, NORMAL, T0 + 30, condition, CACHE)
    state = observe(state, NORMAL, T0 + 40, condition, CACHE)
    assert state is not None and state.is_abnormal and state.normal == 2
    assert observe(state, NORMAL, T0 + 50, condition, CACHE) is None


def test_abnormal_for_timeout_then_counted_again() -> None:
    # timeout 60 s: abnormal at T0 + 20 (third hot round) until T0 + 80; at T0 + 90 the state is ok again with the
    # count cleared, so the node must be hot for 2 + 1 rounds more (T0 + 90, 100, 110) to be acted on again.
    condition = AnomalyCondition(60.0, 2, 3)
    acted = rounds([HOT] * 12, condition)
    assert acted == [False, False, True, True, True, True, True, True, True, False, False, True]


def test_forgotten_after_the_cache_timeout() -> None:
    condition = AnomalyCondition(60.0, 2, 3)
    state = observe(observe(None, HOT, T0, condition, CACHE), HOT, T0 + 10, condition, CACHE)
    assert state == AnomalyState(None, 2, 0, T0 + 10)
    # 301 s later (cache 300 s) the two hot rounds are forgotten: this one is the first.
    assert observe(state, HOT, T0 + 10 + 301, condition, CACHE) == AnomalyState(None, 1, 0, T0 + 311)
    # cache 0: never forgotten.
    assert acts(observe(state, HOT, T0 + 10_000, condition, 0.0), condition)
