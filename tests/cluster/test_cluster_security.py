"""The chart's security on a real, stock control plane: kube-apiserver without ``--allow-privileged``, with
Pod Security admission, the Node and RBAC authorizers and ValidatingAdmissionPolicy, as a cluster admin
installs it with the real helm.

* The chart installs in a namespace enforcing Pod Security ``privileged`` (the level the agent's hostPath
  needs); the scheduler and the manager also run alone in a namespace enforcing ``restricted``; a namespace
  enforcing ``baseline`` is refused before anything is created.
* An agent token bound to the agent's pod on node A writes node A's NodeMetric and evicts node A's pods,
  and is refused node B's; with the policy off, RBAC alone lets it (what the policy stops).
* A PodMigrationJob is admitted only for a pod its creator may evict, and its Reservation template only
  with what a migration may set; the aggregated roles reach namespace editors and viewers.
* The scheduler's token writes pods' status but no pod, nor labels or annotations through the status, and
  of CSIStorageCapacities only the release's requeue signal.
* An agent eviction names the pod's UID: a pod made again under the same name is not evicted.
* The agent process, with the chart's container identity on real cgroups, throttles and evicts.
* ``helm uninstall`` leaves the kept CRDs and nothing else of the release (the test lists what is left).

One control plane for the module; the tests run in file order and the last one uninstalls the release.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from cluster_kit import Components, Kube, Release, helm

from koordpy_testkit.confined import Confinement
from koordpy_testkit.controlplane import ControlPlane, fake_node
from koordpy_testkit.processes import LOOPBACK, Proc, free_port, wait_http

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CHART = ROOT / "charts" / "koordpy"
RELEASE, NAMESPACE = "koordpy", "koordpy-system"
NODE_A, NODE_B, SYSTEM_NODE = "node-a", "node-b", "system-0"
ENFORCE = "pod-security.kubernetes.io/enforce"
KEPT_CRDS = {
    "nodemetrics.slo.koordinator.sh",
    "podmigrationjobs.scheduling.koordinator.sh",
    "reservations.scheduling.koordinator.sh",
    "podgroups.scheduling.sigs.k8s.io",
    "nodeqosensurancepolicies.ensurance.crane.io",
    "avoidanceactions.ensurance.crane.io",
    "nodeqoss.ensurance.crane.io",
    "podqoss.ensurance.crane.io",
    "clusterkopfpeerings.kopf.dev",
}
# the chart's Deployments on a node of their own, so node A and node B carry only agents and test pods
ON_SYSTEM_NODE = ("--set", "scheduler.nodeSelector.role=system", "--set", "manager.nodeSelector.role=system")
NM = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"
PMJ = "/apis/scheduling.koordinator.sh/v1alpha1/podmigrationjobs"


# ---- helpers ---------------------------------------------------------------------------------


def ok(resp: httpx.Response) -> dict[str, Any]:
    assert resp.status_code < 300, f"{resp.request.method} {resp.request.url}: {resp.status_code} {resp.text[:500]}"
    body: dict[str, Any] = resp.json()
    return body


def namespace(api: httpx.Client, name: str, level: str | None = None) -> None:
    labels = {ENFORCE: level, f"{ENFORCE}-version": "latest"} if level else {}
    ok(
        api.post(
            "/api/v1/namespaces",
            json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}},
        )
    )


def pod(name: str, node: str | None, **spec: Any) -> dict[str, Any]:
    """A pod bound to ``node``; with ``None``, one that stays pending (no scheduler of that name runs)."""
    body: dict[str, Any] = {"containers": [{"name": "c", "image": "registry.example/app:1"}], **spec}
    if node:
        body["nodeName"] = node
    else:
        body["schedulerName"] = "nobody"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": body}


def pods(api: httpx.Client, ns: str, selector: str = "") -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = ok(api.get(f"/api/v1/namespaces/{ns}/pods", params={"labelSelector": selector}))[
        "items"
    ]
    return items


def agent_pod(api: httpx.Client, node: str, ns: str = NAMESPACE) -> dict[str, Any]:
    found = [p for p in pods(api, ns, "app.kubernetes.io/component=agent") if p["spec"].get("nodeName") == node]
    assert len(found) == 1, f"one agent pod on {node}: {[p['metadata']['name'] for p in found]}"
    return found[0]


def agent_token(plane: ControlPlane, node: str, ns: str = NAMESPACE, release: str = RELEASE) -> str:
    """The token the kubelet would mount into the agent pod on ``node`` (bound to that pod)."""
    with plane.client() as api:
        bound = agent_pod(api, node, ns)
    meta = bound["metadata"]
    return plane.token(
        ns,
        f"{release}-agent" if "koordpy" in release else f"{release}-koordpy-agent",
        bound_pod=(meta["name"], meta["uid"]),
    )


def evict(api: httpx.Client, ns: str, name: str, *, dry_run: bool = False) -> httpx.Response:
    """An Eviction; ``dry_run`` goes through admission (the policies too) and changes nothing."""
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}}
    params = {"dryRun": "All"} if dry_run else {}
    return api.post(f"/api/v1/namespaces/{ns}/pods/{name}/eviction", json=body, params=params)


def nodemetric(node: str) -> dict[str, Any]:
    return {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": node}, "spec": {}}


def patch_status(api: httpx.Client, node: str) -> httpx.Response:
    body = json.dumps({"status": {"updateTime": "2030-01-01T00:00:00Z"}})
    return api.patch(f"{NM}/{node}/status", content=body, headers={"Content-Type": "application/merge-patch+json"})


def refused_by(resp: httpx.Response, policy: str, status: int = 403) -> str:
    """The refusal's message; 403 for a Forbidden validation, 422 for an Invalid one."""
    assert resp.status_code == status, f"{resp.status_code} {resp.text[:300]}"
    message: str = resp.json()["message"]
    assert f"ValidatingAdmissionPolicy '{policy}'" in message, message
    return message


