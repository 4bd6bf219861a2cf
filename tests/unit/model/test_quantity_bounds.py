"""The quantity parser's bounds, row by row against apimachinery's ``resource.ParseQuantity``.

Go facts used below: the scanner takes ASCII digits only; the exponent goes through
``strconv.ParseInt(.., 10, 64)``; a parsed value is rounded away from zero to whole nanos; a BinarySI
value is capped at 2^63-1 = 9223372036854775807; a DecimalSI/exponent value is not capped but every
int64 view of it overflows (``MilliValue`` of 1e19 returns 0).
"""

from fractions import Fraction

import pytest

from koordpy.model.quantity import INT64_MAX, QuantityError, milli_value, parse_quantity, resource_value, value

NANO = Fraction(1, 10**9)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # 2^63-1 exactly is the largest decimal value: 9223372036854775807 fits int64.
        ("9223372036854775807", Fraction(INT64_MAX)),
        # 9.223372036854775807e18 = 9223372036854775807 (shift of 18 digits, no fraction left).
        ("9.223372036854775807e18", Fraction(INT64_MAX)),
        # 8Ei = 8 * 2^60 = 2^63, one above int64: Go caps BinarySI silently at 2^63-1.
        ("8Ei", Fraction(INT64_MAX)),
        ("-16Ei", Fraction(-INT64_MAX)),
        # 7Ei = 7 * 2^60 = 8070450532247928832 < 2^63-1: exact.
        ("7Ei", Fraction(7 * 2**60)),
        # 0.1n = 1e-10, rounded away from zero to the next whole nano: 1n.
        ("0.1n", NANO),
        ("-0.1n", -NANO),
        # 1e-99999999 is far below 1n: also 1n, decided from the exponent alone (no 10**99999999).
        ("1e-99999999", NANO),
        # 0 times any exponent that fits int64 is 0 (Go: ParseInt succeeds, the value is 0).
        ("0e99999999", Fraction(0)),
        # 0.0000000001Ki = 1e-10 * 1024 = 102.4n, rounded up to 103n.
        ("0.0000000001Ki", 103 * NANO),
        # Leading zeros in the exponent are fine for ParseInt: 1e0000000000000000000000003 = 1000.
        ("1e0000000000000000000000003", Fraction(1000)),
        # "1." is in Go's grammar (<digits>.): 1.
        ("1.", Fraction(1)),
        # Go's UnmarshalJSON trims Unicode spaces (strings.TrimSpace), NBSP included.
        ("\u00a02Gi\t", Fraction(2 * 2**30)),
        # A JSON number arrives as float: 1e-07 is its repr, parsed like the text "1e-07": 100n.
        (1e-07, 100 * NANO),
    ],
)
def test_values_at_the_bounds(text: str | float, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    ("text", "why"),
    [
        # 2^63 = 9223372036854775808: one above int64; a decimal value is not capped, it is refused.
        ("9223372036854775808", "out of range"),
        # 1e19 > 2^63-1.
        ("1e19", "out of range"),
        # The two hostile values: refused from the exponent, before any arithmetic.
        ("1e400", "out of range"),
        ("1e99999999", "out of range"),
        (1e300, "out of range"),
        # Python ints beyond int64 (a JSON integer) as well.
        (2**63, "out of range"),
        # 20-digit exponent: beyond int64, Go's ParseInt fails (ErrSuffix).
        ("0e99999999999999999999", "exponent out of int64 range"),
        # Non-ASCII digits: int() and str.isdigit accept them, Go's scanner does not.
        ("\uff11", "not a quantity"),
        ("\u0663Gi", "not a quantity"),
        ("1\u0663", "not a quantity"),
        # Go's scanner reads these as 0 (no digit at all); refused here (see parse_quantity).
        ("Gi", "no digits"),
        (".", "no digits"),
        ("-", "no digits"),
        # The exponent takes digits only: the CRD pattern's "e1.5" is refused by Go too.
        ("1e1.5", "not a quantity"),
        ("1e", "not a quantity"),
        # Python's own number syntax is not Kubernetes': underscores, infinity, hex.
        ("1_000", "not a quantity"),
        ("inf", "not a quantity"),
        ("0x10", "not a quantity"),
        # A zero-width space is not Unicode White_Space, so Go does not trim it either.
        ("1\u200b", "not a quantity"),
        (float("inf"), "not a quantity"),
    ],
)
def test_refused_with_a_reason(text: str | int | float, why: str) -> None:
    with pytest.raises(QuantityError, match=why):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("text", "millis", "ok"),
    [
        # 9223372036854775m = 9223372036854775 millis: fits.
        ("9223372036854775m", 9223372036854775, True),
        # 9223372036854775.807 cores * 1000 = 9223372036854775807 = 2^63-1 millis: the last that fits.
        ("9223372036854775.807", INT64_MAX, True),
        # 9223372036854775.808 cores -> 2^63 millis: Go's MilliValue wraps; refused here.
        ("9223372036854775.808", None, False),
        # 8Ei is capped at 2^63-1 bytes, but as cpu its milli-value is 1000x that: refused.
        ("8Ei", None, False),
    ],
)
def test_milli_value_fits_int64(text: str, millis: int | None, ok: bool) -> None:
    if ok:
        assert milli_value(text) == millis
    else:
        with pytest.raises(QuantityError, match="milli-value overflows int64"):
            milli_value(text)


def test_value_of_the_cap_fits_int64() -> None:
    assert value("8Ei") == INT64_MAX
    assert resource_value("memory", "8Ei") == INT64_MAX


@pytest.mark.parametrize("text", ["1e400", "1e99999999", "\uff11"])
def test_memoised_path_still_raises_every_time(text: str) -> None:
    # lru_cache does not cache exceptions: a hostile value raises on every call, never a cached int.
    for _ in range(3):
        with pytest.raises(QuantityError):
            resource_value("cpu", text)


def test_long_tails_are_read_exactly() -> None:
    # 1.000...0001Ki with 5,000 zeros: 1024 + 1024e-5001 -> 1024 + 1n after rounding up.
    assert parse_quantity("1." + "0" * 5000 + "1Ki") == 1024 + NANO
    # 0.4999...9Ki (60 nines) = 512 - 1024e-61: rounds up to exactly 512.
    assert parse_quantity("0." + "4" + "9" * 60 + "Ki") == 512
    # 5,000 digits of zeros before a 1, then e-4990: 1e-4990+... far below 1n -> 1n.
    assert parse_quantity("0" * 5000 + "1e-4990") == NANO
