"""The ``migrationController:`` section: Koordinator MigrationControllerArgs names and defaults, field paths."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.config.errors import ConfigError, validate
from koordpy.config.manager import ManagerConfiguration
from koordpy.config.migration import MigrationControllerArgs, node_selector_matches, parse_node_selector


def test_defaults_are_koordinators() -> None:
    args = validate(ManagerConfiguration, {}).migration_controller
    assert args.max_migrating_per_node == 2
    assert (args.max_migrating_per_namespace, args.max_migrating_globally) == (None, None)
    assert (args.max_migrating_per_workload, args.max_unavailable_per_workload) == (None, None)
    assert args.skip_check_expected_replicas is None
    assert set(args.object_limiters) == {"workload"}
    assert args.object_limiters["workload"].duration == 300.0  # 5m
    assert (args.object_limiters["workload"].max_migrating, args.object_limiters["workload"].burst) == (None, 0)
    assert (args.default_job_mode, args.default_job_ttl) == ("ReservationFirst", 300.0)
    assert (args.evict_qps, args.evict_burst, args.eviction_policy) == (10.0, 1, "Eviction")
    assert args.default_delete_options is None
    assert (args.arbitration_args.enabled, args.arbitration_args.interval) == (True, 0.5)
    assert args.scheduler_names == ("koord-scheduler",)
    assert (args.dry_run, args.max_concurrent_reconciles, args.node_fit) == (False, 1, False)


def test_koordinator_args_paste_unchanged() -> None:
    raw = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "MigrationControllerArgs",
        "evictLocalStoragePods": True,
        "namespaces": {"exclude": ["kube-system", "koordinator-system"]},
        "maxMigratingPerNode": 2,
        "maxMigratingPerNamespace": 5,
        "maxMigratingPerWorkload": "20%",
        "maxUnavailablePerWorkload": 2,
        "maxMigratingGlobally": 50,
        "skipCheckExpectedReplicas": False,
        "objectLimiters": {"workload": {"duration": "10m", "maxMigrating": 3, "burst": 2}},
        "defaultJobMode": "EvictDirectly",
        "defaultJobTTL": "30m",
        "evictQPS": "5.5",
        "evictBurst": 3,
        "evictionPolicy": "SoftEviction",
        "defaultDeleteOptions": {"gracePeriodSeconds": 30},
        "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]},
        "priorityThreshold": {"value": 10000},
        "nodeSelector": "pool=general,!gpu",
        "skipEvictionGates": ["PVC", "BarePods"],
        "schedulerNames": ["koord-scheduler", "default-scheduler"],
        "arbitrationArgs": {"enabled": True, "interval": "1s"},
    }
    args = validate(MigrationControllerArgs, raw)
    assert (args.max_migrating_per_workload, args.max_unavailable_per_workload) == ("20%", 2)
    assert (args.default_job_ttl, args.evict_qps, args.arbitration_args.interval) == (1800.0, 5.5, 1.0)
    assert args.object_limiters["workload"].duration == 600.0
    assert args.label_selector is not None and args.label_selector.matches({"app": "web"})
    assert not args.label_selector.matches({"app": "db"})


@pytest.mark.parametrize(
    ("fields", "path", "fragment"),
    [
        ({"maxMigratingPerNode": "2"}, "maxMigratingPerNode", "valid integer"),
        ({"maxMigratingPerNode": True}, "maxMigratingPerNode", "valid integer"),
        ({"maxMigratingPerWorkload": "ten"}, "maxMigratingPerWorkload", "pattern"),
        ({"maxMigratingPerWorkload": "10"}, "maxMigratingPerWorkload", "pattern"),
        ({"maxUnavailablePerWorkload": -1}, "maxUnavailablePerWorkload", "greater than or equal to 0"),
        ({"maxUnavailablePerWorkload": True}, "maxUnavailablePerWorkload", ""),
        ({"defaultJobTTL": "soon"}, "defaultJobTTL", ""),
        ({"defaultJobMode": "Later"}, "defaultJobMode", "ReservationFirst"),
        ({"evictQPS": "fast"}, "evictQPS", "numeric"),
        ({"evictQPS": 0}, "evictQPS", "greater than 0"),
        ({"evictBurst": 0}, "evictBurst", "greater than or equal to 1"),
        ({"evictionPolicy": "Kill"}, "evictionPolicy", ""),
        ({"arbitrationArgs": {"interval": "0s"}}, "arbitrationArgs.interval", "greater than 0"),
        ({"arbitrationArgs": {"enabled": "yes"}}, "arbitrationArgs.enabled", "valid boolean"),
        ({"objectLimiters": {"pod": {}}}, "objectLimiters.pod", ""),
        ({"namespaces": {"include": ["a"], "exclude": ["b"]}}, "namespaces.include", "only one"),
        ({"priorityThreshold": {"name": "high"}}, "priorityThreshold.name", "value"),
        ({"nodeFit": True}, "nodeFit", "not built"),
        ({"nodeSelector": "zone in (a,b)"}, "nodeSelector", "set-based"),
        ({"skipEvictionGates": ["Everything"]}, "skipEvictionGates[0]", ""),
        ({"processQueueQPS": 3}, "processQueueQPS", "Extra inputs"),
        ({"jobSelectRatio": 1.2}, "jobSelectRatio", "Extra inputs"),
        ({"labelSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}, "labelSelector", "values"),
    ],
)
def test_bad_values_name_the_field(fields: dict[str, Any], path: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        validate(ManagerConfiguration, {"migrationController": fields}, "manager.yaml")
    paths = [p for p, _ in caught.value.problems]
    assert any(p.startswith(f"migrationController.{path}") for p in paths), caught.value.problems
    assert fragment in str(caught.value)


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        ("pool=general", {"pool": "general"}, True),
        ("pool=general", {"pool": "gpu"}, False),
        ("pool==general,zone!=a", {"pool": "general", "zone": "b"}, True),
        ("pool==general,zone!=a", {"pool": "general", "zone": "a"}, False),
        ("gpu", {"gpu": ""}, True),
        ("!gpu", {"gpu": ""}, False),
        ("!gpu", {}, True),
    ],
)
def test_node_selector(selector: str, labels: dict[str, str], matches: bool) -> None:
    assert node_selector_matches(parse_node_selector(selector), labels) is matches
