"""The no-op extender of the throughput bench: it passes every node, scores nothing and binds with one call."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import httpx
import orjson

from koordpy.kube.client import ApiClient
from koordpy.kube.connection import ConnectionInfo
from koordpy.kube.resources import PODS
from koordpy_testkit.apiserver import running_apiserver, write_kubeconfig
from koordpy_testkit.noop_extender import filter_reply, serve

POD = {"metadata": {"name": "p", "namespace": "ns", "annotations": {"x": ',"NodeNames":["evil"]}'}}}


def test_filter_hands_back_the_names_it_was_sent() -> None:
    # as Go encodes ExtenderArgs: NodeNames is the last key
    body = orjson.dumps({"Pod": POD, "Nodes": None, "NodeNames": ["n1", "n2"]})
    assert orjson.loads(filter_reply(body)) == {"NodeNames": ["n1", "n2"]}
    assert orjson.loads(filter_reply(orjson.dumps({"Pod": POD, "Nodes": None, "NodeNames": []}))) == {"NodeNames": []}
    # another key order, or the full-object form: decoded
    assert orjson.loads(filter_reply(orjson.dumps({"NodeNames": ["n1"], "Pod": POD}))) == {"NodeNames": ["n1"]}
    items = {"items": [{"metadata": {"name": "n1"}}]}
    assert orjson.loads(filter_reply(orjson.dumps({"Pod": POD, "Nodes": items, "NodeNames": None}))) == {"Nodes": items}
    assert "Error" in orjson.loads(filter_reply(b"{not json"))
    assert "Error" in orjson.loads(filter_reply(b"[1]"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_serves_the_three_verbs_and_binds_through_the_api(tmp_path: Path) -> None:
    async with running_apiserver() as api:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url)
        async with ApiClient(ConnectionInfo.for_url(api.url)) as client:
            created = await client.create(
                PODS, {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": [{"name": "c"}]}}
            )
        port, stop = free_port(), asyncio.Event()
        server = asyncio.create_task(serve("127.0.0.1", port, str(kubeconfig), stop))
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
                for _ in range(100):
                    try:
                        if (await http.get("/healthz")).status_code == 200:
                            break
                    except httpx.TransportError:
                        await asyncio.sleep(0.05)
                args = {"Pod": POD, "Nodes": None, "NodeNames": ["n1", "n2"]}
                assert (await http.post("/filter", json=args)).json() == {"NodeNames": ["n1", "n2"]}
                assert (await http.post("/prioritize", json=args)).json() == []
                bind = {"PodName": "p", "PodNamespace": "ns", "PodUID": created["metadata"]["uid"], "Node": "n2"}
                assert (await http.post("/bind", json=bind)).json() == {"Error": ""}
                again = (await http.post("/bind", json=bind)).json()["Error"]
                assert again.startswith("binding failed: Conflict")
                assert (await http.post("/nothing", json={})).status_code == 404
        finally:
            stop.set()
            await server
        bound = [r for r in api.requests if r["subresource"] == "binding"]
        assert [(r["verb"], r["name"]) for r in bound] == [("create", "p"), ("create", "p")]
        async with ApiClient(ConnectionInfo.for_url(api.url)) as client:
            assert (await client.get(PODS, "p", "ns"))["spec"]["nodeName"] == "n2"
