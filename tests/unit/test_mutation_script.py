"""scripts/mutation.py's accounting: how mutants are counted per file, when a listed equivalent survivor counts
and when its listing is stale, the score, and the ``[tool.mutmut]`` table each group runs with (the run
itself, mutmut over the groups, is ``make mutation``: docs/testing.md)."""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutation_script", ROOT / "scripts" / "mutation.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


mutation = load_script()

FILES = ("koordpy/a.py", "koordpy/b.py")
LISTED = {"name": "koordpy.a.x_f__mutmut_2", "change": ["- x = 0", "+ x = None"], "why": "read as a truth value"}


def classify(statuses: dict[str, str], changes: dict[str, list[str]], equivalent: dict[str, dict[str, object]]):  # type: ignore[no-untyped-def]
    return mutation.classify(FILES, statuses, changes, equivalent)


def test_mutants_are_counted_per_file_by_status() -> None:
    statuses = {
        "koordpy.a.x_f__mutmut_1": "killed",
        "koordpy.a.x_f__mutmut_10": "timeout",
        "koordpy.a.xǁCǁm__mutmut_1": "survived",
        "koordpy.b.x_g__mutmut_1": "no tests",
        "koordpy.b.x_g__mutmut_2": "segfault",
        "koordpy.b.x_g__mutmut_3": "suspicious",
    }
    changes = {name: ["- a", "+ b"] for name in statuses}
    scores, survivors, stale = classify(statuses, changes, {})
    a, b = scores
    assert (a.file, a.mutants, a.killed, a.timeout, a.survived, a.no_tests, a.equivalent) == (
        "koordpy/a.py",
        3,
        1,
        1,
        1,
        0,
        0,
    )
    assert (b.mutants, b.killed, b.no_tests, b.other) == (3, 1, 1, 1)
    assert round(a.score, 1) == 66.7  # (1 killed + 1 timeout) / 3
    assert round(b.score, 1) == 33.3  # 1 (segfault: killed) / 3; no tests and suspicious are not detected
    assert [s["name"] for s in survivors] == [
        "koordpy.a.xǁCǁm__mutmut_1",
        "koordpy.b.x_g__mutmut_1",
        "koordpy.b.x_g__mutmut_3",
    ]
    assert stale == []


def test_a_listed_survivor_with_its_change_is_equivalent_and_left_out_of_the_score() -> None:
    statuses = {"koordpy.a.x_f__mutmut_1": "killed", LISTED["name"]: "survived"}
    scores, survivors, stale = classify(statuses, {LISTED["name"]: ["- x = 0", "+ x = None"]}, {LISTED["name"]: LISTED})
    assert (scores[0].equivalent, scores[0].survived, scores[0].score) == (1, 0, 100.0)
    assert survivors == [] and stale == []


@pytest.mark.parametrize(
    ("status", "change", "why"),
    [
        ("killed", [], "listed as equivalent, but a test kills it"),
        ("timeout", [], "listed as equivalent, but a test kills it"),
        ("survived", ["- x = 0", "+ x = 1"], "listed with another change"),
    ],
)
def test_a_listing_that_no_longer_holds_is_stale(status: str, change: list[str], why: str) -> None:
    scores, survivors, stale = classify({LISTED["name"]: status}, {LISTED["name"]: change}, {LISTED["name"]: LISTED})
    assert [s["why"] for s in stale] == [why]
    assert scores[0].equivalent == 0
    if status == "survived":
        assert scores[0].survived == 1 and [s["name"] for s in survivors] == [LISTED["name"]]


def test_a_listing_of_a_mutant_mutmut_no_longer_makes_is_stale_and_other_files_listings_are_not_read() -> None:
    other = {**LISTED, "name": "koordpy.c.x_h__mutmut_1"}
    _, _, stale = classify({"koordpy.a.x_f__mutmut_1": "killed"}, {}, {LISTED["name"]: LISTED, other["name"]: other})
    assert [(s["name"], s["why"]) for s in stale] == [(LISTED["name"], "listed, but mutmut made no such mutant")]


def test_a_mutant_of_no_file_of_the_group_stops_the_run() -> None:
    with pytest.raises(SystemExit, match="koordpy.ab.x_f__mutmut_1 of no file of the group"):
        classify({"koordpy.ab.x_f__mutmut_1": "killed"}, {}, {})


def test_the_listed_equivalent_survivors_are_well_formed() -> None:
    listed = tomllib.loads((ROOT / "mutation" / "equivalent.toml").read_text())["mutant"]
    files = {f for group in mutation.GROUPS.values() for f in group.files}
    for entry in listed:
        assert set(entry) == {"name", "change", "why"}, entry
        assert mutation.file_of(entry["name"], {mutation.module_of(f): f for f in files}) is not None, entry["name"]
        assert entry["change"] and all(line[:2] in ("- ", "+ ") for line in entry["change"]), entry
        assert len(entry["why"]) > 20, entry
    assert len({entry["name"] for entry in listed}) == len(listed)


def test_each_group_runs_its_files_against_fast_tests_only() -> None:
    for name, group in mutation.GROUPS.items():
        table = tomllib.loads(mutation.mutmut_table(group))["tool"]["mutmut"]
        assert table["only_mutate"] == [f"src/{f}" for f in group.files], name
        assert table["pytest_add_cli_args_test_selection"] == list(group.tests), name
        assert "koordpy_testkit.fresh_caches" in table["pytest_add_cli_args"], name
        for path in (*group.files, *group.tests):
            assert (ROOT / ("src" if path.startswith("koordpy/") else "") / path).exists(), path
        assert all(t.startswith(("tests/unit/", "tests/adapters/")) for t in group.tests), name
