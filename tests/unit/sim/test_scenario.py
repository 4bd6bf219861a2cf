"""Scenario schema: defaults, the bundled default, and errors that name the field path."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from koordpy.config.errors import ConfigError, validate
from koordpy.config.scenario import Scenario
from koordpy.sim.run import DEFAULT_SCENARIO


def test_bundled_default_is_valid_and_about_100_nodes_6_hours() -> None:
    scenario = validate(Scenario, yaml.safe_load(DEFAULT_SCENARIO.read_text()))
    assert sum(p.count for p in scenario.node_pools) == 100
    assert scenario.duration == 6 * 3600
    patterns = {w.usage.pattern for w in scenario.workloads}
    assert {"diurnal", "bursty"} <= patterns


def test_defaults_and_units(small: Scenario) -> None:
    assert small.duration == 3600.0
    assert small.node_pools[0].allocatable["cpu"] == 16000  # millicores
    assert small.workloads[0].usage.cpu.mean == 2500
    assert small.workloads[0].usage.memory.mean == 1024**3
    assert small.node_metric.report_interval == 60.0
    assert small.node_metric.lag == 10.0
    assert small.qos.interval == 30.0
    # hot threshold defaults to the load-aware cpu threshold (Koordinator default 65)
    assert small.hot_threshold == 65


def _problems(raw: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        validate(Scenario, raw, "s.yaml")
    assert str(info.value).startswith("s.yaml: ")
    return info.value.problems


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda r: r["workloads"][1]["usage"]["cpu"].update(mean="lots"), "workloads[1].usage.cpu.mean"),
        (lambda r: r["workloads"][0].update(replicas=3), "workloads[0].replicas"),
        (lambda r: r["nodePools"][0].update(count=0), "nodePools[0].count"),
        (lambda r: r["nodePools"][0]["allocatable"].pop("memory"), "nodePools[0].allocatable.memory"),
        (lambda r: r["workloads"][0]["limits"].update(cpu="1"), "workloads[0].limits.cpu"),
        (lambda r: r.update(nodeMetric={"reportInterval": "45s"}), "nodeMetric.reportInterval"),
        (lambda r: r.update(kind="Scenarios"), "kind"),
        (lambda r: r.update(duration="soon"), "duration"),
        (lambda r: r["workloads"][1]["lifetime"].update(max="1m"), "workloads[1].lifetime.max"),
        (lambda r: r["workloads"][1].update(name="svc"), "workloads[1].name"),
        (lambda r: r["workloads"][0]["arrivals"].update(end="2h"), "workloads[0].arrivals"),
        (lambda r: r.update(scheduler={"loadAware": {"usageThresholds": {"cpu": 170}}}), "scheduler.loadAware"),
    ],
)
def test_errors_name_the_field_path(small_raw: dict[str, Any], mutate: Any, path: str) -> None:
    raw = small_raw
    mutate(raw)
    paths = [p for p, _ in _problems(raw)]
    assert any(p == path or p.startswith(path + ".") for p in paths), paths
