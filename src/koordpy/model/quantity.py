"""Kubernetes resource quantities in exact arithmetic.

A quantity string (``"1.5"``, ``"250m"``, ``"2Gi"``, ``"1e3"``, ``"12k"``) is parsed into a
:class:`fractions.Fraction`. Integer views round *up*, as Kubernetes' ``Value()`` and
``MilliValue()`` do, so ``"1.0001m"`` of cpu is 2 millicores.

Not guaranteed: canonical re-formatting identical to the Go library (``format_*`` give a
readable, parseable form, not the apimachinery canonical string).
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

__all__ = [
    "QuantityError",
    "format_bytes",
    "format_cpu_millis",
    "milli_value",
    "parse_quantity",
    "resource_value",
    "value",
]

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_RE = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?:(?P<exp>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$"
)


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(raw: str | int | float) -> Fraction:
    """Parse a quantity into an exact fraction of the base unit (cores, bytes, ...)."""
    if isinstance(raw, bool):
        raise QuantityError(f"not a quantity: {raw!r}")
    if isinstance(raw, int):
        return Fraction(raw)
    if isinstance(raw, float):
        if not math.isfinite(raw):
            raise QuantityError(f"not a quantity: {raw!r}")
        return Fraction(str(raw))
    if not isinstance(raw, str):
        raise QuantityError(f"not a quantity: {raw!r}")
    text = raw.strip()
    match = _RE.match(text)
    if match is None:
        raise QuantityError(f"not a quantity: {raw!r}")
    number = Fraction(match["num"])
    if match["exp"]:
        number *= Fraction(10) ** int(match["exp"][1:])
    suffix = match["suffix"] or ""
    number *= _BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix]
    return -number if match["sign"] == "-" else number


def value(raw: str | int | float) -> int:
    """Integer base units, rounded up (Kubernetes ``Quantity.Value()``)."""
    return math.ceil(parse_quantity(raw))


def milli_value(raw: str | int | float) -> int:
    """Integer thousandths, rounded up (Kubernetes ``Quantity.MilliValue()``)."""
    return math.ceil(parse_quantity(raw) * 1000)


def resource_value(resource: str, raw: str | int | float) -> int:
    """The canonical integer for a resource: millicores for cpu, base units for the rest.

    The ``*-cpu`` extended resources of Koordinator (``kubernetes.io/batch-cpu``) are already
    expressed in millicores as plain integers, so they use ``value``. Results for strings and
    numbers are memoised: the same few quantity strings recur on every pod and NodeMetric event.
    """
    if type(raw) in _MEMOISED:
        return _resource_value(resource, raw)
    return _uncached_resource_value(resource, raw)  # raises QuantityError for anything odd


_MEMOISED = frozenset({str, int, float})


def _uncached_resource_value(resource: str, raw: str | int | float) -> int:
    if resource == "cpu":
        return milli_value(raw)
    return value(raw)


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
