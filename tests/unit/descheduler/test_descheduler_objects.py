"""Reading pods, workloads and PodMigrationJobs for arbitration; the pod sorter's key (reference §2.4)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from koordpy.descheduler.objects import (
    HAZARD_BARE,
    HAZARD_CRITICAL,
    HAZARD_DAEMONSET,
    HAZARD_EVICTION_COST,
    HAZARD_LOCAL_STORAGE,
    HAZARD_MIRROR,
    HAZARD_PVC,
    MigrationObjectError,
    OwnerRef,
    Workload,
    job_from_dict,
    pack_sort_key,
    pod_from_dict,
    resolve_workload,
    workload_from_dict,
)


def raw_pod(name: str, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"}
    meta.update(extra.pop("meta", {}))
    spec: dict[str, Any] = {"nodeName": "n1", "containers": [{"name": "c", "resources": extra.pop("resources", {})}]}
    spec.update(extra.pop("spec", {}))
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    status.update(extra.pop("status", {}))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


BURSTABLE = {"requests": {"cpu": "1"}}
GUARANTEED = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}

# Each pair: the first migrates before the second (lower key), differing in exactly one sorter field.
PAIRS = [
    # priority class Free < Batch < Mid < Prod
    (
        {"meta": {"labels": {"koordinator.sh/priority-class": "koord-free"}}},
        {"meta": {"labels": {"koordinator.sh/priority-class": "koord-batch"}}},
    ),
    (
        {"meta": {"labels": {"koordinator.sh/priority-class": "koord-batch"}}},
        {"meta": {"labels": {"koordinator.sh/priority-class": "koord-mid"}}},
    ),
    (
        {"meta": {"labels": {"koordinator.sh/priority-class": "koord-mid"}}},
        {"meta": {"labels": {"koordinator.sh/priority-class": "koord-prod"}}},
    ),
    # spec.priority within one class (prod band 9000-9999)
    ({"spec": {"priority": 9000}}, {"spec": {"priority": 9500}}),
    # Kubernetes QoS Burstable < Guaranteed (both Prod)
    ({"resources": BURSTABLE}, {"resources": GUARANTEED}),
    # Koordinator QoS BE < LS < LSR < LSE, and unset last (class pinned to prod by label)
    *[
        (
            {"meta": {"labels": {"koordinator.sh/priority-class": "koord-prod", "koordinator.sh/qosClass": a}}},
            {
                "meta": {
                    "labels": {
                        "koordinator.sh/priority-class": "koord-prod",
                        **({"koordinator.sh/qosClass": b} if b else {}),
                    }
                }
            },
        )
        for a, b in (("BE", "LS"), ("LS", "LSR"), ("LSR", "LSE"), ("SYSTEM", ""))
    ],
    # pod-deletion-cost, then eviction-cost
    ({"meta": {"annotations": {"controller.kubernetes.io/pod-deletion-cost": "-5"}}}, {}),
    (
        {"meta": {"annotations": {"scheduling.koordinator.sh/eviction-cost": "1"}}},
        {"meta": {"annotations": {"scheduling.koordinator.sh/eviction-cost": "2"}}},
    ),
    # newer pod first
    ({"meta": {"creationTimestamp": "2026-01-02T00:00:00Z"}}, {}),
]


@pytest.mark.parametrize(("first", "second"), PAIRS)
def test_pod_sorter_key_orders_one_field_at_a_time(first: dict[str, Any], second: dict[str, Any]) -> None:
    a = pod_from_dict(raw_pod("a", **first))
    b = pod_from_dict(raw_pod("b", **second))
    assert a.sort_key < b.sort_key


def test_lse_equals_system() -> None:
    labels = {"koordinator.sh/priority-class": "koord-prod"}
    lse = pod_from_dict(raw_pod("a", meta={"labels": {**labels, "koordinator.sh/qosClass": "LSE"}}))
    system = pod_from_dict(raw_pod("b", meta={"labels": {**labels, "koordinator.sh/qosClass": "SYSTEM"}}))
    assert lse.sort_key == system.sort_key


def test_pod_fields_for_the_filters() -> None:
    pod = pod_from_dict(
        raw_pod(
            "p",
            meta={
                "annotations": {
                    "descheduler.alpha.kubernetes.io/evict": "true",
                    "scheduling.koordinator.sh/eviction-cost": "2147483647",
                },
                "ownerReferences": [
                    {"kind": "Other", "name": "x", "uid": "u0"},
                    {"kind": "Job", "name": "train", "uid": "u1", "controller": True},
                ],
            },
            spec={
                "volumes": [{"name": "v", "emptyDir": {}}, {"name": "d", "persistentVolumeClaim": {"claimName": "c"}}]
            },
        )
    )
    assert pod.evict_annotation and pod.eviction_cost == 2**31 - 1
    assert pod.controller == OwnerRef("Job", "train", "u1") and pod.job_owner_uid == "u1"
    assert pod.owner_kinds == ("Other", "Job")
    assert pod.local_storage and pod.pvc and pod.available


@pytest.mark.parametrize(
    ("status", "meta", "available"),
    [
        ({"conditions": [{"type": "Ready", "status": "False"}]}, {}, False),
        ({}, {"deletionTimestamp": "2026-01-01T00:00:00Z"}, False),
        ({"phase": "Succeeded"}, {}, False),
        ({}, {}, True),
    ],
)
def test_available_means_active_and_ready(status: dict[str, Any], meta: dict[str, Any], available: bool) -> None:
    assert pod_from_dict(raw_pod("p", status=status, meta=meta)).available is available


def test_bad_pod_names_the_field() -> None:
    with pytest.raises(MigrationObjectError, match=r"^metadata.ownerReferences: expected a list$"):
        pod_from_dict(raw_pod("p", meta={"ownerReferences": "x"}))


def test_job_from_dict() -> None:
    job = job_from_dict(
        {
            "kind": "PodMigrationJob",
            "metadata": {
                "name": "j",
                "creationTimestamp": "2026-01-01T00:00:00.900Z",
                "annotations": {"descheduler.koordinator.sh/passed-arbitration": "true"},
            },
            "spec": {"podRef": {"namespace": "ns", "name": "p"}, "ttl": "5m"},
            "status": {"phase": "Pending"},
        }
    )
    assert (job.pod_key, job.ttl_seconds, job.passed_arbitration) == ("ns/p", 300.0, True)
    assert job.creation_time == float(int(job.creation_time))  # whole Unix seconds, as upstream
    assert job.active and not job.waiting
    with pytest.raises(MigrationObjectError, match=r"^spec.ttl: "):
        job_from_dict({"metadata": {"name": "j"}, "spec": {"podRef": {"name": "p"}, "ttl": "soon"}})


def test_job_from_dict_reads_what_the_balance_loop_and_the_ledger_read() -> None:
    job = job_from_dict(
        {
            "metadata": {
                "name": "j",
                "labels": {"koordpy.io/descheduler-plugin": "LowNodeLoad"},
                "annotations": {"koordpy.io/source-node": "n1"},
            },
            "spec": {"podRef": {"namespace": "ns", "name": "p", "uid": "u-1"}},
            "status": {"phase": "Running", "nodeName": "n7"},
        }
    )
    assert (job.pod_uid, job.node_name) == ("u-1", "n7")
    assert job.labels == {"koordpy.io/descheduler-plugin": "LowNodeLoad"}
    assert job.annotations == {"koordpy.io/source-node": "n1"}
    bare = job_from_dict({"metadata": {"name": "j"}, "spec": {"podRef": {"name": "p"}}})
    assert (bare.pod_uid, bare.node_name, dict(bare.labels), bare.pod_key) == ("", "", {}, "default/p")
    with pytest.raises(MigrationObjectError, match=r"^metadata.labels: "):
        job_from_dict({"metadata": {"name": "j", "labels": ["x"]}, "spec": {"podRef": {"name": "p"}}})


@pytest.mark.parametrize(
    ("phase", "passed", "waiting", "active"),
    [
        ("", False, True, False),
        ("Pending", False, True, False),
        ("Pending", True, False, True),  # passed: counts (Koordinator's #1150 fix)
        ("Running", True, False, True),
        ("Running", False, False, True),
        ("Succeeded", True, False, False),
        ("Failed", False, False, False),
        ("Aborted", False, False, False),
    ],
)
def test_waiting_and_active(phase: str, passed: bool, waiting: bool, active: bool) -> None:
    annotations = {"descheduler.koordinator.sh/passed-arbitration": "true"} if passed else {}
    job = job_from_dict(
        {
            "metadata": {"name": "j", "annotations": annotations},
            "spec": {"podRef": {"name": "p"}},
            "status": {"phase": phase},
        }
    )
    assert (job.waiting, job.active) == (waiting, active)


def test_workloads_and_owner_chain() -> None:
    deploy = workload_from_dict(
        {"kind": "Deployment", "metadata": {"name": "d", "namespace": "ns", "uid": "ud"}, "spec": {}}
    )
    assert deploy.replicas == 1  # unset spec.replicas defaults to 1
    job = workload_from_dict(
        {"kind": "Job", "metadata": {"name": "j", "namespace": "ns", "uid": "uj"}, "spec": {"parallelism": 4}}
    )
    assert job.replicas is None
    rs = Workload("ReplicaSet", "ns", "d-1", "urs", 3, OwnerRef("Deployment", "d", "ud"))
    pod = pod_from_dict(
        raw_pod(
            "p", meta={"ownerReferences": [{"kind": "ReplicaSet", "name": "d-1", "uid": "urs", "controller": True}]}
        )
    )
    assert resolve_workload(pod, {"urs": rs, "ud": deploy}) == deploy
    assert resolve_workload(pod, {"urs": rs}) == rs  # Deployment not known: the chain stops at the ReplicaSet
    assert resolve_workload(pod, {}) is None
    loop = Workload("ReplicaSet", "ns", "d-1", "urs", 3, OwnerRef("ReplicaSet", "d-1", "urs"))
    assert resolve_workload(pod, {"urs": loop}) == loop  # a self-owning object does not loop forever


def test_packed_sort_key_orders_as_the_tuple() -> None:
    rng = random.Random(3)
    keys = [
        (
            rng.randrange(5),
            rng.randrange(-(2**31), 2**31),
            rng.randrange(3),
            rng.randrange(5),
            rng.randrange(-5, 5),
            rng.choice((0, 1, 2**31 - 1)),
            -float(rng.randrange(1_700_000_000, 1_800_000_000)) - rng.random(),
        )
        for _ in range(500)
    ]
    assert sorted(keys) == sorted(keys, key=pack_sort_key)


RS_OWNER = {"ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "uid": "u-rs", "controller": True}]}


@pytest.mark.parametrize(
    ("extra", "hazards"),
    [
        ({"meta": RS_OWNER}, 0),  # an ordinary ReplicaSet pod: no non-retryable filter can fail it
        ({}, HAZARD_BARE),  # no ownerReferences
        (
            {"meta": {"ownerReferences": [{"kind": "DaemonSet", "name": "d", "uid": "u", "controller": True}]}},
            HAZARD_DAEMONSET,
        ),
        (
            {"meta": {**RS_OWNER, "annotations": {"scheduling.koordinator.sh/eviction-cost": "2147483647"}}},
            HAZARD_EVICTION_COST,
        ),
        ({"meta": {**RS_OWNER, "annotations": {"kubernetes.io/config.mirror": "x"}}}, HAZARD_MIRROR),
        ({"meta": RS_OWNER, "spec": {"priority": 2_000_000_000}}, HAZARD_CRITICAL),
        ({"meta": RS_OWNER, "spec": {"priorityClassName": "system-node-critical"}}, HAZARD_CRITICAL),
        ({"meta": RS_OWNER, "spec": {"volumes": [{"name": "v", "emptyDir": {}}]}}, HAZARD_LOCAL_STORAGE),
        (
            {"meta": RS_OWNER, "spec": {"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}]}},
            HAZARD_PVC,
        ),
        ({"spec": {"volumes": [{"name": "v", "hostPath": {"path": "/x"}}]}}, HAZARD_BARE | HAZARD_LOCAL_STORAGE),
    ],
)
def test_hazard_bits_name_the_filters_a_pod_can_fail(extra: dict[str, Any], hazards: int) -> None:
    assert pod_from_dict(raw_pod("p", **extra)).hazards == hazards


def test_pod_and_job_keys_are_one_interned_string() -> None:
    pod = pod_from_dict(raw_pod("p"))
    job = job_from_dict({"metadata": {"name": "j"}, "spec": {"podRef": {"namespace": "ns", "name": "p"}}, "status": {}})
    assert pod.key == "ns/p"
    assert job.pod_key is pod.key  # identity: the dict lookup of a job's pod compares pointers first
