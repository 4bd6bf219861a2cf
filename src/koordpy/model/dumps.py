"""Walk documents from a dump (``kubectl get ... -o yaml``) into objects by kind.

Each document is one object or a ``List`` (``kind: List`` or any ``*List``) of objects. Reading
files is the caller's job; this only sorts already-parsed documents.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from koordpy.model.durations import DurationError, parse_rfc3339

__all__ = ["DumpError", "SortedDump", "iter_objects", "newest_timestamp", "sort_dump"]


class DumpError(ValueError):
    """A document that is not a Kubernetes object; the message names the source and field."""


def iter_objects(source: str, document: Any) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Yield ``(where, object)`` for a document that is an object or a List of objects."""
    if document is None:
        return
    if not isinstance(document, Mapping):
        raise DumpError(f"{source}: expected a Kubernetes object, got {type(document).__name__}")
    kind = document.get("kind")
    if not isinstance(kind, str) or not kind:
        raise DumpError(f"{source}: kind: required")
    if kind == "List" or (kind.endswith("List") and "items" in document):
        items = document.get("items") or []
        if not isinstance(items, list):
            raise DumpError(f"{source}: items: expected a list")
        for i, item in enumerate(items):
            yield from iter_objects(f"{source}: items[{i}]", item)
        return
    yield source, document


@dataclass
class SortedDump:
    by_kind: dict[str, list[tuple[str, Mapping[str, Any]]]] = field(default_factory=dict)
    ignored: dict[str, int] = field(default_factory=dict)

    def of(self, kind: str) -> list[tuple[str, Mapping[str, Any]]]:
        return self.by_kind.get(kind, [])


def sort_dump(documents: Iterable[tuple[str, Any]], kinds: Iterable[str]) -> SortedDump:
    """Group objects of ``kinds``; count the others in ``ignored`` by kind."""
    wanted = set(kinds)
    out = SortedDump()
    for source, document in documents:
        for where, obj in iter_objects(source, document):
            kind = str(obj["kind"])
            if kind in wanted:
                out.by_kind.setdefault(kind, []).append((where, obj))
            else:
                out.ignored[kind] = out.ignored.get(kind, 0) + 1
    return out


def newest_timestamp(documents: Iterable[tuple[str, Any]]) -> float | None:
    """The newest RFC 3339 time anywhere in the documents (fields named ``*Time``/``*Timestamp``), or None.

    The default ``--now`` of every offline tool (explain, gangs): a dump's newest timestamp, not the
    wall clock. Values that do not parse are skipped. Not guaranteed: a dump's newest timestamp is only
    a lower bound of when it was taken.
    """
    newest: float | None = None
    stack: list[Any] = [doc for _, doc in documents]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            for key, value in item.items():
                if isinstance(value, str) and isinstance(key, str) and key.endswith(("Time", "Timestamp")):
                    try:
                        moment = parse_rfc3339(value)
                    except DurationError:
                        continue
                    newest = moment if newest is None else max(newest, moment)
                elif isinstance(value, Mapping | list):
                    stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)
    return newest
