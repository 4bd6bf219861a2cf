"""Kubernetes resource quantities in exact arithmetic.

A quantity string (``"1.5"``, ``"250m"``, ``"2Gi"``, ``"1e3"``, ``"12k"``) is parsed into a
:class:`fractions.Fraction` of whole nanos. Integer views round *up*, as Kubernetes' ``Value()`` and
``MilliValue()`` do, so ``"1.0001m"`` of cpu is 2 millicores. Every accepted value and integer view
fits int64, the bounds live here only (see :func:`parse_quantity`), and parsing is linear in the
string's length whatever its exponent.

Not guaranteed: canonical re-formatting identical to the Go library (``format_*`` give a
readable, parseable form, not the apimachinery canonical string).
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

__all__ = [
    "INT64_MAX",
    "QuantityError",
    "format_bytes",
    "format_cpu_millis",
    "milli_value",
    "parse_quantity",
    "resource_value",
    "value",
]

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
# The grammar of apimachinery's ``resource.Quantity`` (its doc comment), ASCII digits only: Go's
# scanner compares bytes against '0'..'9', so '１' or '٣' are refused by the API server as well.
# The exponent is Go's ``strconv.ParseInt(.., 10, 64)`` input: an optional sign and digits.
_RE = re.compile(
    r"(?P<sign>[+-]?)(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?"
    r"(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE](?P<exp>[+-]?[0-9]+))?",
    re.ASCII,
)
_DECIMAL_EXPONENT = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_EXPONENT = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}

INT64_MAX = 2**63 - 1
"""The largest magnitude any Kubernetes integer view (``Value``, ``MilliValue``) can hold."""
_NANO = 10**9
_MAX_NANOS = INT64_MAX * _NANO
_GO_SPACE = " \t\n\v\f\r\x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
"""Go's ``unicode.IsSpace``: what ``Quantity.UnmarshalJSON`` trims (``strings.TrimSpace``) before parsing."""


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity, or one out of the range koordpy accepts."""


def parse_quantity(raw: str | int | float) -> Fraction:
    """Parse a quantity into a fraction of the base unit (cores, bytes, ...), in time linear in its length.

    Accepts what the API server's ``resource.ParseQuantity`` accepts, with the same rounding: a
    non-zero value is rounded away from zero to a whole nano (``"0.1n"`` is ``1n``), and a binary-suffixed
    value above 2^63-1 is capped there (``"8Ei"`` is 2^63-1), as Go does when it parses. Refused with a
    :class:`QuantityError` although Go's parser takes them:

    * a decimal value above 2^63-1 in magnitude (``"1e400"``, ``"1e99999999"``): Go keeps it, but every
      integer view of it overflows int64 (``Value``/``MilliValue`` return 0 or wrapped bits), so no
      Kubernetes component can use it;
    * strings without a single digit (``"Gi"``, ``"."``, ``"-"``): Go's scanner reads them as 0, outside
      its documented grammar (and the CRD schema's pattern refuses them); a typo read as zero usage would
      make a node look idle.

    The exponent and the number of digits are checked before any arithmetic, so ``"1e99999999"`` is
    refused as fast as ``"1e400"``. Not guaranteed: Go's int32 wrap-around of exponents beyond
    ±2^31 (Go reads ``"1e4294967296"`` as 1; here it is too large).
    """
    if isinstance(raw, bool):
        raise QuantityError(f"not a quantity: {raw!r}")
    if isinstance(raw, int):
        if not -INT64_MAX <= raw <= INT64_MAX:
            raise QuantityError("quantity out of range: more than 2^63-1 in magnitude")
        return Fraction(raw)
    if isinstance(raw, float):
        if not math.isfinite(raw):
            raise QuantityError(f"not a quantity: {raw!r}")
        return _parse_text(repr(raw), raw)  # the JSON number as text, as Go's decoder sees it
    if not isinstance(raw, str):
        raise QuantityError(f"not a quantity: {type(raw).__name__}")
    return _parse_text(raw.strip(_GO_SPACE), raw)


def _shown(raw: object) -> str:
    text = repr(raw)
    return text if len(text) <= 40 else text[:37] + "..."


def _parse_text(text: str, raw: object) -> Fraction:
    match = _RE.fullmatch(text)
    if match is None:
        raise QuantityError(f"not a quantity: {_shown(raw)}")
    int_digits, frac_digits = match["int"], match["frac"] or ""
    if not int_digits and not frac_digits:
        raise QuantityError(f"not a quantity (no digits): {_shown(raw)}")
    suffix, exp_text = match["suffix"] or "", match["exp"]
    binary = _BINARY_EXPONENT.get(suffix, 0)
    if exp_text is not None:
        # Go: strconv.ParseInt(exponent, 10, 64); leading zeros are fine, more than int64 is not.
        sign = -1 if exp_text[0] == "-" else 1
        exp_digits = exp_text.lstrip("+-").lstrip("0") or "0"
        if len(exp_digits) > 19 or int(exp_digits) > INT64_MAX + (sign < 0):
            raise QuantityError(f"exponent out of int64 range: {_shown(raw)}")
        exponent = sign * int(exp_digits)
    else:
        exponent = _DECIMAL_EXPONENT.get(suffix, 0)
    digits = (int_digits + frac_digits).lstrip("0")
    if not digits:
        return Fraction(0)
    negative = match["sign"] == "-"
    # value = int(digits) * 10**shift * 2**binary, its leading digit at 10**top.
    shift = exponent - len(frac_digits)
    top = len(digits) - 1 + shift
    if top >= 19:  # >= 10**19 > 2**63 before any binary factor
        return _too_large(binary, negative, raw)
    if top < -30:  # < 10**-29 * 2**60 < 1n: Go rounds it up to one nano
        return Fraction(-1 if negative else 1, _NANO)
    # Now |shift| <= len(digits) + 49. Split at the nano position: head (whole nanos) and tail.
    cut = len(digits) + shift + 9  # digits[:cut] are whole nanos of the unscaled value
    if cut >= len(digits):
        nanos = int(digits) * 10 ** (cut - len(digits)) << binary
    else:
        head = int(digits[:cut]) if cut > 0 else 0
        tail = digits[max(cut, 0) :].rjust(len(digits) - cut, "0")
        nanos = (head << binary) + _ceil_tail(tail, binary)
    if nanos > _MAX_NANOS:
        return _too_large(binary, negative, raw)
    return Fraction(-nanos if negative else nanos, _NANO)


def _ceil_tail(tail: str, binary: int) -> int:
    """``ceil(0.<tail> * 2**binary)`` reading at most ``binary`` digits of a tail of any length.

    With ``t`` the first ``binary`` digits and ``r`` the rest: ``0.t * 2**binary`` is a multiple of
    ``2**binary / 10**binary`` apart from the next integer, and a non-zero ``r`` adds strictly less
    than that, so it only decides between ``ceil`` and ``floor + 1``.
    """
    kept = tail[:binary]
    rest_nonzero = tail[binary:].strip("0") != ""
    scaled = (int(kept) if kept else 0) << binary
    unit: int = 10 ** len(kept)
    if rest_nonzero:
        return scaled // unit + 1
    return -(-scaled // unit)


def _too_large(binary: int, negative: bool, raw: object) -> Fraction:
    if binary:  # Go caps a BinarySI value silently at 2**63-1
        return Fraction(-INT64_MAX if negative else INT64_MAX)
    raise QuantityError(f"quantity out of range: more than 2^63-1 in magnitude: {_shown(raw)}")


def value(raw: str | int | float) -> int:
    """Integer base units, rounded up (Kubernetes ``Quantity.Value()``)."""
    return math.ceil(parse_quantity(raw))


def milli_value(raw: str | int | float) -> int:
    """Integer thousandths, rounded up (Kubernetes ``Quantity.MilliValue()``).

    Raises :class:`QuantityError` when the result does not fit int64 (above about 9.2e15 cores):
    Go's ``MilliValue`` silently returns 0 or wrapped bits there.
    """
    millis = math.ceil(parse_quantity(raw) * 1000)
    if not -INT64_MAX - 1 <= millis <= INT64_MAX:
        raise QuantityError(f"quantity out of range: its milli-value overflows int64: {_shown(raw)}")
    return millis


def resource_value(resource: str, raw: str | int | float) -> int:
    """The canonical integer for a resource: millicores for cpu, base units for the rest.

    The ``*-cpu`` extended resources of Koordinator (``kubernetes.io/batch-cpu``) are already
    expressed in millicores as plain integers, so they use ``value``. The usual forms (whole digits with
    ``m``, ``k``, ``M``, ``G``, ``Ki``, ``Mi``, ``Gi`` or no suffix) are read with integer arithmetic; other
    strings and numbers are memoised.
    """
    if type(raw) is str:  # the short path (``_SIMPLE_SCALE``), by string methods: cheaper than a regex
        end = raw[-1:]
        if end == "i":
            suffix, digits = raw[-2:], raw[:-2]
        elif end in _SIMPLE_ONE_CHAR:
            suffix, digits = end, raw[:-1]
        else:
            suffix, digits = "", raw
        if len(digits) <= 15 and digits.isdigit() and digits.isascii() and suffix in _SIMPLE_SUFFIXES:
            amount = _simple_value(resource == "cpu", int(digits), suffix)
            if amount <= _SIMPLE_MAX:
                return amount
    if type(raw) in _MEMOISED:
        return _resource_value(resource, raw)
    return _uncached_resource_value(resource, raw)  # raises QuantityError for anything odd


_MEMOISED = frozenset({str, int, float})


def _uncached_resource_value(resource: str, raw: str | int | float) -> int:
    if resource == "cpu":
        return milli_value(raw)
    return value(raw)


_SIMPLE_SCALE = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
"""The short path's form, ``[0-9]{1,15}(m|k|M|G|Ki|Mi|Gi|)`` in ASCII digits: the forms nearly every quantity
takes (what ``resource.Quantity`` prints for whole millicores and bytes: ``"712m"``, ``"1956Mi"``,
``"2051342336"``), read with integer arithmetic instead of :func:`parse_quantity`'s exact fractions, and not
memoised: koordlet's usage strings change on every report, so a memo would mostly churn."""
_SIMPLE_MAX = 2**62
"""Results from the short path above this go the long way, which decides range errors and caps."""
_SIMPLE_ONE_CHAR = frozenset("mkMG")
_SIMPLE_SUFFIXES = frozenset({"m", *_SIMPLE_SCALE})


def _simple_value(cpu: bool, digits: int, suffix: str) -> int:
    """``milli_value`` (cpu) or ``value`` of ``<digits><suffix>``, exactly, for the suffixes of ``_SIMPLE_SCALE``."""
    if suffix == "m":
        return digits if cpu else -(-digits // 1000)  # Value() rounds up
    return digits * _SIMPLE_SCALE[suffix] * (1000 if cpu else 1)


_resource_value = functools.lru_cache(maxsize=8192, typed=True)(_uncached_resource_value)


def format_cpu_millis(millis: int) -> str:
    """``1500`` -> ``"1500m"``; whole cores print without a suffix."""
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def format_bytes(amount: int) -> str:
    """Exact binary-suffixed form when one fits, else plain bytes."""
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = _BINARY[suffix]
        if amount and amount % unit == 0:
            return f"{amount // unit}{suffix}"
    return str(amount)
