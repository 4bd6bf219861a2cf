"""Live mode: ``explain`` and ``agent plan`` list the objects from a cluster (the API emulator, its own
process on 127.0.0.1) instead of reading files, through ``koordpy`` and through kubectl's plugin
mechanism (``kubectl koordpy ...`` with the real kubectl finding ``kubectl-koordpy`` on PATH)."""

from __future__ import annotations

import json
import os
import re
import selectors
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from test_explain_kube_scheduler import STAMP, dump

from koordpy.cli.kubectl import SHORTCUTS
from koordpy.cli.main import COMMANDS, EXAMPLES, load_command
from koordpy.kube.connection import write_kubeconfig
from koordpy.model.durations import format_rfc3339, parse_rfc3339
from koordpy_testkit.bounds import HANG_BACKSTOP

BIN = Path(sys.executable).parent
KOORDPY = BIN / "koordpy"
KUBECTL = BIN / "kubectl"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """An emulator seeded with the kubectl-shaped dump and the agent example (read-only: shared by the
    module's tests); yields a kubeconfig."""
    tmp_path = tmp_path_factory.mktemp("live")
    seed = tmp_path / "seed.yaml"
    seed.write_text(yaml.safe_dump(dump()), encoding="utf-8")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "koordpy_testkit.apiserver",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--seed",
            str(seed),
            "--seed",
            str(EXAMPLES / "agent-node.yaml"),
            "--token",
            "t0k=admin",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            assert sel.select(timeout=HANG_BACKSTOP), "the emulator printed no URL within 30 s"
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        yield write_kubeconfig(tmp_path / "kubeconfig", url, token="t0k")
    finally:
        proc.terminate()
        proc.wait(timeout=HANG_BACKSTOP)
        if proc.stdout is not None:
            proc.stdout.close()


def run(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=HANG_BACKSTOP, env=env, check=False
    )


