"""The implicit and explicit per-workload limits (Koordinator GetMaxMigrating / GetMaxUnavailable)."""

from __future__ import annotations

import pytest

from koordpy.descheduler.limits import scaled_value, workload_limit


@pytest.mark.parametrize(
    ("replicas", "configured", "expected"),
    [
        # implicit rule (nothing configured)
        (0, None, 0),  # < 4 -> 1, capped at 0 replicas -> 0
        (1, None, 1),  # < 4 -> 1
        (3, None, 1),  # < 4 -> 1
        (4, None, 2),  # 4..10 -> 2
        (10, None, 2),  # 4..10 -> 2
        (11, None, 1),  # > 10 -> 10 % of 11 = 1.1, floor 1
        (19, None, 1),  # 10 % of 19 = 1.9, floor 1
        (20, None, 2),  # 10 % of 20 = 2
        (105, None, 10),  # 10 % of 105 = 10.5, floor 10
        # explicit integers
        (5, 3, 3),  # as is
        (5, 9, 5),  # capped at replicas
        (5, 0, 1),  # 0 -> 1
        # explicit percents, rounded down
        (10, "25%", 2),  # 25 % of 10 = 2.5, floor 2
        (3, "25%", 1),  # 25 % of 3 = 0.75, floor 0 -> 1
        (8, "50%", 4),  # 50 % of 8 = 4
        (8, "200%", 8),  # 16, capped at 8
    ],
)
def test_workload_limit(replicas: int, configured: int | str | None, expected: int) -> None:
    assert workload_limit(replicas, configured) == expected


def test_scaled_value_rejects_a_string_without_percent() -> None:
    with pytest.raises(ValueError, match="percent"):
        scaled_value("10", 5)
