"""The operations listener (``extender.metricsPort``): real uvicorn servers on loopback, real HTTP.

``serve_all`` runs the main server (verbs, lifespan with the watches) and the ops server (``/healthz``,
``/readyz``, ``/metrics`` only) in the test's event loop; the process test starts ``koordpy extender``
with a configuration that sets ``metricsPort`` and stops it with SIGTERM.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import httpx
import orjson
import pytest
import typer
import uvicorn
from typer.testing import CliRunner

from koordpy.cli import extender as extender_cli
from koordpy.config import SchedulerConfiguration, validate
from koordpy.kube.client import ApiClient
from koordpy.kube.connection import ConnectionInfo
from koordpy.runtime.clock import SystemClock
from koordpy.scheduler.extender.server import Extender, build_extender, build_servers, serve_all
from koordpy_testkit import NodeBuilder, NodeMetricBuilder
from koordpy_testkit.apiserver import ApiServerEmulator, running_apiserver, write_kubeconfig
from koordpy_testkit.bounds import HANG_BACKSTOP, eventually

# The command registered the way cli/main.py does it (as in test_extender_cli).
LAUNCH = (
    "import typer\n"
    "from koordpy.cli import extender\n"
    "app = typer.Typer(pretty_exceptions_enable=False)\n"
    "@app.callback()\n"
    "def main() -> None: pass\n"
    "extender.register(app)\n"
    "app()\n"
)
JSON = {"Content-Type": "application/json"}
POD = {"metadata": {"name": "p", "namespace": "default", "uid": "u"}, "spec": {"containers": []}}
FILTER = orjson.dumps({"Pod": POD, "Nodes": None, "NodeNames": ["n1", "n2"]})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def seed(api: ApiServerEmulator) -> None:
    api.seed(NodeBuilder("n1").allocatable(cpu="32", memory="128Gi").build())
    api.seed(NodeMetricBuilder("n1").updated(time.time() - 10).usage(cpu="4", memory="8Gi").build())


@pytest.fixture
def sigterm_recorder() -> Iterator[list[int]]:
    """SIGTERM goes to a recorder while the test runs (``serve_all`` re-raises it to this handler)."""
    received: list[int] = []

    def record(sig: int, _: FrameType | None) -> None:
        received.append(sig)

    previous = signal.signal(signal.SIGTERM, record)
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


async def wait_started(servers: list[uvicorn.Server], task: asyncio.Task[None]) -> list[str]:
    """The base URLs of the started servers, in order (main first)."""
    await eventually(lambda: all(server.started for server in servers) or task.done(), "uvicorn started", interval=0.01)
    if task.done():
        task.result()
    assert all(server.started for server in servers), "uvicorn did not start"
    return [f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}" for server in servers]


async def refused(url: str) -> bool:
    async with httpx.AsyncClient(timeout=HANG_BACKSTOP) as http:
        try:
            await http.get(url + "/healthz")
        except httpx.ConnectError:
            return True
    return False


async def test_ops_port_serves_health_readiness_and_metrics_only_and_stops_with_the_main_port(
    sigterm_recorder: list[int],
) -> None:
    async with running_apiserver(bookmark_interval=0.2) as api:
        seed(api)
        client = ApiClient(ConnectionInfo.for_url(api.url, token="test"))
        extender = build_extender(validate(SchedulerConfiguration, {}), client, clock=SystemClock(), freeze_gc=False)
        servers = build_servers(extender, "127.0.0.1", 0, metrics_host="127.0.0.1", metrics_port=0)
        assert [server.config.lifespan for server in servers] == ["on", "off"]
        task = asyncio.create_task(serve_all(servers))
        main_url, ops_url = await wait_started(servers, task)
        assert main_url != ops_url
        async with (
            httpx.AsyncClient(base_url=main_url, timeout=HANG_BACKSTOP) as main,
            httpx.AsyncClient(base_url=ops_url, timeout=HANG_BACKSTOP) as ops,
        ):
            assert extender.synced is not None
            await asyncio.wait_for(extender.synced.wait(), HANG_BACKSTOP)  # the main server's lifespan runs the watches
            assert (await ops.get("/healthz")).text == "ok"
            assert (await ops.get("/readyz")).text == "ok"

            resp = await main.post("/filter", content=FILTER, headers=JSON)
            assert resp.status_code == 200
            result = orjson.loads(resp.content)
            assert result["NodeNames"] == ["n1"] and list(result["FailedNodes"]) == ["n2"]
            assert (await main.post("/prioritize", content=FILTER, headers=JSON)).status_code == 200

            metrics = await ops.get("/metrics")
            assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
            # one registry: the ops port reports what the main port served and what the watches saw
            assert 'koordpy_extender_requests_total{outcome="ok",verb="filter"} 1.0' in metrics.text
            assert 'koordpy_extender_cache_objects{kind="nodes"} 1.0' in metrics.text
            assert metrics.text == (await main.get("/metrics")).text

            for verb in ("filter", "prioritize", "bind"):
                assert (await ops.post(f"/{verb}", content=FILTER, headers=JSON)).status_code == 404, verb
            assert (await ops.get("/debug/nodes/n1")).status_code == 404
            assert (await main.get("/debug/nodes/n1")).status_code == 200

            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.wait_for(task, HANG_BACKSTOP)
        assert sigterm_recorder == [signal.SIGTERM]  # re-raised once, after both shut down
        assert all(server.should_exit for server in servers)
        assert await refused(main_url) and await refused(ops_url)
        assert client._session is None  # the main server's lifespan closed the API client


def not_ready(extender: Extender, reason: str) -> None:
    extender.not_ready = lambda: reason  # type: ignore[method-assign]


async def test_readiness_is_the_same_on_both_ports() -> None:
    extender = build_extender(validate(SchedulerConfiguration, {}), None, freeze_gc=False)
    servers = build_servers(extender, "127.0.0.1", 0, metrics_host="127.0.0.1", metrics_port=0)
    task = asyncio.create_task(serve_all(servers))
    urls = await wait_started(servers, task)
    try:
        async with httpx.AsyncClient(timeout=HANG_BACKSTOP) as http:
            not_ready(extender, "waiting for the first list of pods")
            for url in urls:
                resp = await http.get(url + "/readyz")
                assert (resp.status_code, resp.text) == (503, "not ready: waiting for the first list of pods")
                assert (await http.get(url + "/healthz")).status_code == 200
    finally:
        servers[1].should_exit = True  # either server stopping stops both
        await asyncio.wait_for(task, HANG_BACKSTOP)
    assert servers[0].should_exit
    assert await refused(urls[0]) and await refused(urls[1])


async def test_an_ops_port_in_use_stops_the_main_server_and_exits_with_uvicorns_status() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        extender = build_extender(validate(SchedulerConfiguration, {}), None, freeze_gc=False)
        main_port = free_port()
        servers = build_servers(extender, "127.0.0.1", main_port, metrics_host="127.0.0.1", metrics_port=port)
        # awaited in this task: a SystemExit raised in another task would escape the event loop
        with pytest.raises(SystemExit) as exited:
            async with asyncio.timeout(HANG_BACKSTOP):
                await serve_all(servers)
    assert exited.value.code == 3  # uvicorn's STARTUP_FAILURE
    assert servers[0].should_exit
    assert await refused(f"http://127.0.0.1:{main_port}")


async def test_the_process_serves_the_ops_port_and_stops_both_on_sigterm(tmp_path: Path) -> None:
    async with running_apiserver(bookmark_interval=0.2) as api:
        seed(api)
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url, token="test")
        port, metrics_port = free_port(), free_port()
        config = tmp_path / "scheduler.yaml"
        config.write_text(
            "apiVersion: koordpy.io/v1alpha1\nkind: SchedulerConfiguration\n"
            f"extender:\n  port: {port}\n  metricsPort: {metrics_port}\n  metricsHost: 127.0.0.1\n"
        )
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            LAUNCH,
            "extender",
            "--config",
            str(config),
            "--kubeconfig",
            str(kubeconfig),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "KUBECONFIG": ""},
        )
        main_url, ops_url = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{metrics_port}"
        try:
            async with httpx.AsyncClient(base_url=ops_url, timeout=HANG_BACKSTOP) as ops:
                deadline = time.monotonic() + HANG_BACKSTOP
                while True:
                    try:
                        if (await ops.get("/readyz")).status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    assert proc.returncode is None, "extender exited early"
                    assert time.monotonic() < deadline, "extender never became ready on its ops port"
                    await asyncio.sleep(0.1)
                assert (await ops.get("/healthz")).text == "ok"
                assert "koordpy_extender_watch_restarts_total" in (await ops.get("/metrics")).text
                assert (await ops.post("/filter", content=FILTER, headers=JSON)).status_code == 404
                async with httpx.AsyncClient(base_url=main_url, timeout=HANG_BACKSTOP) as main:
                    result = orjson.loads((await main.post("/filter", content=FILTER, headers=JSON)).content)
                assert result["NodeNames"] == ["n1"]
        finally:
            proc.send_signal(signal.SIGTERM)
            _, stderr = await asyncio.wait_for(proc.communicate(), HANG_BACKSTOP)
        assert proc.returncode in (0, -signal.SIGTERM), stderr.decode()[-2000:]
        events = [json.loads(line)["event"] for line in stderr.decode().splitlines() if line.startswith("{")]
        assert sum(e.startswith("Uvicorn running on") for e in events) == 2
        assert sum(e.startswith("Finished server process") for e in events) == 2
        assert await refused(main_url) and await refused(ops_url)


def test_a_port_override_equal_to_metrics_port_exits_2(tmp_path: Path) -> None:
    app = typer.Typer(pretty_exceptions_enable=False)

    @app.callback()
    def main() -> None:
        pass

    extender_cli.register(app)
    config = tmp_path / "scheduler.yaml"
    config.write_text("apiVersion: koordpy.io/v1alpha1\nkind: SchedulerConfiguration\nextender:\n  metricsPort: 9000\n")
    result = CliRunner().invoke(app, ["extender", "--config", str(config), "--port", "9000"])
    assert result.exit_code == 2
    assert "--port: must differ from extender.metricsPort (9000)" in result.output
