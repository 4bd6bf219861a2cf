"""CLI conventions, through the real ``koordpy`` entry point (subprocesses): ``--version``, ``-h`` everywhere,
``python -m koordpy``, bare ``koordpy`` prints help with exit 0, help without type placeholders, lazy
sub-commands (``--help`` imports no model), and services without a usable kubeconfig fail with one line.

Start-up time is measured in bench/cli_startup.py, not here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

from koordpy.cli.main import COMMANDS, load_command
from koordpy_testkit.bounds import HANG_BACKSTOP

ROOT = Path(__file__).resolve().parents[3]
KOORDPY = Path(sys.executable).parent / "koordpy"
COMMAND_PATHS = [
    [],
    ["scheduler"],
    ["scheduler", "explain"],
    ["agent"],
    ["agent", "plan"],
    ["agent", "run"],
    ["extender"],
    ["manager"],
    ["simulate"],
    ["descheduler"],
    ["descheduler", "arbitrate"],
]
# typer's own placeholders: <list[Path]>, <str>, <path>, <int range>, <bool> ...
TYPE_PLACEHOLDER = re.compile(r"<(list\[|str|int|float|bool|path|file|text|dir)[^>]*>", re.I)
SERVICES = [["extender"], ["manager"], ["agent", "run", "--node", "node-1"]]


def koordpy(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(KOORDPY), *args], capture_output=True, text=True, timeout=HANG_BACKSTOP, check=False, env=env, cwd=ROOT
    )


def test_version_prints_the_package_version() -> None:
    expected = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    result = koordpy("--version")
    assert (result.returncode, result.stdout, result.stderr) == (0, f"koordpy {expected}\n", "")
    assert version("koordpy") == expected


def test_python_dash_m_is_the_same_command() -> None:
    for args in (["--version"], ["--help"], ["agent", "plan", "-h"]):
        module = subprocess.run(
            [sys.executable, "-m", "koordpy", *args], capture_output=True, text=True, timeout=HANG_BACKSTOP, check=False
        )
        script = koordpy(*args)
        assert module.returncode == script.returncode == 0
        assert module.stdout == script.stdout


def test_bare_koordpy_prints_help_on_stdout_and_exits_0() -> None:
    result = koordpy()
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Usage: koordpy [OPTIONS] COMMAND [ARGS]...")
    assert result.stdout == koordpy("--help").stdout
    for name in COMMANDS:
        assert re.search(rf"^  {name}\s", result.stdout, re.M), name


@pytest.mark.parametrize("group", [["agent"], ["scheduler"], ["descheduler"]])
def test_bare_group_prints_its_help_and_exits_0(group: list[str]) -> None:
    result = koordpy(*group)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"Usage: koordpy {' '.join(group)} [OPTIONS] COMMAND")
    assert result.stdout == koordpy(*group, "--help").stdout


@pytest.mark.parametrize("path", COMMAND_PATHS, ids=lambda p: " ".join(p) or "koordpy")
def test_dash_h_is_help_and_shows_no_type_placeholder(path: list[str]) -> None:
    short = koordpy(*path, "-h")
    long = koordpy(*path, "--help")
    assert short.returncode == long.returncode == 0, short.stderr
    assert short.stdout == long.stdout
    assert short.stdout.startswith(f"Usage: koordpy {' '.join(path)}".rstrip())
    assert "-h, --help" in short.stdout
    assert not TYPE_PLACEHOLDER.search(short.stdout), TYPE_PLACEHOLDER.findall(short.stdout)
    assert "--install-completion" not in short.stdout


def test_help_names_the_explicit_metavars() -> None:
    explain = koordpy("scheduler", "explain", "-h").stdout
    assert "-f, --filename FILE" in explain and "--pod NAMESPACE/NAME" in explain and "--now RFC3339" in explain
    assert "--kubeconfig FILE" in koordpy("extender", "-h").stdout
    assert "[SCENARIO]" in koordpy("simulate", "-h").stdout


def test_top_level_help_and_version_import_no_sub_command() -> None:
    """Lazy sub-commands: ``koordpy --help`` loads neither numpy nor pydantic nor any model or server module."""
    for args in (["--help"], ["--version"], []):
        result = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "koordpy", *args],
            capture_output=True,
            text=True,
            timeout=HANG_BACKSTOP,
            check=False,
        )
        assert result.returncode == 0
        imported = {line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines() if "|" in line}
        assert "koordpy.cli.main" in imported  # the probe sees koordpy's own imports
        heavy = sorted(
            m
            for m in imported
            if m.split(".")[0]
            in ("numpy", "pydantic", "kubernetes", "kopf", "aiohttp", "fastapi", "uvicorn", "yaml", "rich")
            or m.startswith(("koordpy.model", "koordpy.config", "koordpy.scheduler", "koordpy.agent", "koordpy.sim"))
            or (m.startswith("koordpy.cli.") and m != "koordpy.cli.main")
        )
        assert heavy == [], f"{args}: {heavy[:10]}"


@pytest.mark.parametrize("name", list(COMMANDS))
def test_summary_in_the_lazy_table_is_the_commands_own(name: str) -> None:
    """``koordpy --help`` lists COMMANDS' summaries without importing: they must say what the command says."""
    command = load_command(name)
    own = (command.help or "").strip().split("\n\n")[0].replace("\n", " ")
    assert COMMANDS[name].summary == own


