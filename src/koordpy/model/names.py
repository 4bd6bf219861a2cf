"""Object names as the Kubernetes API server validates them (``k8s.io/apimachinery/pkg/util/validation``).

A name read from a user's object (a PodMigrationJob's ``spec.podRef``, a ``reservationRef``) is checked
here before it is put into a URL: ``web-1/status`` would otherwise address the status subresource of pod
``web-1``, and a 9,000-character name is a request the API server refuses with an error that says nothing
about the object it came from.

* namespaces are DNS-1123 labels: at most 63 characters of ``a-z``, ``0-9`` and ``-``, starting and
  ending alphanumeric (``ValidateNamespaceName``);
* pod, node and Reservation names are DNS-1123 subdomains: at most 253 characters, DNS-1123 labels
  joined by ``.`` (``ValidatePodName``, ``NameIsDNSSubdomain``).

Label keys and values (selectors in configuration files) follow ``IsQualifiedName`` and ``IsValidLabelValue``.

Each check returns the problem as text (the API server's wording, shortened) or None when the name is valid.
"""

from __future__ import annotations

import re

__all__ = [
    "DNS1123_LABEL_MAX",
    "DNS1123_LABEL_PATTERN",
    "DNS1123_SUBDOMAIN_MAX",
    "DNS1123_SUBDOMAIN_PATTERN",
    "dns1123_label_problem",
    "dns1123_subdomain_problem",
    "label_key_problem",
    "label_value_problem",
]

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL_PATTERN = rf"^{_LABEL}$"
"""JSON-schema ``pattern`` of a DNS-1123 label (length bounded apart, by ``maxLength``)."""
DNS1123_SUBDOMAIN_PATTERN = rf"^{_LABEL}(\.{_LABEL})*$"
"""JSON-schema ``pattern`` of a DNS-1123 subdomain (length bounded apart, by ``maxLength``)."""
_LABEL_RE = re.compile(_LABEL, re.ASCII)
_SUBDOMAIN_RE = re.compile(rf"{_LABEL}(\.{_LABEL})*", re.ASCII)
"""Matched with ``fullmatch``: Python's ``$`` would also match before a trailing newline."""


def _shown(name: str) -> str:
    return repr(name) if len(name) <= 60 else f"{name[:40]!r}... ({len(name)} characters)"


def _name_problem(name: object, limit: int, pattern: re.Pattern[str], what: str) -> str | None:
    if not isinstance(name, str) or not name:
        return "must be a non-empty string"
    if len(name) > limit:
        return f"{_shown(name)} must be no more than {limit} characters"
    if pattern.fullmatch(name) is None:
        return f"{_shown(name)} must be a DNS-1123 {what}, starting and ending with an alphanumeric character"
    return None


def dns1123_label_problem(name: object) -> str | None:
    """Why ``name`` is not a DNS-1123 label (a namespace), or None."""
    return _name_problem(name, DNS1123_LABEL_MAX, _LABEL_RE, "label: lower case alphanumeric characters or '-'")


def dns1123_subdomain_problem(name: object) -> str | None:
    """Why ``name`` is not a DNS-1123 subdomain (a pod, node or Reservation name), or None."""
    return _name_problem(
        name, DNS1123_SUBDOMAIN_MAX, _SUBDOMAIN_RE, "subdomain: lower case alphanumeric characters, '-' or '.'"
    )


_QUALIFIED_NAME_MAX = 63
_QUALIFIED_NAME_RE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", re.ASCII)


def label_key_problem(key: object) -> str | None:
    """Why ``key`` is not a label key (an optional DNS-1123 subdomain prefix and ``/``, then a name of at most
    63 characters: alphanumerics, ``-``, ``_`` and ``.``, starting and ending alphanumeric), or None
    (``IsQualifiedName``)."""
    if not isinstance(key, str) or not key:
        return "must be a non-empty string"
    prefix, slash, name = key.rpartition("/")
    if slash:
        problem = dns1123_subdomain_problem(prefix)
        if problem is not None:
            return f"prefix of {_shown(key)}: {problem}"
    if not name or len(name) > _QUALIFIED_NAME_MAX or _QUALIFIED_NAME_RE.fullmatch(name) is None:
        return (
            f"{_shown(key)}: the name part must be 1 to 63 characters of alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric character"
        )
    return None


def label_value_problem(value: object) -> str | None:
    """Why ``value`` is not a label value (empty, or at most 63 characters of alphanumerics, ``-``, ``_`` and
    ``.`` starting and ending alphanumeric), or None (``IsValidLabelValue``)."""
    if not isinstance(value, str):
        return "must be a string"
    if value and (len(value) > _QUALIFIED_NAME_MAX or _QUALIFIED_NAME_RE.fullmatch(value) is None):
        return (
            f"{_shown(value)}: a label value must be empty or 1 to 63 characters of alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric character"
        )
    return None
