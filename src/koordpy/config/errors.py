"""One error type for every configuration problem, with a field path per problem."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import pydantic

__all__ = ["ConfigError", "field_problems", "validate"]

M = TypeVar("M", bound=pydantic.BaseModel)


class ConfigError(ValueError):
    """Invalid configuration. ``problems`` lists ``(field.path, message)`` pairs."""

    def __init__(self, problems: list[tuple[str, str]], source: str = "") -> None:
        self.problems = problems
        self.source = source
        prefix = f"{source}: " if source else ""
        super().__init__(prefix + "; ".join(f"{path}: {msg}" for path, msg in problems))


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out or "<root>"


_BOUND_ERRORS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal"})


def validate(model: type[M], data: Mapping[str, Any] | None, source: str = "") -> M:
    """Validate ``data`` into ``model`` or raise :class:`ConfigError` with field paths.

    Every field problem is reported at once, and so is the load-aware args' cross-field rule. Other models'
    cross-field rules ("after" validators) run only once that model's own fields are valid, so they may show
    up on the next run.
    """
    try:
        return model.model_validate(data or {})
    except pydantic.ValidationError as exc:
        problems: list[tuple[str, str]] = []
        for err in exc.errors(include_url=False):
            base = _path(tuple(err["loc"]))
            msg = str(err["msg"]).removeprefix("Value error, ")
            if err["type"] in _BOUND_ERRORS:
                msg += f", got {err['input']!r}"
            if msg.startswith(FIELD_PROBLEMS):
                # A model-level validator reporting several ``path: message`` problems.
                for item in msg.removeprefix(FIELD_PROBLEMS).split("\n"):
                    path, _, text = item.partition(": ")
                    full = path if base == "<root>" else f"{base}.{path}"
                    problems.append((full, text))
            else:
                problems.append((base, msg))
        raise ConfigError(problems, source) from None


FIELD_PROBLEMS = "field problems:\n"


def field_problems(problems: list[str]) -> ValueError:
    """Build the error a model validator raises for several ``path: message`` problems."""
    return ValueError(FIELD_PROBLEMS + "\n".join(problems))
