"""Object names checked as the API server checks them, before they reach a request path."""

from __future__ import annotations

import re

import pytest

from koordpy.model.names import (
    DNS1123_LABEL_PATTERN,
    DNS1123_SUBDOMAIN_PATTERN,
    dns1123_label_problem,
    dns1123_subdomain_problem,
    label_key_problem,
    label_value_problem,
)


@pytest.mark.parametrize(
    ("name", "label_ok", "subdomain_ok"),
    [
        ("web-1", True, True),
        ("a", True, True),
        ("0abc", True, True),
        ("web.shop.example", False, True),  # dots: a subdomain, not a label
        ("a" * 63, True, True),
        ("a" * 64, False, True),  # labels are at most 63
        ("a" * 253, False, True),
        ("a" * 254, False, False),  # subdomains at most 253
        ("web-1/status", False, False),  # a subresource path, not a name
        ("..", False, False),
        (".", False, False),
        ("Web", False, False),  # upper case
        ("-web", False, False),
        ("web-", False, False),
        ("web..1", False, False),  # an empty label between the dots
        ("web-1\n", False, False),  # a trailing newline ($ alone would let it through)
        ("wéb", False, False),
        ("", False, False),
    ],
)
def test_dns1123(name: str, label_ok: bool, subdomain_ok: bool) -> None:
    assert (dns1123_label_problem(name) is None) is label_ok
    assert (dns1123_subdomain_problem(name) is None) is subdomain_ok


def test_non_strings_are_refused() -> None:
    for value in (None, 7, ["web"], {"name": "web"}):
        assert dns1123_label_problem(value) == "must be a non-empty string"
        assert dns1123_subdomain_problem(value) == "must be a non-empty string"


def test_a_long_name_is_shown_shortened() -> None:
    problem = dns1123_subdomain_problem("a" * 9000)
    assert problem is not None and "9000 characters" in problem and len(problem) < 200


@pytest.mark.parametrize("name", ["web-1", "a.b", "web-1/status", "Web", "a" * 64])
def test_schema_patterns_agree_with_the_checks(name: str) -> None:
    # the CRD carries the patterns (lengths apart, as maxLength); both sides must judge a name alike
    assert (re.fullmatch(DNS1123_LABEL_PATTERN[1:-1], name) is not None and len(name) <= 63) is (
        dns1123_label_problem(name) is None
    )
    assert (re.fullmatch(DNS1123_SUBDOMAIN_PATTERN[1:-1], name) is not None and len(name) <= 253) is (
        dns1123_subdomain_problem(name) is None
    )


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        ("app", True),
        ("app.kubernetes.io/name", True),
        ("koordinator.sh/priority-class", True),
        ("a_b.c-d", True),
        ("", False),
        ("-app", False),
        ("bad key", False),
        ("Example.com/x", False),  # a prefix is a DNS subdomain: lower case
        ("example.com/", False),
        ("x" * 64, False),
    ],
)
def test_label_keys(key: str, ok: bool) -> None:
    assert (label_key_problem(key) is None) is ok


@pytest.mark.parametrize(
    ("value", "ok"), [("", True), ("v1.2_a-b", True), ("a b", False), ("-a", False), ("x" * 64, False)]
)
def test_label_values(value: str, ok: bool) -> None:
    assert (label_value_problem(value) is None) is ok
