"""``koordpy descheduler arbitrate`` through the real CLI entry point, on the bundled migration dump."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from koordpy.cli.main import EXAMPLES, app

runner = CliRunner()
DUMP = EXAMPLES / "migration-dump.yaml"


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["descheduler", "arbitrate", *args])
    return result.exit_code, result.stdout, result.stderr


def report(*args: str, dump: Path = DUMP) -> dict[str, Any]:
    code, out, err = run("-f", str(dump), "-o", "json", *args)
    assert code == 0, err
    parsed: dict[str, Any] = json.loads(out)
    return parsed


def test_exact_shape() -> None:
    got = report()
    assert set(got) == {"order", "verdicts"}
    assert set(got["verdicts"]) == set(got["order"])
    for verdict in got["verdicts"].values():
        assert set(verdict) == {"verdict", "filter", "reason"}
        assert verdict["verdict"] in ("pass", "requeue", "fail")
        assert (verdict["filter"] is None) == (verdict["verdict"] == "pass")
        assert isinstance(verdict["reason"], str) and verdict["reason"]


def test_upstream_order_and_verdicts_on_the_bundled_dump() -> None:
    got = report()
    # Primary: the Job with a migrating job (train: pmj-train-0 Running) first; then pod rank: the missing pod
    # first, then BestEffort (Batch) pods newest first, then Burstable Prod pods newest first, then Guaranteed.
    assert got["order"] == [
        "pmj-train-1",
        "pmj-train-2",
        "pmj-ghost",
        "pmj-hotfix",
        "pmj-log-agent",
        "pmj-web-b",
        "pmj-web-a",
        "pmj-db-0",
        "pmj-cache-0",
    ]
    assert {name: (v["verdict"], v["filter"]) for name, v in got["verdicts"].items()} == {
        "pmj-train-1": ("pass", None),
        "pmj-train-2": ("pass", None),
        "pmj-ghost": ("pass", None),
        "pmj-hotfix": ("pass", None),  # evict annotation
        "pmj-log-agent": ("fail", "DaemonSetPods"),
        "pmj-web-b": ("pass", None),
        # Deployment web, 3 replicas: implicit maxMigratingPerWorkload 1 (< 4); web-b passed just before -> 1 >= 1
        "pmj-web-a": ("requeue", "MaxMigratingPerWorkload"),
        "pmj-db-0": ("fail", "ExpectedReplicas"),  # StatefulSet with 1 replica
        "pmj-cache-0": ("fail", "EvictionCost"),  # MaxInt32
    }


def test_config_limits_apply(tmp_path: Path) -> None:
    cfg = tmp_path / "manager.yaml"
    cfg.write_text("migrationController:\n  maxMigratingGlobally: 2\n")
    got = report("--config", str(cfg))
    # train-0 is already migrating (1), train-1 passes (2); everything after that is capped globally,
    # except the missing pod (passes) and the evict annotation (bypass).
    verdicts = {name: (v["verdict"], v["filter"]) for name, v in got["verdicts"].items()}
    assert verdicts["pmj-train-1"] == ("pass", None)
    assert verdicts["pmj-train-2"] == ("requeue", "MaxMigratingGlobally")
    assert verdicts["pmj-web-b"] == ("requeue", "MaxMigratingGlobally")
    assert verdicts["pmj-hotfix"] == ("pass", None)


def test_disabled_arbitration_passes_everything(tmp_path: Path) -> None:
    cfg = tmp_path / "manager.yaml"
    cfg.write_text("migrationController: {arbitrationArgs: {enabled: false}}\n")
    got = report("--config", str(cfg))
    assert {v["verdict"] for v in got["verdicts"].values()} == {"pass"}
    assert got["order"][0] == "pmj-train-1"  # oldest waiting job first


def test_now_ttl_and_default_note() -> None:
    # pmj-train-1 and -2 have ttl 1h from 09:01: at 10:01 it has run out
    got = report("--now", "2026-11-23T10:01:00Z")
    assert got["verdicts"]["pmj-train-1"]["verdict"] == "fail"
    assert got["verdicts"]["pmj-train-1"]["filter"] == "TTL"
    code, _, err = run("-f", str(DUMP), "-o", "json")
    assert code == 0 and "note: evaluated at the newest timestamp in the input" in err


def test_table_output() -> None:
    code, out, _ = run("-f", str(DUMP))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:5] == ["#", "JOB", "VERDICT", "FILTER", "REASON"]
    assert lines[1].split()[:4] == ["1", "pmj-train-1", "pass", "-"]
    assert lines[7].split()[:4] == ["7", "pmj-web-a", "requeue", "MaxMigratingPerWorkload"]


def test_ignored_kinds_are_noted(tmp_path: Path) -> None:
    extra = tmp_path / "cm.yaml"
    extra.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    code, _, err = run("-f", str(DUMP), "-f", str(extra), "-o", "json")
    assert code == 0 and "note: ignored 1 object(s) of kind ConfigMap" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--now", "yesterday"], "error: --now: not an RFC 3339 timestamp: 'yesterday'"),
        (["-o", "yaml"], "error: -o: expected json or table, got 'yaml'"),
    ],
)
def test_bad_options_exit_2_with_one_line(args: list[str], message: str) -> None:
    code, out, err = run("-f", str(DUMP), *args)
    assert (code, out, err.strip()) == (2, "", message)


def test_bad_config_names_file_and_field(tmp_path: Path) -> None:
    cfg = tmp_path / "manager.yaml"
    cfg.write_text("migrationController: {maxMigratingPerWorkload: ten}\n")
    code, _, err = run("-f", str(DUMP), "--config", str(cfg))
    assert code == 2 and err.startswith(f"error: {cfg}: migrationController.maxMigratingPerWorkload")
    assert len(err.strip().splitlines()) == 1


def test_bad_job_names_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "pmj.yaml"
    bad.write_text(
        "apiVersion: scheduling.koordinator.sh/v1alpha1\nkind: PodMigrationJob\n"
        "metadata: {name: j}\nspec: {podRef: {namespace: ns}}\n"
    )
    code, _, err = run("-f", str(bad))
    assert (code, err.strip()) == (2, f"error: {bad}: PodMigrationJob j: spec.podRef.name: required")


def test_bad_pod_names_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "pod.json"
    bad.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ns"},
                "spec": {"priority": "high"},
            }
        )
    )
    code, _, err = run("-f", str(bad))
    assert (code, err.strip()) == (2, f"error: {bad}: Pod ns/p: spec.priority: expected an integer")


def test_bad_workload_names_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "deploy.yaml"
    bad.write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: ns}\nspec: {replicas: true}\n"
    )
    code, _, err = run("-f", str(bad))
    assert (code, err.strip()) == (2, f"error: {bad}: Deployment ns/d: spec.replicas: expected a non-negative integer")


def test_duplicate_job_is_an_error(tmp_path: Path) -> None:
    dup = tmp_path / "dup.yaml"
    dup.write_text(
        "apiVersion: scheduling.koordinator.sh/v1alpha1\nkind: PodMigrationJob\n"
        "metadata: {name: pmj-ghost}\nspec: {podRef: {namespace: ns, name: p}}\n"
    )
    code, _, err = run("-f", str(DUMP), "-f", str(dup))
    assert code == 2 and "PodMigrationJob pmj-ghost: appears twice in the input" in err


def gang_dump(tmp_path: Path, jobs: list[str]) -> Path:
    """A running gang of four (a ``scheduling.sigs.k8s.io`` PodGroup, minMember 4) of the Job ``train``,
    one pod per node, and a PodMigrationJob for each member named in ``jobs``."""
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "uid-train", "controller": True}
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "ml"},
            "spec": {"minMember": 4},
        },
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "ml", "uid": "uid-train"}},
    ]
    for i in range(4):
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"w{i}",
                    "namespace": "ml",
                    "uid": f"uid-w{i}",
                    "labels": {"pod-group.scheduling.sigs.k8s.io": "train"},
                    "ownerReferences": [owner],
                    "creationTimestamp": "2026-11-23T09:00:00Z",
                },
                "spec": {"nodeName": f"n{i}", "containers": [{"name": "c", "image": "i"}]},
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
            }
        )
    for name in jobs:
        docs.append(
            {
                "apiVersion": "scheduling.koordinator.sh/v1alpha1",
                "kind": "PodMigrationJob",
                "metadata": {"name": f"pmj-{name}", "creationTimestamp": "2026-11-23T09:05:00Z"},
                "spec": {"podRef": {"namespace": "ml", "name": name}},
            }
        )
    path = tmp_path / "gang.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
    return path


def test_a_dump_with_a_gang_gives_the_managers_gang_verdicts(tmp_path: Path) -> None:
    """One job of the four: 4-1 = 3 < minMember 4, requeued; jobs for all four: they pass together."""
    one = report(dump=gang_dump(tmp_path, ["w0"]))["verdicts"]["pmj-w0"]
    assert (one["verdict"], one["filter"]) == ("requeue", "GangBelowMinimum")
    assert "moving pod ml/w0 alone leaves 3 < 4" in one["reason"]
    four = report(dump=gang_dump(tmp_path, ["w0", "w1", "w2", "w3"]))["verdicts"]
    assert {name: v["verdict"] for name, v in four.items()} == dict.fromkeys(
        ["pmj-w0", "pmj-w1", "pmj-w2", "pmj-w3"], "pass"
    )
    assert "moves with gang ml/train together: 4 PodMigrationJobs" in four["pmj-w0"]["reason"]
