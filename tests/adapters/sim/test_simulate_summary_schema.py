"""Every ``koordpy simulate`` mode writes a ``summary.json`` the one shipped JSON Schema accepts; the schema
refuses other layouts (snake_case keys, ``results[]``, another mode's keys, formatted numbers);
docs/simulate.md's key tables are the schema's."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from koordpy.cli.main import app
from koordpy.sim.summary import SCHEMA_PATH, load_schema

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "simulate.md"
EXAMPLE = ROOT / "src" / "koordpy" / "examples" / "scenario.yaml"

# one big pod that never fits among the small ones: its latencies are null
STARVED: dict[str, Any] = {
    "kind": "StarvingScenario",
    "name": "schema-starving",
    "seed": 2,
    "durationSeconds": 900,
    "nodes": {"count": 2, "allocatable": {"cpu": "4", "memory": "16Gi"}},
    "smallPods": {
        "ratePerSecond": 0.2,
        "endSeconds": 900,
        "lifetimeSeconds": [60, 120],
        "shapes": [{"requests": {"cpu": "1", "memory": "1Gi"}}],
    },
    "bigJobs": [
        {
            "name": "big",
            "arrivalSeconds": 600,
            "requests": {"cpu": "4"},
            "lifetimeSeconds": 60,
            "priority": 1000,
            "priorityClassName": "high",
        }
    ],
}

MODES: dict[str, list[str]] = {
    "default": [str(EXAMPLE), "--compare", "baseline"],
    "gangs": ["gangs", "--compare", "baseline"],
    "koordpy only": [str(EXAMPLE)],
    "migration": ["--migration"],
    "starving": ["--starving"],
    "starving, nothing started": ["--starving", "STARVED"],
}


def _run(tmp_path: Path, args: list[str]) -> dict[str, Any]:
    if "STARVED" in args:
        path = tmp_path / "starved.yaml"
        path.write_text(yaml.safe_dump(STARVED), encoding="utf-8")
        args = [str(path) if a == "STARVED" else a for a in args]
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["simulate", *args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return document


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture(scope="module")
def summaries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    return {mode: _run(tmp_path_factory.mktemp("summary"), args) for mode, args in MODES.items()}


def _numbers(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    return [value]


@pytest.mark.parametrize("mode", list(MODES))
def test_every_mode_writes_a_summary_the_schema_accepts(
    mode: str, summaries: dict[str, dict[str, Any]], validator: jsonschema.Draft202012Validator
) -> None:
    document = summaries[mode]
    assert [e.message for e in validator.iter_errors(document)] == []
    assert list(document)[:8] == [
        "apiVersion",
        "kind",
        "scenarioKind",
        "scenario",
        "seed",
        "simulatedSeconds",
        "nodes",
        "pods",
    ]
    assert list(document)[-2:] == ["warnings", "policies"]
    assert all(body["policy"] == name for name, body in document["policies"].items())
    # no figure is a formatted string: every string in the document is a name or a note
    texts = [v for v in _numbers(document) if isinstance(v, str)]
    assert [t for t in texts if re.fullmatch(r"-?[\d,]+(\.\d+)?%?", t)] == []


def test_the_modes_cover_every_kind_and_nulls(summaries: dict[str, dict[str, Any]]) -> None:
    kinds = {d["scenarioKind"] for d in summaries.values()}
    assert kinds == {"Scenario", "MigrationScenario", "StarvingScenario"}
    assert "gangJobs" in summaries["gangs"]["policies"]["koordpy"]
    assert "gangJobs" not in summaries["default"]["policies"]["koordpy"]
    starved = summaries["starving, nothing started"]["policies"]["baseline"]
    assert starved["bigJobsStarted"] == 0 and starved["bigJobStartLatencyP50Seconds"] is None
    assert list(summaries["koordpy only"]["policies"]) == ["koordpy"]


def _bad(document: dict[str, Any], change: Any) -> dict[str, Any]:
    copied = copy.deepcopy(document)
    change(copied)
    return copied


def _first_policy(document: dict[str, Any]) -> dict[str, Any]:
    policy: dict[str, Any] = next(iter(document["policies"].values()))
    return policy


def test_the_schema_refuses_other_layouts(
    summaries: dict[str, dict[str, Any]], validator: jsonschema.Draft202012Validator
) -> None:
    default, migration, starving = summaries["default"], summaries["migration"], summaries["starving"]
    refused = {
        "a formatted number": _bad(default, lambda d: _first_policy(d).update(hotNodeMinutes="1,850.5")),
        "no apiVersion": _bad(default, lambda d: d.pop("apiVersion")),
        "another kind": _bad(migration, lambda d: d.update(kind="MigrationScenario")),
        "a snake_case key": _bad(migration, lambda d: _first_policy(d).update(seconds_to_finish=194.0)),
        "results instead of policies": _bad(starving, lambda d: d.update(results=list(d.pop("policies").values()))),
        "another mode's key": _bad(default, lambda d: d.update(drained=3)),
        "a missing mode key": _bad(migration, lambda d: d.pop("followedWorkload")),
        "half the gang keys": _bad(summaries["gangs"], lambda d: _first_policy(d).pop("gangHolds")),
        "a null count": _bad(starving, lambda d: _first_policy(d).update(bigJobs=None)),
    }
    accepted = [name for name, document in refused.items() if validator.is_valid(document)]
    assert accepted == []


def _type(prop: dict[str, Any]) -> str:
    if "const" in prop or "enum" in prop:
        return "string"
    kind = prop["type"]
    return " or ".join(kind) if isinstance(kind, list) else str(kind)


def _schema_tables() -> dict[str, list[tuple[str, str, str]]]:
    schema = load_schema()
    policies = {
        "Scenario": "scenarioPolicy",
        "MigrationScenario": "migrationPolicy",
        "StarvingScenario": "starvingPolicy",
    }

    def rows(props: dict[str, Any]) -> list[tuple[str, str, str]]:
        return [(f"`{key}`", _type(prop), prop["description"]) for key, prop in props.items()]

    tables = {"Every document": rows(schema["properties"])}
    for branch in schema["allOf"]:
        kind = branch["if"]["properties"]["scenarioKind"]["const"]
        own = {k: v for k, v in branch["then"]["properties"].items() if k != "policies"}
        tables[f"`scenarioKind: {kind}`"] = rows(own)
        tables[f"`policies.<name>` of a `{kind}`"] = rows(schema["$defs"][policies[kind]]["properties"])
    return tables


def _doc_section() -> str:
    text = DOC.read_text(encoding="utf-8")
    assert "\n## `summary.json`\n" in text, "docs/simulate.md: no summary.json section"
    return text.split("\n## `summary.json`\n", 1)[1].split("\n## ", 1)[0]


def test_the_docs_tables_are_the_schemas() -> None:
    documented = {}
    for part in _doc_section().split("\n### ")[1:]:
        title, body = part.split("\n", 1)
        documented[title] = [
            (key, kind, meaning)
            for key, kind, meaning in re.findall(r"^\| (`[^`]+`) \| ([^|]+) \| (.+) \|$", body, flags=re.M)
        ]
    assert documented == _schema_tables()


def test_the_docs_example_is_the_bundled_drains_summary(summaries: dict[str, dict[str, Any]]) -> None:
    block = re.search(r"```json\n(.*?)```", _doc_section(), flags=re.S)
    assert block is not None, "docs/simulate.md: no json example in the summary.json section"
    assert json.loads(block.group(1)) == summaries["migration"]


def test_the_schema_ships_inside_the_package() -> None:
    assert SCHEMA_PATH.parent == ROOT / "src" / "koordpy" / "sim"
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert '"**/*.json"' in pyproject.split("[tool.setuptools.package-data]", 1)[1].split("\n[", 1)[0]
