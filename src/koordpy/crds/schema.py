"""Pydantic models -> structural OpenAPI v3 schemas and CustomResourceDefinition objects.

The output obeys the apiextensions.k8s.io/v1 structural-schema rules: every node has a ``type`` (except
``x-kubernetes-int-or-string`` and ``x-kubernetes-preserve-unknown-fields`` nodes), no ``$ref``, no
``additionalProperties`` next to ``properties``, and ``anyOf`` only in the int-or-string pattern.
Defaults are not emitted: the API server would apply them, and the upstream CRDs do not. Unions other
than ``X | None`` are refused, so a model that cannot be expressed structurally fails loudly here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, WithJsonSchema

from koordpy.model.quantity import QuantityError, parse_quantity

__all__ = [
    "AGE",
    "Duration",
    "FreeForm",
    "PrinterColumn",
    "Quantity",
    "Resource",
    "ResourceList",
    "SchemaError",
    "Time",
    "WireModel",
    "crd_manifest",
    "structural_schema",
]

_NUMBER = r"(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
QUANTITY_PATTERN = rf"^(\+|-)?{_NUMBER}(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?{_NUMBER}))?$"


def _bounded_quantity(raw: str | int | float) -> str | int | float:
    """Keep the value as written, but only if it is a quantity koordpy can use (bounds in
    ``koordpy.model.quantity``): ``1e400`` or ``"１"`` fail validation here, not arithmetic later."""
    try:
        parse_quantity(raw)
    except QuantityError as exc:
        raise ValueError(str(exc)) from None
    return raw


Quantity = Annotated[
    str | int | float,
    AfterValidator(_bounded_quantity),
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        }
    ),
]
"""A resource.Quantity: ``"500m"``, ``"1Gi"`` or a bare number, kept as written once it parses within
koordpy's bounds. The CRD schema carries upstream's pattern only (it admits ``1e99999999``)."""

ResourceList = dict[str, Quantity]
Duration = Annotated[str, WithJsonSchema({"type": "string"})]
"""A metav1.Duration as Go prints it (``"5m0s"``, ``"300s"``). Not parsed here."""
Time = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]
"""A metav1.Time, RFC 3339. Kept as text so objects round-trip unchanged."""
FreeForm = Annotated[dict[str, Any], WithJsonSchema({"type": "object", "x-kubernetes-preserve-unknown-fields": True})]
"""An object whose content belongs to another API (kept verbatim, never pruned)."""


class WireModel(BaseModel):
    """Base of every CRD model: upstream camelCase names, unknown fields ignored when reading."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True, use_attribute_docstrings=True)


class SchemaError(ValueError):
    """A model that has no structural OpenAPI form; the message names the JSON path."""


_DROPPED = frozenset({"title", "default", "examples", "$defs"})


def _resolve(node: Mapping[str, Any], defs: Mapping[str, Any], path: str) -> dict[str, Any]:
    """Inline ``$ref`` and single-element ``allOf``; the referring node's keys win."""
    out = dict(node)
    if "allOf" in out and len(out["allOf"]) == 1:
        inner = out.pop("allOf")[0]
        out = {**_resolve(inner, defs, path), **out}
    if "$ref" in out:
        ref = out.pop("$ref")
        name = ref.rsplit("/", 1)[-1]
        if name not in defs:
            raise SchemaError(f"{path}: unresolvable $ref {ref}")
        out = {**_resolve(defs[name], defs, path), **out}
    return out


def _convert(node: Mapping[str, Any], defs: Mapping[str, Any], path: str, depth: int = 0) -> dict[str, Any]:
    if depth > 40:
        raise SchemaError(f"{path}: schema nested too deeply (recursive model?)")
    node = _resolve(node, defs, path)
    if node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields"):
        return {k: v for k, v in node.items() if k not in _DROPPED}
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o != {"type": "null"}]
        if len(options) != 1:
            raise SchemaError(f"{path}: union of {len(options)} types has no structural form")
        rest = {k: v for k, v in node.items() if k != "anyOf"}
        inner = _convert(options[0], defs, path, depth + 1)
        return {**inner, **{k: v for k, v in rest.items() if k not in _DROPPED}}
    for junctor in ("oneOf", "allOf", "not"):
        if junctor in node:
            raise SchemaError(f"{path}: {junctor} has no structural form here")
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key == "const":
            out["enum"] = [value]
        elif key == "properties":
            out["properties"] = {name: _convert(sub, defs, f"{path}.{name}", depth + 1) for name, sub in value.items()}
        elif key == "additionalProperties":
            if value is True:
                out["x-kubernetes-preserve-unknown-fields"] = True
            elif isinstance(value, Mapping):
                out["additionalProperties"] = _convert(value, defs, f"{path}.*", depth + 1)
            # False: dropped; the API server prunes unknown fields instead.
        elif key == "items":
            if not isinstance(value, Mapping):
                raise SchemaError(f"{path}[]: tuple-typed arrays have no structural form")
            out["items"] = _convert(value, defs, f"{path}[]", depth + 1)
        elif key == "uniqueItems":
            continue  # forbidden in apiextensions v1
        else:
            out[key] = value
    if "enum" in out and "type" not in out:
        kinds = {type(v) for v in out["enum"]}
        if kinds == {str}:
            out["type"] = "string"
        elif kinds <= {int}:
            out["type"] = "integer"
    if "type" not in out:
        raise SchemaError(f"{path}: no type")
    if out["type"] == "object" and "properties" in out and "additionalProperties" in out:
        raise SchemaError(f"{path}: properties and additionalProperties together are not structural")
    if out.get("required") == []:
        del out["required"]
    return out


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The structural OpenAPI v3 schema of ``model`` (aliases as property names)."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.get("$defs", {})
    return _convert(raw, defs, model.__name__)


