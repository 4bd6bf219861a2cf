"""The start-up check of the uvicorn internals the fast path stands on, and the fallback when one changed:
real uvicorn on loopback, real HTTP, the real ``koordpy extender`` process against the API emulator.

A uvicorn release is played by a copy of the installed uvicorn package with one private name renamed
throughout its httptools protocol (``pipeline``, an attribute only the inline verbs read;
``_unset_keepalive_if_required``, a method only they call; ``send_400_response``, a callback the listener
limits override), put first on the extender process's
``PYTHONPATH``: uvicorn itself works as before, koordpy's subclasses meet a name they do not know. The
extender then answers ``/filter``, ``/prioritize`` and ``/bind`` through the ASGI app with the answers the
fast path gives, logs one warning naming the name, and ``koordpy_extender_fast_path`` is 0. Without the
check the first of these releases answers every ``/filter`` with 400 while ``/healthz`` says ok (shown
below: the failure the check exists for).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import orjson
import pytest

from koordpy.scheduler.extender.fastpath import ATTRIBUTES, METHODS, check_protocols, missing_names
from koordpy_testkit import NodeBuilder, NodeMetricBuilder, PodBuilder
from koordpy_testkit.apiserver import ApiServerEmulator, running_apiserver, write_kubeconfig
from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.processes import free_port
from koordpy_testkit.uvicorn_release import uvicorn_release

JSON = {"Content-Type": "application/json"}
LAUNCH = (
    "import typer\n"
    "from koordpy.cli import extender\n"
    "app = typer.Typer(pretty_exceptions_enable=False)\n"
    "@app.callback()\n"
    "def main() -> None: pass\n"
    "extender.register(app)\n"
    "app()\n"
)
# The inline protocol served without the start-up check (what the extender did before it had one).
UNCHECKED = (
    "import sys, uvloop\n"
    "from pathlib import Path\n"
    "from koordpy.cli.connection import require_connection\n"
    "from koordpy.cli.scheduler import load_scheduler_config\n"
    "from koordpy.kube.client import ApiClient\n"
    "from koordpy.scheduler.extender.server import build_extender, build_servers, serve_all\n"
    "config = load_scheduler_config(Path(sys.argv[1]))\n"
    "extender = build_extender(config, ApiClient(require_connection(sys.argv[2])))\n"
    "e = config.extender\n"
    "servers = build_servers(extender, e.host, e.port, metrics_host=e.metrics_host, metrics_port=e.metrics_port,"
    " mode='inline')\n"
    "uvloop.run(serve_all(servers))\n"
)


# -- in-process: the check against the installed uvicorn ----------------------------------------------


async def test_the_installed_uvicorn_passes_the_check() -> None:
    assert missing_names() == []
    check = await check_protocols()
    assert (check.mode, check.problems, check.fast_path) == ("inline", (), True)


def test_the_names_checked_are_those_uvicorn_has_today() -> None:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    assert [m for m in METHODS if not callable(getattr(HttpToolsProtocol, m, None))] == []
    assert len(METHODS) + len(ATTRIBUTES) >= 25


async def test_a_missing_module_is_named_and_served_by_h11(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn.protocols.http.httptools_impl", None)
    check = await check_protocols()
    assert check.mode == "standard" and "uvicorn.protocols.http.httptools_impl cannot be imported" in check.problems[0]


# -- a uvicorn release that renamed one private name ----------------------------------------------------


POD = PodBuilder("web-1", namespace="shop").requests(cpu="2", memory="1Gi").build()
FILTER = orjson.dumps({"Pod": POD, "Nodes": None, "NodeNames": ["cold", "warm", "hot"]})
PRIORITIZE = orjson.dumps({"Pod": POD, "Nodes": None, "NodeNames": ["cold", "warm"]})
BIND = orjson.dumps({"PodName": "web-1", "PodNamespace": "shop", "PodUID": POD["metadata"]["uid"], "Node": "cold"})


def seed(api: ApiServerEmulator) -> None:
    for name, cpu in (("cold", "2"), ("warm", "12"), ("hot", "30")):
        api.seed(NodeBuilder(name).allocatable(cpu="32", memory="128Gi", pods="110").build())
        api.seed(NodeMetricBuilder(name).updated(time.time() - 10).usage(cpu=cpu, memory="8Gi").build())
    api.seed(POD)


@dataclass
class Served:
    verbs: httpx.AsyncClient
    ops: httpx.AsyncClient
    api: ApiServerEmulator
    stderr: list[str]


@asynccontextmanager
async def extender_process(tmp_path: Path, pythonpath: Path | None, script: str = LAUNCH) -> AsyncIterator[Served]:
    """``koordpy extender`` (or ``script``) as a process against the API emulator, ready; stopped by SIGTERM."""
    async with running_apiserver(bookmark_interval=0.2) as api:
        seed(api)
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url, token="test")
        port, metrics_port = free_port(), free_port()
        config = tmp_path / "scheduler.yaml"
        config.write_text(
            "apiVersion: koordpy.io/v1alpha1\nkind: SchedulerConfiguration\n"
            f"extender:\n  port: {port}\n  metricsPort: {metrics_port}\n  metricsHost: 127.0.0.1\n"
        )
        args = ["extender", "--config", str(config), "--kubeconfig", str(kubeconfig)]
        if script is not LAUNCH:
            args = [str(config), str(kubeconfig)]
        env = {**os.environ, "KUBECONFIG": ""}
        if pythonpath is not None:
            env["PYTHONPATH"] = str(pythonpath)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", script, *args, stderr=asyncio.subprocess.PIPE, env=env
        )
        stderr: list[str] = []
        try:
            async with (
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=HANG_BACKSTOP) as verbs,
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{metrics_port}", timeout=HANG_BACKSTOP) as ops,
            ):
                deadline = time.monotonic() + HANG_BACKSTOP
                while True:
                    try:
                        if (await ops.get("/readyz")).status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    assert proc.returncode is None, "extender exited early"
                    assert time.monotonic() < deadline, "extender never became ready"
                    await asyncio.sleep(0.1)
                yield Served(verbs, ops, api, stderr)
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(proc.communicate(), HANG_BACKSTOP)
            stderr.extend(err.decode().splitlines())


def log_events(lines: list[str]) -> list[dict[str, object]]:
    return [json.loads(line) for line in lines if line.startswith("{")]


def gauge(metrics: str) -> float:
    return next(
        float(line.split()[1]) for line in metrics.splitlines() if line.startswith("koordpy_extender_fast_path ")
    )


async def verbs_answered(served: Served) -> dict[str, object]:
    filtered = await served.verbs.post("/filter", content=FILTER, headers=JSON)
    prioritized = await served.verbs.post("/prioritize", content=PRIORITIZE, headers=JSON)
    bound = await served.verbs.post("/bind", content=BIND, headers=JSON)
    assert [r.status_code for r in (filtered, prioritized, bound)] == [200, 200, 200], [
        (r.status_code, r.text[:200]) for r in (filtered, prioritized, bound)
    ]
    metrics = (await served.ops.get("/metrics")).text
    async with httpx.AsyncClient(base_url=served.api.url, timeout=HANG_BACKSTOP) as api:
        pod = (await api.get("/api/v1/namespaces/shop/pods/web-1", headers={"Authorization": "Bearer test"})).json()
    return {
        "filter": orjson.loads(filtered.content),
        "prioritize": orjson.loads(prioritized.content),
        "bind": orjson.loads(bound.content),
        "gauge": gauge(metrics),
        "bound_to": pod["spec"].get("nodeName"),
    }


@pytest.fixture(scope="module")
def fast_path_answers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """What the installed uvicorn's fast path answers, for comparison."""

    async def run() -> dict[str, object]:
        async with extender_process(tmp_path_factory.mktemp("fast"), None) as served:
            return await verbs_answered(served)

    return asyncio.run(run())


