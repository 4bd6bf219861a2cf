"""The PodMigrationJob a planned move becomes: a plain manifest, filed like any other job.

Koordinator's ``CreatePodMigrationJob`` (pkg/descheduler/controllers/migration/evict.go, v1.8): the name is a fresh
UUID (the caller's: nothing here draws random numbers), ``spec.podRef`` names the pod with its UID, ``mode`` and
``ttl`` are ``migrationController.defaultJobMode``/``defaultJobTTL``, ``deleteOptions`` its
``defaultDeleteOptions``; annotations ``koordinator.sh/evict-reason`` (the move's reason) and
``koordinator.sh/evict-trigger`` (the plugin, ``LowNodeLoad``), and ``koordinator.sh/job-created-by`` when a
creator id is given. koordpy adds the label ``koordpy.io/descheduler-plugin: LowNodeLoad`` (select the jobs a
plugin filed) and, as annotations, the node the pod leaves and the destination the round expected.

``status`` is left out: a job without a phase is Pending, and the job goes through arbitration like any other
(the manager never marks it passed).
"""

from __future__ import annotations

from typing import Any

from koordpy.config.migration import MigrationControllerArgs
from koordpy.descheduler.lownodeload.result import PlannedMove

__all__ = [
    "ANNOTATION_EVICT_REASON",
    "ANNOTATION_EVICT_TRIGGER",
    "ANNOTATION_EXPECTED_DESTINATION",
    "ANNOTATION_JOB_CREATED_BY",
    "ANNOTATION_SOURCE_NODE",
    "LABEL_PLUGIN",
    "NAME",
    "migration_job",
]

NAME = "LowNodeLoad"
LABEL_PLUGIN = "koordpy.io/descheduler-plugin"
ANNOTATION_EVICT_REASON = "koordinator.sh/evict-reason"
ANNOTATION_EVICT_TRIGGER = "koordinator.sh/evict-trigger"
ANNOTATION_JOB_CREATED_BY = "koordinator.sh/job-created-by"
ANNOTATION_SOURCE_NODE = "koordpy.io/source-node"
ANNOTATION_EXPECTED_DESTINATION = "koordpy.io/expected-destination"


def _go_duration(seconds: float) -> str:
    """Seconds as a Go duration string (``300.0`` -> ``5m0s``, ``0.5`` -> ``500ms``)."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    fraction = seconds - whole
    text = f"{secs + fraction:g}s"
    if hours:
        return f"{hours}h{minutes}m{text}"
    if minutes:
        return f"{minutes}m{text}"
    return text


def migration_job(
    move: PlannedMove, name: str, migration: MigrationControllerArgs, *, created_by: str | None = None
) -> dict[str, Any]:
    """The PodMigrationJob manifest for ``move``, named ``name`` (a UUID)."""
    namespace, _, pod_name = move.pod.partition("/")
    annotations = {
        ANNOTATION_EVICT_REASON: move.reason,
        ANNOTATION_EVICT_TRIGGER: NAME,
        ANNOTATION_SOURCE_NODE: move.node,
    }
    if move.landing.node is not None:
        annotations[ANNOTATION_EXPECTED_DESTINATION] = move.landing.node
    if created_by is not None:
        annotations[ANNOTATION_JOB_CREATED_BY] = created_by
    spec: dict[str, Any] = {
        "podRef": {"namespace": namespace, "name": pod_name, "uid": move.uid},
        "mode": migration.default_job_mode,
    }
    if migration.default_job_ttl > 0:  # 0: no deadline
        spec["ttl"] = _go_duration(migration.default_job_ttl)
    if migration.default_delete_options is not None:
        spec["deleteOptions"] = dict(migration.default_delete_options)
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {"name": name, "labels": {LABEL_PLUGIN: NAME}, "annotations": annotations},
        "spec": spec,
    }
