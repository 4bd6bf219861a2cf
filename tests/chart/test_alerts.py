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
from helm_render import CHART, MONITORING_API, ROOT, of_kind, render, run_helm

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


def rules_by_alert(*args: str) -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for g in rule_groups(*args) for r in g["rules"]}


def test_each_alerts_for_and_windows_come_from_its_values() -> None:
    """Every alert's ``for`` and every range of its expression are prometheusRule.alerts values: with each
    set to a duration of its own, no other duration is left in any rule."""
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())["prometheusRule"]["alerts"]
    args, expected = [], {}
    for index, (alert, fields) in enumerate(sorted(defaults.items())):
        expected[alert] = {}
        for offset, name in enumerate(sorted(fields)):
            value = f"{100 + 10 * index + offset}s"
            args += ["--set", f"prometheusRule.alerts.{alert}.{name}={value}"]
            expected[alert][name] = value
    rules = rules_by_alert(*args)
    assert sorted(rules) == sorted(defaults)
    for alert, rule in rules.items():
        assert rule["for"] == expected[alert]["for"], alert
        windows = {v for k, v in expected[alert].items() if k != "for"}
        assert set(re.findall(r"\[(\w+)\]", rule["expr"])) == windows, (alert, rule["expr"])
    # and the defaults are the documented ones
    assert {a: r["for"] for a, r in rules_by_alert().items()} == {a: f["for"] for a, f in defaults.items()}


def test_the_runbook_base_is_a_value_and_every_alert_points_at_its_section() -> None:
    base = "https://wiki.example.com/platform/koordpy-operations"
    for alert, rule in rules_by_alert("--set", f"prometheusRule.runbookBaseUrl={base}").items():
        assert rule["annotations"]["runbook_url"] == f"{base}#{alert.lower()}"
    default = "https://github.com/koordpy/koordpy/blob/main/docs/operations.md"
    assert {r["annotations"]["runbook_url"].split("#")[0] for r in rules_by_alert().values()} == {default}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("prometheusRule.runbookBaseUrl=docs/operations.md", "runbookBaseUrl"),
        ("prometheusRule.runbookBaseUrl=https://wiki.example.com/ops#alerts", "runbookBaseUrl"),
        ("prometheusRule.alerts.KoordpyManagerDown.for=5 minutes", "for"),
        ("prometheusRule.alerts.KoordpyExtenderBindErrors.window=0", "window"),
        ("prometheusRule.alerts.KoordpyNodeMetricsExpired.window=5m", "window"),
        ("prometheusRule.alerts.KoordpyTypo.for=5m", "KoordpyTypo"),
    ],
)
def test_the_schema_refuses_bad_runbook_bases_durations_and_alert_names(value: str, message: str) -> None:
    refused = run_helm("template", "koordpy", str(CHART), *MONITORING_API, "--set", value)
    assert refused.returncode != 0 and "values don't meet the specifications of the schema" in refused.stderr
    assert message in refused.stderr, refused.stderr


def test_the_manager_down_alert_comes_with_the_servicemonitors_whose_labels_it_selects() -> None:
    (rule,) = [r for r in rules_by_alert().values() if r["alert"] == "KoordpyManagerDown"]
    assert 'job="manager",service="koordpy-manager"' in rule["expr"]
    assert "KoordpyManagerDown" not in rules_by_alert("--set", "serviceMonitor.enabled=false")
    assert "KoordpyManagerDown" not in rules_by_alert("--set", "manager.enabled=false")


def runbook_sections() -> dict[str, str]:
    """docs/operations.md's sections by their anchor (GitHub's: lower case, spaces to dashes)."""
    text = (ROOT / "docs" / "operations.md").read_text()
    parts = re.split(r"^(#+ .*)$", text, flags=re.M)
    return {
        re.sub(r"[^a-z0-9-]", "", heading.lstrip("#").strip().lower().replace(" ", "-")): body
        for heading, body in zip(parts[1::2], parts[2::2], strict=True)
    }


def test_every_alert_has_a_runbook_section_saying_what_it_means_how_to_confirm_and_repair() -> None:
    sections = runbook_sections()
    for alert, rule in rules_by_alert().items():
        anchor = rule["annotations"]["runbook_url"].rsplit("#", 1)[1]
        assert anchor == alert.lower() and anchor in sections, alert
        body = sections[anchor]
        assert body.lstrip().startswith("**What it means.**"), (alert, body[:200])
        assert "**Confirm.**" in body and "**Repair.**" in body, alert
        confirm = body.split("**Confirm.**", 1)[1].split("**Repair.**", 1)[0]
        commands = [
            line
            for block in re.findall(r"```sh\n(.*?)```", confirm, re.S)
            for line in block.splitlines()
            if line.startswith(("kubectl ", "koordpy "))
        ]
        assert commands, f"{alert}: no kubectl or koordpy command under Confirm"
    assert (CHART / "templates" / "prometheusrule.yaml").is_file()