@pytest.mark.parametrize(
    ("old", "new", "mode"),
    [
        ("pipeline", "queued_cycles", "asgi"),
        ("_unset_keepalive_if_required", "_unset_keepalive", "asgi"),
        ("send_400_response", "answer_400", "asgi on uvicorn's h11 protocol, no read-time bound"),
    ],
)
async def test_a_uvicorn_that_renamed_an_internal_is_served_through_the_fallback(
    tmp_path: Path, fast_path_answers: dict[str, object], old: str, new: str, mode: str
) -> None:
    overlay = uvicorn_release(tmp_path / "site", old, new)
    async with extender_process(tmp_path, overlay) as served:
        answers = await verbs_answered(served)
    assert fast_path_answers["gauge"] == 1
    assert answers["gauge"] == 0
    for verb in ("filter", "prioritize", "bind"):
        assert answers[verb] == fast_path_answers[verb], verb
    assert answers["filter"]["NodeNames"] == ["cold", "warm"]  # type: ignore[index]  # hot: 30 of 32 cpu
    assert answers["bind"] == {"Error": ""} and answers["bound_to"] == "cold"
    events = log_events(served.stderr)
    off = [e for e in events if e["event"] == "extender.fast_path_off"]
    assert len(off) == 1 and off[0]["level"] == "warning" and off[0]["serving"] == mode, events[:5]
    assert any(old in problem for problem in off[0]["problems"]), off[0]  # type: ignore[attr-defined]
    assert not [e for e in events if e["event"] == "extender.fast_path"]
    assert not [e for e in events if "Invalid HTTP request" in str(e["event"])]


async def test_the_fast_path_logs_that_it_serves(tmp_path: Path, fast_path_answers: dict[str, object]) -> None:
    async with extender_process(tmp_path, None) as served:
        assert gauge((await served.ops.get("/metrics")).text) == 1
    fast = [e for e in log_events(served.stderr) if str(e["event"]).startswith("extender.fast_path")]
    assert [(e["event"], e["level"], e["serving"]) for e in fast] == [("extender.fast_path", "info", "inline")]


async def test_without_the_check_that_release_answers_every_filter_400(tmp_path: Path) -> None:
    overlay = uvicorn_release(tmp_path / "site", "pipeline", "queued_cycles")
    async with extender_process(tmp_path, overlay, script=UNCHECKED) as served:
        answers = [await served.verbs.post("/filter", content=FILTER, headers=JSON) for _ in range(3)]
        assert [a.status_code for a in answers] == [400, 400, 400]
        assert (await served.verbs.get("/healthz")).status_code == 200  # while health says ok
        assert (await served.ops.get("/readyz")).status_code == 200