def get(api: httpx.Client, path: str, **params: str) -> dict[str, Any]:
    """GET, retried while the API server answers 429 (a CRD's storage being (re)initialised)."""
    for _ in range(30):
        resp = api.get(path, params=params)
        if resp.status_code != 429:
            return ok(resp)
        time.sleep(float(resp.headers.get("Retry-After", "1")))
    return ok(resp)


def listed_objects(api: httpx.Client, selector: str, namespace_name: str) -> set[str]:
    """``kind/namespace/name`` of every object labelled ``selector`` in every listable API (found by
    discovery), plus everything in ``namespace_name`` but what Kubernetes puts in every namespace."""
    found: set[str] = set()
    versions = ["/api/v1"] + [f"/apis/{g['preferredVersion']['groupVersion']}" for g in ok(api.get("/apis"))["groups"]]
    for base in versions:
        for resource in ok(api.get(base))["resources"]:
            if "/" in resource["name"] or "list" not in resource["verbs"]:
                continue
            for item in get(api, f"{base}/{resource['name']}", labelSelector=selector)["items"]:
                found.add(f"{resource['kind']}/{item['metadata'].get('namespace', '')}/{item['metadata']['name']}")
            if resource["namespaced"] and resource["kind"] != "Event":
                for item in get(api, f"{base}/namespaces/{namespace_name}/{resource['name']}")["items"]:
                    if (resource["kind"], item["metadata"]["name"]) not in {
                        ("ServiceAccount", "default"),
                        ("ConfigMap", "kube-root-ca.crt"),
                    }:
                        found.add(f"{resource['kind']}/{namespace_name}/{item['metadata']['name']}")
    return found


# ---- the control plane and the release ---------------------------------------------------------


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A stock control plane (no --allow-privileged) with two worker nodes and a system node, the chart
    installed in ``koordpy-system`` (labelled Pod Security ``privileged``) with two manager replicas."""
    control = ControlPlane(workdir=tmp_path_factory.mktemp("security"))
    control.start()
    try:
        with control.client() as api:
            for node in (NODE_A, NODE_B):
                ok(api.post("/api/v1/nodes", json=fake_node(node)))
            ok(api.post("/api/v1/nodes", json=fake_node(SYSTEM_NODE, labels={"role": "system"})))
            namespace(api, NAMESPACE, "privileged")
        helm(
            control, "install", RELEASE, str(CHART), "-n", NAMESPACE, "--set", "manager.replicaCount=2", *ON_SYSTEM_NODE
        )
        yield control
    finally:
        control.stop()


def test_the_chart_installs_on_a_stock_apiserver_and_every_pod_is_admitted(plane: ControlPlane) -> None:
    apiserver = plane.procs["kube-apiserver"].args
    assert not [a for a in apiserver if a.startswith("--allow-privileged")], apiserver
    with plane.client() as api:
        # the control: this API server refuses a privileged container, whatever the namespace's level
        privileged = pod("privileged", NODE_A)
        privileged["spec"]["containers"][0]["securityContext"] = {"privileged": True}
        refused = api.post(f"/api/v1/namespaces/{NAMESPACE}/pods", json=privileged)
        assert refused.status_code == 422 and "disallowed by cluster policy" in refused.text, refused.text

        def by_component() -> dict[str, list[str]] | None:
            found: dict[str, list[str]] = {}
            for item in pods(api, NAMESPACE):
                if item["status"].get("phase") != "Running":
                    return None
                component = item["metadata"]["labels"]["app.kubernetes.io/component"]
                found.setdefault(component, []).append(item["spec"]["nodeName"])
            return found if sum(map(len, found.values())) == 6 else None

        running = plane.wait_for("the release's 6 pods running", by_component)
        assert {c: sorted(nodes) for c, nodes in running.items()} == {
            "agent": [NODE_A, NODE_B, SYSTEM_NODE],
            "manager": [SYSTEM_NODE, SYSTEM_NODE],
            "scheduler": [SYSTEM_NODE],
        }
        base = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
        names = {p["metadata"]["name"] for p in ok(api.get(base))["items"]}
        assert names == {
            "koordpy-agent-node-scope",
            "koordpy-agent-evictions",
            "koordpy-podmigrationjob-eviction-rights",
            "koordpy-scheduler-pod-status",
        }
        for name in names:  # the API server's type check of every expression found nothing to warn about
            status = plane.wait_for(f"{name} type-checked", lambda n=name: ok(api.get(f"{base}/{n}")).get("status"))
            assert status["typeChecking"].get("expressionWarnings") is None, status


def test_scheduler_and_manager_run_at_restricted_and_the_agent_alone_at_privileged(plane: ControlPlane) -> None:
    """The split docs/security.md describes: two releases, the agent's in its own privileged namespace."""
    core, nodes = "koordpy-core", "koordpy-nodes"
    with plane.client() as api:
        namespace(api, core, "restricted")
        namespace(api, nodes, "privileged")
    shared = ("--set", "crds.enabled=false", "--set", "userRoles.enabled=false", *ON_SYSTEM_NODE)
    with_agent = helm(plane, "install", "core", str(CHART), "-n", core, *shared, check=False)
    assert with_agent.returncode != 0
    assert 'level "restricted", which refuses the agent\'s pods (its hostPath volumes and uid 0)' in with_agent.stderr
    helm(plane, "install", "core", str(CHART), "-n", core, "--set", "agent.enabled=false", *shared)
    helm(
        plane,
        "install",
        "nodes",
        str(CHART),
        "-n",
        nodes,
        "--set",
        "scheduler.enabled=false",
        "--set",
        "manager.enabled=false",
        *shared,
    )
    try:
        with plane.client() as api:
            running = plane.wait_for(
                "the scheduler and the manager admitted at restricted, the agents at privileged",
                lambda: (
                    len([p for p in pods(api, core) if p["status"].get("phase") == "Running"]) == 2
                    and len([p for p in pods(api, nodes) if p["status"].get("phase") == "Running"]) == 3
                    and {p["metadata"]["labels"]["app.kubernetes.io/component"] for p in pods(api, core)}
                ),
            )
            assert running == {"scheduler", "manager"}
            # the agent's pod itself is refused at restricted, for its host paths and its uid 0
            (agent,) = [d for d in ok(api.get(f"/apis/apps/v1/namespaces/{nodes}/daemonsets"))["items"]]
            spec = {
                k: v
                for k, v in agent["spec"]["template"]["spec"].items()
                if k not in ("serviceAccountName", "serviceAccount")
            }
            template = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "agent-copy"}, "spec": spec}
            refused = api.post(f"/api/v1/namespaces/{core}/pods", json=template, params={"dryRun": "All"})
            assert refused.status_code == 403, refused.text
            message = refused.json()["message"]
            assert 'violates PodSecurity "restricted:latest"' in message
            assert 'volumes "host-cgroup", "state" use restricted volume type "hostPath"' in message
            assert 'runAsUser=0 (container "agent" must not set runAsUser=0)' in message
            # at baseline its host paths are the one thing refused (no capability, no privilege, no host namespace)
            namespace(api, "koordpy-pss-baseline", "baseline")
            refused = api.post("/api/v1/namespaces/koordpy-pss-baseline/pods", json=template, params={"dryRun": "All"})
            assert refused.status_code == 403, refused.text
            reasons = refused.json()["message"].split('violates PodSecurity "baseline:latest": ', 1)[1]
            assert reasons == 'hostPath volumes (volumes "host-cgroup", "state")'
    finally:
        helm(plane, "uninstall", "core", "-n", core)
        helm(plane, "uninstall", "nodes", "-n", nodes)


