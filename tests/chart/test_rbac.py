"""Rendered RBAC: least privilege per component, no wildcards, a ``# why:`` comment on every rule.

``grants(objects)`` (helm_render.py) maps each ServiceAccount to the rules bound to it. Whether the components'
calls are allowed is the real authorizer's answer on the real-cluster tier (``tests/cluster/test_cluster_rbac.py``).
"""

from __future__ import annotations

import re

import pytest
from helm_render import CHART, Rule, allowed, grants, of_kind, render, render_scenario

SCHEDULER = "koordpy-system/koordpy-scheduler"
MANAGER = "koordpy-system/koordpy-manager"
AGENT = "koordpy-system/koordpy-agent"

# (apiGroup, resource[/subresource], verb) each component's code calls (koordpy.kube.client calls and
# reflectors in koordpy.agent.loop / .reporter, koordpy.scheduler.extender.server; kopf in koordpy.manager).
NEEDED = {
    SCHEDULER: [
        ("", "nodes", "list"),
        ("", "nodes", "watch"),
        ("", "pods", "list"),
        ("", "pods", "watch"),
        ("", "pods/binding", "create"),
        ("scheduling.sigs.k8s.io", "podgroups", "list"),
        ("scheduling.sigs.k8s.io", "podgroups", "watch"),
        ("scheduling.sigs.k8s.io", "podgroups/status", "patch"),
        ("scheduling.x-k8s.io", "podgroups/status", "patch"),
        ("scheduling.volcano.sh", "podgroups", "list"),
        ("scheduling.volcano.sh", "podgroups", "watch"),
        ("scheduling.k8s.io", "podgroups", "list"),
        ("scheduling.k8s.io", "podgroups", "watch"),
        ("slo.koordinator.sh", "nodemetrics", "list"),
        ("slo.koordinator.sh", "nodemetrics", "watch"),
        ("scheduling.koordinator.sh", "reservations", "list"),
        ("scheduling.koordinator.sh", "reservations", "watch"),
        ("", "events", "create"),
    ],
    AGENT: [
        ("", "pods", "list"),
        ("", "pods", "watch"),
        ("", "nodes", "list"),
        ("", "nodes", "watch"),
        ("slo.koordinator.sh", "nodemetrics", "get"),
        ("slo.koordinator.sh", "nodemetrics", "create"),
        ("slo.koordinator.sh", "nodemetrics/status", "patch"),
        ("", "pods/eviction", "create"),
        ("", "events", "create"),
        ("ensurance.crane.io", "nodeqosensurancepolicies", "list"),
        ("ensurance.crane.io", "nodeqosensurancepolicies", "watch"),
        ("ensurance.crane.io", "avoidanceactions", "list"),
        ("ensurance.crane.io", "avoidanceactions", "watch"),
        ("ensurance.crane.io", "nodeqoss", "list"),
        ("ensurance.crane.io", "nodeqoss", "watch"),
        ("ensurance.crane.io", "podqoss", "list"),
        ("ensurance.crane.io", "podqoss", "watch"),
    ],
    MANAGER: [
        ("", "nodes", "list"),
        ("", "nodes", "watch"),
        ("slo.koordinator.sh", "nodemetrics", "list"),
        ("slo.koordinator.sh", "nodemetrics", "watch"),
        ("slo.koordinator.sh", "nodemetrics", "create"),
        ("slo.koordinator.sh", "nodemetrics", "patch"),
        ("slo.koordinator.sh", "nodemetrics", "delete"),
        ("kopf.dev", "clusterkopfpeerings", "get"),
        ("scheduling.koordinator.sh", "podmigrationjobs", "list"),
        ("scheduling.koordinator.sh", "podmigrationjobs", "watch"),
        ("scheduling.koordinator.sh", "podmigrationjobs", "patch"),
        ("scheduling.koordinator.sh", "podmigrationjobs", "delete"),
        ("scheduling.koordinator.sh", "podmigrationjobs/status", "patch"),
        ("", "pods/eviction", "create"),
        ("", "events", "create"),
        ("apps", "replicasets", "get"),
        ("apps", "deployments", "get"),
        ("", "pods", "list"),
        ("", "pods", "watch"),
        ("scheduling.sigs.k8s.io", "podgroups", "list"),
        ("scheduling.sigs.k8s.io", "podgroups", "watch"),
        ("scheduling.sigs.k8s.io", "podgroups/status", "patch"),
        ("scheduling.x-k8s.io", "podgroups", "list"),
        ("scheduling.x-k8s.io", "podgroups", "watch"),
        ("scheduling.x-k8s.io", "podgroups/status", "patch"),
        ("scheduling.volcano.sh", "podgroups", "list"),
        ("scheduling.volcano.sh", "podgroups", "watch"),
        ("scheduling.volcano.sh", "podgroups", "patch"),
        ("scheduling.k8s.io", "podgroups", "list"),
        ("scheduling.k8s.io", "podgroups", "watch"),
        ("scheduling.koordinator.sh", "reservations", "list"),
        ("scheduling.koordinator.sh", "reservations", "watch"),
        ("scheduling.koordinator.sh", "reservations", "create"),
        ("scheduling.koordinator.sh", "reservations", "delete"),
        ("scheduling.koordinator.sh", "reservations/status", "patch"),
    ],
}

