"""The ValidatingAdmissionPolicies and the user-facing ClusterRoles as rendered; what they do on a real API
server is tests/cluster/test_cluster_security.py."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
import yaml
from helm_render import CHART, of_kind, render, run_helm

from koordpy.crds import RESOURCES

VAP_API = ("--api-versions", "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy")
POLICY_KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")


def policies(*args: str) -> dict[str, dict[str, Any]]:
    objects = render(*VAP_API, *args)
    return {f"{o['kind']}/{o['metadata']['name']}": o for kind in POLICY_KINDS for o in of_kind(objects, kind)}


def test_policies_render_only_where_the_cluster_serves_their_api() -> None:
    # helm template without a cluster knows group/versions but no kinds: like a cluster without the API
    assert [o for kind in POLICY_KINDS for o in of_kind(render(), kind)] == []
    assert sorted(policies()) == [
        "ValidatingAdmissionPolicy/koordpy-agent-evictions",
        "ValidatingAdmissionPolicy/koordpy-agent-node-scope",
        "ValidatingAdmissionPolicy/koordpy-podmigrationjob-eviction-rights",
        "ValidatingAdmissionPolicy/koordpy-scheduler-pod-status",
        "ValidatingAdmissionPolicyBinding/koordpy-agent-evictions",
        "ValidatingAdmissionPolicyBinding/koordpy-agent-node-scope",
        "ValidatingAdmissionPolicyBinding/koordpy-podmigrationjob-eviction-rights",
        "ValidatingAdmissionPolicyBinding/koordpy-scheduler-pod-status",
    ]
    for obj in policies().values():
        kubernetes_validate.validate(obj, "1.35", strict=True)


def test_each_binding_binds_its_policy_with_the_configured_actions() -> None:
    rendered = policies("--set", "admissionPolicies.validationActions={Warn,Audit}")
    for key, binding in rendered.items():
        if key.startswith("ValidatingAdmissionPolicyBinding/"):
            assert f"ValidatingAdmissionPolicy/{binding['spec']['policyName']}" in rendered
            assert binding["spec"]["validationActions"] == ["Warn", "Audit"]
    for key, policy in rendered.items():
        if key.startswith("ValidatingAdmissionPolicy/"):
            assert policy["spec"]["failurePolicy"] == "Fail", key


def test_policies_name_the_releases_own_service_accounts() -> None:
    proc = run_helm("template", "prod", str(CHART), "--namespace", "qos", *VAP_API)
    assert proc.returncode == 0, proc.stderr
    objects = [doc for doc in yaml.safe_load_all(proc.stdout) if doc]
    accounts = {o["metadata"]["name"] for o in of_kind(objects, "ServiceAccount")}
    assert accounts == {"prod-koordpy-scheduler", "prod-koordpy-manager", "prod-koordpy-agent"}
    conditions = {
        p["metadata"]["name"]: [c["expression"] for c in p["spec"]["matchConditions"]]
        for p in of_kind(objects, "ValidatingAdmissionPolicy")
    }
    agent = 'request.userInfo.username == "system:serviceaccount:qos:prod-koordpy-agent"'
    assert conditions["prod-koordpy-agent-node-scope"] == [agent]
    assert conditions["prod-koordpy-agent-evictions"] == [agent]
    manager = 'request.userInfo.username != "system:serviceaccount:qos:prod-koordpy-manager"'
    assert conditions["prod-koordpy-podmigrationjob-eviction-rights"][0] == manager
    scheduler = 'request.userInfo.username == "system:serviceaccount:qos:prod-koordpy-scheduler"'
    assert conditions["prod-koordpy-scheduler-pod-status"] == [scheduler]


def test_the_scheduler_policy_matches_its_status_writes_and_keeps_the_metadata() -> None:
    spec = policies()["ValidatingAdmissionPolicy/koordpy-scheduler-pod-status"]["spec"]
    # PATCH and PUT of pods/status are both UPDATE in admission; pods themselves RBAC refuses it already
    assert spec["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods/status"]}
    ]
    kept = [v["expression"].split(" ? ")[0].removeprefix("(has(object.metadata.") for v in spec["validations"]]
    assert kept == ["labels)", "annotations)", "finalizers)"]
    assert all(v["reason"] == "Forbidden" for v in spec["validations"])


def test_agent_policies_match_its_node_writes_and_evictions_only() -> None:
    rendered = policies()
    scope = rendered["ValidatingAdmissionPolicy/koordpy-agent-node-scope"]["spec"]
    assert scope["matchConstraints"]["resourceRules"] == [
        {
            "apiGroups": ["slo.koordinator.sh"],
            "apiVersions": ["*"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["nodemetrics", "nodemetrics/status"],
        }
    ]
    evictions = rendered["ValidatingAdmissionPolicy/koordpy-agent-evictions"]["spec"]
    assert evictions["paramKind"] == {"apiVersion": "v1", "kind": "Pod"}
    assert evictions["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods/eviction"]}
    ]
    # every Pod of the eviction's namespace is a parameter; none at all: nothing to evict either
    assert rendered["ValidatingAdmissionPolicyBinding/koordpy-agent-evictions"]["spec"]["paramRef"] == {
        "selector": {},
        "parameterNotFoundAction": "Allow",
    }
    for spec in (scope, evictions):
        (variable,) = spec["variables"]
        assert "request.userInfo.extra['authentication.kubernetes.io/node-name'][0]" in variable["expression"]
        assert spec["validations"][0]["expression"] == "variables.node != ''"


@pytest.mark.parametrize(
    ("args", "left"),
    [
        (
            ("--set", "admissionPolicies.agentNodeScope=false"),
            {"podmigrationjob-eviction-rights", "scheduler-pod-status"},
        ),
        (("--set", "agent.enabled=false"), {"podmigrationjob-eviction-rights", "scheduler-pod-status"}),
        (
            ("--set", "admissionPolicies.podMigrationJobEvictionRights=false"),
            {"agent-node-scope", "agent-evictions", "scheduler-pod-status"},
        ),
        (("--set", "manager.enabled=false"), {"agent-node-scope", "agent-evictions", "scheduler-pod-status"}),
        (
            ("--set", "admissionPolicies.schedulerPodStatus=false"),
            {"agent-node-scope", "agent-evictions", "podmigrationjob-eviction-rights"},
        ),
        (
            ("--set", "scheduler.enabled=false"),
            {"agent-node-scope", "agent-evictions", "podmigrationjob-eviction-rights"},
        ),
    ],
)
def test_each_policy_follows_its_switch_and_its_component(args: tuple[str, ...], left: set[str]) -> None:
    names = {key.split("/", 1)[1].removeprefix("koordpy-") for key in policies(*args)}
    assert names == left


# ---- user roles --------------------------------------------------------------------------------

WRITE = {"create", "update", "patch", "delete", "deletecollection"}
AGGREGATE = "rbac.authorization.k8s.io/aggregate-to-"


def user_roles(*args: str) -> dict[str, dict[str, Any]]:
    return {
        r["metadata"]["name"]: r
        for r in of_kind(render(*args), "ClusterRole")
        if r["metadata"]["name"].removeprefix("koordpy-") in ("view", "edit", "migrate", "admin")
    }


def test_view_and_edit_are_aggregated_and_migrate_and_admin_are_not() -> None:
    roles = user_roles()
    aggregated = {
        name: sorted(k.removeprefix(AGGREGATE) for k in r["metadata"]["labels"] if k.startswith(AGGREGATE))
        for name, r in roles.items()
    }
    assert aggregated == {
        "koordpy-view": ["admin", "edit", "view"],
        "koordpy-edit": ["admin", "edit"],
        "koordpy-migrate": [],
        "koordpy-admin": [],
    }
    assert user_roles("--set", "userRoles.enabled=false") == {}


def test_aggregated_roles_write_no_cluster_scoped_kind() -> None:
    """view/edit/admin are handed out per namespace and often cluster-wide too: none of koordpy's
    cluster-scoped kinds (a PodMigrationJob evicts, a Reservation holds capacity) may be written through them."""
    cluster_scoped = {r.plural for r in RESOURCES if not r.namespaced}
    assert {"podmigrationjobs", "reservations", "nodemetrics"} <= cluster_scoped
    for name in ("koordpy-view", "koordpy-edit"):
        for rule in user_roles()[name]["rules"]:
            if WRITE & set(rule["verbs"]):
                assert not cluster_scoped & set(rule["resources"]), (name, rule)
    edit = user_roles()["koordpy-edit"]["rules"]
    writes = {(res, verb) for rule in edit for res in rule["resources"] for verb in rule["verbs"]}
    assert ("podgroups", "create") in writes and ("podgroups/status", "patch") not in writes


def test_view_reads_every_kind_users_see_and_migrate_creates_jobs() -> None:
    readable = {res for rule in user_roles()["koordpy-view"]["rules"] for res in rule["resources"]}
    users_kinds = {r.plural for r in RESOURCES} - {"clusterkopfpeerings"}  # kopf's, internal to the manager
    assert users_kinds <= readable
    migrate = user_roles()["koordpy-migrate"]["rules"]
    assert any("podmigrationjobs" in r["resources"] and "create" in r["verbs"] for r in migrate)
    assert not any("pods/eviction" in r["resources"] for r in migrate)