def test_a_namespace_enforcing_baseline_is_refused_before_anything_is_created(plane: ControlPlane) -> None:
    with plane.client() as api:
        namespace(api, "koordpy-baseline", "baseline")
    result = helm(
        plane, "install", "base", str(CHART), "-n", "koordpy-baseline", "--set", "crds.enabled=false", check=False
    )
    assert result.returncode != 0
    assert (
        'namespace koordpy-baseline enforces Pod Security level "baseline", which refuses the agent\'s pods'
        " (its hostPath volumes): label it pod-security.kubernetes.io/enforce=privileged" in result.stderr
    )
    assert helm(plane, "list", "-n", "koordpy-baseline", "-q").stdout.strip() == ""  # no release record either
    with plane.client() as api:
        assert listed_objects(api, "app.kubernetes.io/instance=base", "koordpy-baseline") == set()
    # without the agent the same namespace takes the release (its other pods are restricted-compliant)
    helm(
        plane,
        "install",
        "base",
        str(CHART),
        "-n",
        "koordpy-baseline",
        "--set",
        "crds.enabled=false",
        "--set",
        "agent.enabled=false",
        "--set",
        "userRoles.enabled=false",
        *ON_SYSTEM_NODE,
    )
    helm(plane, "uninstall", "base", "-n", "koordpy-baseline")


def test_the_privileged_opt_in_needs_allow_privileged_and_rollback_on_failure_leaves_nothing(
    plane: ControlPlane,
) -> None:
    """agent.privileged on a stock API server: refused half-way; --rollback-on-failure removes the rest."""
    args = ("install", "opt-in", str(CHART), "-n", NAMESPACE, "--set", "crds.enabled=false")
    args += ("--set", "agent.privileged=true", "--set", "scheduler.enabled=false", "--set", "manager.enabled=false")
    result = helm(plane, *args, "--rollback-on-failure", "--timeout", "120s", check=False)
    assert result.returncode != 0
    assert "privileged: Forbidden: disallowed by cluster policy" in result.stderr, result.stderr
    assert helm(plane, "list", "-n", NAMESPACE, "-q").stdout.split() == [RELEASE]
    with plane.client() as api:
        assert listed_objects(api, "app.kubernetes.io/instance=opt-in", "opt-in-nowhere") == set()


@pytest.fixture(scope="module")
def victims(plane: ControlPlane) -> str:
    """A namespace with a pod on each worker node."""
    with plane.client() as api:
        namespace(api, "victims")
        for name, node in (("on-a", NODE_A), ("on-b", NODE_B), ("pending", None)):
            ok(api.post("/api/v1/namespaces/victims/pods", json=pod(name, node)))
    return "victims"