@dataclass(frozen=True)
class PrinterColumn:
    """One ``additionalPrinterColumns`` entry."""

    name: str
    type: Literal["string", "integer", "number", "boolean", "date"]
    json_path: str
    description: str = ""
    priority: int = 0

    def manifest(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": self.type, "jsonPath": self.json_path}
        if self.description:
            out["description"] = self.description
        if self.priority:
            out["priority"] = self.priority
        return out


AGE = PrinterColumn("Age", "date", ".metadata.creationTimestamp")
"""Appended to every CRD's columns unless a model places it itself (upstream order)."""


@dataclass(frozen=True)
class Resource:
    """A custom resource kind: its names, scope, models and presentation."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    spec: type[BaseModel] | None
    status: type[BaseModel] | None
    description: str
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    columns: tuple[PrinterColumn, ...] = ()
    spec_required: bool = False
    status_subresource: bool = True
    extra_properties: Mapping[str, Any] = field(default_factory=dict)
    """Top-level properties besides spec/status (upstream kinds that keep data at the root)."""
    annotations: Mapping[str, str] = field(default_factory=dict)
    """The CRD object's own annotations, as upstream's carries them (``api-approved.kubernetes.io`` for a
    group under ``k8s.io``/``kubernetes.io``, without which kube-apiserver refuses the CRD)."""

    @property
    def name(self) -> str:
        return f"{self.plural}.{self.group}"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def root_schema(self) -> dict[str, Any]:
        """``openAPIV3Schema`` for the whole object."""
        props: dict[str, Any] = {
            "apiVersion": {"type": "string", "description": "Versioned schema of this representation."},
            "kind": {"type": "string", "description": "REST resource this object represents."},
            "metadata": {"type": "object"},
        }
        if self.spec is not None:
            props["spec"] = structural_schema(self.spec)
        if self.status is not None:
            props["status"] = structural_schema(self.status)
        props.update(self.extra_properties)
        out: dict[str, Any] = {"type": "object", "description": self.description, "properties": props}
        if self.spec_required and self.spec is not None:
            out["required"] = ["spec"]
        return out


def crd_manifest(res: Resource) -> dict[str, Any]:
    """The CustomResourceDefinition object for ``res`` (apiextensions.k8s.io/v1)."""
    names: dict[str, Any] = {
        "kind": res.kind,
        "listKind": f"{res.kind}List",
        "plural": res.plural,
        "singular": res.kind.lower(),
    }
    if res.short_names:
        names["shortNames"] = list(res.short_names)
    if res.categories:
        names["categories"] = list(res.categories)
    version: dict[str, Any] = {
        "name": res.version,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": res.root_schema()},
    }
    if res.status_subresource and res.status is not None:
        version["subresources"] = {"status": {}}
    columns = [*res.columns] if AGE in res.columns else [*res.columns, AGE]
    version["additionalPrinterColumns"] = [c.manifest() for c in columns]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": res.name, **({"annotations": dict(res.annotations)} if res.annotations else {})},
        "spec": {
            "group": res.group,
            "names": names,
            "scope": "Namespaced" if res.namespaced else "Cluster",
            "versions": [version],
        },
    }


def by_name(resources: Iterable[Resource]) -> dict[str, Resource]:
    """Index resources by CRD name, refusing duplicates."""
    out: dict[str, Resource] = {}
    for res in resources:
        if res.name in out:
            raise ValueError(f"duplicate custom resource {res.name}")
        out[res.name] = res
    return out
