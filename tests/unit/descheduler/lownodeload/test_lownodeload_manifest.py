"""The PodMigrationJob a planned move becomes: a plain job, valid against the CRD, read back by arbitration."""

from __future__ import annotations

from koordpy.config.errors import validate
from koordpy.config.migration import MigrationControllerArgs
from koordpy.crds.podmigrationjob import PodMigrationJobSpec
from koordpy.descheduler.lownodeload import LABEL_PLUGIN, PlannedMove, migration_job
from koordpy.descheduler.objects import job_from_dict
from koordpy_testkit.balance import BalanceCluster

CPU = {"lowThresholds": {"cpu": 30}, "highThresholds": {"cpu": 50}, "anomalyCondition": {"consecutiveAbnormalities": 1}}


def planned() -> PlannedMove:
    cluster = BalanceCluster()
    cluster.node("n1")
    cluster.node("n2")
    for name in ("a", "b"):
        cluster.pod(name, "n1", cpu="1200m")
    (move,) = cluster.run(CPU).moves
    return move


def test_manifest() -> None:
    move = planned()
    migration = validate(
        MigrationControllerArgs, {"defaultJobTTL": "5m", "defaultDeleteOptions": {"gracePeriodSeconds": 5}}
    )
    job = migration_job(move, "8c5e0b1e-0f9a-4a43-9f1c-2f1b1c6e0001", migration, created_by="manager-uid")
    assert job == {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {
            "name": "8c5e0b1e-0f9a-4a43-9f1c-2f1b1c6e0001",
            "labels": {LABEL_PLUGIN: "LowNodeLoad"},
            "annotations": {
                "koordinator.sh/evict-reason": "node is overutilized, cpu usage(60.00%)>threshold(50.00%)",
                "koordinator.sh/evict-trigger": "LowNodeLoad",
                "koordinator.sh/job-created-by": "manager-uid",
                "koordpy.io/source-node": "n1",
                "koordpy.io/expected-destination": "n2",
            },
        },
        "spec": {
            "podRef": {"namespace": "default", "name": "a", "uid": move.uid},
            "mode": "ReservationFirst",
            "ttl": "5m0s",
            "deleteOptions": {"gracePeriodSeconds": 5},
        },
    }
    PodMigrationJobSpec.model_validate(job["spec"])
    parsed = job_from_dict(job)
    # arbitration reads it as any other waiting job: Pending, not passed
    assert (parsed.pod_key, parsed.waiting, parsed.ttl_seconds) == ("default/a", True, 300.0)


def test_manifest_without_ttl_and_evict_directly() -> None:
    job = migration_job(
        planned(), "x", validate(MigrationControllerArgs, {"defaultJobTTL": 0, "defaultJobMode": "EvictDirectly"})
    )
    assert "ttl" not in job["spec"] and job["spec"]["mode"] == "EvictDirectly"
    assert "koordinator.sh/job-created-by" not in job["metadata"]["annotations"]