def test_an_agent_token_writes_and_evicts_on_its_own_node_only(plane: ControlPlane, victims: str) -> None:
    token = agent_token(plane, NODE_A)
    with plane.client(token) as agent:
        review = ok(
            agent.post(
                "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
            )
        )
        assert review["status"]["userInfo"]["extra"]["authentication.kubernetes.io/node-name"] == [NODE_A]
        assert ok(agent.post(NM, json=nodemetric(NODE_A)))["metadata"]["name"] == NODE_A
        assert patch_status(agent, NODE_A).status_code == 200
        message = refused_by(agent.post(NM, json=nodemetric(NODE_B)), "koordpy-agent-node-scope")
        assert f"the koordpy agent on node {NODE_A} may write only NodeMetric {NODE_A}, not {NODE_B}" in message
        with plane.client() as api:
            ok(api.post(NM, json=nodemetric(NODE_B)))  # the manager would have created it
        refused_by(patch_status(agent, NODE_B), "koordpy-agent-node-scope")
        message = refused_by(evict(agent, victims, "on-b"), "koordpy-agent-evictions")
        assert f"may evict only pods bound to {NODE_A}, not victims/on-b" in message
        refused_by(evict(agent, victims, "pending"), "koordpy-agent-evictions")  # bound to no node
        assert evict(agent, victims, "on-a").status_code == 201
    with plane.client(agent_token(plane, NODE_B)) as other:
        assert patch_status(other, NODE_B).status_code == 200
        assert evict(other, victims, "on-b").status_code == 201
    # a token of the agent's ServiceAccount that is bound to no pod names no node: refused everything
    with plane.client(plane.token(NAMESPACE, "koordpy-agent")) as unbound:
        for resp in (patch_status(unbound, NODE_A), evict(unbound, victims, "pending")):
            assert resp.status_code == 403 and "token names no node" in resp.json()["message"], resp.text


def test_with_the_policy_off_rbac_alone_lets_one_node_act_on_another(plane: ControlPlane) -> None:
    """What the policy stops (docs/security.md, "With the policies off")."""
    with plane.client() as api:
        for name in ("on-b-again", "on-b-stays"):
            ok(api.post("/api/v1/namespaces/victims/pods", json=pod(name, NODE_B)))
    switch = ("upgrade", RELEASE, str(CHART), "-n", NAMESPACE, "--reuse-values", "--set")
    helm(plane, *switch, "admissionPolicies.agentNodeScope=false")
    try:
        with plane.client(agent_token(plane, NODE_A)) as agent:
            # the API server drops deleted policies from its cache within moments, each on its own
            plane.wait_for(
                "node A's token writes node B's NodeMetric and may evict its pod",
                lambda: (
                    patch_status(agent, NODE_B).status_code == 200
                    and evict(agent, "victims", "on-b-again", dry_run=True).status_code == 201
                ),
            )
            assert evict(agent, "victims", "on-b-again").status_code == 201
    finally:
        helm(plane, *switch, "admissionPolicies.agentNodeScope=true")
    with plane.client(agent_token(plane, NODE_A)) as agent:
        seen: list[tuple[int, int]] = []

        def enforced() -> bool:
            codes = (
                patch_status(agent, NODE_B).status_code,
                evict(agent, "victims", "on-b-stays", dry_run=True).status_code,
            )
            seen.append(codes)
            return codes == (403, 403)

        try:
            plane.wait_for("both policies enforced again", enforced)
        except TimeoutError:
            raise AssertionError(
                f"(NodeMetric status patch, dry-run eviction) answers, last five: {seen[-5:]}"
            ) from None


def _service_account(api: httpx.Client, ns: str, name: str) -> None:
    ok(
        api.post(
            f"/api/v1/namespaces/{ns}/serviceaccounts",
            json={"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
        )
    )


def _bind(api: httpx.Client, role: str, ns: str, user_ns: str, user: str, *, cluster: bool = False) -> None:
    subject = [{"kind": "ServiceAccount", "name": user, "namespace": user_ns}]
    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}
    meta = {"name": f"{user}-{role}"}
    if cluster:
        ok(
            api.post(
                "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                json={
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRoleBinding",
                    "metadata": meta,
                    "roleRef": ref,
                    "subjects": subject,
                },
            )
        )
    else:
        ok(
            api.post(
                f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
                json={
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "RoleBinding",
                    "metadata": meta,
                    "roleRef": ref,
                    "subjects": subject,
                },
            )
        )


def _job(name: str, ns: str, pod_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {"name": name},
        "spec": {"podRef": {"namespace": ns, "name": pod_name}, "mode": "EvictDirectly"},
    }


@pytest.fixture(scope="module")
def teams(plane: ControlPlane) -> dict[str, str]:
    """team-a (where ``dev`` edits, and so may evict) and team-b (where ``dev`` may not), a pod in each;
    ``dev`` may create PodMigrationJobs (the chart's migrate role, cluster-wide), ``viewer`` views team-a,
    ``operator`` edits team-a and holds the chart's admin role (it may patch jobs)."""
    with plane.client() as api:
        for team in ("team-a", "team-b"):
            namespace(api, team)
            ok(api.post(f"/api/v1/namespaces/{team}/pods", json=pod("app", NODE_A)))
        for user in ("dev", "viewer", "operator"):
            _service_account(api, "team-a", user)
        _bind(api, "edit", "team-a", "team-a", "dev")
        _bind(api, "view", "team-a", "team-a", "viewer")
        _bind(api, "koordpy-migrate", "", "team-a", "dev", cluster=True)
        _bind(api, "edit", "team-a", "team-a", "operator")
        _bind(api, "koordpy-admin", "", "team-a", "operator", cluster=True)
    return {user: plane.token("team-a", user) for user in ("dev", "viewer", "operator")}