def _no_kube_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBECONFIG", "KUBERNETES_"))}
    env["HOME"] = str(home)
    return env


@pytest.fixture
def empty_config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text("{}\n")  # every component's defaults
    return path


@pytest.mark.parametrize("service", SERVICES, ids=lambda s: " ".join(s[:2]))
def test_service_without_kubeconfig_fails_with_one_line_and_exit_2(
    service: list[str], empty_config: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    result = koordpy(*service, "--config", str(empty_config), env=_no_kube_env(home))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: cannot load Kubernetes connection settings from ")
    assert str(home / ".kube" / "config") in lines[0]  # names where it looked


@pytest.mark.parametrize("service", SERVICES, ids=lambda s: " ".join(s[:2]))
@pytest.mark.parametrize(
    ("content", "detail"),
    [("clusters: [\n", "invalid YAML at line 2"), ("apiVersion: v1\nkind: Config\n", "")],
    ids=["broken-yaml", "no-context"],
)
def test_service_with_unusable_kubeconfig_fails_with_one_line_and_exit_2(
    service: list[str], empty_config: Path, tmp_path: Path, content: str, detail: str
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(content)
    result = koordpy(
        *service, "--config", str(empty_config), "--kubeconfig", str(kubeconfig), env=_no_kube_env(tmp_path)
    )
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith(f"error: cannot load Kubernetes connection settings from --kubeconfig {kubeconfig}: ")
    assert detail in lines[0]


def test_a_mistyped_command_suggests_the_lazy_one() -> None:
    result = koordpy("extendr")
    assert result.returncode == 2
    assert result.stderr == "error: no such command 'extendr'. Did you mean 'extender'? (see 'koordpy -h')\n"


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["simulate", "--bogus"],
            "error: no such option: --bogus (Possible options: --out) (see 'koordpy simulate -h')",
        ),
        (["scheduler", "explain"], "error: missing option '--pod' (see 'koordpy scheduler explain -h')"),
        (
            ["simulate", "--seed", "-1"],
            "error: invalid value for '--seed': Input should be greater than or equal to 0 (see 'koordpy simulate -h')",
        ),
        (
            ["scheduler", "explain", "-f", "x.yaml", "--pod", "a/b", "--now", "2026-01-01"],
            "error: --now: not an RFC 3339 timestamp: '2026-01-01' is a date without a time (say 2026-01-01T00:00:00Z)",
        ),
    ],
    ids=["unknown-option", "missing-option", "bad-value", "date-only-now"],
)
def test_usage_errors_are_one_error_line_like_every_other(args: list[str], line: str, tmp_path: Path) -> None:
    """click's usage block and ``Error:`` become the one ``error: ...`` line every koordpy error is."""
    (tmp_path / "x.yaml").write_text("kind: List\nitems: []\n")
    result = subprocess.run(
        [str(KOORDPY), *args], capture_output=True, text=True, timeout=HANG_BACKSTOP, check=False, cwd=tmp_path
    )
    assert (result.returncode, result.stdout, result.stderr) == (2, "", line + "\n")


LISTEN_FLAGS = [
    (["extender"], "--metrics-host"),
    (["manager"], "--health-host"),
    (["agent", "run", "--node", "node-1"], "--host"),
]


@pytest.mark.parametrize(("service", "flag"), LISTEN_FLAGS, ids=lambda v: v if isinstance(v, str) else " ".join(v[:2]))
@pytest.mark.parametrize(
    ("value", "detail"),
    [("$(POD_IP)", "is an unexpanded variable"), ("10.0.0.999", "is neither an IP address nor a host name")],
    ids=["unexpanded", "not-an-address"],
)
def test_a_bad_listen_address_fails_with_one_line_before_connecting(
    service: list[str], flag: str, value: str, detail: str, empty_config: Path, tmp_path: Path
) -> None:
    """The chart passes $(POD_IP): a pod without that variable in its env must say so, not fail in bind()."""
    result = koordpy(*service, "--config", str(empty_config), f"{flag}={value}", env=_no_kube_env(tmp_path))
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0] == f"error: {flag}: {value!r} {detail}" + (
        " (is it defined in the container's env?)" if value.startswith("$") else ""
    )
