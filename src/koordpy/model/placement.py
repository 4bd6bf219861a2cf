"""A pod's placement constraints (node name, node selector, required node affinity, tolerations).

Kept apart from :class:`~koordpy.model.objects.PodInfo` so the extender's pod cache does not
carry them for every pod: only the pod being placed needs them.

Not guaranteed: preferred (soft) affinity, inter-pod affinity and topology spread are not read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koordpy.model.objects import ObjectError

__all__ = [
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "PodPlacement",
    "Toleration",
    "placement_from_dict",
]

OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
FIELD_OPERATORS = frozenset({"In", "NotIn"})


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class PodPlacement:
    """``required_terms`` is None when the pod has no required node affinity (every node matches);
    an empty tuple matches no node, as in kube-scheduler."""

    node_name: str = ""
    node_selector: Mapping[str, str] | None = None
    tolerations: tuple[Toleration, ...] = ()
    required_terms: tuple[NodeSelectorTerm, ...] | None = None


def _mapping(obj: Any, path: str) -> Mapping[str, Any]:
    if obj is None:
        return {}
    if not isinstance(obj, Mapping):
        raise ObjectError(f"{path}: expected an object, got {type(obj).__name__}")
    return obj


def _list(obj: Any, path: str) -> list[Any]:
    if obj is None:
        return []
    if not isinstance(obj, list):
        raise ObjectError(f"{path}: expected a list, got {type(obj).__name__}")
    return obj


def _requirements(raw: Any, path: str, operators: frozenset[str]) -> tuple[NodeSelectorRequirement, ...]:
    out = []
    for i, item in enumerate(_list(raw, path)):
        where = f"{path}[{i}]"
        item = _mapping(item, where)
        operator = str(item.get("operator") or "")
        if operator not in operators:
            raise ObjectError(f"{where}.operator: expected one of {', '.join(sorted(operators))}, got {operator!r}")
        values = tuple(str(v) for v in _list(item.get("values"), f"{where}.values"))
        out.append(NodeSelectorRequirement(str(item.get("key") or ""), operator, values))
    return tuple(out)


def placement_from_dict(raw: Mapping[str, Any]) -> PodPlacement:
    """Read ``spec.nodeName``, ``spec.nodeSelector``, ``spec.tolerations`` and
    ``spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution``."""
    spec = _mapping(_mapping(raw, "pod").get("spec"), "spec")
    selector_raw = spec.get("nodeSelector")
    selector = None
    if selector_raw is not None:
        selector = {str(k): str(v) for k, v in _mapping(selector_raw, "spec.nodeSelector").items()}
    tolerations = []
    for i, tol in enumerate(_list(spec.get("tolerations"), "spec.tolerations")):
        tol = _mapping(tol, f"spec.tolerations[{i}]")
        tolerations.append(
            Toleration(
                key=str(tol.get("key") or ""),
                operator=str(tol.get("operator") or "Equal"),
                value=str(tol.get("value") or ""),
                effect=str(tol.get("effect") or ""),
            )
        )
    affinity = _mapping(spec.get("affinity"), "spec.affinity")
    node_affinity = _mapping(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")
    required_path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    required_raw = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    terms: tuple[NodeSelectorTerm, ...] | None = None
    if required_raw is not None:
        built = []
        for i, term in enumerate(_list(_mapping(required_raw, required_path).get("nodeSelectorTerms"), required_path)):
            where = f"{required_path}.nodeSelectorTerms[{i}]"
            term = _mapping(term, where)
            built.append(
                NodeSelectorTerm(
                    _requirements(term.get("matchExpressions"), f"{where}.matchExpressions", OPERATORS),
                    _requirements(term.get("matchFields"), f"{where}.matchFields", FIELD_OPERATORS),
                )
            )
        terms = tuple(built)
    return PodPlacement(
        node_name=str(spec.get("nodeName") or ""),
        node_selector=selector,
        tolerations=tuple(tolerations),
        required_terms=terms,
    )
