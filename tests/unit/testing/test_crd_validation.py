"""The emulator's CustomResourceDefinition rules, one case per kube-apiserver rule, without HTTP."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from koordpy.crds import POD_GROUP, RESOURCES, crd_manifest
from koordpy.kube.resources import CUSTOMRESOURCEDEFINITIONS
from koordpy_testkit.apiserver import ClusterState, StatusError
from koordpy_testkit.apiserver.crdvalidation import apply_crd_defaults, crd_problems, is_protected_group

APPROVAL = "metadata.annotations[api-approved.kubernetes.io]"


def widget() -> dict[str, Any]:
    """A valid CRD in an unprotected group, with a status subresource and a printer column."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                            },
                        }
                    },
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}],
                }
            ],
        },
    }


def in_group(group: str, annotation: str | None = None) -> dict[str, Any]:
    crd = widget()
    crd["spec"]["group"] = group
    crd["metadata"]["name"] = f"widgets.{group}"
    if annotation is not None:
        crd["metadata"]["annotations"] = {"api-approved.kubernetes.io": annotation}
    return crd


def problems_of(crd: dict[str, Any], old: dict[str, Any] | None = None) -> list[tuple[str, str, str]]:
    apply_crd_defaults(crd)
    return [(p.field, p.type, p.message) for p in crd_problems(crd, old)]


def test_the_base_case_and_every_crd_koordpy_ships_are_valid() -> None:
    assert problems_of(widget()) == []
    for res in RESOURCES:
        assert problems_of(crd_manifest(res)) == [], res.name


@pytest.mark.parametrize(
    ("group", "protected"),
    [
        ("scheduling.sigs.k8s.io", True),
        ("k8s.io", True),
        ("apps.kubernetes.io", True),
        ("kubernetes.io", True),
        ("notk8s.io", False),  # a suffix match needs the dot
        ("scheduling.koordinator.sh", False),
        ("ensurance.crane.io", False),
    ],
)
def test_protected_groups(group: str, protected: bool) -> None:
    assert is_protected_group(group) is protected


def test_a_protected_group_without_approval_is_required_value() -> None:
    ((field, kind, message),) = problems_of(in_group("scheduling.sigs.k8s.io"))
    assert (field, kind) == (APPROVAL, "Required")
    assert message.startswith('Required value: protected groups must have approval annotation "api-approved')


@pytest.mark.parametrize(
    ("annotation", "ok"),
    [
        ("https://github.com/kubernetes-sigs/scheduler-plugins/pull/50", True),
        ("unapproved, experimental-only", True),  # upstream's bypass form
        ("/relative/path/is/a/request/uri", True),
        ("approved by me", False),
        ("", False),
    ],
)
def test_approval_values(annotation: str, ok: bool) -> None:
    found = problems_of(in_group("x.k8s.io", annotation))
    if ok:
        assert found == []
    else:
        ((field, kind, message),) = found
        assert field == APPROVAL
        assert kind == ("Required" if annotation == "" else "Invalid")
        assert "protected groups must have approval annotation" in message


def test_an_update_that_keeps_the_approval_state_is_not_rechecked() -> None:
    old = in_group("x.k8s.io", "bad value")
    new = copy.deepcopy(old)
    new["spec"]["versions"][0]["additionalPrinterColumns"][0]["name"] = "Bigness"
    assert problems_of(new, old) == []
    del new["metadata"]["annotations"]
    assert [f for f, _, _ in problems_of(new, old)] == [APPROVAL]


