"""``label_selector_matches``: metav1.LabelSelector semantics, one row per rule."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from koordpy.model.selectors import label_selector_matches, selectors_disjoint


@dataclass(frozen=True)
class Req:
    key: str
    operator: str
    values: tuple[str, ...] = ()


LABELS = {"app": "web", "tier": "front"}


@pytest.mark.parametrize(
    ("match_labels", "expressions", "expected"),
    [
        (None, None, True),  # empty selector: everything
        ({}, (), True),
        ({"app": "web"}, None, True),
        ({"app": "web", "tier": "back"}, None, False),  # every matchLabels entry must hold
        ({"team": "x"}, None, False),  # absent key
        (None, (Req("app", "In", ("web", "api")),), True),
        (None, (Req("app", "In", ("api",)),), False),
        (None, (Req("team", "In", ("x",)),), False),  # In needs the key
        (None, (Req("app", "NotIn", ("api",)),), True),
        (None, (Req("app", "NotIn", ("web",)),), False),
        (None, (Req("team", "NotIn", ("x",)),), True),  # NotIn holds for an absent key
        (None, (Req("tier", "Exists"),), True),
        (None, (Req("team", "Exists"),), False),
        (None, (Req("team", "DoesNotExist"),), True),
        (None, (Req("tier", "DoesNotExist"),), False),
        ({"app": "web"}, (Req("tier", "Exists"), Req("team", "Exists")), False),  # every requirement must hold
    ],
)
def test_label_selector_matches(
    match_labels: dict[str, str] | None, expressions: tuple[Req, ...] | None, expected: bool
) -> None:
    assert label_selector_matches(match_labels, expressions, LABELS) is expected


@pytest.mark.parametrize(
    ("first", "second", "key"),
    [
        (({"pool": "a"}, None), ({"pool": "b"}, None), "pool"),  # different values of one key
        (({"pool": "a"}, None), ({"zone": "x"}, None), None),  # a node may carry both
        ((None, None), ({"pool": "a"}, None), None),  # no selector: every node
        ((None, (Req("pool", "In", ("a", "b")),)), (None, (Req("pool", "In", ("c",)),)), "pool"),
        ((None, (Req("pool", "In", ("a", "b")),)), (None, (Req("pool", "In", ("b",)),)), None),  # b in both
        (({"pool": "a"}, None), (None, (Req("pool", "NotIn", ("a",)),)), "pool"),
        (({"pool": "a"}, None), (None, (Req("pool", "NotIn", ("b",)),)), None),
        ((None, (Req("gpu", "Exists"),)), (None, (Req("gpu", "DoesNotExist"),)), "gpu"),
        (({"gpu": "yes"}, None), (None, (Req("gpu", "DoesNotExist"),)), "gpu"),
        ((None, (Req("gpu", "NotIn", ("x",)),)), (None, (Req("gpu", "DoesNotExist"),)), None),  # absent passes NotIn
        # a selector that contradicts itself selects nothing: disjoint from anything
        (({"pool": "a"}, (Req("pool", "In", ("b",)),)), (None, None), "pool"),
    ],
)
def test_selectors_disjoint(
    first: tuple[dict[str, str] | None, tuple[Req, ...] | None],
    second: tuple[dict[str, str] | None, tuple[Req, ...] | None],
    key: str | None,
) -> None:
    assert selectors_disjoint(first, second) == key
    assert selectors_disjoint(second, first) == key
