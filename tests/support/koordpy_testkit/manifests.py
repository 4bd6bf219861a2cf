"""The manifests the project shows its users: the files under ``examples/`` and the YAML blocks of the
documentation, found and sorted into what each one is.

A YAML document with ``apiVersion`` and ``kind`` is either a **Kubernetes object** (something ``kubectl
apply`` sends to an API server) or one of koordpy's own **file formats** (``koordpy.io/*``: the
components' configuration files, simulator scenarios and summaries), which no API server serves. A
YAML block of ``docs/install.md`` without ``apiVersion`` is a set of chart values.

Not guaranteed: blocks are found by their fence (a line starting with three backticks and ``yaml``);
an indented fence (inside a list item) is found too, and its indentation removed.
"""

from __future__ import annotations

import pkgutil
import re
import textwrap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Any

import yaml

import koordpy.crds
from koordpy.crds import Resource

__all__ = [
    "DOCS",
    "EXAMPLES",
    "FEATURE_GATED",
    "FILE_FORMAT_GROUPS",
    "INSTALL_DOC",
    "ROOT",
    "VALUES",
    "Block",
    "doc_blocks",
    "doc_objects",
    "example_files",
    "gvk",
    "is_file_format",
    "is_object",
    "known_models",
    "kube_objects",
    "needs_gate",
    "object_id",
    "values_files",
]

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
VALUES = EXAMPLES / "values"
INSTALL_DOC = ROOT / "docs" / "install.md"
DOCS: tuple[Path, ...] = (*sorted((ROOT / "docs").glob("*.md")), ROOT / "charts" / "koordpy" / "README.md")
"""The pages whose YAML blocks are checked: every docs/*.md and the chart's README."""

FILE_FORMAT_GROUPS = frozenset({"koordpy.io"})
"""API groups of koordpy's own file formats (configuration files, scenarios, summaries)."""

_FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[A-Za-z0-9_+-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```", re.M | re.S)


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: where it is (``path:line``), its language and its text."""

    path: Path
    line: int
    lang: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    def documents(self) -> list[Any]:
        return [doc for doc in yaml.safe_load_all(self.text) if doc is not None]


def doc_blocks(path: Path, lang: str = "yaml") -> list[Block]:
    """The fenced blocks of ``path`` in language ``lang``, in page order."""
    text = path.read_text(encoding="utf-8")
    out = []
    for match in _FENCE.finditer(text):
        if match.group("lang") != lang:
            continue
        line = text.count("\n", 0, match.start()) + 1
        out.append(Block(path, line, lang, textwrap.dedent(match.group("body"))))
    return out


def is_file_format(doc: Any) -> bool:
    """A koordpy file (``koordpy.io/*`` configuration, scenario or summary), not an API object."""
    return isinstance(doc, dict) and "apiVersion" in doc and "kind" in doc and gvk(doc)[0] in FILE_FORMAT_GROUPS


def is_object(doc: Any) -> bool:
    """A Kubernetes object: ``apiVersion`` and ``kind``, and not one of koordpy's own file formats."""
    return isinstance(doc, dict) and "apiVersion" in doc and "kind" in doc and not is_file_format(doc)


def kube_objects(text: str) -> list[dict[str, Any]]:
    """The Kubernetes objects of a YAML text (every document that :func:`is_object`)."""
    return [doc for doc in yaml.safe_load_all(text) if is_object(doc)]


def gvk(doc: dict[str, Any]) -> tuple[str, str, str]:
    """``(group, version, kind)`` of an object (group empty for the core API)."""
    group, _, version = str(doc["apiVersion"]).rpartition("/")
    return group, version, str(doc["kind"])


def known_models() -> dict[tuple[str, str, str], Resource]:
    """Every custom resource koordpy has a model of (``koordpy.crds``), installed by the chart or not."""
    out: dict[tuple[str, str, str], Resource] = {}
    for info in pkgutil.iter_modules(koordpy.crds.__path__):
        module = import_module(f"koordpy.crds.{info.name}")
        for value in vars(module).values():
            if isinstance(value, Resource):
                out[(value.group, value.version, value.kind)] = value
    return out


def object_id(doc: dict[str, Any]) -> str:
    """``apiVersion kind namespace/name`` (namespace empty when the object names none)."""
    meta = doc.get("metadata") or {}
    return f"{doc['apiVersion']} {doc['kind']} {meta.get('namespace', '')}/{meta.get('name', '')}"


def example_files(*, gated: bool | None = False) -> list[Path]:
    """The manifests under ``examples/`` (the values files under ``examples/values/`` excluded): those that
    need no feature gate, or (``gated``) those that need one (:func:`needs_gate`), or (None) all."""
    paths = sorted(p for p in EXAMPLES.glob("*.yaml"))
    if gated is None:
        return paths
    return [p for p in paths if needs_gate(kube_objects(p.read_text(encoding="utf-8"))) == gated]


def values_files() -> list[Path]:
    """The chart values under ``examples/values/``."""
    return sorted(VALUES.glob("*.yaml"))


FEATURE_GATED: dict[tuple[str, str], str] = {("scheduling.k8s.io", "v1beta1"): "GenericWorkload"}
"""API group versions a v1.37 kube-apiserver serves only with a feature gate on (and its runtime-config): the
session's control plane has none on, so their blocks are checked on a plane that has
(``test_cluster_native_gangs.py``)."""


def needs_gate(objects: Sequence[dict[str, Any]]) -> bool:
    """Whether one of ``objects`` is of an API version in :data:`FEATURE_GATED`."""
    return any(gvk(o)[:2] in FEATURE_GATED for o in objects)


def doc_objects(*, gated: bool = False) -> Iterator[tuple[Block, list[dict[str, Any]]]]:
    """Every YAML block of the documentation that holds Kubernetes objects, with them: the blocks that need
    no feature gate, or (``gated``) those that need one (:func:`needs_gate`)."""
    for page in DOCS:
        for block in doc_blocks(page):
            objects = [doc for doc in block.documents() if is_object(doc)]
            if objects and needs_gate(objects) == gated:
                yield block, objects
