"""``resource_value``'s short path for whole digits with a common suffix, checked against the exact
``parse_quantity`` path it skips (``_uncached_resource_value``): same integer, or the same refusal."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from koordpy.model import quantity
from koordpy.model.quantity import QuantityError, _uncached_resource_value, resource_value

RESOURCES = ("cpu", "memory", "kubernetes.io/batch-cpu", "ephemeral-storage")


def exact(resource: str, text: str) -> int | str:
    try:
        return _uncached_resource_value(resource, text)
    except QuantityError:
        return "refused"


def short(resource: str, text: str) -> int | str:
    try:
        return resource_value(resource, text)
    except QuantityError:
        return "refused"


@pytest.mark.parametrize(
    ("resource", "text", "expected"),
    [
        ("cpu", "712m", 712),
        ("cpu", "2", 2000),  # 2 cores = 2 × 1000 m
        ("cpu", "3k", 3_000_000),  # 3 × 10^3 cores × 1000
        ("memory", "1956Mi", 1956 * 2**20),  # 2,051,014,656 bytes
        ("memory", "2051342336", 2051342336),
        ("memory", "1500m", 2),  # 1.5 bytes, Value() rounds up
        ("memory", "1000m", 1),
        ("memory", "0m", 0),
        ("kubernetes.io/batch-cpu", "1500", 1500),  # extended *-cpu: plain integers, not millicores
        ("memory", "007Ki", 7 * 1024),  # leading zeros, as the exact path reads them
        # at the edge: 999,999,999,999,999 G cores in millicores is 10^27, beyond int64: refused, not wrapped
        ("cpu", "999999999999999G", "refused"),
        ("memory", "999999999999999G", "refused"),  # 10^24 bytes > 2^63 - 1
        ("memory", "999999999999999Gi", 2**63 - 1),  # binary suffixes are capped, as Go caps them
    ],
)
def test_short_path_table(resource: str, text: str, expected: int | str) -> None:
    assert short(resource, text) == expected
    assert exact(resource, text) == expected


@settings(max_examples=600, deadline=None)
@given(
    resource=st.sampled_from(RESOURCES),
    digits=st.text(alphabet="0123456789", min_size=1, max_size=17),
    suffix=st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti", "n", "u", "T", "E", "Ei", "e3", "x"]),
)
def test_short_path_equals_the_exact_path(resource: str, digits: str, suffix: str) -> None:
    text = digits + suffix
    assert short(resource, text) == exact(resource, text)


@pytest.mark.parametrize("text", ["١٢m", "12 m", "+12m", "-12m", "1_000", "12.5m", " 12m", "12mi", "12KI"])
def test_what_the_short_path_does_not_take_goes_the_exact_way(text: str) -> None:
    # non-ASCII digits, signs, underscores (int() would read "1_000"), fractions, spaces, wrong case
    assert short("cpu", text) == exact("cpu", text)


@pytest.mark.parametrize(
    ("resource", "text"),
    [("cpu", "712m"), ("memory", "712m"), ("cpu", "2"), ("cpu", "3k"), ("memory", "1956Mi"), ("memory", "7Ki")],
)
def test_the_usual_forms_never_take_the_memoised_long_path(resource: str, text: str) -> None:
    before = quantity._resource_value.cache_info()
    resource_value(resource, text)
    after = quantity._resource_value.cache_info()
    assert (after.hits, after.misses) == (before.hits, before.misses)
