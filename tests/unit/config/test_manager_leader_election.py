"""``leaderElection`` of the manager's configuration: client-go's ``NewLeaderElector`` checks (each duration
positive, ``leaseDuration > renewDeadline > 1.2 x retryPeriod``), each problem reported with its field
path, all of them at once."""

from __future__ import annotations

import pytest

from koordpy.config.errors import ConfigError, validate
from koordpy.config.manager import ManagerConfiguration, leader_election_problems


def election(**fields: str) -> dict[str, object]:
    return {"leaderElection": fields}


def test_the_defaults_are_client_gos() -> None:
    settings = validate(ManagerConfiguration, {}).leader_election
    assert (settings.lease_duration_seconds, settings.renew_deadline_seconds, settings.retry_period_seconds) == (
        15.0,
        10.0,
        2.0,
    )


@pytest.mark.parametrize(
    ("fields", "problems"),
    [
        (
            {"leaseDuration": "10s", "renewDeadline": "10s"},
            [("leaderElection.leaseDuration", "10s must be longer than renewDeadline (10s)")],
        ),
        (  # 1.2 x 5 s = 6 s >= 6 s
            {"renewDeadline": "6s", "retryPeriod": "5s"},
            [("leaderElection.renewDeadline", "6s must be longer than 1.2 x retryPeriod (6s)")],
        ),
        (  # both at once: 5 s is not longer than 5 s, nor than 1.2 x 5 s = 6 s
            {"leaseDuration": "5s", "renewDeadline": "5s", "retryPeriod": "5s"},
            [
                ("leaderElection.leaseDuration", "5s must be longer than renewDeadline (5s)"),
                ("leaderElection.renewDeadline", "5s must be longer than 1.2 x retryPeriod (6s)"),
            ],
        ),
        ({"retryPeriod": "0s"}, [("leaderElection.retryPeriod", "'0s' must be between 1s and 1h")]),
    ],
)
def test_a_misordered_election_names_its_fields(fields: dict[str, str], problems: list[tuple[str, str]]) -> None:
    with pytest.raises(ConfigError) as raised:
        validate(ManagerConfiguration, election(**fields))
    assert raised.value.problems == problems


def test_fractional_durations_are_accepted_in_order() -> None:
    """10.4 s > 10.2 s > 1.2 x 2 s = 2.4 s: valid (the Lease gets 11 whole seconds, rounded up)."""
    settings = validate(
        ManagerConfiguration, election(leaseDuration="10.4s", renewDeadline="10.2s", retryPeriod="2s")
    ).leader_election
    assert (settings.lease_duration_seconds, settings.renew_deadline_seconds) == (10.4, 10.2)


def test_non_positive_durations_are_refused_first() -> None:
    """What the elector itself is given (the configuration bounds each field to 1 s .. 1 h before)."""
    assert leader_election_problems(15, -1, 0) == [
        "renewDeadline: must be greater than zero, got -1s",
        "retryPeriod: must be greater than zero, got 0s",
    ]
    assert leader_election_problems(15, 10, 2) == []
