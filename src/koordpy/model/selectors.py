"""``metav1.LabelSelector`` matching: the one implementation, whatever model carries the selector.

``matchLabels`` must all be present with their values and every ``matchExpressions`` requirement must
hold (``In``, ``NotIn``, ``Exists``, ``DoesNotExist``); an empty selector matches everything. The
selectors of the descheduler's arguments, Crane's ensurance policies and Reservation owners all match
through :func:`label_selector_matches`.

Not guaranteed: validation. An operator outside the four, or ``values`` where the operator takes none,
is the caller's to refuse when it reads the selector; here an unknown operator matches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

__all__ = ["LabelRequirementLike", "label_selector_matches"]


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