def test_a_podmigrationjob_is_admitted_only_for_a_pod_its_creator_may_evict(
    plane: ControlPlane, teams: dict[str, str]
) -> None:
    with plane.client(teams["dev"]) as dev:
        assert ok(dev.post(PMJ, json=_job("move-a", "team-a", "app")))["metadata"]["name"] == "move-a"
        message = refused_by(
            dev.post(PMJ, json=_job("move-b", "team-b", "app")), "koordpy-podmigrationjob-eviction-rights"
        )
        assert "system:serviceaccount:team-a:dev may not evict pod team-b/app (create pods/eviction)" in message
        # without the migrate role's patch, dev cannot even try to point the job at another pod
        retarget = json.dumps({"spec": {"podRef": {"namespace": "team-b"}}})
        merge = {"Content-Type": "application/merge-patch+json"}
        assert dev.patch(f"{PMJ}/move-a", content=retarget, headers=merge).status_code == 403
        # without a namespace the job names no pod anyone could be asked about
        unnamed = _job("move-x", "", "app")
        del unnamed["spec"]["podRef"]["namespace"]
        assert "spec.podRef must name the pod's namespace and name" in refused_by(
            dev.post(PMJ, json=unnamed), "koordpy-podmigrationjob-eviction-rights", 422
        )
    with plane.client(teams["operator"]) as operator:
        # pointing a job at another pod is the creator's question again; other changes are not
        refused_by(
            operator.patch(f"{PMJ}/move-a", content=retarget, headers=merge), "koordpy-podmigrationjob-eviction-rights"
        )
        note = json.dumps({"metadata": {"annotations": {"team-a/ticket": "42"}}})
        assert operator.patch(f"{PMJ}/move-a", content=note, headers=merge).status_code == 200
    # the manager's own patches (spec.podRef.uid, annotations) are not the creator's question
    with plane.client(plane.token(NAMESPACE, "koordpy-manager")) as manager:
        uid = json.dumps(
            {"metadata": {"annotations": {"koordpy.io/passed-arbitration": "true"}}, "spec": {"podRef": {"uid": "u-1"}}}
        )
        assert (
            manager.patch(
                f"{PMJ}/move-a", content=uid, headers={"Content-Type": "application/merge-patch+json"}
            ).status_code
            == 200
        )
    with plane.client() as api:
        ok(api.delete(f"{PMJ}/move-a"))


def test_the_aggregated_roles_reach_namespace_editors_and_viewers(plane: ControlPlane, teams: dict[str, str]) -> None:
    group = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "gang"},
        "spec": {"minMember": 2},
    }
    path = "/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/{}/podgroups"
    with plane.client(teams["dev"]) as dev, plane.client(teams["viewer"]) as viewer:
        # the clusterrole-aggregation controller folds koordpy's rules into edit and view
        plane.wait_for(
            "edit aggregates koordpy-edit", lambda: dev.post(path.format("team-a"), json=group).status_code == 201
        )
        assert viewer.get(path.format("team-a")).status_code == 200
        assert viewer.post(path.format("team-a"), json={**group, "metadata": {"name": "g2"}}).status_code == 403
        assert dev.get(path.format("team-b")).status_code == 403  # edit in team-a only
        # cluster-scoped kinds are not in the aggregated roles: a namespace editor writes none of them
        reservation = {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "Reservation",
            "metadata": {"name": "r"},
            "spec": {},
        }
        assert dev.post("/apis/scheduling.koordinator.sh/v1alpha1/reservations", json=reservation).status_code == 403


def _templated(name: str, template: dict[str, Any], ttl: str | None = "5m") -> dict[str, Any]:
    job = _job(name, "team-a", "app")
    job["spec"].pop("mode")  # ReservationFirst: the manager would create a Reservation from the template
    job["spec"]["reservationOptions"] = {"template": template}
    if ttl is not None:
        job["spec"]["ttl"] = ttl
    return job


