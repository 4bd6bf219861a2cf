"""docs/descheduler.md's chart examples against the rendered chart: the ClusterRole a user adds for the
``Delete`` evictor grants the chart's manager exactly that (the chart itself never does), the HA
example reaches the manager's configuration with its leader election's timings, and the balance loop's
values turn it on with the scheduler's configuration and the RBAC it needs."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from helm_render import ROOT, allowed, grants, named, render

from koordpy.config.errors import validate
from koordpy.config.manager import ManagerConfiguration

DOC = (ROOT / "docs" / "descheduler.md").read_text(encoding="utf-8")
MANAGER = "koordpy-system/koordpy-manager"


def yaml_blocks(containing: str) -> list[str]:
    return [b for b in re.findall(r"```yaml\n(.*?)```", DOC, flags=re.S) if containing in b]


def test_the_documented_cluster_role_grants_the_delete_evictor_that_the_chart_does_not() -> None:
    chart = render()
    assert not allowed(grants(chart)[MANAGER].rules, "", "pods", "delete")
    (block,) = yaml_blocks("kind: ClusterRoleBinding")
    extra = list(yaml.safe_load_all(block))
    with_extra = grants([*chart, *extra])[MANAGER].rules
    assert allowed(with_extra, "", "pods", "delete")
    assert not allowed(with_extra, "", "pods", "patch")  # the SoftEviction evictor needs patch: not this one


def test_the_documented_ha_values_reach_the_managers_leader_election() -> None:
    (block,) = yaml_blocks("replicaCount: 2")
    values = yaml.safe_load(block)["manager"]
    election = values["config"]["leaderElection"]
    objects = render(
        "--set",
        f"manager.replicaCount={values['replicaCount']}",
        *(arg for key, value in election.items() for arg in ("--set", f"manager.config.leaderElection.{key}={value}")),
    )
    config = yaml.safe_load(named(objects, "ConfigMap", "-manager")["data"]["config.yaml"])
    rendered = validate(ManagerConfiguration, config).leader_election
    assert (rendered.lease_duration_seconds, rendered.renew_deadline_seconds, rendered.retry_period_seconds) == (
        8.0,
        5.0,
        1.0,
    )


def test_the_documented_balance_values_turn_the_loop_on_with_what_it_needs(tmp_path: Path) -> None:
    (block,) = yaml_blocks("    lowNodeLoad:\n")
    path = tmp_path / "values.yaml"
    path.write_text(block)
    objects = render("-f", str(path))
    data = named(objects, "ConfigMap", "-manager")["data"]
    config = validate(ManagerConfiguration, yaml.safe_load(data["config.yaml"]))
    assert config.low_node_load is not None and config.descheduling_interval_seconds == 10.0
    assert "scheduler.yaml" in data  # the extender's configuration, for where a moved pod would land
    rules = grants(objects)[MANAGER].rules
    assert allowed(rules, "scheduling.koordinator.sh", "podmigrationjobs", "create")
    assert allowed(rules, "apps", "replicasets", "watch")