# Calls a component must NOT be able to make (a leak here is a privilege escalation).
DENIED = {
    SCHEDULER: [
        ("", "pods", "delete"),
        ("", "pods", "update"),
        # gang members are retried through the extender's own requeue signal, never a write on a pod
        ("", "pods", "patch"),
        ("storage.k8s.io", "csistoragecapacities", "create"),
        ("storage.k8s.io", "csistoragecapacities", "update"),
        ("", "pods/status", "patch"),
        # a PodGroup's spec belongs to its user; the extender writes one status condition only
        ("scheduling.sigs.k8s.io", "podgroups", "patch"),
        ("scheduling.x-k8s.io", "podgroups", "update"),
        ("scheduling.volcano.sh", "podgroups", "patch"),
        # a native PodGroup is kube-scheduler's to write (its status) and its user's (its spec)
        ("scheduling.k8s.io", "podgroups", "patch"),
        ("scheduling.k8s.io", "podgroups/status", "patch"),
        ("scheduling.k8s.io", "podgroups/status", "update"),
        ("", "nodes", "patch"),
        ("", "secrets", "get"),
        ("", "pods/eviction", "create"),
        # Reservations are read-only for the extender: the manager is their only writer.
        ("scheduling.koordinator.sh", "reservations", "create"),
        ("scheduling.koordinator.sh", "reservations", "patch"),
        ("scheduling.koordinator.sh", "reservations", "delete"),
        ("scheduling.koordinator.sh", "reservations/status", "patch"),
    ],
    AGENT: [
        ("", "nodes", "patch"),
        ("", "pods", "delete"),
        ("", "secrets", "get"),
        ("", "pods/binding", "create"),
        ("slo.koordinator.sh", "nodemetrics", "delete"),
        ("ensurance.crane.io", "podqoss", "patch"),
        ("ensurance.crane.io", "nodeqoss", "delete"),
    ],
    MANAGER: [
        ("", "pods", "delete"),
        ("", "pods", "patch"),
        # its rounds read pods from their watch cache, never one by one
        ("", "pods", "get"),
        ("", "nodes", "patch"),
        ("", "pods/binding", "create"),
        ("", "secrets", "list"),
        ("apps", "deployments", "patch"),
        # status only: a PodGroup's spec belongs to its user.
        ("scheduling.sigs.k8s.io", "podgroups", "patch"),
        ("scheduling.x-k8s.io", "podgroups", "update"),
        ("scheduling.sigs.k8s.io", "podgroups", "delete"),
        # a native PodGroup is kube-scheduler's to write (its status) and its user's (its spec)
        ("scheduling.k8s.io", "podgroups", "patch"),
        ("scheduling.k8s.io", "podgroups/status", "patch"),
        ("scheduling.k8s.io", "podgroups/status", "update"),
        # status only: a Reservation's spec belongs to its author.
        ("scheduling.koordinator.sh", "reservations", "patch"),
        ("scheduling.koordinator.sh", "reservations", "update"),
    ],
}


@pytest.mark.parametrize("component", sorted(NEEDED))
def test_each_component_is_granted_what_its_code_calls(component: str) -> None:
    rules = grants(render())[component].rules
    missing = [need for need in NEEDED[component] if not allowed(rules, *need)]
    assert missing == []


@pytest.mark.parametrize("component", sorted(DENIED))
def test_each_component_is_denied_what_it_must_not_do(component: str) -> None:
    rules = grants(render())[component].rules
    leaked = [call for call in DENIED[component] if allowed(rules, *call)]
    assert leaked == []


def test_kube_scheduler_container_uses_the_builtin_roles_and_its_own_lease() -> None:
    scheduler = grants(render())[SCHEDULER]
    assert scheduler.builtin == {
        "system:kube-scheduler",
        "system:volume-scheduler",
        "extension-apiserver-authentication-reader",
    }
    lease_rules = [r for r in scheduler.rules if r.resources == ("leases",)]
    assert allowed(lease_rules, "coordination.k8s.io", "leases", "create")
    named_rules = [r for r in lease_rules if r.resource_names]
    assert [r.resource_names for r in named_rules] == [("koordpy-scheduler",)]
    assert all(r.namespace == "koordpy-system" for r in lease_rules)
    without = grants(render("--set", "scheduler.leaderElection.enabled=false"))[SCHEDULER]
    assert not allowed(without.rules, "coordination.k8s.io", "leases", "create")


