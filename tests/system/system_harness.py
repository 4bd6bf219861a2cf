"""Paths and entry points of the system tier; the process helpers are ``koordpy_testkit.processes``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from koordpy_testkit.processes import LOOPBACK, Proc, free_port, wait_http

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
KOORDPY = Path(os.environ.get("KOORDPY_SYSTEM_BIN") or BIN / "koordpy")
"""The koordpy entry point the components run from (the venv's by default)."""

__all__ = ["BIN", "KOORDPY", "LOOPBACK", "ROOT", "Proc", "free_port", "wait_http"]
