"""BindingClient: the extender's lean ``pods/binding`` call, against the API emulator and hand-made servers."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import orjson
import pytest

from koordpy.kube import errors
from koordpy.kube.binder import BindingClient
from koordpy.kube.client import ApiClient
from koordpy.kube.connection import ConnectionInfo
from koordpy.kube.resources import PODS
from koordpy_testkit.apiserver import ApiServerEmulator


def pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


async def test_binds_like_the_api_client_and_raises_the_same_errors(
    apiserver: ApiServerEmulator, api_client: ApiClient
) -> None:
    binder = BindingClient(api_client.connection)
    try:
        created = await api_client.create(PODS, pod("p"))
        uid = created["metadata"]["uid"]
        with pytest.raises(errors.Conflict):  # the uid precondition
            await binder.create_binding("default", "p", "not-the-uid", "n1")
        answer = await binder.create_binding("default", "p", uid, "n1", annotations={"example.com/a": "1"})
        assert answer["status"] == "Success"
        bound = await api_client.get(PODS, "p", "default")
        assert bound["spec"]["nodeName"] == "n1"
        assert next(c for c in bound["status"]["conditions"] if c["type"] == "PodScheduled")["status"] == "True"
        with pytest.raises(errors.Conflict):  # already bound
            await binder.create_binding("default", "p", uid, "n2")
        with pytest.raises(errors.NotFound):
            await binder.create_binding("default", "ghost", None, "n1")
        bindings = [r for r in apiserver.requests if r["subresource"] == "binding"]
        assert [r["name"] for r in bindings] == ["p", "p", "p", "ghost"]
    finally:
        await binder.close()


async def test_keeps_one_connection_for_requests_one_after_another(api_client: ApiClient) -> None:
    binder = BindingClient(api_client.connection)
    try:
        for i in range(5):
            created = await api_client.create(PODS, pod(f"p{i}"))
            await binder.create_binding("default", f"p{i}", created["metadata"]["uid"], "n1")
        assert len(binder._idle) == 1
        # concurrent requests open their own connections and keep them (up to max_idle)
        names = [f"q{i}" for i in range(4)]
        uids = [(await api_client.create(PODS, pod(n)))["metadata"]["uid"] for n in names]
        await asyncio.gather(*(binder.create_binding("default", n, u, "n1") for n, u in zip(names, uids, strict=True)))
        assert 1 <= len(binder._idle) <= 4 and binder._open == len(binder._idle)
    finally:
        await binder.close()
    assert not binder._idle
    with pytest.raises(errors.ApiConnectionError):
        await binder.create_binding("default", "late", None, "n1")


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Any]


@asynccontextmanager
async def raw_server(handler: Handler) -> AsyncIterator[ConnectionInfo]:
    """A server running ``handler`` per connection; every connection is closed by the end of the block
    (a handler that returns on the client's close would leave its side open past the event loop)."""
    writers: list[asyncio.StreamWriter] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        try:
            result = handler(reader, writer)
            if inspect.isawaitable(result):
                await result
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield ConnectionInfo(server=f"http://127.0.0.1:{port}", authorization="Bearer t0ken")
    finally:
        server.close()
        for writer in writers:
            writer.close()
        await asyncio.gather(*(w.wait_closed() for w in writers), return_exceptions=True)
        await server.wait_closed()


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    return head, await reader.readexactly(length)


async def test_reads_chunked_answers_and_sends_credentials() -> None:
    seen: list[tuple[bytes, bytes]] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await read_request(reader))
        payload = b'{"kind":"Status","status":"Success"}'
        writer.write(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        writer.write(b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (10, payload[:10], len(payload) - 10, payload[10:]))
        await writer.drain()
        writer.close()

    async with raw_server(handler) as connection:
        binder = BindingClient(connection)
        answer = await binder.create_binding("ns", "p", "u-1", "n1")
        await binder.close()
    assert answer == {"kind": "Status", "status": "Success"}
    head, body = seen[0]
    assert head.startswith(b"POST /api/v1/namespaces/ns/pods/p/binding HTTP/1.1\r\n")
    assert b"Authorization: Bearer t0ken\r\n" in head
    assert orjson.loads(body) == {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p", "namespace": "ns", "uid": "u-1"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
    }


async def test_a_connection_the_server_closed_is_not_reused_and_errors_keep_their_kind() -> None:
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await read_request(reader)
        if connections == 2:
            body = b'{"kind":"Status","code":429,"reason":"TooManyRequests","message":"slow down"}'
            head = b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nContent-Length: %d\r\n\r\n" % len(body)
        elif connections == 3:
            writer.close()  # closed before any answer
            return
        else:
            body = b"{}"
            head = b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n"
        writer.write(head + body)
        await writer.drain()
        writer.close()  # no "Connection: close": the client must notice the close by itself

    async with raw_server(handler) as connection:
        binder = BindingClient(connection)
        try:
            assert await binder.create_binding("ns", "a", None, "n1") == {}
            await asyncio.sleep(0.05)  # the close arrives
            with pytest.raises(errors.TooManyRequests) as limited:
                await binder.create_binding("ns", "b", None, "n1")
            assert limited.value.retry_after == 3
            await asyncio.sleep(0.05)
            with pytest.raises(errors.ApiConnectionError):
                await binder.create_binding("ns", "c", None, "n1")
            assert await binder.create_binding("ns", "d", None, "n1") == {}
        finally:
            await binder.close()
    assert connections == 4


async def test_refused_connections_are_connection_errors() -> None:
    async with raw_server(lambda r, w: w.close()) as connection:
        pass  # the port is free again
    binder = BindingClient(connection)
    with pytest.raises(errors.ApiConnectionError, match="connect"):
        await binder.create_binding("ns", "p", None, "n1")
    await binder.close()


def test_falls_back_to_the_api_client_behind_a_proxy() -> None:
    direct = ConnectionInfo(server="https://10.0.0.1:6443")
    proxied = ConnectionInfo(server="https://10.0.0.1:6443", proxy="http://proxy:3128")
    fallback = ApiClient(proxied)
    assert isinstance(BindingClient.for_connection(direct, ApiClient(direct)), BindingClient)
    assert BindingClient.for_connection(proxied, fallback) is fallback
    with pytest.raises(ValueError, match="expected http"):
        BindingClient(ConnectionInfo(server="unix:///var/run/k8s.sock"))


async def test_at_most_max_connections_are_open_and_waiters_get_released_ones() -> None:
    opened = 0
    busy = 0
    most_busy = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal opened, busy, most_busy
        opened += 1
        try:
            while True:  # keep-alive: one request after another on this connection
                await read_request(reader)
                busy += 1
                most_busy = max(most_busy, busy)
                await asyncio.sleep(0.02)
                busy -= 1
                writer.write(b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}")
                await writer.drain()
        except asyncio.IncompleteReadError:
            writer.close()

    async with raw_server(handler) as connection:
        binder = BindingClient(connection, max_connections=2)
        try:
            answers = await asyncio.gather(*(binder.create_binding("ns", f"p{i}", None, "n1") for i in range(7)))
            assert answers == [{}] * 7
            assert opened == 2 and most_busy == 2 and binder._open == 2 and len(binder._idle) == 2
            # a request that gives up while waiting for a connection takes nothing with it
            blockers = [asyncio.ensure_future(binder.create_binding("ns", f"b{i}", None, "n1")) for i in range(2)]
            await asyncio.sleep(0)  # both connections in use
            assert not binder._idle
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.005):
                    await binder.create_binding("ns", "impatient", None, "n1")
            await asyncio.gather(*blockers)
            assert await binder.create_binding("ns", "after", None, "n1") == {}
            assert opened == 2 and binder._open == 2 and not binder._waiting
        finally:
            await binder.close()
    with pytest.raises(ValueError, match="max_connections"):
        BindingClient(connection, max_connections=0)
