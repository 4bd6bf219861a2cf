"""Emulator rules without HTTP: selectors, patches, resource paths, PDB arithmetic."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.kube.resources import NODEMETRICS, NODES, PDBS, PODGROUPS, PODS, by_plural
from koordpy_testkit.apiserver import ClusterState, StatusError
from koordpy_testkit.apiserver.patching import apply_json_patch, apply_merge_patch
from koordpy_testkit.apiserver.selectors import FieldSelector, LabelSelector, match_label_selector_object


def test_resource_paths() -> None:
    assert PODS.path() == "/api/v1/pods"
    assert PODS.path("ns") == "/api/v1/namespaces/ns/pods"
    assert PODS.path("ns", "p", "binding") == "/api/v1/namespaces/ns/pods/p/binding"
    assert NODES.path(name="n1", subresource="status") == "/api/v1/nodes/n1/status"
    assert NODEMETRICS.path(name="n1") == "/apis/slo.koordinator.sh/v1alpha1/nodemetrics/n1"
    assert PODGROUPS.path("team") == "/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/team/podgroups"
    assert PDBS.api_version == "policy/v1" and PDBS.qualified == "poddisruptionbudgets.policy"
    assert by_plural("", "pods") is PODS and by_plural("x", "pods") is None
    with pytest.raises(ValueError, match="cluster-scoped"):
        NODES.path("ns")
    with pytest.raises(ValueError, match="needs a namespace"):
        PODS.path(name="p")
    with pytest.raises(ValueError, match="needs an object name"):
        PODS.path("ns", subresource="status")


@pytest.mark.parametrize(
    ("selector", "labels", "want"),
    [
        ("", {}, True),
        ("a=1", {"a": "1"}, True),
        ("a==1", {"a": "2"}, False),
        ("a!=1", {}, True),  # != matches objects without the label
        ("a in (1, 2)", {"a": "2"}, True),
        ("a notin (1,2)", {"a": "3"}, True),
        ("a notin (1,2)", {}, True),
        ("a", {"a": ""}, True),
        ("!a", {"a": ""}, False),
        ("a=1,b in (x)", {"a": "1", "b": "x"}, True),
        ("a=1,b in (x)", {"a": "1", "b": "y"}, False),
    ],
)
def test_label_selector(selector: str, labels: dict[str, str], want: bool) -> None:
    assert LabelSelector(selector).matches({"metadata": {"labels": labels}}) is want


def test_field_selector_fields_and_errors() -> None:
    pod: dict[str, Any] = {"metadata": {"name": "p", "namespace": "d"}, "spec": {"hostNetwork": True}}
    assert FieldSelector("spec.nodeName=", "Pod").matches(pod)
    assert FieldSelector("spec.hostNetwork=true,metadata.namespace!=x", "Pod").matches(pod)
    assert not FieldSelector("metadata.name=q", "Pod").matches(pod)
    with pytest.raises(StatusError) as err:
        FieldSelector("spec.nodeName=n1", "Node")  # not an indexed field for nodes
    assert err.value.code == 400


def test_label_selector_objects_as_in_pdbs() -> None:
    labels = {"app": "web", "tier": "a"}
    assert match_label_selector_object({}, labels)  # empty selects all (policy/v1)
    assert not match_label_selector_object(None, labels)
    sel = {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}]}
    assert match_label_selector_object(sel, labels)
    sel["matchExpressions"].append({"key": "gone", "operator": "Exists"})
    assert not match_label_selector_object(sel, labels)


def test_patches() -> None:
    base = {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    assert apply_merge_patch(base, {"a": {"b": None, "c": [3]}, "e": 2}) == {"a": {"c": [3]}, "d": 1, "e": 2}
    assert base == {"a": {"b": 1, "c": [1, 2]}, "d": 1}  # not mutated
    ops = [
        {"op": "add", "path": "/a/c/-", "value": 3},
        {"op": "replace", "path": "/d", "value": 5},
        {"op": "move", "from": "/a/b", "path": "/b"},
        {"op": "remove", "path": "/a/c/0"},
        {"op": "test", "path": "/missing", "value": None},  # kopf's "no resourceVersion yet" test
    ]
    assert apply_json_patch(base, ops) == {"a": {"c": [2, 3]}, "d": 5, "b": 1}
    with pytest.raises(StatusError) as err:
        apply_json_patch(base, [{"op": "test", "path": "/d", "value": 2}])
    assert err.value.code == 422


def _pdb_case(status: dict[str, Any] | None, generation_bumps: int = 0) -> tuple[int, dict[str, Any]]:
    """Evict one running pod covered by a budget whose status is ``status`` (None: never written, as
    without a disruption controller); return the HTTP code (201 on success) and the budget's status after."""
    st = ClusterState(start_rv=1)
    pods, pdbs = st.infos[("", "pods")], st.infos[("policy", "poddisruptionbudgets")]
    st.seed(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p0", "namespace": "d", "labels": {"app": "x"}},
            "spec": {"nodeName": "n"},
            "status": {"phase": "Running"},
        }
    )
    pdb = st.create(
        pdbs, "d", {"metadata": {"name": "b"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "x"}}}}
    )
    for bump in range(generation_bumps):
        pdb = st.replace(pdbs, "d", "b", {**pdb, "spec": {**pdb["spec"], "minAvailable": 2 + bump}})
    if status is not None:
        pdb = st.replace(pdbs, "d", "b", {**pdb, "status": status}, subresource="status")
    try:
        st.evict("d", "p0", {"deleteOptions": {"gracePeriodSeconds": 0}})
    except StatusError as err:
        return err.code, st.get(pdbs, "d", "b").get("status") or {}
    assert "p0" not in {name for _, name in st.objects[pods.key]}
    return 201, st.get(pdbs, "d", "b").get("status") or {}


@pytest.mark.parametrize(
    ("status", "bumps", "want", "allowed_after"),
    [
        # never processed (no disruption controller wrote a status): refused, as the real server does
        (None, 0, 429, None),
        # processed an older generation of the spec: refused until the controller catches up
        ({"observedGeneration": 1, "disruptionsAllowed": 3}, 1, 429, 3),
        # processed, 1 allowed: evicted and charged (1 - 1 = 0)
        ({"observedGeneration": 1, "disruptionsAllowed": 1}, 0, 201, 0),
        # processed, 0 allowed: refused
        ({"observedGeneration": 1, "disruptionsAllowed": 0, "desiredHealthy": 1, "currentHealthy": 1}, 0, 429, 0),
        # a negative allowance is refused with 403
        ({"observedGeneration": 1, "disruptionsAllowed": -1}, 0, 403, -1),
    ],
)
def test_pdb_status_rules(status: dict[str, Any] | None, bumps: int, want: int, allowed_after: int | None) -> None:
    code, after = _pdb_case(status, bumps)
    assert code == want
    assert after.get("disruptionsAllowed") == allowed_after
    if code == 201:
        assert list(after["disruptedPods"]) == ["p0"]


def test_watch_history_bounds_and_too_new_versions() -> None:
    st = ClusterState(start_rv=100, history_size=2)
    nodes = st.infos[("", "nodes")]
    for i in range(3):
        st.create(nodes, None, {"metadata": {"name": f"n{i}"}})
    assert [e.rv for e in st.events_since(nodes, 102)] == [103]
    assert [e.rv for e in st.events_since(nodes, 101)] == [102, 103]
    for bad in (100, 104):  # compacted away / from the future (a previous incarnation)
        with pytest.raises(StatusError) as err:
            st.events_since(nodes, bad)
        assert err.value.code == 410 and err.value.body["reason"] == "Expired"
