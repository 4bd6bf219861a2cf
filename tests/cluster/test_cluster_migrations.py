"""PodMigrationJobs on the real control plane: the chart's CRD and the real API server refuse a podRef they
could not hold; every wait of a job is named in a condition and an Event; a ttl fails the job at its
deadline while a PodDisruptionBudget keeps the disruption controller answering 429; an evictor the chart's
RBAC does not grant fails the job at once. The manager runs on the chart's ServiceAccount token with the
chart's configuration; the pods are a real Deployment's, scheduled by the stock default scheduler onto a
kwok node, replaced by the real ReplicaSet controller.
"""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

import httpx
import pytest
from cluster_kit import Components, Kube, Space, wait_until

from koordpy.model.durations import parse_rfc3339
from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.controlplane import ControlPlane

pytestmark = pytest.mark.cluster

SA = "system:serviceaccount:koordpy-system:koordpy-manager"
PMJ = "PodMigrationJob"
DIRECT = {"migrationController": {"defaultJobMode": "EvictDirectly"}}


def deployment(space: Space, name: str, replicas: int, node: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": space.namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {"kubernetes.io/hostname": node},
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.invalid/app:1",
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                        }
                    ],
                },
            },
        },
    }


def running_pods(space: Space, app: str, count: int) -> list[str]:
    """The names of the ``count`` Ready pods of ``app`` (waits for the Deployment to have them)."""

    def ready() -> list[str] | None:
        names = [
            name
            for name, pod in space.pods().items()
            if pod["metadata"].get("labels", {}).get("app") == app
            and not pod["metadata"].get("deletionTimestamp")
            and any(c["type"] == "Ready" and c["status"] == "True" for c in pod.get("status", {}).get("conditions", []))
        ]
        return sorted(names) if len(names) == count else None

    pods: list[str] = wait_until(f"{count} Ready pods of {app}", ready)
    return pods


def job(space: Space, name: str, pod: str, *, ttl: str = "5m", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": PMJ,
        "metadata": {"name": f"{space.namespace}-{name}", "labels": labels or {}},
        "spec": {"mode": "EvictDirectly", "ttl": ttl, "podRef": {"namespace": space.namespace, "name": pod}},
    }


def status(kube: Kube, name: str) -> dict[str, Any]:
    found = kube.get(PMJ, name)
    assert found is not None, name
    return dict(found.get("status") or {})


def waiting(status_: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in status_.get("conditions") or () if c["type"] == "Waiting" and c["status"] == "True"), None)


def kubectl_apply(plane: ControlPlane, obj: dict[str, Any]) -> None:
    """``kubectl apply -f -`` of ``obj`` with the control plane's kubectl, as its admin."""
    assert plane.bin_dir is not None
    done = subprocess.run(
        [str(plane.bin_dir / "kubectl"), "--kubeconfig", str(plane.admin_kubeconfig), "apply", "-f", "-"],
        input=json.dumps(obj),
        capture_output=True,
        text=True,
        timeout=HANG_BACKSTOP,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def job_events(kube: Kube, name: str) -> list[dict[str, Any]]:
    return kube.events("default", involved=name)


def event_reasons(kube: Kube, name: str) -> list[str]:
    return [e["reason"] for e in job_events(kube, name)]


def budget(kube: Kube, space: Space, app: str, max_unavailable: int, observed: str, value: int) -> None:
    """A PodDisruptionBudget over ``app``'s pods; returns once the disruption controller's status has
    ``observed`` == ``value`` (until then the API server answers evictions as it pleases)."""
    kube.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": app, "namespace": space.namespace},
            "spec": {"maxUnavailable": max_unavailable, "selector": {"matchLabels": {"app": app}}},
        }
    )

    def computed() -> bool:
        pdb = kube.get("PodDisruptionBudget", app, space.namespace) or {}
        return (pdb.get("status") or {}).get(observed) == value

    wait_until(f"the disruption controller's {observed} = {value} for {app}", computed)


def manager_audit(plane: ControlPlane, resource: str, subresource: str = "") -> list[dict[str, Any]]:
    return [
        e
        for e in plane.audit_events()
        if e["user"]["username"] == SA
        and (e.get("objectRef") or {}).get("resource") == resource
        and (e.get("objectRef") or {}).get("subresource", "") == subresource
    ]


