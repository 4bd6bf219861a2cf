"""The structural-schema checker (koordpy.crds.structural) catches each rule's violation."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.crds.structural import structural_problems


def root(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


GOOD = root(
    spec={
        "type": "object",
        "properties": {
            "q": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "anything": {"x-kubernetes-preserve-unknown-fields": True},
            "m": {"type": "object", "additionalProperties": {"type": "string"}},
            "l": {"type": "array", "items": {"type": "integer"}},
            "either": {"type": "object", "properties": {"a": {"type": "string"}}, "oneOf": [{"required": ["a"]}]},
        },
    },
    metadata={"type": "object", "properties": {"name": {"type": "string", "maxLength": 63}}},
)


def test_a_structural_schema_has_no_problems() -> None:
    assert structural_problems(GOOD) == []


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        (root(a={"description": "no type"}), ".a: type is required"),
        (root(a={"type": "thing"}), ".a: unknown type 'thing'"),
        (root(a={"$ref": "#/x", "type": "object"}), ".a: $ref is not allowed"),
        (
            root(
                a={
                    "type": "object",
                    "properties": {"b": {"type": "string"}},
                    "additionalProperties": {"type": "string"},
                }
            ),
            ".a: properties and additionalProperties are mutually exclusive",
        ),
        (root(a={"type": "object", "additionalProperties": False}), ".a: additionalProperties: false is not allowed"),
        (root(a={"type": "array"}), ".a: arrays must specify items"),
        (root(a={"type": "array", "items": [{"type": "string"}]}), ".a[]: items must be a single schema, not a list"),
        (
            root(a={"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
            ".a: uniqueItems: true is not allowed",
        ),
        (
            root(a={"x-kubernetes-int-or-string": True, "type": "string"}),
            ".a: int-or-string nodes must not set type",
        ),
        (
            root(a={"x-kubernetes-int-or-string": True, "anyOf": [{"type": "string"}]}),
            ".a: int-or-string anyOf must be [{type: integer}, {type: string}]",
        ),
        (
            root(a={"type": "object", "anyOf": [{"properties": {"b": {"type": "string"}}}]}),
            ".a.anyOf[0].b: specified in a junctor but not outside it",
        ),
        (
            root(a={"type": "string", "oneOf": [{"description": "x"}]}),
            ".a.oneOf[0]: description is not allowed inside a logical junctor",
        ),
        (
            root(a={"type": "string", "x-kubernetes-preserve-unknown-fields": False}),
            ".a: x-kubernetes-preserve-unknown-fields must be true when set",
        ),
        (
            root(metadata={"type": "object", "properties": {"labels": {"type": "object"}}}),
            ".metadata.labels: only metadata.name and metadata.generateName may be restricted",
        ),
        ({"type": "array", "items": {"type": "string"}}, "<root>: type must be object"),
        (root(a={"type": "object", "properties": {"b": {}}}), ".a.b: type is required"),
        (root(a={"type": "object", "additionalProperties": {"type": "array"}}), ".a.*: arrays must specify items"),
    ],
)
def test_each_violation_is_reported_with_its_path(schema: dict[str, Any], problem: str) -> None:
    assert problem in structural_problems(schema)
