"""Structured logs (structlog) on stderr, one line per event, in one of two formats with the same fields.

``configure_logging`` is idempotent and also routes the standard library's ``logging`` (uvicorn, asyncio,
kopf) through the same renderer, so every line of a process has the same shape. The fields, in this
order: ``timestamp`` (ISO 8601, UTC), ``level``, ``logger``, ``event`` (the message), then ``object``
(``namespace/name`` of the Kubernetes object a kopf handler logs about, when there is one) and any other
key the code bound. ``json`` writes one JSON object per line (for log collectors; the default); ``text``
writes the same fields as ``key=value`` pairs (logfmt) for reading in a terminal.

Not guaranteed: ordering between lines written from different threads; the order of the fields after
``event`` in ``json`` (JSON objects are unordered).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any, Literal, TextIO

import structlog

__all__ = ["LOG_FORMATS", "LogFormat", "configure_logging", "get_logger"]

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
LogFormat = Literal["json", "text"]
LOG_FORMATS: tuple[LogFormat, ...] = ("json", "text")
_FIRST = ["timestamp", "level", "logger", "event", "object"]


def _object_of_record(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """``object``: the ``namespace/name`` kopf attaches to its per-object log records (``k8s_ref``)."""
    record = event_dict.get("_record")
    ref = getattr(record, "k8s_ref", None) if record is not None else None
    if isinstance(ref, dict) and ref.get("name"):
        namespace = ref.get("namespace")
        event_dict["object"] = f"{namespace}/{ref['name']}" if namespace else str(ref["name"])
    return event_dict


def _renderer(fmt: LogFormat) -> Any:
    if fmt == "text":
        return structlog.processors.LogfmtRenderer(key_order=_FIRST, drop_missing=True, bool_as_flag=False)
    return structlog.processors.JSONRenderer()


def configure_logging(level: str = "info", stream: TextIO | None = None, *, fmt: LogFormat = "json") -> None:
    """Log at ``level`` (debug/info/warning/error) to ``stream`` (default stderr) in ``fmt`` (json or text)."""
    if fmt not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, got {fmt!r}")
    numeric = _LEVELS.get(level.lower(), logging.INFO)
    out = stream if stream is not None else sys.stderr
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, _renderer(fmt)],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_logger_name, _object_of_record, *shared],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                _renderer(fmt),
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
