"""Reading input files for the offline tools: YAML (multi-document) or JSON, with bounds.

Every problem is an :class:`InputError` whose message names the file and, where there is one,
the line or field path. The bounds keep a hostile or mistaken file from costing more than a
bounded amount of memory and time:

* at most :data:`MAX_INPUT_BYTES` per file, read with a bounded read (a pipe or ``/dev/stdin``
  works; a character device such as ``/dev/zero``, a directory or a socket is refused);
* YAML aliases (``*name``) are refused outright: Kubernetes dumps never contain them, and
  expanding them is how a few hundred bytes become gigabytes. Anchors alone are harmless;
* nesting deeper than :data:`MAX_DEPTH` mappings/lists is refused (JSON and YAML);
* an integer literal longer than :data:`MAX_INT_DIGITS` digits is refused with its field path
  (the largest Kubernetes integer, int64, has 19 digits).

Not guaranteed: the bounds are on the input, not on what the tool then builds from it; a
well-formed dump of :data:`MAX_INPUT_BYTES` of objects still needs several times that in memory.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "MAX_DEPTH",
    "MAX_INPUT_BYTES",
    "MAX_INT_DIGITS",
    "UNEXPECTED",
    "InputError",
    "field_path",
    "one_line",
    "parse_text",
    "read_documents",
    "read_mapping",
    "read_text",
]

MAX_INPUT_BYTES = 32 * 1024 * 1024
"""Largest file read (32 MiB: a 2,000-pod ``kubectl get -o yaml`` dump is about 20 MiB)."""
MAX_DEPTH = 100
"""Deepest nesting of mappings and lists accepted (a Pod with affinity terms is about 12)."""
MAX_INT_DIGITS = 64
"""Longest integer literal accepted, in characters."""
MAX_MESSAGE_CHARS = 400
"""Error lines are cut here (a hostile value quoted in full could be megabytes)."""
UNEXPECTED = (ValueError, TypeError, AttributeError, KeyError, IndexError, ArithmeticError, RecursionError)
"""What a malformed document can still raise from conversion code; the CLIs turn it into one line."""

_BASE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class InputError(ValueError):
    """A file that cannot be read or parsed; the message names the file."""


class _LongInteger:
    """Stands for an integer literal too long to convert; reported with its field path."""

    __slots__ = ("length",)

    def __init__(self, length: int) -> None:
        self.length = length


class _Loader(_BASE_LOADER):  # type: ignore[misc]
    """The safe loader whose integers never reach Python's quadratic int() on huge literals."""


def _construct_int(loader: Any, node: yaml.ScalarNode) -> object:
    text = str(node.value)
    if len(text) > MAX_INT_DIGITS:
        return _LongInteger(len(text))
    return yaml.SafeLoader.construct_yaml_int(loader, node)


_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def _json_int(text: str) -> object:
    return _LongInteger(len(text)) if len(text) > MAX_INT_DIGITS else int(text)


def one_line(message: str) -> str:
    """``message`` on one line, at most :data:`MAX_MESSAGE_CHARS` characters."""
    flat = " ".join(message.split())
    return flat if len(flat) <= MAX_MESSAGE_CHARS else flat[: MAX_MESSAGE_CHARS - 3] + "..."


def read_text(path: Path, limit: int = MAX_INPUT_BYTES) -> str:
    """The file's text, read with a bounded read; refuses devices, directories and sockets."""
    try:
        with open(path, "rb") as handle:
            mode = os.fstat(handle.fileno()).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
                raise InputError(f"{path}: not a regular file or a pipe")
            data = handle.read(limit + 1)
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory") from None
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise InputError(f"{path}: larger than {limit} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def field_path(parts: Iterator[int | str] | list[int | str] | tuple[int | str, ...]) -> str:
    """``("spec", "containers", 0, "name")`` -> ``spec.containers[0].name``; empty -> ``<root>``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "<root>"


def _check_tree(source: str, document: Any) -> None:
    """Depth and long-integer check, iterative so that it cannot itself run out of stack."""
    stack: list[tuple[Any, tuple[int | str, ...]]] = [(document, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, _LongInteger):
            raise InputError(
                f"{source}: {field_path(path)}: integer literal of {value.length} characters (at most {MAX_INT_DIGITS})"
            )
        if isinstance(value, dict):
            long_key = next((k for k in value if isinstance(k, _LongInteger)), None)
            if long_key is not None:
                raise InputError(
                    f"{source}: {field_path(path)}: key is an integer literal of {long_key.length} characters "
                    f"(at most {MAX_INT_DIGITS})"
                )
            children: Any = ((k if isinstance(k, str) else repr(k), v) for k, v in value.items())
        elif isinstance(value, list):
            children = enumerate(value)
        else:
            continue
        if len(path) >= MAX_DEPTH:
            raise InputError(f"{source}: {field_path(path)}: nested deeper than {MAX_DEPTH} levels")
        for key, child in children:
            if isinstance(child, dict | list | _LongInteger):
                stack.append((child, (*path, key)))


def _check_yaml_events(source: str, text: str) -> None:
    """Refuse aliases and deep nesting before anything is built (the event stream is flat)."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=_BASE_LOADER):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    line = event.start_mark.line + 1 if event.start_mark is not None else "?"
                    raise InputError(f"{source}: line {line}: nested deeper than {MAX_DEPTH} levels")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
            elif isinstance(event, yaml.AliasEvent):
                line = event.start_mark.line + 1 if event.start_mark is not None else "?"
                raise InputError(
                    f"{source}: line {line}: YAML alias *{event.anchor} is not accepted "
                    "(aliases are refused; write the value out)"
                )
    except yaml.YAMLError as exc:
        raise _yaml_error(source, exc) from None


def _yaml_error(source: str, exc: yaml.YAMLError) -> InputError:
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return InputError(f"{source}: invalid YAML{where}: {problem}")


def parse_text(source: str, text: str, *, json_only: bool = False) -> list[Any]:
    """The documents of one file's text (JSON when ``json_only``, else YAML, which includes JSON)."""
    if json_only:
        try:
            docs = [json.loads(text, parse_int=_json_int)]
        except json.JSONDecodeError as exc:
            raise InputError(f"{source}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
        except RecursionError:
            raise InputError(f"{source}: nested deeper than {MAX_DEPTH} levels") from None
    else:
        _check_yaml_events(source, text)
        try:
            docs = list(yaml.load_all(text, Loader=_Loader))
        except yaml.YAMLError as exc:
            raise _yaml_error(source, exc) from None
        except (ValueError, TypeError, OverflowError) as exc:  # a constructor refusing a scalar
            raise InputError(f"{source}: invalid YAML: {exc}") from None
    for doc in docs:
        _check_tree(source, doc)
    return docs


def read_documents(paths: list[Path]) -> list[tuple[str, Any]]:
    """All documents of all files, each tagged ``"file#doc"`` for error messages."""
    out: list[tuple[str, Any]] = []
    for path in paths:
        text = read_text(path)
        docs = parse_text(str(path), text, json_only=path.suffix == ".json")
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
