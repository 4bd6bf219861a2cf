"""The repository speaks of koordpy only: no file links outside it, cites koordpy's own tickets, or narrates
its own development.

Every file ``git ls-files`` lists is read (binary files, ``bench/results/*.json`` (raw measurement data)
and this file's own examples aside) and searched for three kinds of text:

* links outside the repository: the design folder beside the checkout (relative or absolute) and its
  reference pages;
* ticket numbers: the word issue or ticket before a number (with or without ``#``), or a bare ``#12`` used
  as a ticket. An upstream project's issue or pull request (``Koordinator issue #1150``, ``PR #1651``) is
  a source and allowed when the project is named within the 100 characters before it;
* development narration: the session the text was written in, its start, earlier sessions, "before this
  change/optimisation/work", "the old commit", a commit hash in prose ("at 9553f13").

Not guaranteed: that prose free of these phrases reads as a user's document; the patterns catch the
habits seen so far, not every way of narrating.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from koordpy_testkit.bounds import HANG_BACKSTOP

ROOT = Path(__file__).resolve().parents[2]

OUTSIDE = re.compile(r"\.\./shared|/work/shared|shared[/]reference")
TICKET = re.compile(
    r"\b(?:issues?|tickets?)\s?#?\d+\b|(?<![\w&/:#\"'=-])(?<!color: )(?<!PR )#\d{1,5}\b(?![\w-])", re.IGNORECASE
)
UPSTREAM = re.compile(
    r"koordinator|kubernetes|crane|volcano|scheduler-plugins|kopf|helm|kwok|etcd|aiohttp|uvicorn|starlette|"
    r"hypothesis|typer|upstream",
    re.IGNORECASE,
)
PULL_REQUEST = re.compile(r"\bPR #\d+")
NARRATION = re.compile(
    r"\bthis[ ]session\b|\bsession's[ ]start\b|\bearlier sessions?\b|\bbefore this (?:change|optimi[sz]ation|work|commit)\b"
    r"|\bthe old commit\b|\b(?:commit|at|on|since) (?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,12}\b",
    re.IGNORECASE,
)
SELF = "tests/unit/test_repository_text.py"
"""This file: its examples are what the patterns must catch."""
CONTEXT = 100
"""Characters before a ticket number searched for the upstream project's name."""

NOT_YET: dict[str, str] = {}
"""Files known to fail, each until its rewrite lands (xfail strict: the mark must go when it passes)."""


def tracked_text_files() -> list[str]:
    """Every tracked file that is text, except raw measurement data (``bench/results/*.json``)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=HANG_BACKSTOP
    ).stdout.decode()
    paths = []
    for path in sorted(filter(None, listed.split("\0"))):
        if (path.startswith("bench/results/") and path.endswith(".json")) or path == SELF:
            continue
        if not (ROOT / path).is_file():  # deleted in the working tree, not yet committed
            continue
        data = (ROOT / path).read_bytes()
        if b"\0" in data[:8192]:
            continue
        paths.append(path)
    return paths


def problems(text: str) -> list[str]:
    """Each offending excerpt, with its line number."""
    found = []

    def where(start: int) -> str:
        line = text.count("\n", 0, start) + 1
        excerpt = text[max(0, start - 40) : start + 40].replace("\n", " ")
        return f"line {line}: ...{excerpt}..."

    for match in OUTSIDE.finditer(text):
        found.append(f"outside link {match.group()!r} {where(match.start())}")
    for match in TICKET.finditer(text):
        before = text[max(0, match.start() - CONTEXT) : match.start()]
        if UPSTREAM.search(before):
            continue
        found.append(f"ticket {match.group()!r} {where(match.start())}")
    for match in PULL_REQUEST.finditer(text):
        before = text[max(0, match.start() - CONTEXT) : match.start()]
        if not UPSTREAM.search(before):
            found.append(f"pull request without its project {match.group()!r} {where(match.start())}")
    for match in NARRATION.finditer(text):
        found.append(f"narration {match.group()!r} {where(match.start())}")
    return found


FILES = tracked_text_files()


def test_the_listing_covers_the_repository() -> None:
    assert len(FILES) > 300
    assert {"README.md", "pyproject.toml", "src/koordpy/cli/main.py", "charts/koordpy/Chart.yaml"} <= set(FILES)


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(path, marks=pytest.mark.xfail(strict=True, reason=NOT_YET[path])) if path in NOT_YET else path
        for path in FILES
    ],
)
def test_file_speaks_of_koordpy_only(path: str) -> None:
    text = (ROOT / path).read_text(encoding="utf-8", errors="replace")
    assert problems(text) == []


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("see `../" + "shared/" + "reference/scheduler.md` §2", "outside link"),
        ("the quantities of issue " + "14", "ticket"),
        ("(issue #3)", "ticket"),
        ("as asked in #12.", "ticket"),
        ("measured at this " + "session" + "'s start", "narration"),
        ("the committed run (at 9553f13, load 0.7)", "narration"),
        ("on the code before this optimisation gave 139 ms", "narration"),
        ("merged in PR #1651", "pull request"),
    ],
)
def test_each_kind_is_caught(text: str, kind: str) -> None:
    assert [p.split(" ", 1)[0] for p in problems(text)] == [kind.split(" ", 1)[0]]


@pytest.mark.parametrize(
    "text",
    [
        "Pending jobs never block each other (Koordinator issue #1150).",
        "as Koordinator merged it (PR #1651, v1.4)",
        "Koordinator at `a7a1b76b`, scheduler-plugins at v0.31",
        "body { color: #222; }",
        "every cluster of this test session",
        "### 3. Heading",
        "dump.yaml#0: NodeQOSEnsurancePolicy waterline",
    ],
)
def test_sources_and_ordinary_text_pass(text: str) -> None:
    assert problems(text) == []
