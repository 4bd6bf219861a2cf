"""Samples of one metric family from Prometheus text (a component's /metrics)."""

from __future__ import annotations

import re

__all__ = ["samples", "total"]

_LABEL = re.compile(r'(\w+)="([^"]*)"')


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """``name``'s samples (the exact series name, e.g. ``koordpy_extender_bind_failures_total``) by their
    sorted label pairs."""
    out: dict[tuple[tuple[str, str], ...], float] = {}
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            series, value = line.rsplit(" ", 1)
            labels = tuple(sorted(_LABEL.findall(series.split("{", 1)[1]))) if "{" in series else ()
            out[labels] = float(value)
    return out


def total(text: str, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for k, v in samples(text, name).items() if wanted <= set(k))
