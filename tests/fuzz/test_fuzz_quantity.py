"""Fuzz the quantity parser: only QuantityError ever escapes, every input is decided fast (no 10**N),
valid quantities round-trip and stay within int64.

Bounded and reproducible: ``derandomize=True`` (the examples follow from the test's source), a fixed
``max_examples`` and 0.5 CPU seconds per example (``cpu_bounded``): an input that makes the parser compute
10**N exactly takes minutes, far over it, while a loaded machine cannot push a fast parse near it.
(hypothesis' own ``deadline`` counts wall-clock time, which a busy machine stretches: it is off.)
"""

from __future__ import annotations

import contextlib
from fractions import Fraction

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from koordpy.model.quantity import INT64_MAX, QuantityError, milli_value, parse_quantity, resource_value, value
from koordpy_testkit.bounds import cpu_bounded

FUZZ = settings(
    max_examples=300,
    deadline=None,  # wall-clock time; each example is bounded in CPU seconds (cpu_bounded)
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)

SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
digits = st.text(alphabet="0123456789", max_size=30)
exponents = st.one_of(
    st.integers(-(10**20), 10**20),  # beyond int64 as well
    st.sampled_from([99999999, 400, -99999999, 2**31, 2**63 - 1, -(2**63), 2**63]),
)


@st.composite
def quantity_like(draw: st.DrawFn) -> str:
    """Strings shaped like quantities, including the hostile ones (1e99999999, 1e400)."""
    sign = draw(st.sampled_from(["", "+", "-"]))
    whole = draw(digits)
    frac = draw(st.one_of(st.none(), digits))
    number = whole + ("" if frac is None else "." + frac)
    if draw(st.booleans()):
        tail = draw(st.sampled_from(SUFFIXES))
    else:
        tail = draw(st.sampled_from(["e", "E"])) + str(draw(exponents))
    return sign + number + tail


unicode_noise = st.text(
    alphabet=st.one_of(st.characters(), st.sampled_from(list("0123456789.eE+-KMGTPEimunk\uff11\u0663 "))),
    max_size=40,
)

FIXED = ["1e99999999", "1e400", "\uff11", "\u0663Gi", "8Ei", "1e-99999999", "9223372036854775808", "Gi", " 1 "]


def _check(raw: object) -> Fraction | None:
    try:
        result = parse_quantity(raw)  # type: ignore[arg-type]
    except QuantityError:
        return None
    assert isinstance(result, Fraction)
    assert abs(result) <= INT64_MAX
    assert (result * 10**9).denominator == 1  # whole nanos, as Go rounds them
    return result


@FUZZ
@given(quantity_like())
@example("1e99999999")
@example("1e400")
@example("\uff11")
@example("\u0663Gi")
@example("1e9999999999999999999")
@example("-16Ei")
@cpu_bounded(0.5)
def test_quantity_shaped_strings(text: str) -> None:
    result = _check(text)
    if result is None:
        return
    # Round trip: the value printed as whole nanos parses back to itself.
    assert parse_quantity(f"{result.numerator * (10**9 // result.denominator)}n") == result
    # Integer views are ints within int64 or a QuantityError, never an OverflowError.
    assert -INT64_MAX <= value(text) <= INT64_MAX
    try:
        millis = milli_value(text)
    except QuantityError:
        assert abs(result) * 1000 > INT64_MAX
    else:
        assert abs(millis) <= INT64_MAX + 1


@FUZZ
@given(st.one_of(unicode_noise, st.sampled_from(FIXED)))
@cpu_bounded(0.5)
def test_any_text(text: str) -> None:
    _check(text)
    for resource in ("cpu", "memory"):
        with contextlib.suppress(QuantityError):
            resource_value(resource, text)


@FUZZ
@given(
    st.one_of(
        st.integers(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.booleans(),
        st.none(),
        st.lists(st.integers(), max_size=2),
        st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    )
)
@example(10**400)
@example(1e300)
@example(float("nan"))
@cpu_bounded(0.5)
def test_any_json_value(raw: object) -> None:
    _check(raw)
    with contextlib.suppress(QuantityError):
        resource_value("cpu", raw)  # type: ignore[arg-type]
