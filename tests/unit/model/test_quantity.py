from fractions import Fraction

import pytest

from koordpy.model.quantity import (
    QuantityError,
    format_bytes,
    format_cpu_millis,
    milli_value,
    parse_quantity,
    resource_value,
    value,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1", Fraction(1)),
        ("250m", Fraction(1, 4)),
        ("1.5", Fraction(3, 2)),
        (".5", Fraction(1, 2)),
        ("2Ki", Fraction(2048)),
        ("1Mi", Fraction(2**20)),
        ("3Gi", Fraction(3 * 2**30)),
        ("1Ti", Fraction(2**40)),
        ("1Pi", Fraction(2**50)),
        ("1Ei", Fraction(2**60)),
        ("1k", Fraction(1000)),
        ("1M", Fraction(10**6)),
        ("1G", Fraction(10**9)),
        ("1T", Fraction(10**12)),
        ("1P", Fraction(10**15)),
        ("1E", Fraction(10**18)),
        ("100n", Fraction(1, 10**7)),
        ("5u", Fraction(5, 10**6)),
        ("1e3", Fraction(1000)),
        ("1.5E-3", Fraction(3, 2000)),
        ("+2", Fraction(2)),
        ("-1", Fraction(-1)),
        (" 4 ", Fraction(4)),
        (7, Fraction(7)),
        (0.5, Fraction(1, 2)),
    ],
)
def test_parse_quantity_every_suffix_form(text: str | int | float, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize("bad", ["", "1x", "Gi", "1.2.3", "1 Gi", "0x10", "1ki", True, None, float("nan")])
def test_parse_quantity_rejects_garbage(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "millis", "units"),
    [
        # MilliValue and Value round up, as Kubernetes does.
        ("1.0001m", 2, 1),
        ("100m", 100, 1),
        ("2", 2000, 2),
        ("1500m", 1500, 2),
        ("1Ki", 1024000, 1024),
    ],
)
def test_integer_views_round_up(text: str, millis: int, units: int) -> None:
    assert milli_value(text) == millis
    assert value(text) == units


def test_resource_value_uses_millicores_for_cpu_only() -> None:
    assert resource_value("cpu", "1.5") == 1500
    assert resource_value("memory", "1.5Ki") == 1536
    # Koordinator's batch-cpu is already an integer number of millicores.
    assert resource_value("kubernetes.io/batch-cpu", "2000") == 2000


def test_formatting_round_trips() -> None:
    assert format_cpu_millis(2000) == "2"
    assert format_cpu_millis(1500) == "1500m"
    assert format_bytes(3 * 2**30) == "3Gi"
    assert format_bytes(1000) == "1000"
    for amount in (2**20, 5 * 2**40, 12345):
        assert value(format_bytes(amount)) == amount


@pytest.mark.parametrize("bad", [["1"], {"cpu": "1"}, True, "12x", float("inf")])
def test_resource_value_rejects_unhashable_and_odd_values_with_quantity_error(bad: object) -> None:
    # the memo only serves str/int/float; a list from a hostile manifest must still be a QuantityError
    with pytest.raises(QuantityError):
        resource_value("cpu", bad)  # type: ignore[arg-type]