def test_a_migrate_role_user_cannot_create_a_reservation_through_a_jobs_template(
    plane: ControlPlane, teams: dict[str, str]
) -> None:
    """``dev`` may migrate team-a's pods (the migrate role, and ``edit`` there for the eviction right) and
    may not create a Reservation (403). A job's template is what the manager creates a Reservation from with
    its own identity: the PodMigrationJob CRD's schema refuses, at admission, every field that would make
    it another Reservation than the replacement's (owners, expiry, a ttl beyond the job's, ...). A template
    name passes admission (the schema cannot see the job's UID, which is the only name allowed): the manager
    fails such a job without creating anything (tests/cluster/test_cluster_reservations.py)."""
    owners = [{"labelSelector": {"matchLabels": {"app": "team-b-db"}}}]
    refused = {
        "owners": {"spec": {"owners": owners}},
        "expires": {"spec": {"expires": "2099-01-01T00:00:00Z"}},
        "preAllocation": {"spec": {"preAllocation": True}},
        "preAllocationPolicy": {"spec": {"preAllocationPolicy": {"mode": "Cluster"}}},
        "unschedulable": {"spec": {"unschedulable": True}},
        "taints": {"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}},
        "allocatePolicy": {"spec": {"allocatePolicy": "Restricted"}},
    }
    with plane.client() as api:
        get(api, PMJ)  # the CRD's storage answers (429 until it is ready, right after the install)
    with plane.client(teams["dev"]) as dev:
        direct = {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "Reservation",
            "metadata": {"name": "dev-own"},
            "spec": {"template": {"spec": {}}, "owners": owners},
        }
        assert dev.post("/apis/scheduling.koordinator.sh/v1alpha1/reservations", json=direct).status_code == 403
        for field, template in refused.items():
            resp = dev.post(PMJ, json=_templated(f"tpl-{field.lower()}", template))
            assert resp.status_code == 422, (field, resp.status_code, resp.text[:300])
            (cause,) = resp.json()["details"]["causes"]
            assert cause["field"] == f"spec.reservationOptions.template.spec.{field}", cause
            assert cause["reason"] == "FieldValueForbidden" and "may not be set: " in cause["message"], cause
        # a ttl beyond the job's (1h > 5m), a ttl of 0 (never expires): refused; 5m, the job's own: admitted
        for ttl in ("1h", "0s", "0"):
            resp = dev.post(PMJ, json=_templated("tpl-ttl", {"spec": {"ttl": ttl}}))
            assert resp.status_code == 422, (ttl, resp.text[:300])
            (cause,) = resp.json()["details"]["causes"]
            assert cause["field"] == "spec.reservationOptions.template.spec.ttl", cause
            assert "at most the job's spec.ttl" in cause["message"], cause
        # what a template may set: the replacement's requests and placement, labels, a ttl within the job's
        allowed = {
            "metadata": {"labels": {"team": "a"}, "annotations": {"ticket": "42"}},
            "spec": {
                "ttl": "5m",
                "allocateOnce": True,
                "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
            },
        }
        created = ok(dev.post(PMJ, json=_templated("tpl-allowed", allowed)))
        assert created["spec"]["reservationOptions"]["template"] == allowed
        # a name: admitted here, failed by the manager unless it is the job's UID (Koordinator writes that back)
        named = ok(dev.post(PMJ, json=_templated("tpl-named", {"metadata": {"name": "team-b-db"}})))
        assert named["spec"]["reservationOptions"]["template"]["metadata"]["name"] == "team-b-db"
        # no ttl on the job: the schema cannot know the manager's defaultJobTTL, the manager checks it
        ok(dev.post(PMJ, json=_templated("tpl-no-job-ttl", {"spec": {"ttl": "24h"}}, ttl=None)))
    with plane.client() as api:
        for name in ("tpl-allowed", "tpl-named", "tpl-no-job-ttl"):
            ok(api.delete(f"{PMJ}/{name}"))
        assert get(api, "/apis/scheduling.koordinator.sh/v1alpha1/reservations")["items"] == []


def _merge(api: httpx.Client, path: str, body: dict[str, Any]) -> httpx.Response:
    return api.patch(path, content=json.dumps(body), headers={"Content-Type": "application/merge-patch+json"})


def test_the_scheduler_token_writes_pod_status_and_its_requeue_signal_only(plane: ControlPlane, victims: str) -> None:
    """The scheduler's ServiceAccount (kube-scheduler and the extender): RBAC refuses a patch of a pod
    (its image, its labels); the policy refuses the same labels (and annotations) through the status
    subresource, which the built-in system:kube-scheduler role grants; kube-scheduler's own status write
    (a PodScheduled condition) passes. Of CSIStorageCapacities it may patch the chart's requeue signal
    only."""
    pod_path = f"/api/v1/namespaces/{victims}/pods/scheduled"
    with plane.client() as api:
        before = ok(api.post(f"/api/v1/namespaces/{victims}/pods", json=pod("scheduled", NODE_A)))
        other = {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSIStorageCapacity",
            "metadata": {"name": "someone-elses"},
            "storageClassName": "fast",
        }
        ok(api.post(f"/apis/storage.k8s.io/v1/namespaces/{NAMESPACE}/csistoragecapacities", json=other))
    with plane.client(plane.token(NAMESPACE, f"{RELEASE}-scheduler")) as scheduler:
        image = {"spec": {"containers": [{"name": "c", "image": "attacker.example/miner:1"}]}}
        for body in (image, {"metadata": {"labels": {"app": "stolen"}}}):
            resp = _merge(scheduler, pod_path, body)
            assert resp.status_code == 403, resp.text[:300]
            assert 'cannot patch resource "pods"' in resp.json()["message"]
        for key in ("labels", "annotations"):
            message = refused_by(
                _merge(scheduler, pod_path + "/status", {"metadata": {key: {"app": "stolen"}}}),
                "koordpy-scheduler-pod-status",
            )
            assert f"the koordpy scheduler may write the status of pod {victims}/scheduled, not its {key}" in message
        condition = {
            "type": "PodScheduled",
            "status": "True",
            "lastTransitionTime": "2030-01-01T00:00:00Z",
        }
        assert _merge(scheduler, pod_path + "/status", {"status": {"conditions": [condition]}}).status_code == 200
        signals = f"/apis/storage.k8s.io/v1/namespaces/{NAMESPACE}/csistoragecapacities"
        stamp = {"metadata": {"annotations": {"gang.scheduling.koordpy.io/requeued-at": "2030-01-01T00:00:00Z"}}}
        assert _merge(scheduler, f"{signals}/{RELEASE}-gang-requeue", stamp).status_code == 200
        assert _merge(scheduler, f"{signals}/someone-elses", stamp).status_code == 403
    with plane.client() as api:
        after = ok(api.get(pod_path))
        assert after["spec"]["containers"] == before["spec"]["containers"]
        assert after["metadata"].get("labels") == before["metadata"].get("labels")
        assert after["metadata"].get("annotations") == before["metadata"].get("annotations")
        ok(api.delete(f"/apis/storage.k8s.io/v1/namespaces/{NAMESPACE}/csistoragecapacities/someone-elses"))


def test_an_agent_eviction_of_a_pod_made_again_under_its_name_is_refused(plane: ControlPlane, victims: str) -> None:
    """The agent planned to evict ``sts-0`` (uid u1); before its call the pod was deleted and made again
    under the same name (a StatefulSet's). The agent's eviction names u1: the API server refuses it (409),
    the new pod stays, and the evictor reports the planned pod gone. The new pod's own uid is evicted."""
    from koordpy.agent.actuators.evictor import Evictor, EvictOutcome
    from koordpy.kube.client import ApiClient
    from koordpy.kube.connection import load_connection

    pods_path = f"/api/v1/namespaces/{victims}/pods"
    with plane.client() as api:
        planned = ok(api.post(pods_path, json=pod("sts-0", NODE_A)))["metadata"]["uid"]
        ok(api.delete(f"{pods_path}/sts-0", params={"gracePeriodSeconds": "0"}))
        plane.wait_for("sts-0 gone", lambda: api.get(f"{pods_path}/sts-0").status_code == 404)
        again = ok(api.post(pods_path, json=pod("sts-0", NODE_A)))["metadata"]["uid"]
    assert again != planned
    kubeconfig = plane.kubeconfig("agent-node-a-evictor", agent_token(plane, NODE_A))

    async def evict(uid: str) -> tuple[EvictOutcome, str]:
        async with ApiClient(load_connection(kubeconfig=str(kubeconfig))) as client:
            return await Evictor(client, retries=0).evict(victims, "sts-0", uid, None)

    outcome, detail = asyncio.run(evict(planned))
    assert outcome is EvictOutcome.GONE and "does not match the UID in record" in detail, detail
    with plane.client() as api:
        assert ok(api.get(f"{pods_path}/sts-0"))["metadata"].get("deletionTimestamp") is None
    assert [
        (e["objectRef"]["name"], e["responseStatus"]["code"])
        for e in plane.audit_events()
        if (e.get("objectRef") or {}).get("subresource") == "eviction"
        and e["objectRef"].get("name") == "sts-0"
        and e["user"]["username"] == f"system:serviceaccount:{NAMESPACE}:{RELEASE}-agent"
    ] == [("sts-0", 409)]
    assert asyncio.run(evict(again))[0] is EvictOutcome.EVICTED


# ---- the agent process with the chart's container identity, on real cgroups ---------------------

CONTROLLERS = ("cpu", "cpuacct", "memory")
CGROUP = Path("/sys/fs/cgroup")
ENSURANCE = "/apis/ensurance.crane.io/v1alpha1"


def _policy(name: str, metric: str, value: int, action: str) -> dict[str, Any]:
    rule = {
        "name": name,
        "avoidanceThreshold": 1,
        "restoreThreshold": 100,
        "actionName": action,
        "metricRule": {"name": metric, "value": value},
    }
    return {
        "apiVersion": "ensurance.crane.io/v1alpha1",
        "kind": "NodeQOSEnsurancePolicy",
        "metadata": {"name": name},
        "spec": {"objectiveEnsurances": [rule]},
    }


def _action(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "ensurance.crane.io/v1alpha1",
        "kind": "AvoidanceAction",
        "metadata": {"name": name},
        "spec": {"coolDownSeconds": 1, **spec},
    }


@pytest.fixture
def node_a_cgroups(plane: ControlPlane) -> Iterator[tuple[str, Path, subprocess.Popen[bytes]]]:
    """A BestEffort pod on node A whose cgroup (v1 cgroupfs layout, cpu, cpuacct and memory) runs a busy
    process, below a test directory of each controller; and a cgroup there for the agent itself."""
    if os.geteuid() != 0:
        pytest.fail("this test runs as root (it creates cgroups and namespaces)")
    for c in CONTROLLERS:
        if not os.access(CGROUP / c / "cgroup.procs", os.W_OK):
            pytest.fail(f"{CGROUP / c} is not a writable cgroup v1 controller: the test needs one")
    with plane.client() as api:
        namespace(api, "qos")
        uid = ok(api.post("/api/v1/namespaces/qos/pods", json=pod("busy", NODE_A)))["metadata"]["uid"]
    top = f"koordpy-clustertest-{uuid.uuid4().hex[:8]}"
    rel = f"kubepods/besteffort/pod{uid}"
    made: list[Path] = []
    busy: subprocess.Popen[bytes] | None = None
    try:
        for c in CONTROLLERS:
            for part in (
                top,
                f"{top}/agent",
                f"{top}/kubepods",
                f"{top}/kubepods/besteffort",
                f"{top}/{rel}",
                f"{top}/{rel}/{'c' * 64}",
            ):
                (CGROUP / c / part).mkdir()
                made.append(CGROUP / c / part)
        join = " ".join(f"echo $$ > {CGROUP / c / top / rel / ('c' * 64)}/cgroup.procs;" for c in CONTROLLERS)
        script = "b = bytearray(32 << 20)\nwhile True: pass"
        busy = subprocess.Popen(["sh", "-c", f'{join} exec {sys.executable} -c "{script}"'])
        yield top, Path(rel), busy
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
        time.sleep(0.1)
        for path in reversed(made):
            try:
                path.rmdir()
            except OSError as exc:  # pragma: no cover - leave a message, the cgroup is then visible
                print(f"could not remove {path}: {exc}", file=sys.stderr)
        with plane.client() as api:
            for kind, name in (
                ("nodeqosensurancepolicies", "throttle-busy"),
                ("nodeqosensurancepolicies", "evict-busy"),
                ("avoidanceactions", "throttle"),
                ("avoidanceactions", "evict"),
            ):
                api.delete(f"{ENSURANCE}/{kind}/{name}")


def test_the_agent_throttles_and_evicts_with_the_charts_container_identity(
    plane: ControlPlane, node_a_cgroups: tuple[str, Path, subprocess.Popen[bytes]]
) -> None:
    top, rel, _ = node_a_cgroups
    workdir = Path(tempfile.mkdtemp(prefix="koordpy-clustertest-agent-", dir="/tmp"))
    agent: Proc | None = None
    try:
        with plane.client() as api:
            daemonset = ok(api.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets/{RELEASE}-agent"))
            (container,) = daemonset["spec"]["template"]["spec"]["containers"]
            config = yaml.safe_load(
                ok(api.get(f"/api/v1/namespaces/{NAMESPACE}/configmaps/{RELEASE}-agent"))["data"]["config.yaml"]
            )
            for obj, kind in (
                (
                    _action("throttle", {"throttle": {"cpuThrottle": {"minCPURatio": 0, "stepCPURatio": 50}}}),
                    "avoidanceactions",
                ),
                (_policy("throttle-busy", "cpu_total_usage", 100, "throttle"), "nodeqosensurancepolicies"),
            ):
                ok(api.post(f"{ENSURANCE}/{kind}", json=obj))
        # the chart's configuration; only paths, the port and the pace changed for a test
        port = free_port()
        config.update(
            {
                "collectIntervalSeconds": 0.5,
                "stateDir": str(workdir / "state"),
                "server": {**config.get("server", {}), "port": port},
                "nodeMetric": {"reportIntervalSeconds": 1, "aggregateDurationSeconds": 1},
            }
        )
        (workdir / "config.yaml").write_text(yaml.safe_dump(config))
        kubeconfig = plane.kubeconfig("agent-node-a", agent_token(plane, NODE_A))
        root = workdir / "host-cgroup"  # the container's --cgroup-root: each controller's test directory
        binds = {str(CGROUP / c / top): str(root / c) for c in CONTROLLERS}
        command = [str(BIN / "koordpy"), "agent", "run", "--config", str(workdir / "config.yaml"), "--node", NODE_A]
        command += ["--kubeconfig", str(kubeconfig), "--cgroup-root", str(root), f"--host={LOOPBACK}"]
        confinement = Confinement.from_security_context(container["securityContext"])
        assert (confinement.uid, confinement.capabilities, confinement.privileged) == (0, (), False)
        join = [str(CGROUP / c / top / "agent" / "cgroup.procs") for c in CONTROLLERS]
        agent = Proc("agent", confinement.command(command, binds=binds, join=join), workdir / "agent.log").start()
        wait_http(f"http://{LOOPBACK}:{port}/readyz", 120, agent)

        quota_file = CGROUP / "cpu" / top / rel / "cpu.cfs_quota_us"
        plane.wait_for("the agent throttles the busy pod", lambda: int(quota_file.read_text()) > 0, timeout=120)
        quota = int(quota_file.read_text())
        assert 1000 <= quota < 100000 * (os.cpu_count() or 1), quota
        with plane.client() as api:
            reported = plane.wait_for(
                "the agent's NodeMetric of node A with the busy pod",
                lambda: [
                    m
                    for m in ok(api.get(f"{NM}/{NODE_A}")).get("status", {}).get("podsMetric", [])
                    if m.get("name") == "busy"
                ],
            )
            assert reported[0]["namespace"] == "qos"
            ok(
                api.post(
                    f"{ENSURANCE}/avoidanceactions",
                    json=_action("evict", {"eviction": {"terminationGracePeriodSeconds": 0}}),
                )
            )
            ok(
                api.post(
                    f"{ENSURANCE}/nodeqosensurancepolicies",
                    json=_policy("evict-busy", "memory_total_utilization", 1, "evict"),
                )
            )

            def evicted() -> bool:
                resp = api.get("/api/v1/namespaces/qos/pods/busy")  # one read: the pod may go between two
                return resp.status_code == 404 or "deletionTimestamp" in ok(resp)["metadata"]

            plane.wait_for("the agent evicts the busy pod", evicted, timeout=120)
        metrics = httpx.get(f"http://{LOOPBACK}:{port}/metrics", timeout=10).text
        assert 'koordpy_agent_evictions_total{outcome="evicted"} 1.0' in metrics
        assert "koordpy_agent_actuator_errors_total 0.0" in metrics
    finally:
        if agent is not None:
            agent.stop()
        shutil.rmtree(workdir, ignore_errors=True)


# ---- uninstall (last: it removes the module's release) ------------------------------------------


def test_uninstall_leaves_the_kept_crds_and_nothing_else_of_the_release(plane: ControlPlane, tmp_path: Path) -> None:
    with plane.client() as client:
        release = Release(plane, Kube(client))
        components = Components(plane, release, tmp_path)
        try:
            components.start_manager()  # it takes the release's Lease, then acts
            plane.wait_for(
                "the manager's NodeMetric of every node",
                lambda: len(get(client, NM)["items"]) == 3,
            )
            plane.wait_for(
                "the manager holds its Lease",
                lambda: (
                    (release.kube.get("Lease", f"{RELEASE}-manager", NAMESPACE) or {})
                    .get("spec", {})
                    .get("holderIdentity")
                ),
            )
        finally:
            components.close()
        assert listed_objects(client, f"app.kubernetes.io/instance={RELEASE}", NAMESPACE)
        result = release.uninstall()
        assert "These resources were kept due to the resource policy" in result.stdout
        plane.wait_for("the release's pods gone", lambda: not pods(client, NAMESPACE))
        assert not get(client, "/apis/kopf.dev/v1/clusterkopfpeerings")["items"]  # nothing peers any more
        left = listed_objects(client, f"app.kubernetes.io/instance={RELEASE}", NAMESPACE)
        assert left == {f"CustomResourceDefinition//{name}" for name in KEPT_CRDS}, sorted(left)
        # what the tests and the manager (one per node) wrote with the kept kinds stays, as any user's
        # objects of a kept CRD do
        assert {m["metadata"]["name"] for m in get(client, NM)["items"]} == {NODE_A, NODE_B, SYSTEM_NODE}
