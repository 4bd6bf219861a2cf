"""The lock (``requirements/run.lock`` and ``requirements/dev.lock``, written by ``make lock``) read back:
what it pins, whether it agrees with ``pyproject.toml``, and whether a virtualenv holds exactly it.

``python -m koordpy_testkit.lockfile installed LOCK`` (``scripts/run-tests.sh`` runs it before pytest)
compares the running interpreter's installed distributions with ``LOCK`` and prints one line saying
which lock the run uses; any difference fails the run with the list of differences.

Not guaranteed: the hashes are checked here only for their presence (pip checks them when it installs).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

__all__ = ["Locked", "disagreements", "installed_differences", "read_lock"]

PROJECT_SOURCE = "koordpy (pyproject.toml)"
BUILD_SOURCE = "pyproject.toml (build-system), pip"
CONSTRAINT_SOURCE = "-c requirements/dev.lock"
_ENTRY = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^ ;\\]+)\s*(?:;\s*(?P<marker>[^\\]+?))?\s*\\?$"
)


@dataclass
class Locked:
    """One pinned entry: a name may have several (one per environment marker)."""

    name: str
    version: Version
    marker: Marker | None
    hashes: set[str] = field(default_factory=set)
    via: list[str] = field(default_factory=list)

    def applies(self, environment: Mapping[str, str] | None = None) -> bool:
        return self.marker is None or self.marker.evaluate(dict(environment) if environment else None)


def read_lock(path: Path) -> list[Locked]:
    """Every entry of a uv/pip-tools requirements file with hashes and ``# via`` annotations."""
    entries: list[Locked] = []
    in_via = False
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line:
            continue
        if (match := _ENTRY.match(raw)) is not None:
            marker = match["marker"]
            entries.append(
                Locked(
                    canonicalize_name(match["name"]),
                    Version(match["version"]),
                    Marker(marker.strip()) if marker else None,
                )
            )
            in_via = False
        elif line.startswith("--hash=sha256:"):
            assert entries, f"{path}: a hash before any entry"
            entries[-1].hashes.add(line.removeprefix("--hash=sha256:").rstrip(" \\"))
        elif line.startswith("# via"):
            rest = line.removeprefix("# via").strip()
            if rest:
                entries[-1].via.append(rest)
                in_via = False
            else:
                in_via = True
        elif in_via and line.startswith("#   "):
            entries[-1].via.append(line.removeprefix("#").strip())
        elif not line.startswith("#"):
            raise ValueError(f"{path}: a line the lock reader does not know: {raw!r}")
    return entries


def _pyproject(pyproject: Path) -> tuple[list[Requirement], list[Requirement], list[Requirement]]:
    data = tomllib.loads(pyproject.read_text())
    runtime = [Requirement(r) for r in data["project"]["dependencies"]]
    dev = [Requirement(r) for r in data["project"]["optional-dependencies"]["dev"]]
    build = [Requirement(r) for r in [*data["build-system"]["requires"], "pip"]]
    return runtime, dev, build


def _by_name(entries: Iterable[Locked]) -> dict[str, list[Locked]]:
    found: dict[str, list[Locked]] = {}
    for entry in entries:
        found.setdefault(entry.name, []).append(entry)
    return found


def _check_declared(where: str, declared: Sequence[Requirement], locked: Mapping[str, list[Locked]]) -> list[str]:
    problems: list[str] = []
    for requirement in declared:
        name = canonicalize_name(requirement.name)
        pins = locked.get(name)
        if not pins:
            problems.append(f"{where}: {requirement} is declared in pyproject.toml but not locked")
            continue
        for pin in pins:
            if pin.version not in requirement.specifier:
                problems.append(f"{where}: {name}=={pin.version} is outside pyproject.toml's {requirement}")
    return problems