def test_a_pod_ref_the_api_server_could_not_hold_is_refused_and_a_valid_job_completes(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube
) -> None:
    """The refused specs get 422 naming the field; a valid job applied with the real kubectl passes
    arbitration, evicts its pod once through the Eviction API and completes."""
    node = space.node("n0", cpu="8", memory="32Gi")
    space.wait_nodes_ready()
    kube.create(deployment(space, "web", 4, node))
    pods = running_pods(space, "web", 4)
    manager = koordpy.start_manager(DIRECT)
    refused = {
        "long-name": {"podRef": {"namespace": space.namespace, "name": "w" * 9000}},
        "subresource": {"podRef": {"namespace": space.namespace, "name": f"{pods[0]}/status"}},
        "upper-namespace": {"podRef": {"namespace": "Shop", "name": pods[0]}},
        "absurd-ttl": {"podRef": {"namespace": space.namespace, "name": pods[0]}, "ttl": "1e99h"},
    }
    for name, spec in refused.items():
        body = {**job(space, name, pods[0]), "spec": {"mode": "EvictDirectly", **spec}}
        resp = kube.client.post("/apis/scheduling.koordinator.sh/v1alpha1/podmigrationjobs", json=body)
        assert resp.status_code == 422, (name, resp.status_code, resp.text[:300])
        field = "spec.ttl" if name == "absurd-ttl" else "spec.podRef"
        assert field in resp.text, (name, resp.text[:300])
    good = job(space, "good", pods[0])["metadata"]["name"]
    kubectl_apply(control_plane, job(space, "good", pods[0]))  # as a user would, with the real kubectl
    wait_until("the valid job done", lambda: status(kube, good).get("phase") in ("Succeeded", "Failed"))
    done = kube.get(PMJ, good)
    assert done is not None
    assert (done["status"]["phase"], done["status"]["status"]) == ("Succeeded", "Complete"), done["status"]
    assert done["metadata"]["annotations"]["descheduler.koordinator.sh/passed-arbitration"] == "true"
    assert pods[0] not in space.pods() or space.pods()[pods[0]]["metadata"].get("deletionTimestamp")
    running_pods(space, "web", 4)  # the ReplicaSet replaced it
    exposition = httpx.get(koordpy.manager_base + "/metrics", timeout=HANG_BACKSTOP).text
    assert 'koordpy_migration_evictions_total{evictor="Eviction",outcome="evicted"} 1.0' in exposition
    evicted = [e for e in manager_audit(control_plane, "pods", "eviction") if e["objectRef"].get("name") == pods[0]]
    assert [e["responseStatus"]["code"] for e in evicted] == [201]
    assert "Traceback" not in manager.log.read_text(errors="replace")


