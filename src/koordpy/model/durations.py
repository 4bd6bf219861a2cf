"""Go ``time.Duration`` strings (``"5m"``, ``"1h30m"``, ``"300ms"``) and RFC 3339 timestamps.

Durations are returned as float seconds; timestamps as float seconds since the epoch (UTC).
A duration is bounded like Go's (int64 nanoseconds: at most :data:`MAX_DURATION_SECONDS`, about
292 years); NaN, infinity and anything longer are refused.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

__all__ = [
    "DURATION_PATTERN",
    "MAX_DURATION_SECONDS",
    "DurationError",
    "format_rfc3339",
    "human_duration",
    "parse_duration",
    "parse_rfc3339",
]

MAX_DURATION_SECONDS = (2**63 - 1) / 1e9
"""Go's ``time.Duration`` range (int64 nanoseconds), in seconds."""
_MAX_TEXT = 256
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
DURATION_PATTERN = rf"^(\+?({_PART.pattern})+|0|)$"
"""A JSON-schema ``pattern`` for the non-negative duration strings :func:`parse_duration` reads, built from
its own unit regex. Not covered: blanks around the text (the parser strips them) and ``-0s``."""


class DurationError(ValueError):
    """A string that is not a Go duration or an RFC 3339 timestamp."""


def parse_duration(raw: str | int | float) -> float:
    """Parse a Go duration string; a bare number is taken as seconds."""
    if isinstance(raw, bool):
        raise DurationError(f"not a duration: {raw!r}")
    if isinstance(raw, int | float):
        return _bounded(float(raw) if abs(raw) <= MAX_DURATION_SECONDS else math.inf, raw)
    if not isinstance(raw, str) or len(raw) > _MAX_TEXT:
        raise DurationError(f"not a duration: {str(raw)[:40]!r}")
    text = raw.strip()
    if text in ("0", ""):
        return 0.0
    sign = -1.0 if text.startswith("-") else 1.0
    body = text.lstrip("+-")
    pos = 0
    total = 0.0
    while pos < len(body):
        match = _PART.match(body, pos)
        if match is None:
            raise DurationError(f"not a duration: {raw!r}")
        total += float(match[1]) * _UNITS[match[2]]
        pos = match.end()
    if pos == 0:
        raise DurationError(f"not a duration: {raw!r}")
    return _bounded(sign * total, raw)


def _bounded(seconds: float, raw: object) -> float:
    if not math.isfinite(seconds) or abs(seconds) > MAX_DURATION_SECONDS:
        raise DurationError(f"duration out of range (at most {MAX_DURATION_SECONDS:.4g}s): {str(raw)[:40]!r}")
    return seconds


_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")


def parse_rfc3339(raw: str) -> float:
    """Parse ``2026-11-21T10:00:00Z`` (fractions and offsets allowed) into epoch seconds."""
    if raw[-1:] == "Z":  # the API server's form: ``fromisoformat`` reads the Z itself (3.11+), zone included
        try:
            return datetime.fromisoformat(raw).timestamp()
        except ValueError:
            pass  # the path below gives the same answer or names the problem
    text = raw.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise DurationError(f"not an RFC 3339 timestamp: {raw!r}") from exc
    if _DATE_ONLY.fullmatch(text):
        raise DurationError(f"not an RFC 3339 timestamp: {raw!r} is a date without a time (say {text}T00:00:00Z)")
    if moment.tzinfo is None:
        raise DurationError(f"RFC 3339 timestamp needs a zone: {raw!r} (Z or +hh:mm, say {text}Z)")
    return moment.timestamp()


def human_duration(seconds: float) -> str:
    """A duration as kubectl prints ages: ``45s``, ``3m20s``, ``40m``, ``5h10m``, ``30h``, ``6d1h``, ``40d``,
    ``2y30d``, ``9y``. The rules of ``HumanDuration`` in Kubernetes' apimachinery
    (``pkg/util/duration/duration.go``): two units while the larger is small, one unit after. A negative
    duration (a clock behind the object's) reads ``0s``."""
    total = max(int(seconds), 0)
    if total < 120:
        return f"{total}s"
    minutes = total // 60
    if minutes < 10:
        rest = total % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = total // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def format_rfc3339(epoch: float) -> str:
    """Epoch seconds as ``YYYY-MM-DDTHH:MM:SSZ`` (whole seconds, as Kubernetes writes them)."""
    return datetime.fromtimestamp(int(epoch), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
