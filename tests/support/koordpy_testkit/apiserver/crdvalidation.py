"""The apiextensions.k8s.io/v1 CustomResourceDefinition rules kube-apiserver applies on create and update.

Written from kube-apiserver's CRD validation (apiextensions-apiserver ``validation.go``), so that a CRD the
emulator accepts is one a real cluster accepts. Enforced, each with the field path kube-apiserver names:

- ``metadata.name`` is ``<spec.names.plural>.<spec.group>``;
- a protected group (``k8s.io``, ``*.k8s.io``, ``kubernetes.io``, ``*.kubernetes.io``) carries the
  ``api-approved.kubernetes.io`` annotation: a URL or a reason starting with ``unapproved`` (an update that
  leaves the approval state unchanged is not re-checked, as upstream);
- ``spec.group`` a DNS subdomain with at least one dot; ``spec.scope`` Cluster or Namespaced;
- ``spec.versions``: DNS-1035 names, unique, exactly one ``storage: true``, an ``openAPIV3Schema`` each,
  structural (:func:`koordpy.crds.structural.structural_problems`), ``nullable`` not at the root, and with a
  ``status`` subresource only the root keywords upstream allows there (no ``anyOf``, ``additionalProperties``,
  ``default``, ...), type ``object``;
- ``spec.names``: plural, singular, kind and listKind required; plural, singular, shortNames and categories
  DNS-1035 labels (lower case); kind and listKind lower-cased likewise, and different from each other;
- printer columns: name, a known type and format, a ``.``-rooted JSON path; scale subresource paths;
- ``spec.preserveUnknownFields`` never true; on update ``spec.group`` and ``spec.names.plural`` are immutable,
  and so are ``spec.scope`` and ``spec.names.kind`` (every stored CRD counts as established).

Not checked: CEL rules (``x-kubernetes-validations``), defaults against their schema, list-map keys, conversion
webhooks, selectable fields, ``status.storedVersions``. kube-apiserver does not require a served version
either, and neither does this module. Defaulting (:func:`apply_crd_defaults`) fills ``names.singular``,
``names.listKind`` and ``conversion`` as the v1 API does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from koordpy.crds.structural import structural_problems

__all__ = ["APPROVAL_ANNOTATION", "FieldError", "apply_crd_defaults", "crd_problems", "is_protected_group"]

APPROVAL_ANNOTATION = "api-approved.kubernetes.io"
_APPROVAL_FIELD = f"metadata.annotations[{APPROVAL_ANNOTATION}]"
_APPROVAL_KEP = "see https://github.com/kubernetes/enhancements/pull/1111"
_REQUEST_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*:)?/\S*$")
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = re.compile(rf"^{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*$")
_DNS1035_TEXT = "must be a DNS-1035 label: lower case letters, digits or '-', starting with a letter (at most 63)"
_SUBDOMAIN_TEXT = "must be a lower case RFC 1123 subdomain: labels of a-z, 0-9 and '-' joined by '.' (at most 253)"
_SCOPES = ("Cluster", "Namespaced")
_COLUMN_TYPES = ("boolean", "date", "integer", "number", "string")
_COLUMN_FORMATS = ("byte", "date", "date-time", "double", "float", "int32", "int64", "password")
_ROOT_WITH_STATUS = frozenset(
    {
        "description",
        "type",
        "format",
        "title",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "uniqueItems",
        "multipleOf",
        "required",
        "items",
        "properties",
        "externalDocs",
        "example",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-validations",
    }
)
_WITH_STATUS = "if the status subresource is enabled"
_ZERO_VALUES: tuple[Any, ...] = (None, False, "", [], {})  # upstream skips zero-valued keywords at the root
_REASONS = {
    "Required": "FieldValueRequired",
    "Invalid": "FieldValueInvalid",
    "NotSupported": "FieldValueNotSupported",
    "Forbidden": "FieldValueForbidden",
}


@dataclass(frozen=True)
class FieldError:
    """One ``field.Error`` as kube-apiserver reports it in a ``Status`` cause."""

    type: Literal["Required", "Invalid", "NotSupported", "Forbidden"]
    field: str
    detail: str = ""
    value: Any = None
    supported: tuple[str, ...] = ()

    @property
    def reason(self) -> str:
        return _REASONS[self.type]

    @property
    def message(self) -> str:
        """The cause message: the error without its field path."""
        if self.type == "Required":
            head = "Required value"
        elif self.type == "Forbidden":
            head = "Forbidden"
        elif self.type == "NotSupported":
            choices = ", ".join(json.dumps(s) for s in self.supported)
            return f"Unsupported value: {_render(self.value)}: supported values: {choices}"
        else:
            head = f"Invalid value: {_render(self.value)}"
        return f"{head}: {self.detail}" if self.detail else head

    def cause(self) -> dict[str, str]:
        return {"reason": self.reason, "message": self.message, "field": self.field}

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def _render(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def is_protected_group(group: str) -> bool:
    """Groups reserved for APIs approved by the Kubernetes project."""
    return group in ("k8s.io", "kubernetes.io") or group.endswith((".k8s.io", ".kubernetes.io"))


def apply_crd_defaults(crd: dict[str, Any]) -> None:
    """The v1 API's defaulting, in place: ``names.singular``/``listKind`` from ``kind``, ``conversion: None``."""
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return
    names = spec.get("names")
    if isinstance(names, dict) and isinstance(names.get("kind"), str) and names["kind"]:
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", names["kind"] + "List")
    spec.setdefault("conversion", {"strategy": "None"})


