"""Label and field selectors, in their query-string forms and the ``LabelSelector`` object form.

Not supported: set-based selectors inside field selectors (the API server has none either) and
``>``/``<`` label operators (only used by node affinity, not by list calls).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from koordpy_testkit.apiserver.errors import StatusError

__all__ = ["FieldSelector", "LabelSelector", "match_label_selector_object"]


@dataclass(frozen=True)
class _Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: frozenset[str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("=", "in"):
            return present and labels[self.key] in self.values
        # "!=" and "notin" match objects without the label too, as the API server does
        return not present or labels[self.key] not in self.values


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


class LabelSelector:
    """A parsed ``labelSelector`` query value; an empty selector matches everything."""

    def __init__(self, text: str | None) -> None:
        self.text = text or ""
        self.requirements = [self._parse(part) for part in _split_top_level(self.text)]

    @staticmethod
    def _parse(part: str) -> _Requirement:
        words = part.split(None, 1)
        if len(words) == 2 and words[1].lstrip().lower().startswith(("in ", "in(", "notin ", "notin(")):
            key = words[0]
            rest = words[1].strip()
            op = "notin" if rest.lower().startswith("notin") else "in"
            inner = rest[len(op) :].strip()
            if not (inner.startswith("(") and inner.endswith(")")):
                raise StatusError(400, f"unable to parse requirement: {part!r}", "BadRequest")
            values = frozenset(v.strip() for v in inner[1:-1].split(",") if v.strip())
            return _Requirement(key, op, values)
        for token, op in (("!=", "!="), ("==", "="), ("=", "=")):
            if token in part:
                key, value = part.split(token, 1)
                return _Requirement(key.strip(), op, frozenset([value.strip()]))
        if part.startswith("!"):
            return _Requirement(part[1:].strip(), "!exists", frozenset())
        if not part.replace("-", "").replace(".", "").replace("/", "").replace("_", "").isalnum():
            raise StatusError(400, f"unable to parse requirement: {part!r}", "BadRequest")
        return _Requirement(part, "exists", frozenset())

    def matches(self, obj: Mapping[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(req.matches(labels) for req in self.requirements)


_COMMON_FIELDS = ("metadata.name", "metadata.namespace")
_FIELDS_BY_KIND: dict[str, tuple[str, ...]] = {
    "Pod": (
        "spec.nodeName",
        "spec.schedulerName",
        "spec.restartPolicy",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
    "Node": ("spec.unschedulable",),
    "Event": (
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
}


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    if path == "source":
        path = "source.component"
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, Mapping):
            return ""
        node = node.get(part)
    if node is None:
        return ""
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)


class FieldSelector:
    """A parsed ``fieldSelector`` query value, checked against the fields the API server indexes for ``kind``.

    An unsupported field raises 400 as the API server does. A missing field compares as ``""`` (so
    ``spec.nodeName=`` selects unbound pods).
    """

    def __init__(self, text: str | None, kind: str) -> None:
        self.text = text or ""
        allowed = set(_COMMON_FIELDS) | set(_FIELDS_BY_KIND.get(kind, ()))
        self.terms: list[tuple[str, bool, str]] = []
        for part in _split_top_level(self.text):
            for token, negated in (("!=", True), ("==", False), ("=", False)):
                if token in part:
                    key, value = part.split(token, 1)
                    negate = negated
                    break
            else:
                raise StatusError(400, f"invalid selector: {part!r}; can't understand it", "BadRequest")
            key = key.strip()
            if key not in allowed:
                raise StatusError(400, f'field label not supported: "{key}"', "BadRequest")
            self.terms.append((key, negate, value.strip()))

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all((_field_value(obj, key) == value) != negate for key, negate, value in self.terms)


def match_label_selector_object(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Match a ``LabelSelector`` object (``matchLabels`` + ``matchExpressions``).

    As for PodDisruptionBudgets in policy/v1, an empty selector matches every pod; a None selector
    matches nothing.
    """
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    checks: dict[str, Callable[[str, frozenset[str]], bool]] = {
        "In": lambda k, vs: k in labels and labels[k] in vs,
        "NotIn": lambda k, vs: k not in labels or labels[k] not in vs,
        "Exists": lambda k, vs: k in labels,
        "DoesNotExist": lambda k, vs: k not in labels,
    }
    for expr in selector.get("matchExpressions") or ():
        check = checks.get(str(expr.get("operator")))
        if check is None or not check(str(expr.get("key")), frozenset(expr.get("values") or ())):
            return False
    return True
