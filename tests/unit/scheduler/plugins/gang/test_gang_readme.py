"""The gang README says what the code does: its argument table and key names match the code."""

from __future__ import annotations

import re
from pathlib import Path

import koordpy.scheduler.plugins.gang as gang
from koordpy.config import CoschedulingArgs
from koordpy.scheduler.plugins.gang import keys

README = Path(gang.__file__).with_name("README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = README.index(title)
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


def test_args_table_lists_every_field_and_only_those() -> None:
    table = _section("### `gang:` arguments")
    named = set(re.findall(r"^\| `(\w+)`(?:, `(\w+)`)?", table, flags=re.M))
    documented = {name for pair in named for name in pair if name}
    fields = {f.alias or n for n, f in CoschedulingArgs.model_fields.items()} - {"apiVersion", "kind"}
    assert documented == fields


def test_args_defaults_in_the_table_are_the_models() -> None:
    args = CoschedulingArgs.model_validate({})
    table = _section("### `gang:` arguments")
    # The rows state 600s, once-satisfied, 660 and 5; the model must agree.
    assert "| `defaultTimeout` | `600s` |" in table and args.default_timeout == 600
    assert "| `defaultMatchPolicy` | `once-satisfied` |" in table and args.default_match_policy == "once-satisfied"
    assert "| `binderHttpTimeoutSeconds` (koordpy) | 660 |" in table and args.binder_http_timeout_seconds == 660
    assert "| `binderAnswerMarginSeconds` (koordpy) | 5 |" in table and args.binder_answer_margin_seconds == 5


def test_every_key_constant_is_documented() -> None:
    for name in dir(keys):
        if name.startswith(("LABEL_", "ANNOTATION_")):
            value = getattr(keys, name)
            short = value.removeprefix("gang.scheduling.koordinator.sh/")
            assert f"`{value}`" in README or f"`{short}`" in README, name