def test_the_extender_may_patch_its_requeue_signal_and_no_other_object_of_its_kind() -> None:
    objects = render()
    (signal,) = of_kind(objects, "CSIStorageCapacity")
    assert (signal["metadata"]["namespace"], signal["metadata"]["name"]) == ("koordpy-system", "koordpy-gang-requeue")
    # a storage class no claim uses, and no node topology: it reports capacity on no node
    assert signal["storageClassName"] == "koordpy-gang-requeue" and "nodeTopology" not in signal
    rules = [r for r in grants(objects)[SCHEDULER].rules if "csistoragecapacities" in r.resources]
    assert [(r.namespace, r.resource_names, r.verbs) for r in rules] == [
        ("koordpy-system", ("koordpy-gang-requeue",), ("patch",))
    ]
    assert not allowed(rules, "storage.k8s.io", "csistoragecapacities", "patch", "another")
    (config,) = [c for c in of_kind(objects, "ConfigMap") if c["metadata"]["name"] == "koordpy-scheduler"]
    assert "requeueSignal: koordpy-system/koordpy-gang-requeue" in config["data"]["config.yaml"]
    # no retry requests (requeueQPS 0), or a signal of the user's: neither the object nor the rule
    for args in (
        ("--set", "scheduler.config.gang.requeueQPS=0"),
        ("--set", "scheduler.config.gang.requeueSignal=ops/mine"),
    ):
        other = render(*args)
        assert of_kind(other, "CSIStorageCapacity") == []
        assert not [r for r in grants(other)[SCHEDULER].rules if "csistoragecapacities" in r.resources]
    (mine,) = [c for c in of_kind(render(*args), "ConfigMap") if c["metadata"]["name"] == "koordpy-scheduler"]
    assert "requeueSignal: ops/mine" in mine["data"]["config.yaml"]


def test_taint_nodes_grants_node_and_pod_patch_to_the_manager_only_when_set() -> None:
    # reservation.taintNodes: the round taints held nodes and adds the toleration to pending owners
    on = grants(render("--set", "manager.config.reservation.taintNodes=true"))[MANAGER].rules
    assert allowed(on, "", "nodes", "patch") and allowed(on, "", "pods", "patch")
    assert not allowed(on, "", "nodes", "update") and not allowed(on, "", "pods", "delete")
    off = grants(render("--set", "manager.config.reservation.taintNodes=false"))[MANAGER].rules
    assert not allowed(off, "", "nodes", "patch") and not allowed(off, "", "pods", "patch")


def test_low_node_load_grants_job_creation_and_workload_watches_only_when_set() -> None:
    # lowNodeLoad: the balance round files PodMigrationJobs and reads replica counts from watch caches
    on = grants(render("--set-json", 'manager.config.lowNodeLoad={"highThresholds":{"cpu":80}}'))[MANAGER].rules
    needed = [("scheduling.koordinator.sh", "podmigrationjobs", "create")] + [
        ("apps", kind, verb) for kind in ("replicasets", "deployments", "statefulsets") for verb in ("list", "watch")
    ]
    assert [need for need in needed if not allowed(on, *need)] == []
    # read only, and never the pods' own writes
    leaked = [("apps", "replicasets", "patch"), ("apps", "deployments", "update"), ("", "pods", "delete")]
    assert [call for call in leaked if allowed(on, *call)] == []
    off = grants(render())[MANAGER].rules
    assert [need for need in needed if allowed(off, *need)] == []


def test_no_rule_grants_a_wildcard(scenario: str) -> None:
    objects = render_scenario(scenario)
    for role in of_kind(objects, "ClusterRole") + of_kind(objects, "Role"):
        for rule in role.get("rules", []):
            for key in ("verbs", "resources", "apiGroups", "resourceNames", "nonResourceURLs"):
                assert "*" not in rule.get(key, []), f"{role['metadata']['name']}: {key} has *"
            assert not any("*" in str(r) for r in rule.get("resources", [])), role["metadata"]["name"]


def test_every_rule_and_builtin_binding_has_a_why_comment() -> None:
    missing = []
    for template in sorted((CHART / "templates").glob("*rbac.yaml")):
        lines = template.read_text(encoding="utf-8").splitlines()
        for n, line in enumerate(lines):
            is_rule = re.match(r"^\s*- apiGroups:", line)
            is_builtin = re.match(r"^\s*name: (system:|extension-apiserver)", line)
            if not (is_rule or is_builtin):
                continue
            # The rule's comment block sits right above it; a binding's above its document's "apiVersion".
            start = n if is_rule else max(i for i in range(n) if lines[i].startswith("apiVersion:"))
            block = start
            while block > 0 and lines[block - 1].strip().startswith("#"):
                block -= 1
            if block == start or not lines[block].strip().startswith("# why:"):
                missing.append(f"{template.name}:{n + 1}: {line.strip()}")
    assert missing == []


def test_disabled_components_render_no_rbac() -> None:
    objects = render("--set", "agent.enabled=false", "--set", "manager.enabled=false")
    assert set(grants(objects)) == {SCHEDULER}


def test_rules_parse_into_plain_values() -> None:
    rules = grants(render())[AGENT].rules
    assert (
        Rule(api_groups=("",), resources=("pods/eviction",), verbs=("create",), resource_names=(), namespace=None)
        in rules
    )