def test_every_wait_names_its_reason_in_a_condition_and_an_event(koordpy: Components, space: Space, kube: Kube) -> None:
    """Four replicas: two may migrate at once (maxMigratingPerWorkload), and objectLimiters' default
    (5 minutes) lets the workload lose two pods per 300 s, one at a time: the first job evicts, the second
    waits for the limiter (Running), the third for arbitration (Pending). Both say why."""
    node = space.node("n0", cpu="8", memory="32Gi")
    space.wait_nodes_ready()
    kube.create(deployment(space, "web", 4, node))
    pods = running_pods(space, "web", 4)
    # the three jobs exist before the manager's first round, which arbitrates them together (created one by
    # one under a running manager, a job arriving after the first eviction meets the limiter in arbitration)
    names = [kube.create(job(space, f"m{i}", pods[i]))["metadata"]["name"] for i in range(3)]
    koordpy.start_manager(DIRECT)

    def settled() -> dict[str, dict[str, Any]] | None:
        found = {name: status(kube, name) for name in names}
        done = [n for n, s in found.items() if s.get("phase") == "Succeeded"]
        named = [n for n, s in found.items() if waiting(s) is not None]
        return found if len(done) == 1 and len(named) == 2 else None

    found: dict[str, dict[str, Any]] = wait_until("one job done, two naming their wait", settled)
    held = {name: waiting(s) for name, s in found.items() if waiting(s) is not None}
    phases = sorted(found[name].get("phase") or "Pending" for name in held)
    assert phases == ["Pending", "Running"], found
    for name, condition in held.items():
        assert condition is not None and condition["message"], found[name]
        phase = found[name].get("phase") or "Pending"
        if phase == "Running":  # passed arbitration: the object limiter holds its eviction back
            assert condition["reason"] == "ObjectLimiter" and "300s" in condition["message"], condition
            assert f"{space.namespace}/web" in condition["message"], condition  # it names the workload
        else:  # still in arbitration: the filter that requeued it
            assert condition["reason"] in ("ObjectLimiter", "MaxMigratingPerNode", "MaxMigratingPerWorkload"), condition
        # the Event follows the condition: wait for it
        reason = condition["reason"]
        wait_until(f"{name}'s {reason} Event", lambda n=name, r=reason: r in event_reasons(kube, n))
    time.sleep(2)  # ten more rounds: a wait is told once, not once per round
    for name, condition in held.items():
        told = [e for e in job_events(kube, name) if e["reason"] == condition["reason"]]
        assert len(told) == 1 and (told[0].get("count") or 1) == 1, told


def test_ttl_fails_the_job_at_its_deadline_while_a_budget_answers_429(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube
) -> None:
    """A budget that allows no disruption: the disruption controller keeps disruptionsAllowed at 0 and the
    API server answers each eviction 429. The retries back off 1, 2, 4, 8, 16 then 30 s, so the attempt
    after the 40 s ttl would come at about 61 s; the job fails at its deadline instead."""
    node = space.node("n0", cpu="8", memory="32Gi")
    space.wait_nodes_ready()
    kube.create(deployment(space, "db", 3, node))
    pods = running_pods(space, "db", 3)
    budget(kube, space, "db", 0, "expectedPods", 3)
    koordpy.start_manager(DIRECT)
    created = kube.create(job(space, "db", pods[0], ttl="40s"))
    name = created["metadata"]["name"]
    born = parse_rfc3339(created["metadata"]["creationTimestamp"])
    wait_until("the job failed", lambda: status(kube, name).get("phase") == "Failed", timeout=300)
    final = status(kube, name)
    assert (final["reason"], final["message"]) == ("Timeout", "Abort job caused by timeout")
    # The Event is posted after the status is written: wait for it, then there must be exactly one.
    wait_until("the Timeout Event", lambda: "Timeout" in event_reasons(kube, name))
    (timeout_event,) = [e for e in job_events(kube, name) if e["reason"] == "Timeout"]
    at = parse_rfc3339(timeout_event.get("eventTime") or timeout_event["firstTimestamp"])
    refused = [e for e in manager_audit(control_plane, "pods", "eviction") if e["objectRef"].get("name") == pods[0]]
    assert len(refused) >= 3 and {e["responseStatus"]["code"] for e in refused} == {429}
    last = max(parse_rfc3339(e["requestReceivedTimestamp"]) for e in refused)
    print(
        f"ttl 40 s: Failed/Timeout {at - born:.1f} s after creation, {at - last:.1f} s after the last of {len(refused)} refused evictions"
    )
    # never before the deadline; and before the retry after the last refusal (30 s later, the backoff's cap:
    # the 6th failure in a row), which is where a ttl noticed only by the retry would have failed it
    assert at - born >= 40, at - born
    assert at < last + 30, (at - born, last - born)
    deletes = [e for e in manager_audit(control_plane, "pods") if e["verb"] == "delete"]
    assert deletes == []  # a refused eviction never became a plain delete
    assert space.pods()[pods[0]]["metadata"].get("deletionTimestamp") is None


