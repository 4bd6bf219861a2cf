"""The files a user reads before and around an install: LICENSE is the Apache License 2.0 the package
metadata names, CHANGELOG.md keeps Keep a Changelog's shape, and the links of the install, upgrade and
examples pages (and the changelog's) lead to files and headings that exist."""

from __future__ import annotations

import hashlib
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APACHE_2_0_MD5 = "3b83ef96387f14655fc854ddc3c6bd57"
"""MD5 of the Apache Software Foundation's LICENSE-2.0.txt, the license's standard text."""
PLACEHOLDER = "   Copyright [yyyy] [name of copyright owner]"
KEEP_A_CHANGELOG_SECTIONS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}
LINKED_PAGES = ("docs/install.md", "docs/upgrading.md", "examples/README.md", "CHANGELOG.md")


def test_license_is_the_standard_apache_2_text_with_the_projects_copyright() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    lines = text.split("\n")
    (notice,) = [i for i, line in enumerate(lines) if line.startswith("   Copyright ")]
    assert re.fullmatch(r"   Copyright 20\d\d The koordpy Authors", lines[notice]), lines[notice]
    standard = "\n".join([*lines[:notice], PLACEHOLDER, *lines[notice + 1 :]])
    assert hashlib.md5(standard.encode("utf-8")).hexdigest() == APACHE_2_0_MD5
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert (project["license"], project["license-files"]) == ("Apache-2.0", ["LICENSE"])  # SPDX, PEP 639


def test_changelog_opens_with_unreleased_and_uses_keep_a_changelog_sections() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    versions = re.findall(r"^## (.+)$", text, flags=re.M)
    assert versions and versions[0] == "[Unreleased]", versions
    sections = set(re.findall(r"^### (.+)$", text, flags=re.M))
    assert sections and sections <= KEEP_A_CHANGELOG_SECTIONS, sections - KEEP_A_CHANGELOG_SECTIONS


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(h) for h in re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), flags=re.M)}


@pytest.mark.parametrize("page", LINKED_PAGES)
def test_relative_links_resolve(page: str) -> None:
    source = ROOT / page
    for target in re.findall(r"\]\(([^)\s]+)\)", source.read_text(encoding="utf-8")):
        if "://" in target:
            continue
        path, _, anchor = target.partition("#")
        resolved = (source.parent / path).resolve() if path else source
        assert resolved.exists(), f"{page}: {target} does not exist"
        assert resolved.is_relative_to(ROOT), f"{page}: {target} leaves the repository"
        if anchor:
            assert resolved.suffix == ".md" and anchor in anchors(resolved), f"{page}: no heading for {target}"
