"""Checks that an OpenAPI v3 schema is *structural* in the apiextensions.k8s.io/v1 sense.

Written from the Kubernetes rules, independently of :mod:`koordpy.crds.schema`, so each checks the other:

1. every node (root, each property, each ``additionalProperties`` schema, each ``items``) has a non-empty
   ``type``, unless it sets ``x-kubernetes-int-or-string: true`` or
   ``x-kubernetes-preserve-unknown-fields: true``;
2. a field or item named inside ``allOf``/``anyOf``/``oneOf``/``not`` is also specified outside them;
3. inside those junctors, no ``description``, ``type``, ``default``, ``additionalProperties`` or
   ``nullable`` (except the int-or-string ``anyOf: [{type: integer}, {type: string}]`` pattern);
4. under ``metadata`` only restrictions on ``name`` and ``generateName``;
plus the v1 rules: no ``$ref``, ``additionalProperties`` and ``properties`` not together,
``additionalProperties`` never ``false``, ``items`` a single schema, no ``uniqueItems: true``,
``x-kubernetes-preserve-unknown-fields`` only ``true``, and int-or-string nodes without ``type``.
Not checked: CEL rules, defaults' validity, format names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["structural_problems"]

_JUNCTORS = ("allOf", "anyOf", "oneOf", "not")
_FORBIDDEN_IN_JUNCTOR = ("description", "type", "default", "additionalProperties", "nullable")
_TYPES = {"object", "array", "string", "integer", "number", "boolean"}
_INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]


def _junctor_parts(node: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    parts: list[tuple[str, Mapping[str, Any]]] = []
    for key in _JUNCTORS:
        value = node.get(key)
        if value is None:
            continue
        items = [value] if key == "not" else value
        for i, sub in enumerate(items):
            if isinstance(sub, Mapping):
                parts.append((f"{key}[{i}]" if key != "not" else key, sub))
    return parts


def _check_junctor(path: str, sub: Mapping[str, Any], outside: Mapping[str, Any], out: list[str]) -> None:
    for key in _FORBIDDEN_IN_JUNCTOR:
        if key in sub:
            out.append(f"{path}: {key} is not allowed inside a logical junctor")
    for name in sub.get("properties", {}) or {}:
        if name not in (outside.get("properties") or {}):
            out.append(f"{path}.{name}: specified in a junctor but not outside it")
    if "items" in sub and "items" not in outside:
        out.append(f"{path}[]: items specified in a junctor but not outside it")
    for inner_path, inner in _junctor_parts(sub):
        _check_junctor(f"{path}.{inner_path}", inner, outside, out)


def _walk(node: Any, path: str, out: list[str], *, metadata: bool = False) -> None:
    if not isinstance(node, Mapping):
        out.append(f"{path}: schema must be an object")
        return
    if "$ref" in node:
        out.append(f"{path}: $ref is not allowed")
    int_or_string = node.get("x-kubernetes-int-or-string") is True
    preserve = node.get("x-kubernetes-preserve-unknown-fields")
    if preserve is not None and preserve is not True:
        out.append(f"{path}: x-kubernetes-preserve-unknown-fields must be true when set")
    node_type = node.get("type")
    if int_or_string:
        if node_type is not None:
            out.append(f"{path}: int-or-string nodes must not set type")
        any_of = node.get("anyOf")
        if any_of is not None and list(any_of) != _INT_OR_STRING:
            out.append(f"{path}: int-or-string anyOf must be [{{type: integer}}, {{type: string}}]")
        for key in ("allOf", "oneOf", "not"):
            if key in node:
                out.append(f"{path}: {key} is not allowed on an int-or-string node")
    else:
        if not node_type and preserve is not True:
            out.append(f"{path}: type is required")
        elif node_type and node_type not in _TYPES:
            out.append(f"{path}: unknown type {node_type!r}")
        for part_path, sub in _junctor_parts(node):
            _check_junctor(f"{path}.{part_path}", sub, node, out)
    if node.get("uniqueItems") is True:
        out.append(f"{path}: uniqueItems: true is not allowed")
    props = node.get("properties")
    additional = node.get("additionalProperties")
    if props is not None and additional is not None:
        out.append(f"{path}: properties and additionalProperties are mutually exclusive")
    if additional is False:
        out.append(f"{path}: additionalProperties: false is not allowed")
    if (props is not None or isinstance(additional, Mapping)) and node_type not in (None, "object"):
        out.append(f"{path}: properties on a non-object node")
    if metadata:
        for name, sub in (props or {}).items():
            if name not in ("name", "generateName"):
                out.append(f"{path}.{name}: only metadata.name and metadata.generateName may be restricted")
            elif isinstance(sub, Mapping) and set(sub) - {"type", "pattern", "maxLength", "minLength", "description"}:
                out.append(f"{path}.{name}: only type, pattern and length restrictions are allowed")
    for name, sub in (props or {}).items():
        _walk(sub, f"{path}.{name}", out, metadata=(path == "" and name == "metadata"))
    if isinstance(additional, Mapping):
        _walk(additional, f"{path}.*", out)
    if "items" in node:
        items = node["items"]
        if isinstance(items, list):
            out.append(f"{path}[]: items must be a single schema, not a list")
        else:
            _walk(items, f"{path}[]", out)
        if node_type != "array":
            out.append(f"{path}: items on a non-array node")
    elif node_type == "array":
        out.append(f"{path}: arrays must specify items")


def structural_problems(schema: Mapping[str, Any]) -> list[str]:
    """Every structural-schema violation in ``schema`` (an ``openAPIV3Schema``), as ``path: problem``."""
    out: list[str] = []
    _walk(schema, "", out)
    if schema.get("type") != "object":
        out.append("<root>: type must be object")
    return [p if not p.startswith(":") else "<root>" + p for p in out]