def test_evictions_refused_by_a_budget_are_retried_until_it_allows_them(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube
) -> None:
    node = space.node("n0", cpu="8", memory="32Gi")
    space.wait_nodes_ready()
    kube.create(deployment(space, "api", 3, node))
    pods = running_pods(space, "api", 3)
    budget(kube, space, "api", 0, "expectedPods", 3)
    koordpy.start_manager(DIRECT)
    name = kube.create(job(space, "api", pods[0]))["metadata"]["name"]

    def refusals() -> list[dict[str, Any]]:
        return [
            e
            for e in manager_audit(control_plane, "pods", "eviction")
            if e["objectRef"].get("name") == pods[0] and e["responseStatus"]["code"] == 429
        ]

    wait_until("two refused evictions", lambda: len(refusals()) >= 2)
    held = status(kube, name)
    assert held["phase"] == "Running"
    eviction = next(c for c in held["conditions"] if c["type"] == "Eviction")
    assert (eviction["status"], eviction["reason"]) == ("False", "FailedEvict")
    wait_until("an Evicting Event", lambda: "Evicting" in event_reasons(kube, name))
    kube.patch("PodDisruptionBudget", "api", {"spec": {"maxUnavailable": 1}}, space.namespace)
    wait_until("the job done", lambda: status(kube, name).get("phase") == "Succeeded", timeout=300)
    allowed = [
        e
        for e in manager_audit(control_plane, "pods", "eviction")
        if e["objectRef"].get("name") == pods[0] and e["responseStatus"]["code"] in (200, 201)
    ]
    assert len(allowed) == 1  # one eviction went through, once
    assert [e for e in manager_audit(control_plane, "pods") if e["verb"] == "delete"] == []


def test_an_evictor_the_chart_does_not_grant_fails_the_job_at_once(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube
) -> None:
    """``koordinator.sh/evict-policy: Delete`` asks for a plain delete; the chart grants pods/eviction only,
    so the real authorizer answers 403 and the job fails at once, naming the missing permission, instead
    of retrying until its ttl."""
    node = space.node("n0", cpu="8", memory="32Gi")
    space.wait_nodes_ready()
    kube.create(deployment(space, "web", 4, node))
    pods = running_pods(space, "web", 4)
    koordpy.start_manager(DIRECT)
    body = job(space, "delete", pods[0], labels={"koordinator.sh/evict-policy": "Delete"})
    name = kube.create(body)["metadata"]["name"]
    wait_until("the job failed", lambda: status(kube, name).get("phase") == "Failed")
    final = status(kube, name)
    assert final["reason"] == "FailedEvict" and "delete pods" in final["message"], final
    wait_until("the FailedEvict Event", lambda: "FailedEvict" in event_reasons(kube, name))  # it follows the status
    assert [e["reason"] for e in job_events(kube, name) if e["type"] == "Warning"][-1] == "FailedEvict"
    time.sleep(5)  # ten rounds: the failed job is not tried again
    deletes = [
        e
        for e in manager_audit(control_plane, "pods")
        if e["verb"] == "delete" and e["objectRef"].get("name") == pods[0]
    ]
    assert [e["responseStatus"]["code"] for e in deletes] == [403]
    assert pods[0] in space.pods() and not space.pods()[pods[0]]["metadata"].get("deletionTimestamp")


def gang_set(space: Space, name: str, members: int) -> dict[str, Any]:
    """A StatefulSet of ``members`` pods that make the gang ``name`` (a ``scheduling.sigs.k8s.io`` PodGroup),
    one pod per node (required anti-affinity), scheduled by the stock default scheduler. (Not a batch Job:
    kwok completes a Job's pods at once, and a gang that has finished has nothing left to keep whole.)"""
    labels = {"app": name, "pod-group.scheduling.sigs.k8s.io": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": space.namespace},
        "spec": {
            "replicas": members,
            "serviceName": name,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": space.selector,
                    "terminationGracePeriodSeconds": 0,
                    "affinity": {
                        "podAntiAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "labelSelector": {"matchLabels": {"app": name}},
                                    "topologyKey": "kubernetes.io/hostname",
                                }
                            ]
                        }
                    },
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.invalid/train:1",
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                        }
                    ],
                },
            },
        },
    }


GANG_OF_FOUR = {
    "migrationController": {
        "defaultJobMode": "EvictDirectly",
        # a 4-replica StatefulSet: the implicit per-workload limits (2) would never let its four members
        # move together, and 4 == maxMigratingPerWorkload trips the expected-replicas guard
        "maxMigratingPerWorkload": 4,
        "maxUnavailablePerWorkload": 4,
        "skipCheckExpectedReplicas": True,
    }
}


