"""The Kubernetes request attributes of one HTTP request, resolved as kube-apiserver's request-info
resolver does: the verb RBAC checks (GET single → ``get``, GET collection → ``list``, ``?watch=true`` →
``watch``, POST → ``create``, PUT → ``update``, PATCH → ``patch``, DELETE → ``delete`` or
``deletecollection``), the API group, resource, subresource, namespace and name.

Used by the fault proxy (``koordpy_testkit.faultproxy``) to match its rules and by the emulator's record.

Not resolved: non-resource URLs (discovery, ``/healthz``, ``/openapi``) give None; the legacy
``/api/v1/watch/...`` paths; ``proxy`` subpaths beyond the subresource.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

__all__ = ["WRITE_VERBS", "Call", "call_from_http"]

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})

_WATCH_TRUE = {"true", "1"}


@dataclass(frozen=True, slots=True)
class Call:
    """One resource request: who (``user``, empty when unknown) asked what."""

    user: str
    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespace: str = ""
    name: str = ""

    def __str__(self) -> str:
        res = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        where = f" in {self.namespace}" if self.namespace else ""
        who = f"{self.user}: " if self.user else ""
        return f"{who}{self.verb} {self.group or 'core'}/{res}{where}"


def call_from_http(user: str, method: str, url: str) -> Call | None:
    """The resource request behind ``method url``; None for non-resource URLs (discovery)."""
    parts = urlsplit(url)
    segments = [s for s in parts.path.split("/") if s]
    query = parse_qs(parts.query)
    if segments[:2] == ["api", "v1"]:
        group, rest = "", segments[2:]
    elif len(segments) >= 3 and segments[0] == "apis":
        group, rest = segments[1], segments[3:]
    else:
        return None
    if not rest:
        return None
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if resource == "namespaces" and name and not namespace:
        namespace = name
    method = method.upper()
    if method == "GET":
        verb = "watch" if query.get("watch", [""])[0].lower() in _WATCH_TRUE else "get" if name else "list"
    elif method == "POST":
        verb = "create"
    elif method == "PUT":
        verb = "update"
    elif method == "PATCH":
        verb = "patch"
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        return None
    return Call(user, verb, group, resource, subresource, namespace, name)
