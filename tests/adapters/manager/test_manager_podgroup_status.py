"""The manager's PodGroup status and gang Events, kopf against kmock's emulator over loopback HTTP.

Same set-up as ``test_operator.py`` (its kubeconfig fixture and helpers). Both PodGroup APIs; the
``scheduling.x-k8s.io`` API is left out of the emulator in one test to show the manager runs without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kmock
import pytest
from test_operator import VERBS, api, eventually, kubeconfig, running_manager

__all__ = ["kubeconfig"]  # the fixture, re-used

SIGS = "scheduling.sigs.k8s.io/v1alpha1/podgroups"
X_K8S = "scheduling.x-k8s.io/v1alpha1/podgroups"
VOLCANO = "scheduling.volcano.sh/v1beta1/podgroups"
CONFIG = {
    "leaderElection": {"leaderElect": False},  # kmock keeps no resourceVersions: no Lease to elect on
    "nodeMetric": {"enabled": False},
    "podGroup": {"eventIntervalSeconds": 3600, "eventDelaySeconds": 1, "podEventsPerGang": 2},
}


def make_emulator(emulator: kmock.KubernetesEmulator, *, x_k8s: bool) -> kmock.KubernetesEmulator:
    declared = {
        "v1/namespaces": ("Namespace", False),
        "v1/events": ("Event", True),
        "v1/pods": ("Pod", True),
        "v1/nodes": ("Node", False),
        "apiextensions.k8s.io/v1/customresourcedefinitions": ("CustomResourceDefinition", False),
        "slo.koordinator.sh/v1alpha1/nodemetrics": ("NodeMetric", False),
        SIGS: ("PodGroup", True),
    }
    if x_k8s:
        declared[X_K8S] = ("PodGroup", True)
        declared[VOLCANO] = ("PodGroup", True)
    for resource, (kind, namespaced) in declared.items():
        # Volcano's PodGroup CRD has no status subresource.
        status = kind == "PodGroup" and resource != VOLCANO
        emulator.resources[resource] = kmock.ResourceInfo(
            kind=kind, namespaced=namespaced, verbs=VERBS, subresources={"status"} if status else set()
        )
    return emulator


@pytest.fixture()
def x_k8s_served() -> bool:
    return True


@pytest.fixture()
def emulator(kmock: kmock.KubernetesEmulator, x_k8s_served: bool) -> kmock.KubernetesEmulator:
    return make_emulator(kmock, x_k8s=x_k8s_served)


def podgroup(api_version: str, name: str, min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "team-a", "uid": f"pg-{name}", "resourceVersion": "1"},
        "spec": {"minMember": min_member},
    }


def member(name: str, label: str, group: str, node: str | None = None, phase: str = "Pending") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "koordpy-scheduler",
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": f"pod-{name}",
            "resourceVersion": "1",
            "creationTimestamp": "2027-01-15T08:00:00Z",
            "labels": {label: group},
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": group, "uid": "j", "controller": True}
            ],
        },
        "spec": spec,
        "status": {"phase": phase},
    }


def status_of(emulator: kmock.KubernetesEmulator, resource: str, name: str) -> dict[str, Any]:
    key = (kmock.resource(resource), "team-a", name)
    if key not in emulator.objects or emulator.objects[key].deleted:
        return {}
    return dict(emulator.objects[key].raw.get("status") or {})


def events(emulator: kmock.KubernetesEmulator) -> list[dict[str, Any]]:
    return [r.data for r in emulator if r.method == "POST" and r.url.path == "/api/v1/namespaces/team-a/events"]


PODS = "/api/v1/namespaces/team-a/pods"


async def test_sigs_podgroup_status_follows_its_members_with_events(
    emulator: kmock.KubernetesEmulator, kubeconfig: Path
) -> None:
    label = "pod-group.scheduling.sigs.k8s.io"
    assert (
        await api(
            emulator,
            "POST",
            "/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/team-a/podgroups",
            podgroup("scheduling.sigs.k8s.io/v1alpha1", "mpi", 3),
        )
        < 300
    )
    for i in range(2):
        assert await api(emulator, "POST", PODS, member(f"w{i}", label, "mpi")) < 300
    async with running_manager(CONFIG):
        await eventually(lambda: status_of(emulator, SIGS, "mpi").get("phase") == "Pending", "Pending written")
        assert status_of(emulator, SIGS, "mpi") == {
            "phase": "Pending",
            "scheduled": 0,
            "running": 0,
            "succeeded": 0,
            "failed": 0,
        }
        await eventually(lambda: len(events(emulator)) >= 3, "Events on the PodGroup and 2 waiting pods")
        quorum = "gang team-a/mpi: 2 of 3 members exist"
        posted = events(emulator)
        assert {(e["involvedObject"]["kind"], e["involvedObject"]["name"], e["message"]) for e in posted} == {
            ("PodGroup", "mpi", quorum),
            ("Pod", "w0", quorum),
            ("Pod", "w1", quorum),
        }
        pg_event = next(e for e in posted if e["involvedObject"]["kind"] == "PodGroup")
        assert pg_event["involvedObject"]["uid"] == "pg-mpi"
        assert pg_event["involvedObject"]["apiVersion"] == "scheduling.sigs.k8s.io/v1alpha1"
        assert pg_event["reason"] == "GangWaiting" and pg_event["source"]["component"] == "koordpy-manager"

        # The third member arrives bound and running, then the other two: Pending → ... → Running.
        assert await api(emulator, "POST", PODS, member("w2", label, "mpi", node="n1", phase="Running")) < 300
        await eventually(lambda: status_of(emulator, SIGS, "mpi").get("phase") == "Scheduling", "Scheduling")
        status = status_of(emulator, SIGS, "mpi")
        assert status["scheduled"] == 1 and status["occupiedBy"] == "team-a/mpi" and status["scheduleStartTime"]
        # The message changed, but the interval (3600 s) holds the new Events back: no flood.
        assert len(events(emulator)) == 3
        for i in range(2):
            bound = member(f"w{i}", label, "mpi", node=f"n{i}", phase="Running")
            assert (
                await api(emulator, "PATCH", f"{PODS}/w{i}", {"spec": bound["spec"], "status": bound["status"]}) < 300
            )
        await eventually(lambda: status_of(emulator, SIGS, "mpi").get("phase") == "Running", "Running")
        assert status_of(emulator, SIGS, "mpi")["running"] == 3
    # Status only: the manager never wrote a PodGroup's spec, nor any pod.
    writes = [r for r in emulator if r.method in ("PATCH", "PUT") and r.headers.get("Authorization")]
    assert writes and all(r.url.path.endswith("/mpi/status") for r in writes)


async def test_x_k8s_podgroup_has_no_scheduled_counter(emulator: kmock.KubernetesEmulator, kubeconfig: Path) -> None:
    label = "scheduling.x-k8s.io/pod-group"
    assert (
        await api(
            emulator,
            "POST",
            "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/team-a/podgroups",
            podgroup("scheduling.x-k8s.io/v1alpha1", "ring", 2),
        )
        < 300
    )
    for i in range(2):
        assert await api(emulator, "POST", PODS, member(f"r{i}", label, "ring")) < 300
    async with running_manager(CONFIG):
        # 2 pods ≥ min 2: Pending → Scheduling (scheduler-plugins' machine), none placed yet.
        await eventually(lambda: status_of(emulator, X_K8S, "ring").get("phase") == "Scheduling", "Scheduling")
        status = status_of(emulator, X_K8S, "ring")
        assert "scheduled" not in status
        assert (status["running"], status["succeeded"], status["failed"]) == (0, 0, 0)
        await eventually(lambda: len(events(emulator)) >= 1, "an Event")
        assert events(emulator)[0]["message"] == (
            "gang team-a/ring: 2 of 2 members exist, waiting for 2 more members to be placed"
        )


@pytest.mark.parametrize("x_k8s_served", [False])
async def test_runs_without_the_x_k8s_api(emulator: kmock.KubernetesEmulator, kubeconfig: Path) -> None:
    label = "pod-group.scheduling.sigs.k8s.io"
    assert (
        await api(
            emulator,
            "POST",
            "/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/team-a/podgroups",
            podgroup("scheduling.sigs.k8s.io/v1alpha1", "solo", 1),
        )
        < 300
    )
    assert await api(emulator, "POST", PODS, member("s0", label, "solo")) < 300
    async with running_manager(CONFIG):
        # min 1, one member without a node: Pending → PreScheduling → Scheduling (0 scheduled < 1).
        await eventually(lambda: status_of(emulator, SIGS, "solo").get("phase") == "Scheduling", "Scheduling")
    assert not [r for r in emulator if "scheduling.x-k8s.io" in r.url.path and r.method != "GET"]


async def test_volcano_podgroup_status_in_volcano_phases(emulator: kmock.KubernetesEmulator, kubeconfig: Path) -> None:
    """A ``scheduling.volcano.sh/v1beta1`` PodGroup (members join with Volcano's annotation): Inqueue at once
    (koordpy has no queues), Running once min members are bound; written by a patch of the object that holds
    ``status`` only (Volcano's CRD has no status subresource)."""
    assert (
        await api(
            emulator,
            "POST",
            "/apis/scheduling.volcano.sh/v1beta1/namespaces/team-a/podgroups",
            {**podgroup("scheduling.volcano.sh/v1beta1", "job", 2), "spec": {"minMember": 2, "queue": "research"}},
        )
        < 300
    )
    pods = []
    for i in range(2):
        raw = member(f"v{i}", "x", "unused")
        raw["metadata"]["labels"] = {}
        raw["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": "job"}
        pods.append(raw)
        assert await api(emulator, "POST", PODS, raw) < 300
    async with running_manager(CONFIG):
        await eventually(lambda: status_of(emulator, VOLCANO, "job").get("phase") == "Inqueue", "Inqueue")
        assert status_of(emulator, VOLCANO, "job") == {"phase": "Inqueue", "running": 0, "succeeded": 0, "failed": 0}
        for i in range(len(pods)):
            body = {"spec": {"nodeName": f"n{i}"}, "status": {"phase": "Running"}}
            assert await api(emulator, "PATCH", f"{PODS}/v{i}", body) < 300
        await eventually(lambda: status_of(emulator, VOLCANO, "job").get("phase") == "Running", "Running")
        assert status_of(emulator, VOLCANO, "job")["running"] == 2
    writes = [
        r
        for r in emulator
        if r.method in ("PATCH", "PUT") and "/podgroups/" in r.url.path and r.headers.get("Authorization")
    ]
    assert writes and {r.url.path for r in writes} == {
        "/apis/scheduling.volcano.sh/v1beta1/namespaces/team-a/podgroups/job"
    }
    assert all(set(r.data) == {"status"} for r in writes)
