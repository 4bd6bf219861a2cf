"""Object warnings: every QoS object that would otherwise do nothing says so."""

from __future__ import annotations

from koordpy.agent.policy.objectcheck import qos_warnings
from koordpy.crds.ensurance import AvoidanceAction, NodeQOS, PodQOS
from koordpy_testkit.agent import evict_action, qos_policy, rule, throttle_action


def node_qos(name: str, *rules: dict, selector: dict | None = None, **extra: object) -> NodeQOS:
    spec: dict = {"rules": list(rules), **extra}
    if selector is not None:
        spec["selector"] = selector
    return NodeQOS.model_validate({"kind": "NodeQOS", "metadata": {"name": name}, "spec": spec})


def pod_qos(name: str, spec: dict) -> PodQOS:
    return PodQOS.model_validate({"kind": "PodQOS", "metadata": {"name": name}, "spec": spec})


BE = {"scopeSelector": {"matchExpressions": [{"scopeName": "QOSClass", "operator": "In", "values": ["BestEffort"]}]}}
DISABLE = AvoidanceAction.model_validate({"metadata": {"name": "disablescheduling"}, "spec": {"coolDownSeconds": 300}})


def reasons(warnings) -> list[tuple[str, str, str]]:
    return [(w.kind, w.name, w.reason) for w in warnings]


def test_a_clean_crane_pair_has_no_warning():
    nq = node_qos("nq", rule("cpu", "cpu_total_usage", 5000, "eviction"))
    pq = pod_qos("pq", {"allowedActions": ["eviction"], **BE})
    assert qos_warnings([nq], [evict_action("eviction")], [pq], node_labels=[{}]) == []


def test_every_reason_names_its_object():
    nq = node_qos(
        "nq",
        rule("typo", "cpu_load_5_min", 5000, "eviction"),
        rule("missing", "cpu_total_usage", 5000, "nope"),
        rule("sched", "cpu_total_usage", 5000, "disablescheduling"),
        rule("throttle", "cpu_total_usage", 5000, "throttle"),
        selector={"matchLabels": {"pool": "gpu"}},
        elasticCpuLimit={"elasticNodeCpuLimit": {"percent": 60}},
    )
    pq_empty = pod_qos("empty", {"allowedActions": ["eviction", "ghost"]})
    pq_none = pod_qos("none", {**BE, "resourceQOS": {"cpuQOS": {"cpuPriority": 7}}})
    actions = [evict_action("eviction"), throttle_action("throttle"), DISABLE]
    got = qos_warnings([nq], actions, [pq_empty, pq_none], node_labels=[{"pool": "cpu"}])
    assert reasons(got) == [
        ("NodeQOS", "nq", "IgnoredField"),
        ("NodeQOS", "nq", "SelectsNoNode"),
        ("NodeQOS", "nq", "UnknownMetric"),
        ("NodeQOS", "nq", "UnknownAction"),
        ("NodeQOS", "nq", "UnsupportedAction"),
        ("NodeQOS", "nq", "NoPodAllowed"),  # throttle: no PodQOS lists it
        ("PodQOS", "empty", "SelectsNoPod"),
        ("PodQOS", "empty", "UnknownAction"),
        ("PodQOS", "none", "NoPodAllowed"),
        ("PodQOS", "none", "IgnoredField"),
    ]
    texts = [w.text for w in got]
    assert (
        "NodeQOS nq: spec.rules[0] (typo): metric 'cpu_load_5_min' is a Crane metric koordpy does not act on"
        in texts[2]
    )
    assert "spec.rules[2] (sched): AvoidanceAction 'disablescheduling' neither evicts nor throttles CPU" in texts[4]
    assert texts[7] == "PodQOS empty: spec.allowedActions[1]: no AvoidanceAction named 'ghost'"


def test_legacy_policy_needs_no_podqos_and_node_check_is_optional():
    legacy = qos_policy("nep", rule("cpu", "cpu_total_usage", 5000, "eviction"), selector={"matchLabels": {"a": "b"}})
    assert qos_warnings([legacy], [evict_action("eviction")]) == []  # node_labels None: not checked
    got = qos_warnings([legacy], [evict_action("eviction")], node_labels=[{"a": "c"}])
    assert reasons(got) == [("NodeQOSEnsurancePolicy", "nep", "SelectsNoNode")]
    assert got[0].message.startswith("spec.selector matches no node")


def test_a_pod_pressure_rule_of_a_legacy_policy_needs_a_selector():
    bare = qos_policy("nep", rule("p", "pod_cpu_pressure_some_avg10", 20, "throttle"))
    selected = qos_policy(
        "sel", rule("p", "pod_cpu_pressure_some_avg10", 20, "throttle", selector={"matchLabels": {"app": "web"}})
    )
    node = qos_policy("node", rule("p", "cpu_pressure_some_avg10", 20, "throttle"))  # node scope: no pods to select
    got = qos_warnings([bare, selected, node], [throttle_action("throttle")])
    assert reasons(got) == [("NodeQOSEnsurancePolicy", "nep", "ProtectsSystemPodsOnly")]
    assert "protects only the pods the agent never touches" in got[0].message
    # A NodeQOS protects every pod no PodQOS lets it act on: no selector needed.
    nq = node_qos("nq", rule("p", "pod_cpu_pressure_some_avg10", 20, "throttle"))
    pq = pod_qos("pq", {"allowedActions": ["throttle"], **BE})
    assert qos_warnings([nq], [throttle_action("throttle")], [pq]) == []
