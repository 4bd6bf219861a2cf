"""The services log in one format with the same fields, chosen by ``--log-format``, and the manager's
``/healthz`` says what it checked: the extender and the manager as OS processes on the real control plane,
with the chart's configuration and ServiceAccounts."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
from cluster_kit import Components

from koordpy_testkit.bounds import HANG_BACKSTOP, eventually_sync
from koordpy_testkit.processes import Proc

FIELDS = ["timestamp", "level", "logger", "event"]
LOGFMT_HEAD = re.compile(r'^timestamp=\S+ level=\w+ logger=\S+ event=(?:"(?:[^"\\]|\\.)*"|\S+)(?: |$)')


def log_lines(proc: Proc) -> list[str]:
    """The process's own lines of its current start (the harness's ``====`` markers left out); a last line
    the process is still writing (no newline yet) is left out too."""
    text = Path(proc.log).read_text(encoding="utf-8", errors="replace")
    whole = text[: text.rfind("\n") + 1]
    return [line for line in whole.splitlines() if line and not line.startswith("====")]


def some_lines(proc: Proc, count: int) -> list[str]:
    return eventually_sync(lambda: log_lines(proc) if len(log_lines(proc)) >= count else None, f"{count} lines")


pytestmark = pytest.mark.cluster


def test_extender_and_manager_log_json_lines_with_the_same_fields(koordpy: Components) -> None:
    extender = koordpy.start_extender()
    manager = koordpy.start_manager()
    manager_url = koordpy.manager_base
    for proc in (extender, manager):
        for line in some_lines(proc, 2):
            record = json.loads(line)  # every line is one JSON object
            assert set(FIELDS) <= set(record), (proc.name, record)
            assert record["level"] in ("debug", "info", "warning", "error", "critical")
    loggers = {json.loads(line)["logger"] for line in log_lines(manager)}
    assert any(name.startswith(("koordpy", "kopf")) for name in loggers), loggers
    body = httpx.get(manager_url + "/healthz", timeout=HANG_BACKSTOP).json()
    assert body["status"] == "ok" and body["checks"]["eventLoop"] == "ok"
    assert body["checks"]["operator"] in ("starting", "running")
    assert {"migrationRounds", "reservationRounds"} <= set(body["checks"])


def test_text_format_carries_the_same_fields_first(koordpy: Components) -> None:
    extender = koordpy.start_extender(extra_args=["--log-format", "text"])
    manager = koordpy.start_manager(extra_args=["--log-format", "text"])
    for proc in (extender, manager):
        for line in some_lines(proc, 2):
            assert LOGFMT_HEAD.match(line), (proc.name, line)
            assert not line.startswith("{")
