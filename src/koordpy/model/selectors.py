"""``metav1.LabelSelector`` matching: the one implementation, whatever model carries the selector.

``matchLabels`` must all be present with their values and every ``matchExpressions`` requirement must
hold (``In``, ``NotIn``, ``Exists``, ``DoesNotExist``); an empty selector matches everything. The
selectors of the descheduler's arguments, Crane's ensurance policies and Reservation owners all match
through :func:`label_selector_matches`.

:func:`selectors_disjoint` tells when two selectors can never select the same labels (node pools must not
share a node).

Not guaranteed: validation. An operator outside the four, or ``values`` where the operator takes none,
is the caller's to refuse when it reads the selector; here an unknown operator matches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

__all__ = ["LabelRequirementLike", "label_selector_matches", "selectors_disjoint"]


class LabelRequirementLike(Protocol):
    """A ``matchExpressions`` entry as any of the project's models carries it."""

    @property
    def key(self) -> str: ...

    @property
    def operator(self) -> str: ...

    @property
    def values(self) -> Iterable[str]: ...


def label_selector_matches(
    match_labels: Mapping[str, str] | None,
    match_expressions: Iterable[LabelRequirementLike] | None,
    labels: Mapping[str, str],
) -> bool:
    """Whether ``labels`` satisfy the selector made of ``match_labels`` and ``match_expressions``."""
    for key, value in (match_labels or {}).items():
        if labels.get(key) != value:
            return False
    for req in match_expressions or ():
        present = req.key in labels
        operator = req.operator
        if operator == "In" and (not present or labels[req.key] not in req.values):
            return False
        if operator == "NotIn" and present and labels[req.key] in req.values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


class _KeyRule:
    """What one selector requires of one label key: present or absent, and the values it may take."""

    __slots__ = ("absent", "allowed", "forbidden", "present")

    def __init__(self) -> None:
        self.present = False
        self.absent = False
        self.allowed: frozenset[str] | None = None  # None: any value
        self.forbidden: set[str] = set()

    def allow(self, values: Iterable[str]) -> None:
        self.present = True
        given = frozenset(values)
        self.allowed = given if self.allowed is None else self.allowed & given

    def values(self) -> frozenset[str] | None:
        """The values a matching label may have (None: any but ``forbidden``); empty: none can match."""
        if self.allowed is None:
            return None
        return frozenset(v for v in self.allowed if v not in self.forbidden)


def _key_rules(
    match_labels: Mapping[str, str] | None, match_expressions: Iterable[LabelRequirementLike] | None
) -> dict[str, _KeyRule]:
    rules: dict[str, _KeyRule] = {}
    for key, value in (match_labels or {}).items():
        rules.setdefault(key, _KeyRule()).allow((value,))
    for req in match_expressions or ():
        rule = rules.setdefault(req.key, _KeyRule())
        if req.operator == "In":
            rule.allow(req.values)
        elif req.operator == "NotIn":
            rule.forbidden.update(req.values)
        elif req.operator == "Exists":
            rule.present = True
        elif req.operator == "DoesNotExist":
            rule.absent = True
    return rules


def _unsatisfiable(rule: _KeyRule) -> bool:
    values = rule.values()
    return (rule.present and rule.absent) or (values is not None and not values)


def selectors_disjoint(
    first: tuple[Mapping[str, str] | None, Iterable[LabelRequirementLike] | None],
    second: tuple[Mapping[str, str] | None, Iterable[LabelRequirementLike] | None],
) -> str | None:
    """A label key on which the two selectors (``(matchLabels, matchExpressions)`` each) contradict each other,
    so that no set of labels satisfies both; None when some labels may satisfy both (the selectors may overlap).

    Decided key by key: a key one selector needs present and the other absent, or values that cannot be both
    allowed (``In``/``matchLabels`` sets that do not intersect, or that the other's ``NotIn`` removes). A
    selector that contradicts itself on a key selects nothing, so it is disjoint from any other (that key is
    returned). Not guaranteed: completeness for selectors that only overlap on labels no node has; those
    count as overlapping."""
    mine, theirs = _key_rules(*first), _key_rules(*second)
    for key, rule in (*mine.items(), *theirs.items()):
        if _unsatisfiable(rule):
            return key
    for key in mine.keys() & theirs.keys():
        a, b = mine[key], theirs[key]
        if (a.present or b.present) and (a.absent or b.absent):
            return key
        merged = _KeyRule()
        merged.present = a.present or b.present
        merged.forbidden = a.forbidden | b.forbidden
        for rule in (a, b):
            if rule.allowed is not None:
                merged.allow(rule.allowed)
        if _unsatisfiable(merged):
            return key
    return None
