"""RBAC against reality: recorded API calls vs the chart's rendered (Cluster)Role rules.

* :func:`call_from_http` maps one HTTP request to a Kubernetes request attribute (verb, group,
  resource, subresource, namespace, name) the way the API server's request-info resolver does.
* :func:`rendered_grants` reads ``helm template`` output: Roles/ClusterRoles, their bindings to
  ServiceAccounts, and the ``# why:`` comment on each rule (in the rule item or right above it).
* :func:`check` returns the calls no rule allows, and the granted (verb, group, resource)
  combinations nobody used whose rule has no ``# why:`` comment.

Not modelled: built-in roles referenced by name but not rendered (``system:kube-scheduler`` ...)
grant nothing here, on purpose: each component must be covered by the chart's own rules.
Aggregated ClusterRoles and non-resource URLs are not evaluated.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

__all__ = ["Call", "Grant", "Report", "Rule", "call_from_http", "check", "rendered_grants", "without_rule"]


@dataclass(frozen=True, slots=True)
class Call:
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
        return f"{self.user}: {self.verb} {self.group or 'core'}/{res}{where}"


@dataclass(frozen=True, slots=True)
class Rule:
    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    resource_names: tuple[str, ...]
    why: str
    source: str
    """``ClusterRole/name`` or ``Role/namespace/name`` with the rule's index."""

    def combos(self) -> list[tuple[str, str, str]]:
        return [(v, g, r) for v in self.verbs for g in self.api_groups for r in self.resources]


@dataclass(frozen=True, slots=True)
class Grant:
    """A rule as granted to one ServiceAccount: cluster-wide or in one namespace."""

    rule: Rule
    namespace: str | None


@dataclass(slots=True)
class Report:
    denied: list[Call] = field(default_factory=list)
    unused_without_why: list[tuple[str, str, tuple[str, str, str]]] = field(default_factory=list)
    """(serviceaccount, rule source, (verb, group, resource)) granted, never used, no ``# why:``."""


_WATCH_TRUE = {"true", "1"}


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


def _matches(values: Iterable[str], wanted: str) -> bool:
    return any(v in ("*", wanted) for v in values)


def allows(grant: Grant, call: Call) -> bool:
    """Kubernetes RBAC ``RuleAllows`` plus the binding's namespace scope."""
    rule = grant.rule
    if grant.namespace is not None and call.namespace != grant.namespace:
        return False
    if not _matches(rule.verbs, call.verb) or not _matches(rule.api_groups, call.group):
        return False
    full = f"{call.resource}/{call.subresource}" if call.subresource else call.resource
    ok = any(
        r in ("*", full) or (call.subresource and r in (f"*/{call.subresource}", f"{call.resource}/*"))
        for r in rule.resources
    )
    if not ok:
        return False
    return not rule.resource_names or call.name in rule.resource_names


_WHY = re.compile(r"#\s*why:\s*(.+)")


def _rules_with_why(text: str, doc: Mapping[str, Any], source: str) -> list[Rule]:
    """Pair each parsed rule with the ``# why:`` comments of its item in the document text."""
    raw_rules = doc.get("rules") or []
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if re.match(r"^rules:\s*$", line)), None)
    items: list[list[str]] = []
    if start is not None:
        pending: list[str] = []
        item_indent: int | None = None
        for line in lines[start + 1 :]:
            stripped = line.lstrip()
            indent = len(line) - len(stripped)
            if stripped and indent == 0 and not stripped.startswith(("-", "#")):
                break  # next top-level key
            if stripped.startswith("- ") and (item_indent is None or indent == item_indent):
                item_indent = indent
                items.append([*pending, line])
                pending = []
            elif stripped.startswith("#") and (item_indent is None or indent <= item_indent):
                pending.append(line)
            elif items:
                items[-1].append(line)
    out: list[Rule] = []
    for i, rule in enumerate(raw_rules):
        why = ""
        if i < len(items):
            found = [m.group(1).strip() for line in items[i] if (m := _WHY.search(line))]
            why = " ".join(found)
        out.append(
            Rule(
                api_groups=tuple(rule.get("apiGroups") or ()),
                resources=tuple(rule.get("resources") or ()),
                verbs=tuple(rule.get("verbs") or ()),
                resource_names=tuple(rule.get("resourceNames") or ()),
                why=why,
                source=f"{source}#{i}",
            )
        )
    return out


def rendered_grants(rendered: str) -> dict[str, list[Grant]]:
    """ServiceAccount name → every rule granted to it by the rendered bindings."""
    roles: dict[tuple[str, str], list[Rule]] = {}
    bindings: list[Mapping[str, Any]] = []
    for text in re.split(r"(?m)^---\s*$", rendered):
        doc = yaml.safe_load(text)
        if not isinstance(doc, dict):
            continue
        kind = doc.get("kind")
        meta = doc.get("metadata") or {}
        if kind == "ClusterRole":
            roles[("ClusterRole", meta["name"])] = _rules_with_why(text, doc, f"ClusterRole/{meta['name']}")
        elif kind == "Role":
            key = f"{meta.get('namespace', '')}/{meta['name']}"
            roles[("Role", key)] = _rules_with_why(text, doc, f"Role/{key}")
        elif kind in ("ClusterRoleBinding", "RoleBinding"):
            bindings.append(doc)
    grants: dict[str, list[Grant]] = {}
    for binding in bindings:
        ref = binding["roleRef"]
        namespace = (binding.get("metadata") or {}).get("namespace")
        if ref["kind"] == "Role":
            rules = roles.get(("Role", f"{namespace}/{ref['name']}"), [])
        else:
            rules = roles.get(("ClusterRole", ref["name"]), [])
        scope = namespace if binding["kind"] == "RoleBinding" else None
        for subject in binding.get("subjects") or []:
            if subject.get("kind") == "ServiceAccount":
                grants.setdefault(subject["name"], []).extend(Grant(rule, scope) for rule in rules)
    return grants


def without_rule(rendered: str, resource: str, verbs: str) -> str:
    """The rendered chart minus the rule item ``resources: [resource]`` / ``verbs: [verbs]`` (and its comment).

    Raises ``ValueError`` when no such item is rendered (the demonstration would prove nothing).
    """
    pattern = (
        r"(?m)^(  # why:[^\n]*\n)*  - apiGroups: \[[^\]]*\]\n"
        rf"    resources: \[{re.escape(resource)}\]\n    verbs: \[{re.escape(verbs)}\]\n"
    )
    stripped, count = re.subn(pattern, "", rendered)
    if count == 0:
        raise ValueError(f"no rendered rule with resources [{resource}] and verbs [{verbs}]")
    return stripped


def check(calls: Iterable[Call], grants_by_user: Mapping[str, list[Grant]]) -> Report:
    """Every call allowed; every granted combination used or explained by ``# why:``."""
    report = Report()
    used: set[tuple[str, str]] = set()  # (rule source, verb/group/resource)
    for call in calls:
        grants = grants_by_user.get(call.user, [])
        matching = [g for g in grants if allows(g, call)]
        if not matching:
            report.denied.append(call)
        full = f"{call.resource}/{call.subresource}" if call.subresource else call.resource
        for grant in matching:
            used.add((grant.rule.source, f"{call.verb} {call.group} {full}"))
    for user, grants in grants_by_user.items():
        for grant in grants:
            if grant.rule.why:
                continue
            for verb, group, resource in grant.rule.combos():
                if (grant.rule.source, f"{verb} {group} {resource}") not in used:
                    report.unused_without_why.append((user, grant.rule.source, (verb, group, resource)))
    report.denied = sorted(set(report.denied), key=str)
    return report