def _approval_state(annotations: Mapping[str, Any]) -> tuple[str, str]:
    value = annotations.get(APPROVAL_ANNOTATION)
    if not value:
        return "missing", f'protected groups must have approval annotation "{APPROVAL_ANNOTATION}", {_APPROVAL_KEP}'
    text = str(value)
    if text.startswith("unapproved"):
        return "bypassed", f"not approved: {text!r}"
    if _REQUEST_URI.match(text):  # what Go's url.ParseRequestURI takes: an absolute URL or path
        return "approved", f"approved in {text}"
    return "invalid", (
        f'protected groups must have approval annotation "{APPROVAL_ANNOTATION}" with either a URL or a reason '
        f'starting with "unapproved", {_APPROVAL_KEP}'
    )


def _approval(crd: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    if not is_protected_group(str(_map(crd.get("spec")).get("group") or "")):
        return []
    annotations = _map(_map(crd.get("metadata")).get("annotations"))
    state, reason = _approval_state(annotations)
    if old is not None:
        old_state, _ = _approval_state(_map(_map(old.get("metadata")).get("annotations")))
        if old_state == state:
            return []
    if state == "missing":
        return [FieldError("Required", _APPROVAL_FIELD, reason)]
    if state == "invalid":
        return [FieldError("Invalid", _APPROVAL_FIELD, reason, annotations.get(APPROVAL_ANNOTATION))]
    return []


def _names(names: Mapping[str, Any], path: str) -> list[FieldError]:
    out: list[FieldError] = []
    for key in ("plural", "singular", "kind", "listKind"):
        if not names.get(key):
            out.append(FieldError("Required", f"{path}.{key}"))
    for key in ("plural", "singular"):
        value = names.get(key)
        if value and not (isinstance(value, str) and len(value) <= 63 and _DNS1035.match(value)):
            out.append(FieldError("Invalid", f"{path}.{key}", _DNS1035_TEXT, value))
    for key in ("kind", "listKind"):
        value = names.get(key)
        if value and not (isinstance(value, str) and len(value) <= 63 and _DNS1035.match(value.lower())):
            out.append(FieldError("Invalid", f"{path}.{key}", "may have mixed case, but " + _DNS1035_TEXT, value))
    if names.get("kind") and names.get("kind") == names.get("listKind"):
        out.append(FieldError("Invalid", f"{path}.listKind", "kind and listKind may not be the same", names["kind"]))
    for key in ("shortNames", "categories"):
        for i, value in enumerate(names.get(key) or ()):
            if not (isinstance(value, str) and len(value) <= 63 and _DNS1035.match(value)):
                out.append(FieldError("Invalid", f"{path}.{key}[{i}]", _DNS1035_TEXT, value))
    return out


def _simple_json_path(value: Any, path: str, under: tuple[str, ...] = ()) -> list[FieldError]:
    if not isinstance(value, str) or not value:
        return [FieldError("Invalid", path, "must not be empty", value)]
    if not value.startswith("."):
        return [FieldError("Invalid", path, "must be a simple json path starting with .", value)]
    if under and not value.startswith(under):
        return [FieldError("Invalid", path, f"should be a json path under {' or '.join(u[:-1] for u in under)}", value)]
    return []


def _columns(columns: Any, path: str) -> list[FieldError]:
    out: list[FieldError] = []
    for i, column in enumerate(columns or ()):
        col, where = _map(column), f"{path}[{i}]"
        if not col.get("name"):
            out.append(FieldError("Required", f"{where}.name"))
        kind = col.get("type")
        if not kind:
            out.append(FieldError("Required", f"{where}.type", f"must be one of {','.join(_COLUMN_TYPES)}"))
        elif kind not in _COLUMN_TYPES:
            out.append(FieldError("Invalid", f"{where}.type", f"must be one of {','.join(_COLUMN_TYPES)}", kind))
        if col.get("format") and col["format"] not in _COLUMN_FORMATS:
            detail = f"must be one of {','.join(_COLUMN_FORMATS)}"
            out.append(FieldError("Invalid", f"{where}.format", detail, col["format"]))
        if not col.get("jsonPath"):
            out.append(FieldError("Required", f"{where}.JSONPath"))
        else:
            out.extend(_simple_json_path(col["jsonPath"], f"{where}.JSONPath"))
    return out


def _subresources(subresources: Mapping[str, Any], path: str) -> list[FieldError]:
    scale = subresources.get("scale")
    if scale is None:
        return []
    scale, out = _map(scale), []
    for key, under in (("specReplicasPath", (".spec.",)), ("statusReplicasPath", (".status.",))):
        if not scale.get(key):
            out.append(FieldError("Required", f"{path}.scale.{key}"))
        else:
            out.extend(_simple_json_path(scale[key], f"{path}.scale.{key}", under))
    if scale.get("labelSelectorPath"):
        where = f"{path}.scale.labelSelectorPath"
        out.extend(_simple_json_path(scale["labelSelectorPath"], where, (".spec.", ".status.")))
    return out


def _schema(schema: Any, status_enabled: bool, path: str) -> list[FieldError]:
    if not isinstance(schema, Mapping):
        return [FieldError("Required", path, "schemas are required")]
    out: list[FieldError] = []
    if status_enabled:
        if schema.get("type") not in (None, "object"):
            detail = (
                'only "object" is allowed as the type at the root of the schema if the status subresource is enabled'
            )
            out.append(FieldError("Invalid", f"{path}.type", detail, schema.get("type")))
        extra = sorted(
            k for k, v in schema.items() if k not in _ROOT_WITH_STATUS and v not in (None, False, "", [], {})
        )
        if extra:
            detail = f"only {sorted(_ROOT_WITH_STATUS)} are allowed at the root of the schema {_WITH_STATUS}"
            out.append(FieldError("Invalid", path, detail, extra))
    if schema.get("nullable") is True:
        out.append(FieldError("Forbidden", f"{path}.nullable", "nullable cannot be true at the root"))
    for problem in structural_problems(schema):
        where, _, what = problem.partition(": ")
        inner = "" if where == "<root>" else where
        out.append(FieldError("Invalid", f"{path}{inner}", f"not a structural schema: {what}", None))
    return out


def _versions(spec: Mapping[str, Any], path: str) -> list[FieldError]:
    versions = spec.get("versions")
    out: list[FieldError] = []
    if not isinstance(versions, list):
        versions = []
    seen: set[str] = set()
    duplicates = False
    for i, raw in enumerate(versions):
        version, where = _map(raw), f"{path}[{i}]"
        name = version.get("name")
        if not (isinstance(name, str) and len(name) <= 63 and _DNS1035.match(name)):
            out.append(FieldError("Invalid", f"{where}.name", _DNS1035_TEXT, name))
        if name in seen:
            duplicates = True
        seen.add(str(name))
        subresources = _map(version.get("subresources"))
        schema = _map(version.get("schema")).get("openAPIV3Schema")
        out.extend(_schema(schema, "status" in subresources, f"{where}.schema.openAPIV3Schema"))
        out.extend(_subresources(subresources, f"{where}.subresources"))
        out.extend(_columns(version.get("additionalPrinterColumns"), f"{where}.additionalPrinterColumns"))
    if duplicates:
        out.append(FieldError("Invalid", path, "must contain unique version names", sorted(seen)))
    storage = sum(1 for v in versions if _map(v).get("storage") is True)
    if storage != 1:
        detail = "must have exactly one version marked as storage version"
        out.append(FieldError("Invalid", path, detail, [_map(v).get("name") for v in versions]))
    return out


def crd_problems(crd: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> list[FieldError]:
    """Every rule ``crd`` breaks (empty: kube-apiserver would accept it); ``old`` is the stored CRD on update."""
    meta, spec = _map(crd.get("metadata")), _map(crd.get("spec"))
    names = _map(spec.get("names"))
    group = spec.get("group")
    out: list[FieldError] = []
    name = meta.get("name")
    if not (isinstance(name, str) and len(name) <= 253 and _DNS1123_SUBDOMAIN.match(name)):
        out.append(FieldError("Invalid", "metadata.name", _SUBDOMAIN_TEXT, name))
    if name != f"{names.get('plural')}.{group}":
        out.append(FieldError("Invalid", "metadata.name", 'must be spec.names.plural+"."+spec.group', name))
    if not group:
        out.append(FieldError("Required", "spec.group"))
    elif not (isinstance(group, str) and len(group) <= 253 and _DNS1123_SUBDOMAIN.match(group)):
        out.append(FieldError("Invalid", "spec.group", _SUBDOMAIN_TEXT, group))
    elif "." not in group:
        out.append(FieldError("Invalid", "spec.group", "should be a domain with at least one dot", group))
    scope = spec.get("scope")
    if not scope:
        out.append(FieldError("Required", "spec.scope"))
    elif scope not in _SCOPES:
        out.append(FieldError("NotSupported", "spec.scope", value=scope, supported=_SCOPES))
    if spec.get("preserveUnknownFields") is True:
        detail = (
            "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead"
        )
        out.append(FieldError("Invalid", "spec.preserveUnknownFields", detail, True))
    out.extend(_versions(spec, "spec.versions"))
    out.extend(_names(names, "spec.names"))
    if old is not None:
        old_spec = _map(old.get("spec"))
        for key, new_value, old_value in (
            ("spec.group", group, old_spec.get("group")),
            ("spec.names.plural", names.get("plural"), _map(old_spec.get("names")).get("plural")),
            ("spec.scope", scope, old_spec.get("scope")),
            ("spec.names.kind", names.get("kind"), _map(old_spec.get("names")).get("kind")),
        ):
            if new_value != old_value:
                out.append(FieldError("Invalid", key, "field is immutable", new_value))
    out.extend(_approval(crd, old))
    return out