def test_explain_reads_the_cluster(cluster: Path) -> None:
    done = run(
        KOORDPY,
        "scheduler",
        "explain",
        "--kubeconfig",
        cluster,
        "--pod",
        "default/web-big",
        "--now",
        STAMP,
        "-o",
        "json",
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    by = {row["name"]: row for row in result["nodes"]}
    # the same verdicts as from the file (test_explain_kube_scheduler), plus the agent example's node-1
    assert by["full"]["failures"][0]["detail"] == "Insufficient cpu: requested 15, free 11.82 of 15.92"
    assert by["cordoned"]["failures"][0]["plugin"] == "NodeUnschedulable"
    assert result["selected"] == "cool" and result["nowFrom"] == "--now"
    assert "node-1" in by


def test_live_without_now_uses_the_clock(cluster: Path) -> None:
    done = run(
        KOORDPY,
        "scheduler",
        "explain",
        "--kubeconfig",
        cluster,
        "--context",
        "koordpy",
        "--pod",
        "default/web-big",
        "-o",
        "json",
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["nowFrom"] == "clock"
    assert "newest timestamp" not in done.stderr


AGE = re.compile(r"updated (\S+) ago")


def test_live_ages_read_like_kubectl(cluster: Path) -> None:
    """Live, the clock is days past the seeded NodeMetrics: ages read ``6d1h``, not ``8754m``."""
    done = run(KOORDPY, "scheduler", "explain", "--kubeconfig", cluster, "--pod", "default/web-big")
    assert done.returncode == 0, done.stderr
    ages = AGE.findall(done.stdout)
    assert ages, done.stdout
    for age in ages:
        assert re.fullmatch(r"\d+[smhdy](\d+[smhd])?", age), age
        assert not re.fullmatch(r"\d{3,}m", age), age  # minutes only below 3 hours
    # the same instant in a file run: exactly kubectl's form
    later = format_rfc3339(parse_rfc3339(STAMP) + 8754 * 60)
    seed = cluster.parent / "seed.yaml"
    from_file = run(KOORDPY, "scheduler", "explain", "-f", seed, "--pod", "default/web-big", "--now", later)
    assert from_file.returncode == 0, from_file.stderr
    assert "NodeMetric expired (updated 6d1h ago, expiration 3m)" in from_file.stdout


def test_files_and_cluster_are_exclusive(cluster: Path, tmp_path: Path) -> None:
    done = run(
        KOORDPY, "scheduler", "explain", "--kubeconfig", cluster, "-f", tmp_path / "x.yaml", "--pod", "default/web-big"
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: -f and --kubeconfig/--context are mutually exclusive: read files or a cluster"
    )


def test_unreachable_cluster_is_one_line(tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kc", "http://127.0.0.1:9", token="x")
    done = run(KOORDPY, "scheduler", "explain", "--kubeconfig", kubeconfig, "--pod", "default/p")
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("error: cluster")


def test_agent_plan_reads_the_cluster(cluster: Path) -> None:
    done = run(
        KOORDPY,
        "agent",
        "plan",
        "--kubeconfig",
        cluster,
        "--node",
        "node-1",
        "--now",
        "2026-11-21T10:00:30Z",
        "-o",
        "json",
    )
    assert done.returncode == 0, done.stderr
    from_file = run(
        KOORDPY,
        "agent",
        "plan",
        "-f",
        EXAMPLES / "agent-node.yaml",
        "--node",
        "node-1",
        "--now",
        "2026-11-21T10:00:30Z",
        "-o",
        "json",
    )
    assert json.loads(done.stdout) == json.loads(from_file.stdout)


def plugin_env(home: Path, **extra: str) -> dict[str, str]:
    """kubectl with ``kubectl-koordpy`` on PATH, a HOME of its own, no kube settings but ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBECONFIG", "KUBERNETES_"))}
    return {**env, "HOME": str(home), "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **extra}


def test_kubectl_plugin(cluster: Path) -> None:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    listed = run(KUBECTL, "plugin", "list", env=env)
    assert str(BIN / "kubectl-koordpy") in listed.stdout, listed.stdout + listed.stderr
    done = run(
        KUBECTL,
        "koordpy",
        "explain",
        "--kubeconfig",
        cluster,
        "--pod",
        "default/web-big",
        "--now",
        STAMP,
        "-o",
        "table",
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "pod default/web-big: selected cool"
    plan = run(
        KUBECTL,
        "koordpy",
        "agent",
        "plan",
        "--kubeconfig",
        cluster,
        "--node",
        "node-1",
        "--now",
        "2026-11-21T10:00:30Z",
        "-o",
        "table",
        env=env,
    )
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.splitlines()[0] == "node node-1"
    assert any(line.startswith("evict      batch/batch-a") for line in plan.stdout.splitlines())


def test_kubectl_plugin_reads_kubeconfig_and_its_current_context_alone(cluster: Path, tmp_path: Path) -> None:
    """``kubectl koordpy explain --pod NS/NAME`` with only ``KUBECONFIG`` set, as any kubectl plugin."""
    env = plugin_env(tmp_path, KUBECONFIG=str(cluster))
    done = run(KUBECTL, "koordpy", "explain", "--pod", "default/web-big", "--now", STAMP, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "pod default/web-big: selected cool"
    gangs = run(KUBECTL, "koordpy", "gangs", "-o", "json", env=env)
    assert gangs.returncode == 0, gangs.stderr
    assert json.loads(gangs.stdout)["gangs"] == []


def test_kubectl_plugin_follows_the_current_context_and_context(cluster: Path, tmp_path: Path) -> None:
    """Two contexts: the current one is the emulator; ``--context`` picks the other (nothing listens)."""
    config = yaml.safe_load(cluster.read_text(encoding="utf-8"))
    config["clusters"].append({"name": "gone", "cluster": {"server": "http://127.0.0.1:9"}})
    config["contexts"].append({"name": "gone", "context": {"cluster": "gone", "user": config["users"][0]["name"]}})
    both = tmp_path / "two-contexts"
    both.write_text(yaml.safe_dump(config), encoding="utf-8")
    env = plugin_env(tmp_path, KUBECONFIG=str(both))
    current = run(KUBECTL, "koordpy", "explain", "--pod", "default/web-big", "--now", STAMP, env=env)
    assert current.returncode == 0 and "selected cool" in current.stdout, current.stderr
    other = run(KUBECTL, "koordpy", "explain", "--context", "gone", "--pod", "default/web-big", env=env)
    assert other.returncode == 2
    (line,) = other.stderr.splitlines()
    assert line.startswith("error: cluster") and "127.0.0.1:9" in line  # the context's server, not the current one
    config["current-context"] = "gone"
    both.write_text(yaml.safe_dump(config), encoding="utf-8")
    assert run(KUBECTL, "koordpy", "explain", "--pod", "default/web-big", env=env).returncode == 2
    chosen = run(KUBECTL, "koordpy", "explain", "--context", "koordpy", "--pod", "default/web-big", env=env)
    assert chosen.returncode == 0, chosen.stderr


def test_without_f_and_without_any_cluster_one_line_says_where_it_looked(tmp_path: Path) -> None:
    done = run(KUBECTL, "koordpy", "explain", "--pod", "default/p", env=plugin_env(tmp_path))
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith(
        f"error: cannot load Kubernetes connection settings from {tmp_path / '.kube' / 'config'} "
        "(no --kubeconfig, no $KUBECONFIG, not in a pod): "
    )


def test_kubectl_plugin_help_lists_its_commands(tmp_path: Path) -> None:
    env = plugin_env(tmp_path)
    top = run(KUBECTL, "koordpy", "-h", env=env)
    assert top.returncode == 0, top.stderr
    assert top.stdout.startswith("Usage: kubectl koordpy [OPTIONS] COMMAND [ARGS]...")
    listed = re.findall(r"^  (\S+)\s", top.stdout.split("Commands:", 1)[1], re.M)
    assert listed == [*SHORTCUTS, *COMMANDS]
    assert "$KUBECONFIG" in top.stdout
    explain = run(KUBECTL, "koordpy", "explain", "-h", env=env)
    assert explain.stdout.startswith("Usage: kubectl koordpy explain [OPTIONS]")
    for name, shortcut in SHORTCUTS.items():  # each shortcut is that command, not a copy
        assert load_command(shortcut.group).commands[shortcut.command].name == name
