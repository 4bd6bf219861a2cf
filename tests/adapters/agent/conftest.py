"""Fixtures for the agent adapter tests: a fresh API emulator per test and a client for it."""

from __future__ import annotations

from koordpy_testkit.apiserver.fixture import api_client, apiserver

__all__ = ["api_client", "apiserver"]
