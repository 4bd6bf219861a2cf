"""Fuzz the offline tools' readers and converters in process: each raises only its one input error.

* ``parse_text`` (the file reader behind every ``-f``) raises only ``InputError``;
* ``explain`` raises only ``ExplainError``; ``offline_plan`` only ``OfflineError``;
* ``validate`` of a Scenario / AgentConfiguration / SchedulerConfiguration only ``ConfigError``.

Inputs are the hostile-suite base documents with one field replaced by a hostile value (or a
random shape), plus free-form YAML-ish text. Bounded: explicit ``max_examples``, 5 CPU seconds per
example and derandomised runs, so the tier does the same work every time. The fixed cases of
:mod:`koordpy_testkit.hostile` run first as explicit examples.

Not covered here: ``1e99999999``-style quantities (the bounded quantity parser's own fuzz tier).
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from koordpy.agent.policy.offline import OfflineError, offline_plan
from koordpy.cli.files import InputError, parse_text
from koordpy.config.agent import AgentConfiguration
from koordpy.config.errors import ConfigError, validate
from koordpy.config.scenario import Scenario
from koordpy.config.scheduler import SchedulerConfiguration
from koordpy.scheduler.explain import ExplainError, explain
from koordpy_testkit.bounds import cpu_bounded
from koordpy_testkit.hostile import (
    ALIAS_BOMB,
    LONG_INT,
    NOW,
    base_agent_dump,
    base_cluster_dump,
    base_scenario,
    explain_cases,
    set_path,
)

BOUNDED = settings(
    max_examples=100,
    deadline=None,  # wall-clock time; each example is bounded in CPU seconds (cpu_bounded)
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
NOW_EPOCH = 1_795_255_260.0  # 2026-11-21T10:01:00Z (NOW)
SCHEDULER = validate(SchedulerConfiguration, {})

QUANTITY_LIKE = st.sampled_from(
    ["1", "500m", "1Gi", "1e400", "-1", "1e-400", ".5", "1.5Ki", "+3", "0", "1E3", "१", "12345678901234567890Ei", "Gi"]
)
LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**80), max_value=10**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    QUANTITY_LIKE,
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)


def _paths(document: Any, prefix: str = "") -> list[str]:
    """Every ``a.b[0].c`` path in a document (the places a mutation may hit)."""
    out = [prefix] if prefix else []
    if isinstance(document, dict):
        for key, value in document.items():
            out += _paths(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(document, list):
        for i, value in enumerate(document):
            out += _paths(value, f"{prefix}[{i}]")
    return out


def mutated(base: Any) -> st.SearchStrategy[Any]:
    return st.builds(set_path, st.just(base), st.sampled_from(_paths(base)), VALUES)


CLUSTER = base_cluster_dump()
AGENT_DUMP = {"kind": "List", "apiVersion": "v1", "items": base_agent_dump()}
SCENARIO = base_scenario()


@BOUNDED
@given(st.text(alphabet=st.sampled_from(list("{}[]:,-&*!|>'\"# \n\tabk01.eE+")), max_size=300))
@example(ALIAS_BOMB)
@example("[" * 5000)
@example("x: " + LONG_INT)
@example("a: !!binary aGk=\n")
@cpu_bounded(5)
def test_reader_raises_only_input_error(text: str) -> None:
    for json_only in (False, True):
        try:
            parse_text("fuzz.yaml", text, json_only=json_only)
        except InputError as exc:
            assert str(exc).startswith("fuzz.yaml: ")


@BOUNDED
@given(mutated(CLUSTER))
@cpu_bounded(5)
def test_explain_raises_only_explain_error(document: Any) -> None:
    try:
        explain([("dump.yaml", document)], "default/p", SCHEDULER, NOW_EPOCH)
    except ExplainError as exc:
        assert str(exc).startswith(("dump.yaml", "--pod"))


def test_explain_fixed_cases_through_the_reader() -> None:
    """The hostile suite's explain files, read and explained in process (no file-level specials)."""
    checked = 0
    for case in explain_cases():
        if case.needs_bounded_quantities or "dump.yaml" not in case.files or len(case.files) != 1:
            continue
        try:
            documents = [("dump.yaml", d) for d in parse_text("dump.yaml", case.files["dump.yaml"].decode())]
            explain(documents, "default/p", SCHEDULER, NOW_EPOCH)
        except (InputError, ExplainError) as exc:
            assert str(exc).startswith(("dump.yaml", "--pod"))
        checked += 1
    assert checked >= 60


@BOUNDED
@given(mutated(AGENT_DUMP))
@cpu_bounded(5)
def test_offline_plan_raises_only_offline_error(document: Any) -> None:
    try:
        offline_plan([("dump.yaml", document)], "n1", NOW_EPOCH)
    except OfflineError as exc:
        assert str(exc).startswith(("dump.yaml", "--node"))


@BOUNDED
@given(mutated(SCENARIO))
@cpu_bounded(5)
def test_scenario_validation_raises_only_config_error(document: Any) -> None:
    try:
        validate(Scenario, document, "s.yaml")
    except ConfigError as exc:
        assert str(exc).startswith("s.yaml: ") and exc.problems


@BOUNDED
@given(
    st.dictionaries(
        st.sampled_from(["collectIntervalSeconds", "stateDir", "qos", "nodeMetric", "server", "logLevel"]),
        VALUES,
        max_size=4,
    ),
    st.dictionaries(st.sampled_from(["loadAware", "extender", "kind"]), VALUES, max_size=3),
)
@cpu_bounded(5)
def test_config_validation_raises_only_config_error(agent: dict[str, Any], scheduler: dict[str, Any]) -> None:
    for model, data in ((AgentConfiguration, agent), (SchedulerConfiguration, scheduler)):
        try:
            validate(model, data, "c.yaml")
        except ConfigError as exc:
            assert str(exc).startswith("c.yaml: ") and exc.problems


def test_now_matches_the_hostile_suite() -> None:
    from koordpy.model.durations import parse_rfc3339

    assert parse_rfc3339(NOW) == NOW_EPOCH
