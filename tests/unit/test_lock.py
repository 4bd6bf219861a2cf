"""The lock (requirements/run.lock, requirements/dev.lock) agrees with pyproject.toml: every declared package
locked within its range, nothing locked that nothing needs, run.lock the runtime part of dev.lock, every
entry hashed; and every package koordpy's code imports is declared. A change to pyproject.toml without
`make lock` fails here (the mutated copies below show each kind of disagreement being caught)."""

from __future__ import annotations

import ast
import re
import shutil
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from koordpy_testkit.lockfile import disagreements, read_lock

ROOT = Path(__file__).resolve().parents[2]


def test_lock_agrees_with_pyproject() -> None:
    assert disagreements(ROOT) == []


def test_both_lock_files_are_read_whole() -> None:
    run, dev = read_lock(ROOT / "requirements" / "run.lock"), read_lock(ROOT / "requirements" / "dev.lock")
    assert {"uvicorn", "kopf", "httptools", "uvloop", "setuptools", "pip"} <= {e.name for e in run}
    assert {"pytest", "ruff", "mypy", "uv"} <= {e.name for e in dev} - {e.name for e in run}
    assert all(len(e.hashes) >= 1 for e in [*run, *dev])


def _copy(tmp_path: Path) -> Path:
    (tmp_path / "requirements").mkdir()
    for name in ("pyproject.toml", "requirements/run.lock", "requirements/dev.lock"):
        shutil.copy2(ROOT / name, tmp_path / name)
    return tmp_path


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def _declared(name: str) -> str:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return next(r for r in data["project"]["dependencies"] if canonicalize_name(Requirement(r).name) == name)


def test_a_range_that_excludes_the_locked_version_is_caught(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    _edit(root / "pyproject.toml", f'"{_declared("uvicorn")}"', '"uvicorn>=0.30,<0.31"')
    found = disagreements(root)
    assert any("uvicorn==" in p and "outside pyproject.toml's uvicorn<0.31,>=0.30" in p for p in found), found


def test_a_new_dependency_not_locked_is_caught(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    _edit(root / "pyproject.toml", '    "PyYAML>=6,<7",\n', '    "PyYAML>=6,<7",\n    "tomli-w>=1",\n')
    assert "run.lock: tomli-w>=1 is declared in pyproject.toml but not locked" in disagreements(root)


def test_a_dependency_dropped_from_pyproject_is_caught(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    _edit(root / "pyproject.toml", f'    "{_declared("orjson")}",\n', "")
    assert "run.lock: orjson is locked for pyproject.toml, which no longer declares it" in disagreements(root)


def test_run_lock_other_than_dev_lock_is_caught(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    text = (root / "requirements" / "run.lock").read_text()
    first_hash = re.search(r"orjson==[^\n]*\n    --hash=sha256:([0-9a-f]{64})", text)
    assert first_hash is not None
    _edit(root / "requirements" / "run.lock", first_hash[1], "0" * 64)
    assert any(p.startswith("run.lock: orjson==") and "differs from dev.lock" in p for p in disagreements(root))


def _imported(folder: Path) -> set[str]:
    names: set[str] = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names)


# import name -> distribution name, where they differ
DISTRIBUTION = {"yaml": "pyyaml", "prometheus_client": "prometheus-client", "pydantic_core": "pydantic-core"}
DEV_DISTRIBUTION = {
    "kubernetes_validate": "kubernetes-validate",
    "pytest_asyncio": "pytest-asyncio",
    "xdist": "pytest-xdist",
}


@pytest.mark.parametrize(
    ("folder", "extras"),
    [("src", ()), ("tests", ("dev",)), ("bench", ("dev",)), ("scripts", ("dev",))],
)
def test_every_imported_package_is_declared(folder: str, extras: tuple[str, ...]) -> None:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    declared = {canonicalize_name(Requirement(r).name) for r in data["project"]["dependencies"]}
    for extra in extras:
        declared |= {canonicalize_name(Requirement(r).name) for r in data["project"]["optional-dependencies"][extra]}
    # koordpy, its test support and the tests' own helper modules (imported by file name)
    ours = {"koordpy", "koordpy_testkit"} | {p.stem for p in [*ROOT.glob("tests/**/*.py"), *ROOT.glob("bench/*.py")]}
    imported = {canonicalize_name({**DISTRIBUTION, **DEV_DISTRIBUTION}.get(m, m)) for m in _imported(ROOT / folder)}
    assert imported - {canonicalize_name(n) for n in ours} - declared == set()
