"""Reading input files for the offline tools: YAML (multi-document) or JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

__all__ = ["InputError", "read_documents", "read_mapping"]


class InputError(ValueError):
    """A file that cannot be read or parsed; the message names the file."""


def read_documents(paths: list[Path]) -> list[tuple[str, Any]]:
    """All documents of all files, each tagged ``"file#doc"`` for error messages."""
    out: list[tuple[str, Any]] = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(f"{path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise InputError(f"{path}: not UTF-8 text") from None
        if path.suffix == ".json":
            try:
                out.append((f"{path}", json.loads(text)))
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
            continue
        try:
            docs = list(yaml.safe_load_all(text))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            raise InputError(f"{path}: invalid YAML{where}: {getattr(exc, 'problem', exc)}") from None
        for i, doc in enumerate(docs):
            out.append((f"{path}#{i}" if len(docs) > 1 else str(path), doc))
    return out


def read_mapping(path: Path) -> dict[str, Any]:
    """One YAML/JSON document that must be a mapping (configuration files)."""
    docs = read_documents([path])
    docs = [d for d in docs if d[1] is not None]
    if len(docs) != 1 or not isinstance(docs[0][1], dict):
        raise InputError(f"{path}: expected exactly one mapping document")
    return docs[0][1]