def _check_sources(where: str, entries: Sequence[Locked], allowed: set[str], constrained: bool) -> list[str]:
    """Each entry must be wanted by pyproject.toml (directly, as a declared name) or by another entry."""
    names = {e.name for e in entries}
    problems: list[str] = []
    for entry in entries:
        if not entry.hashes:
            problems.append(f"{where}: {entry.name}=={entry.version} has no hash")
        sources = [s for s in entry.via if not (constrained and s == CONSTRAINT_SOURCE)]
        if not sources:
            problems.append(f"{where}: {entry.name} is locked but nothing requires it")
        for source in sources:
            if source in (PROJECT_SOURCE, BUILD_SOURCE):
                if entry.name not in allowed:
                    problems.append(f"{where}: {entry.name} is locked for pyproject.toml, which no longer declares it")
            elif canonicalize_name(source.split(" ")[0]) not in names:
                problems.append(f"{where}: {entry.name} is locked for {source}, which is not in the lock")
    return problems


def _names(requirements: Iterable[Requirement]) -> set[str]:
    return {canonicalize_name(r.name) for r in requirements}


def disagreements(root: Path) -> list[str]:
    """Where ``root``'s ``pyproject.toml`` and its lock disagree (empty when they agree): a declared
    package not locked or locked outside its range, a locked package nothing declares or requires any
    more, an entry without hashes, or run.lock naming another version or other hashes than dev.lock."""
    runtime, dev, build = _pyproject(root / "pyproject.toml")
    run_entries = read_lock(root / "requirements" / "run.lock")
    dev_entries = read_lock(root / "requirements" / "dev.lock")
    run_locked, dev_locked = _by_name(run_entries), _by_name(dev_entries)
    problems = [
        *_check_declared("run.lock", [*runtime, *build], run_locked),
        *_check_declared("dev.lock", [*runtime, *dev, *build], dev_locked),
        *_check_sources("run.lock", run_entries, _names(runtime) | _names(build), constrained=True),
        *_check_sources("dev.lock", dev_entries, _names(runtime) | _names(dev) | _names(build), constrained=False),
    ]
    for name, pins in run_locked.items():
        other = {(p.version, str(p.marker), frozenset(p.hashes)) for p in dev_locked.get(name, [])}
        for pin in pins:
            if (pin.version, str(pin.marker), frozenset(pin.hashes)) not in other:
                problems.append(f"run.lock: {name}=={pin.version} differs from dev.lock (version, marker or hashes)")
    return problems


def installed_differences(lock: Sequence[Locked], installed: Mapping[str, str], ignore: set[str]) -> list[str]:
    """Differences between a lock (entries for this environment) and ``installed`` (name -> version)."""
    wanted = {e.name: e.version for e in lock if e.applies()}
    problems = []
    for name, version in sorted(wanted.items()):
        have = installed.get(name)
        if have is None:
            problems.append(f"{name}=={version} is locked but not installed")
        elif Version(have) != version:
            problems.append(f"{name} is {have}, the lock says {version}")
    problems += [
        f"{name}=={version} is installed but not locked"
        for name, version in sorted(installed.items())
        if name not in wanted and name not in ignore
    ]
    return problems


def _installed() -> dict[str, str]:
    return {canonicalize_name(d.metadata["Name"]): d.version for d in importlib.metadata.distributions()}


def main(argv: Sequence[str]) -> int:
    if len(argv) != 2 or argv[0] != "installed":
        print("usage: python -m koordpy_testkit.lockfile installed LOCK", file=sys.stderr)
        return 2
    path = Path(argv[1])
    problems = installed_differences(read_lock(path), _installed(), ignore={"koordpy"})
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    if problems:
        print(f"the virtualenv differs from {path} (sha256 {digest}):", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        print("run `make clean` and the make target again to reinstall from the lock", file=sys.stderr)
        return 1
    count = sum(1 for e in read_lock(path) if e.applies())
    print(f"python packages: the {count} of {path} (sha256 {digest}), hashes checked at install, nothing else")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
