"""Structured JSON logs (structlog) on stderr, one object per line.

``configure_logging`` is idempotent and also routes the standard library's ``logging`` (uvicorn,
asyncio) through the same JSON renderer, so every line of a process is machine-readable.

Not guaranteed: ordering between lines written from different threads.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog

__all__ = ["configure_logging", "get_logger"]

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def configure_logging(level: str = "info", stream: TextIO | None = None) -> None:
    """Log JSON lines at ``level`` (debug/info/warning/error) to ``stream`` (default stderr)."""
    numeric = _LEVELS.get(level.lower(), logging.INFO)
    out = stream if stream is not None else sys.stderr
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[
            *shared,
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                structlog.processors.JSONRenderer(),
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        named = logging.getLogger(name)
        named.handlers[:] = []
        named.propagate = True


def get_logger(name: str) -> Any:
    """A structlog logger bound to ``logger=name``."""
    return structlog.get_logger(name).bind(logger=name)