def set_path(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(crd: dict[str, Any]) -> None:
        node: Any = crd
        keys = path.split(".")
        for key in keys[:-1]:
            node = node[int(key)] if key.isdigit() else node[key]
        last = keys[-1]
        if value is _DELETE:
            del node[int(last) if last.isdigit() else last]
        elif last.isdigit():
            node[int(last)] = value
        else:
            node[last] = value

    return mutate


_DELETE = object()
V0 = "spec.versions.0"


def add_version(name: str, storage: bool) -> Callable[[dict[str, Any]], None]:
    def mutate(crd: dict[str, Any]) -> None:
        extra = copy.deepcopy(crd["spec"]["versions"][0])
        extra.update(name=name, storage=storage)
        crd["spec"]["versions"].append(extra)

    return mutate


RULES: list[tuple[str, Callable[[dict[str, Any]], None], str, str]] = [
    # (case, mutation, field named, words in the message)
    ("name is plural.group", set_path("metadata.name", "widget.example.com"), "metadata.name", "plural"),
    ("group needs a dot", set_path("spec.group", "example"), "spec.group", "at least one dot"),
    ("group is a subdomain", set_path("spec.group", "Example.com"), "spec.group", "RFC 1123"),
    ("scope is required", set_path("spec.scope", _DELETE), "spec.scope", "Required value"),
    ("scope is an enum", set_path("spec.scope", "Global"), "spec.scope", 'supported values: "Cluster"'),
    ("one storage version", set_path(f"{V0}.storage", False), "spec.versions", "exactly one version"),
    ("no two storage versions", add_version("v2", True), "spec.versions", "exactly one version"),
    ("unique version names", add_version("v1", False), "spec.versions", "unique version names"),
    ("no versions at all", set_path("spec.versions", []), "spec.versions", "exactly one version"),
    ("version names are DNS-1035", set_path(f"{V0}.name", "V1"), f"{V0.replace('.0', '[0]')}.name", "DNS-1035"),
    ("v1 needs a schema", set_path(f"{V0}.schema", _DELETE), "spec.versions[0].schema.openAPIV3Schema", "required"),
    (
        "the schema is structural",
        set_path(f"{V0}.schema.openAPIV3Schema.properties.spec.properties.size", {"description": "no type"}),
        "spec.versions[0].schema.openAPIV3Schema.spec.size",
        "type is required",
    ),
    (
        "preserve-unknown-fields is only true",
        set_path(f"{V0}.schema.openAPIV3Schema.properties.status.x-kubernetes-preserve-unknown-fields", False),
        "spec.versions[0].schema.openAPIV3Schema.status",
        "must be true",
    ),
    (
        "metadata only restricts name",
        set_path(f"{V0}.schema.openAPIV3Schema.properties.metadata", {"type": "object", "properties": {"x": {}}}),
        "spec.versions[0].schema.openAPIV3Schema.metadata.x",
        "only metadata.name",
    ),
    (
        "with status, root keywords are limited",
        set_path(f"{V0}.schema.openAPIV3Schema.anyOf", [{"required": ["spec"]}]),
        "spec.versions[0].schema.openAPIV3Schema",
        "if the status subresource is enabled",
    ),
    (
        "with status, the root is an object",
        set_path(f"{V0}.schema.openAPIV3Schema.type", "array"),
        "spec.versions[0].schema.openAPIV3Schema.type",
        'only "object"',
    ),
    (
        "the root is not nullable",
        set_path(f"{V0}.schema.openAPIV3Schema.nullable", True),
        "spec.versions[0].schema.openAPIV3Schema.nullable",
        "Forbidden",
    ),
    ("plural is lower case", set_path("spec.names.plural", "Widgets"), "spec.names.plural", "DNS-1035"),
    ("singular is lower case", set_path("spec.names.singular", "Widget"), "spec.names.singular", "DNS-1035"),
    ("kind is a label in mixed case", set_path("spec.names.kind", "Wid get"), "spec.names.kind", "mixed case"),
    ("kind differs from listKind", set_path("spec.names.listKind", "Widget"), "spec.names.listKind", "not be the same"),
    ("plural is required", set_path("spec.names.plural", _DELETE), "spec.names.plural", "Required value"),
    ("kind is required", set_path("spec.names.kind", _DELETE), "spec.names.kind", "Required value"),
    ("short names are labels", set_path("spec.names.shortNames", ["w_1"]), "spec.names.shortNames[0]", "DNS-1035"),
    ("categories are labels", set_path("spec.names.categories", ["All"]), "spec.names.categories[0]", "DNS-1035"),
    (
        "printer column type",
        set_path(f"{V0}.additionalPrinterColumns.0.type", "int"),
        "spec.versions[0].additionalPrinterColumns[0].type",
        "must be one of",
    ),
    (
        "printer column path",
        set_path(f"{V0}.additionalPrinterColumns.0.jsonPath", "spec.size"),
        "spec.versions[0].additionalPrinterColumns[0].JSONPath",
        "starting with .",
    ),
    (
        "scale paths",
        set_path(f"{V0}.subresources.scale", {"specReplicasPath": ".status.n", "statusReplicasPath": ".status.n"}),
        "spec.versions[0].subresources.scale.specReplicasPath",
        "under .spec",
    ),
    ("preserveUnknownFields", set_path("spec.preserveUnknownFields", True), "spec.preserveUnknownFields", "true"),
]


@pytest.mark.parametrize(("case", "mutate", "field", "words"), RULES, ids=[r[0] for r in RULES])
def test_each_rule_names_its_field(case: str, mutate: Callable[[dict[str, Any]], None], field: str, words: str) -> None:
    crd = widget()
    mutate(crd)
    found = problems_of(crd)
    assert any(f == field and words in message for f, _, message in found), (case, found)


def test_defaulting_fills_singular_list_kind_and_conversion() -> None:
    crd = widget()
    del crd["spec"]["names"]["singular"], crd["spec"]["names"]["listKind"]
    assert problems_of(crd) == []
    assert crd["spec"]["names"]["singular"] == "widget"
    assert crd["spec"]["names"]["listKind"] == "WidgetList"
    assert crd["spec"]["conversion"] == {"strategy": "None"}


def test_immutable_fields_on_update() -> None:
    old = widget()
    apply_crd_defaults(old)
    new = copy.deepcopy(old)
    new["spec"]["scope"] = "Cluster"
    new["spec"]["names"]["kind"] = "Gadget"
    new["spec"]["names"]["listKind"] = "GadgetList"
    fields = {f for f, _, m in problems_of(new, old) if "immutable" in m}
    assert fields == {"spec.scope", "spec.names.kind"}


def test_every_problem_is_reported_at_once() -> None:
    crd = in_group("y.k8s.io")
    crd["spec"]["scope"] = "Global"
    crd["spec"]["names"]["plural"] = "Widgets"
    fields = [f for f, _, _ in problems_of(crd)]
    assert fields == ["metadata.name", "spec.scope", "spec.names.plural", APPROVAL]


def crd_info(state: ClusterState) -> Any:
    return state.infos[(CUSTOMRESOURCEDEFINITIONS.group, CUSTOMRESOURCEDEFINITIONS.plural)]


def test_create_answers_422_invalid_as_kube_apiserver_does() -> None:
    state = ClusterState()
    crd = crd_manifest(POD_GROUP)
    del crd["metadata"]["annotations"]
    with pytest.raises(StatusError) as caught:
        state.create(crd_info(state), None, crd)
    body = caught.value.body
    assert caught.value.code == 422 and body["reason"] == "Invalid"
    assert body["message"] == (
        'CustomResourceDefinition.apiextensions.k8s.io "podgroups.scheduling.sigs.k8s.io" is invalid: '
        f'{APPROVAL}: Required value: protected groups must have approval annotation "api-approved.kubernetes.io", '
        "see https://github.com/kubernetes/enhancements/pull/1111"
    )
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueRequired",
            "message": 'Required value: protected groups must have approval annotation "api-approved.kubernetes.io", '
            "see https://github.com/kubernetes/enhancements/pull/1111",
            "field": APPROVAL,
        }
    ]
    assert ("scheduling.sigs.k8s.io", "podgroups") in state.infos  # served by default, the CRD was not stored
    assert state.objects[crd_info(state).key] == {}


def test_update_and_seed_are_checked_too() -> None:
    state = ClusterState()
    stored = state.create(crd_info(state), None, widget())
    broken = copy.deepcopy(stored)
    broken["spec"]["versions"][0]["storage"] = False
    with pytest.raises(StatusError) as caught:
        state.replace(crd_info(state), None, "widgets.example.com", broken)
    assert caught.value.code == 422
    assert "must have exactly one version marked as storage version" in caught.value.body["message"]
    with pytest.raises(ValueError, match="metadata.annotations"):
        state.seed(in_group("z.k8s.io"))
