"""The ``gang:`` section: Koordinator CoschedulingArgs names and defaults, koordpy's binder fields, field paths."""

from __future__ import annotations

import pytest

from koordpy.config.errors import ConfigError, validate
from koordpy.config.gang import CoschedulingArgs
from koordpy.config.scheduler import SchedulerConfiguration


def test_defaults_are_koordinators() -> None:
    args = validate(SchedulerConfiguration, {}).gang
    assert (args.default_timeout, args.default_match_policy, args.controller_workers) == (600.0, "once-satisfied", 1)
    assert (args.skip_check_schedule_cycle, args.enable_preemption, args.aware_network_topology) == (
        False,
        False,
        False,
    )
    # koordpy's own: binder timeout 660 s, answered 5 s early → a bind is held at most 655 s.
    assert args.longest_hold_seconds == 655.0
    assert args.requeue_signal_ref is None  # no requeue signal unless named (the chart names its own)
    named = validate(SchedulerConfiguration, {"gang": {"requeueSignal": "koordpy-system/koordpy-gang-requeue"}})
    assert named.gang.requeue_signal_ref == ("koordpy-system", "koordpy-gang-requeue")


def test_koordinator_args_paste_unchanged() -> None:
    raw = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "CoschedulingArgs",
        "defaultTimeout": "30m",
        "controllerWorkers": 2,
        "skipCheckScheduleCycle": True,
        "defaultMatchPolicy": "waiting-and-running",
    }
    args = validate(CoschedulingArgs, raw)
    assert (args.default_timeout, args.default_match_policy) == (1800.0, "waiting-and-running")


@pytest.mark.parametrize(
    ("gang", "path", "fragment"),
    [
        ({"defaultTimeout": 0}, "gang.defaultTimeout", "greater than 0"),
        ({"defaultTimeout": "soon"}, "gang.defaultTimeout", "not a duration"),
        ({"defaultMatchPolicy": "always"}, "gang.defaultMatchPolicy", "once-satisfied"),
        ({"controllerWorkers": 0}, "gang.controllerWorkers", "greater than or equal to 1"),
        ({"enablePreemption": True}, "gang.enablePreemption", "not built"),
        ({"awareNetworkTopology": True}, "gang.awareNetworkTopology", "not built"),
        ({"binderHttpTimeoutSeconds": 10, "binderAnswerMarginSeconds": 10}, "gang.binderAnswerMarginSeconds", "below"),
        ({"defaultTimout": "5m"}, "gang.defaultTimout", "Extra inputs"),
        ({"requeueSignal": "koordpy-gang-requeue"}, "gang.requeueSignal", "<namespace>/<name>"),
        ({"requeueSignal": "Koordpy/x"}, "gang.requeueSignal", "label"),
        ({"requeueSignal": "koordpy-system/"}, "gang.requeueSignal", "non-empty"),
        ({"requeueSignal": "koordpy-system/X_y"}, "gang.requeueSignal", "subdomain"),
    ],
)
def test_errors_name_the_field(gang: dict[str, object], path: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate(SchedulerConfiguration, {"gang": gang}, "sched.yaml")
    problems = dict(info.value.problems)
    assert path in problems, problems
    assert fragment in problems[path]
    assert str(info.value).startswith("sched.yaml: ")


def test_bounds_show_in_json_schema() -> None:
    props = CoschedulingArgs.model_json_schema(by_alias=True)["properties"]
    assert props["controllerWorkers"]["minimum"] == 1
    assert props["binderAnswerMarginSeconds"]["minimum"] == 0.5
    assert props["binderHttpTimeoutSeconds"]["exclusiveMinimum"] == 0
    assert props["defaultTimeout"]["exclusiveMinimum"] == 0
