"""The emulator as its own OS process: prints its URL, serves seeds, records calls, stops on SIGTERM."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

from koordpy.kube.client import ApiClient
from koordpy.kube.connection import load_connection, write_kubeconfig
from koordpy.kube.resources import NODES, PODS
from koordpy_testkit.bounds import HANG_BACKSTOP


async def test_process_entry_point(tmp_path: Path) -> None:
    seed = tmp_path / "seed.yaml"
    seed.write_text(
        """
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: n1}, status: {allocatable: {cpu: "4"}}}
---
apiVersion: v1
kind: Pod
metadata: {name: p1, namespace: default}
spec: {nodeName: n1, containers: [{name: c}]}
status: {phase: Running}
"""
    )
    record = tmp_path / "calls.jsonl"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "koordpy_testkit.apiserver",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--record",
        str(record),
        "--seed",
        str(seed),
        "--token",
        "secret-1=koordpy-agent",
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), HANG_BACKSTOP)
        url = line.decode().strip()
        assert url.startswith("http://127.0.0.1:")
        kubeconfig = write_kubeconfig(tmp_path / "kc", url, token="secret-1")
        async with ApiClient(load_connection(kubeconfig)) as client:
            nodes = await client.list(NODES)
            assert [n["status"]["allocatable"]["cpu"] for n in nodes.items] == ["4"]
            pods = await client.list(PODS, field_selector="spec.nodeName=n1")
            assert [(p["metadata"]["name"], p["status"]["phase"]) for p in pods.items] == [("p1", "Running")]
            await client.evict("default", "p1", grace_period_seconds=0)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), HANG_BACKSTOP)
    assert code == 0
    calls = [json.loads(line) for line in record.read_text().splitlines()]
    assert [(c["user"], c["verb"], c["resource"], c["subresource"]) for c in calls] == [
        ("koordpy-agent", "list", "nodes", None),
        ("koordpy-agent", "list", "pods", None),
        ("koordpy-agent", "create", "pods", "eviction"),
    ]