def test_a_job_for_one_member_of_a_running_gang_waits_and_the_gang_moves_together(
    control_plane: ControlPlane, koordpy: Components, space: Space, kube: Kube
) -> None:
    """A running gang of four (a StatefulSet's pods, PodGroup minMember 4). A job for one member would
    leave three running and one pending: it waits, condition ``Waiting``/``GangBelowMinimum`` and one
    Event, and the audit log shows no eviction. Once every member has a job, the four pass in one round
    (each carries ``koordpy.io/gang-migration`` naming the four) and the audit log shows the four
    evictions, all after the last job was created."""
    for i in range(4):
        space.node(f"n{i}", cpu="8", memory="32Gi")
    space.wait_nodes_ready()
    kube.create(
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": space.namespace},
            "spec": {"minMember": 4},
        }
    )
    kube.create(gang_set(space, "train", 4))
    pods = running_pods(space, "train", 4)
    uids = {name: space.pods()[name]["metadata"]["uid"] for name in pods}
    manager = koordpy.start_manager(GANG_OF_FOUR)
    first = kube.create(job(space, "m0", pods[0]))["metadata"]["name"]

    def judged() -> dict[str, Any] | None:
        """The job's status once arbitration said something: a named wait, or it moved on."""
        found = status(kube, first)
        return found if waiting(found) is not None or found.get("phase") not in (None, "Pending") else None

    judged_status: dict[str, Any] = wait_until("arbitration judged the job", judged)
    condition = waiting(judged_status)
    assert condition is not None and condition["reason"] == "GangBelowMinimum", judged_status
    assert f"moving pod {space.namespace}/{pods[0]} alone leaves 3 < 4" in condition["message"], condition
    wait_until("the GangBelowMinimum Event", lambda: "GangBelowMinimum" in event_reasons(kube, first))
    time.sleep(2)  # four rounds: still waiting, told once, nothing evicted
    assert (status(kube, first).get("phase") or "Pending") == "Pending"
    assert [e.get("count") or 1 for e in job_events(kube, first) if e["reason"] == "GangBelowMinimum"] == [1]
    now = {name: pod["metadata"]["uid"] for name, pod in space.pods().items()}
    assert now == uids  # the same four pods run, none was replaced

    def evictions_of_the_gang() -> list[dict[str, Any]]:
        return [e for e in manager_audit(control_plane, "pods", "eviction") if e["objectRef"].get("name") in pods]

    assert evictions_of_the_gang() == []
    names = [first] + [kube.create(job(space, f"m{i}", pods[i]))["metadata"]["name"] for i in range(1, 4)]
    last_created = max(parse_rfc3339((kube.get(PMJ, n) or {})["metadata"]["creationTimestamp"]) for n in names)
    wait_until(
        "the four jobs done", lambda: all(status(kube, n).get("phase") == "Succeeded" for n in names), timeout=300
    )
    unit = json.dumps({"gang": f"gang {space.namespace}/train", "jobs": sorted(names)}, separators=(",", ":"))
    for name in names:
        annotations = (kube.get(PMJ, name) or {})["metadata"]["annotations"]
        assert annotations["koordpy.io/gang-migration"] == unit, annotations
    evicted = evictions_of_the_gang()
    # one eviction asked per member, never a second. kwok ends an evicted pod at once, so a member's deletion can
    # finish while its eviction is still in the API server, which then answers 409 (its UID precondition meets
    # the StatefulSet's new pod of that name): the pod is gone all the same and its job succeeds
    assert sorted(e["objectRef"]["name"] for e in evicted) == sorted(pods), evicted
    assert {e["responseStatus"]["code"] for e in evicted} <= {201, 409}, evicted
    assert min(parse_rfc3339(e["requestReceivedTimestamp"]) for e in evicted) >= last_created
    log = manager.log.read_text(errors="replace")
    assert f"pass together: gang {space.namespace}/train moves as one" in log
    assert "Traceback" not in log
