"""The plugin README's configuration example is valid, complete and says what the README claims."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

import koordpy.scheduler.plugins.loadaware as loadaware
from koordpy.config import AggregatedArgs, LoadAwareSchedulingArgs, SchedulerConfiguration, validate

README = Path(loadaware.__file__).with_name("README.md")


def _yaml_blocks() -> list[Any]:
    text = README.read_text(encoding="utf-8")
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", text, flags=re.S)]


def _example() -> dict[str, Any]:
    configs = [b for b in _yaml_blocks() if isinstance(b, dict) and b.get("kind") == "SchedulerConfiguration"]
    assert len(configs) == 1, "README must hold exactly one SchedulerConfiguration example"
    return configs[0]


def _aliases(model: type[LoadAwareSchedulingArgs] | type[AggregatedArgs]) -> set[str]:
    return {field.alias or name for name, field in model.model_fields.items()} - {"apiVersion", "kind"}


def test_readme_example_validates() -> None:
    cfg = validate(SchedulerConfiguration, _example(), "README.md")
    args = cfg.load_aware
    assert args.usage_thresholds == {"cpu": 65, "memory": 95}
    assert args.prod_usage_thresholds == {"cpu": 55, "memory": 90}
    assert args.dominant_resource_weight == 1
    assert args.aggregated is not None and args.aggregated.filter_enabled and args.aggregated.score_enabled
    assert args.aggregated.usage_aggregated_duration == 300.0
    assert args.estimated_seconds_after_initialized == 120


def test_readme_example_spells_out_every_field() -> None:
    example = _example()["loadAware"]
    assert set(example) == _aliases(LoadAwareSchedulingArgs)
    assert set(example["aggregated"]) == _aliases(AggregatedArgs)


def test_readme_field_table_lists_every_field() -> None:
    rows = re.findall(r"^\| `([A-Za-z]+)` \|", README.read_text(encoding="utf-8"), flags=re.M)
    assert set(rows) == _aliases(LoadAwareSchedulingArgs)
