"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902) applied to plain dicts.

Strategic merge patch is treated as a merge patch: lists are replaced, never merged by key.
"""

from __future__ import annotations

import copy
from typing import Any

from koordpy_testkit.apiserver.errors import StatusError

__all__ = ["apply_json_patch", "apply_merge_patch"]


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """Return ``target`` with ``patch`` merged in (``None`` deletes a key). Inputs are not mutated."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _split(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise StatusError(422, f"invalid JSON pointer {pointer!r}", "Invalid")
    return [_unescape(t) for t in pointer[1:].split("/")]


def _walk(doc: Any, tokens: list[str], pointer: str) -> Any:
    node = doc
    for token in tokens:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise StatusError(422, f"path {pointer!r} does not exist", "Invalid")
    return node


def _add(doc: Any, pointer: str, value: Any, replace: bool) -> Any:
    tokens = _split(pointer)
    if not tokens:
        return value
    parent = _walk(doc, tokens[:-1], pointer)
    last = tokens[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise StatusError(422, f"replace: path {pointer!r} does not exist", "Invalid")
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-" and not replace:
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent) - (1 if replace else 0):
            if replace:
                parent[int(last)] = value
            else:
                parent.insert(int(last), value)
        else:
            raise StatusError(422, f"path {pointer!r} is out of range", "Invalid")
    else:
        raise StatusError(422, f"path {pointer!r} has no container", "Invalid")
    return doc


def _remove(doc: Any, pointer: str) -> tuple[Any, Any]:
    tokens = _split(pointer)
    if not tokens:
        raise StatusError(422, "cannot remove the document root", "Invalid")
    parent = _walk(doc, tokens[:-1], pointer)
    last = tokens[-1]
    if isinstance(parent, dict) and last in parent:
        return doc, parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return doc, parent.pop(int(last))
    raise StatusError(422, f"remove: path {pointer!r} does not exist", "Invalid")


def apply_json_patch(target: Any, ops: list[Any]) -> Any:
    """Apply RFC 6902 operations; a failed ``test`` or a bad path raises 422 like the API server."""
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise StatusError(400, f"invalid JSON patch operation: {op!r}", "BadRequest")
        kind, path = op["op"], str(op["path"])
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op.get("value")), replace=False)
        elif kind == "replace":
            doc = _add(doc, path, copy.deepcopy(op.get("value")), replace=True)
        elif kind == "remove":
            doc, _ = _remove(doc, path)
        elif kind == "test":
            tokens = _split(path)
            try:
                actual = _walk(doc, tokens, path)
            except StatusError:
                actual = None
            if actual != op.get("value"):
                raise StatusError(422, f"testing value {path} failed", "Invalid")
        elif kind in ("move", "copy"):
            source = str(op.get("from", ""))
            if kind == "move":
                doc, value = _remove(doc, source)
            else:
                value = copy.deepcopy(_walk(doc, _split(source), source))
            doc = _add(doc, path, value, replace=False)
        else:
            raise StatusError(400, f"unknown JSON patch operation {kind!r}", "BadRequest")
    return doc
