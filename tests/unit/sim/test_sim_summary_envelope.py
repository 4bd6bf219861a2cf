"""summary_envelope: the one layout of summary.json, its order and its refusals."""

from __future__ import annotations

import pytest

from koordpy.sim.summary import API_VERSION, KIND, summary_envelope


def test_the_envelope_wraps_the_modes_keys_and_the_runs_in_order() -> None:
    document = summary_envelope(
        "MigrationScenario",
        "drain",
        seed=7,
        simulated_seconds=194,
        nodes=12,
        pods=30,
        policies=[{"policy": "arbitration", "jobs": 3}, {"policy": "evict-all", "jobs": 3}],
        extra={"drained": 3},
    )
    assert list(document) == [
        "apiVersion",
        "kind",
        "scenarioKind",
        "scenario",
        "seed",
        "simulatedSeconds",
        "nodes",
        "pods",
        "drained",
        "warnings",
        "policies",
    ]
    assert (
        (document["apiVersion"], document["kind"])
        == (API_VERSION, KIND)
        == ("koordpy.io/v1alpha1", "SimulationSummary")
    )
    assert document["simulatedSeconds"] == 194.0 and isinstance(document["simulatedSeconds"], float)
    assert list(document["policies"]) == ["arbitration", "evict-all"] and document["warnings"] == []


def _document(policies: list[dict[str, object]], extra: dict[str, object] | None = None) -> dict[str, object]:
    return summary_envelope(
        "Scenario", "s", seed=1, simulated_seconds=1.0, nodes=1, pods=1, policies=policies, extra=extra
    )


def test_a_repeated_run_name_or_an_envelope_key_is_refused() -> None:
    with pytest.raises(ValueError, match="repeated names"):
        _document([{"policy": "a"}, {"policy": "a"}])
    with pytest.raises(ValueError, match="envelope keys \\['seed'\\]"):
        _document([{"policy": "a"}], extra={"seed": 2})
