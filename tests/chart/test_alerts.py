"""The chart's PrometheusRule: each alert unit-tested with Prometheus' own ``promtool test rules``
(tests/chart/alerts/*.yaml), the rules checked by ``promtool check rules``, every alert both firing and
staying quiet in some test, and docs/operations.md saying what to do for each.

promtool is built from the pinned Go module in tools/prometheus (koordpy_testkit.prometheus).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from helm_render import CHART, MONITORING_API, ROOT, of_kind, render

from koordpy_testkit.prometheus import promtool

ALERT_TESTS = sorted((Path(__file__).parent / "alerts").glob("*.yaml"))


def rule_groups(*args: str) -> list[dict[str, Any]]:
    (rule,) = of_kind(render(*MONITORING_API, *args), "PrometheusRule")
    groups: list[dict[str, Any]] = rule["spec"]["groups"]
    return groups


def alert_names(groups: list[dict[str, Any]]) -> list[str]:
    return [r["alert"] for g in groups for r in g["rules"] if "alert" in r]


@pytest.fixture(scope="module")
def rules_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The rendered rules as a Prometheus rule file, beside a copy of each test file."""
    where = tmp_path_factory.mktemp("alerts")
    (where / "rules.yaml").write_text(yaml.safe_dump({"groups": rule_groups()}, sort_keys=False))
    for path in ALERT_TESTS:
        (where / path.name).write_text(path.read_text())
    return where


def test_the_rules_pass_promtool_check(rules_dir: Path) -> None:
    checked = promtool("check", "rules", "--lint=all", "--lint-fatal", str(rules_dir / "rules.yaml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(alert_names(rule_groups()))} rules found" in checked.stdout, checked.stdout


@pytest.mark.parametrize("path", ALERT_TESTS, ids=lambda p: p.name)
def test_promtool_unit_tests_pass(rules_dir: Path, path: Path) -> None:
    tested = promtool("test", "rules", path.name, cwd=rules_dir)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout, tested.stdout


def _cases() -> list[tuple[str, bool]]:
    """(alert name, fires?) of every alert_rule_test case in the test files."""
    cases = []
    for path in ALERT_TESTS:
        for test in yaml.safe_load(path.read_text())["tests"]:
            cases += [(c["alertname"], bool(c.get("exp_alerts"))) for c in test.get("alert_rule_test", [])]
    return cases


def test_every_alert_is_tested_firing_and_quiet() -> None:
    names = alert_names(rule_groups())
    assert len(names) == len(set(names)) >= 8
    cases = _cases()
    assert {n for n, fires in cases if fires} == set(names), "an alert is never seen firing"
    assert {n for n, fires in cases if not fires} == set(names), "an alert is never seen quiet"


def test_a_broken_rule_fails_its_unit_test(rules_dir: Path, tmp_path: Path) -> None:
    """The unit tests judge the rules: the filter alert's threshold raised to 50 % fails them."""
    groups = rule_groups("--set-json", "prometheusRule.errorRatio=0.5")
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    (tmp_path / "scheduling.yaml").write_text((rules_dir / "scheduling.yaml").read_text())
    tested = promtool("test", "rules", "scheduling.yaml", cwd=tmp_path)
    assert tested.returncode != 0 and "KoordpyExtenderFilterErrors" in tested.stdout + tested.stderr


def test_alert_labels_and_the_pending_bound_come_from_values() -> None:
    groups = rule_groups(
        "--set", "prometheusRule.alertLabels.team=platform", "--set", "prometheusRule.pendingSeconds=1200"
    )
    rules = {r["alert"]: r for g in groups for r in g["rules"]}
    assert all(r["labels"]["team"] == "platform" for r in rules.values())
    assert rules["KoordpyPodsPendingTooLong"]["expr"].strip().endswith("> 1200")
    assert of_kind(render(*MONITORING_API, "--set", "prometheusRule.enabled=false"), "PrometheusRule") == []
    assert of_kind(render(), "PrometheusRule") == []  # not where monitoring.coreos.com/v1 is not served


def test_every_alert_has_a_runbook_section_in_operations_md() -> None:
    text = (ROOT / "docs" / "operations.md").read_text()
    headings = {
        re.sub(r"[^a-z0-9-]", "", h.strip().lower().replace(" ", "-")) for h in re.findall(r"^#+ (.*)$", text, re.M)
    }
    for group in rule_groups():
        for rule in group["rules"]:
            anchor = rule["annotations"]["runbook_url"].rsplit("#", 1)[1]
            assert anchor == rule["alert"].lower() and anchor in headings, rule["alert"]
    assert (CHART / "templates" / "prometheusrule.yaml").is_file()
