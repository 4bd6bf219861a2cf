"""``koordpy extender``: configuration errors exit 2 naming the field; the real process serves and survives."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path

import httpx
import orjson
import pytest
import typer
from typer.testing import CliRunner

from koordpy.cli import extender
from koordpy_testkit import NodeBuilder, NodeMetricBuilder
from koordpy_testkit.apiserver import running_apiserver, write_kubeconfig
from koordpy_testkit.bounds import HANG_BACKSTOP

# A koordpy-like app with the command registered the way cli/main.py does it.
LAUNCH = (
    "import typer\n"
    "from koordpy.cli import extender\n"
    "app = typer.Typer(pretty_exceptions_enable=False)\n"
    "@app.callback()\n"
    "def main() -> None: pass\n"
    "extender.register(app)\n"
    "app()\n"
)


def cli() -> typer.Typer:
    app = typer.Typer(pretty_exceptions_enable=False)

    @app.callback()
    def main() -> None:
        pass

    extender.register(app)
    return app


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("extender:\n  port: 0\n", "extender.port"),
        ("extender:\n  bogus: 1\n", "extender.bogus"),
        ("loadAware:\n  usageThresholds: {cpu: 300}\n", "loadAware"),
        ("kind: Wrong\n", "kind"),
    ],
)
def test_bad_config_exits_2_naming_the_field(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / "scheduler.yaml"
    path.write_text("apiVersion: koordpy.io/v1alpha1\nkind: SchedulerConfiguration\n" + text)
    result = CliRunner().invoke(cli(), ["extender", "--config", str(path)])
    assert result.exit_code == 2
    assert field in result.output
    assert str(path) in result.output


def test_missing_files_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli(), ["extender", "--config", str(tmp_path / "absent.yaml")])
    assert result.exit_code == 2 and "absent.yaml" in result.output
    config = tmp_path / "ok.yaml"
    config.write_text("apiVersion: koordpy.io/v1alpha1\nkind: SchedulerConfiguration\n")
    result = CliRunner().invoke(
        cli(), ["extender", "--config", str(config), "--kubeconfig", str(tmp_path / "nokube.yaml")]
    )
    assert result.exit_code == 2 and "nokube.yaml" in result.output


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_the_process_serves_survives_garbage_and_stops_cleanly(tmp_path: Path) -> None:
    async with running_apiserver(bookmark_interval=0.2) as api:
        now = time.time()
        api.seed(NodeBuilder("n1").allocatable(cpu="32", memory="128Gi").build())
        api.seed(NodeMetricBuilder("n1").updated(now - 10).usage(cpu="4", memory="8Gi").build())
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url, token="test")
        config = tmp_path / "scheduler.yaml"
        config.write_text("apiVersion: koordpy.io/v1alpha1\nkind: SchedulerConfiguration\n")
        port = free_port()
        env = {**os.environ, "KUBECONFIG": ""}
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            LAUNCH,
            "extender",
            "--config",
            str(config),
            "--kubeconfig",
            str(kubeconfig),
            "--port",
            str(port),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=HANG_BACKSTOP) as http:
                deadline = time.monotonic() + HANG_BACKSTOP
                while True:
                    try:
                        if (await http.get("/readyz")).status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    assert proc.returncode is None, "extender exited early"
                    assert time.monotonic() < deadline, "extender never became ready"
                    await asyncio.sleep(0.1)
                for body in (b"\xff\xfe", b"[" * 100_000, b'{"Pod": 3}'):
                    resp = await http.post("/filter", content=body, headers={"Content-Type": "application/json"})
                    assert resp.status_code == 400
                pod = {"metadata": {"name": "p", "namespace": "default", "uid": "u"}, "spec": {"containers": []}}
                resp = await http.post(
                    "/filter",
                    content=orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": ["n1", "n2"]}),
                    headers={"Content-Type": "application/json"},
                )
                result = orjson.loads(resp.content)
                assert result["NodeNames"] == ["n1"] and list(result["FailedNodes"]) == ["n2"]
        finally:
            proc.send_signal(signal.SIGTERM)
            _, stderr = await asyncio.wait_for(proc.communicate(), HANG_BACKSTOP)
        # uvicorn shuts down gracefully, then re-raises SIGTERM so the exit status says why it stopped
        assert proc.returncode in (0, -signal.SIGTERM), stderr.decode()[-2000:]
        events = [json.loads(line)["event"] for line in stderr.decode().splitlines() if line.startswith("{")]
        assert "cache.synced" in events
        assert any(e.startswith("Finished server process") for e in events)
        assert events.count("request.rejected") == 3
