"""The verbs answered inside the HTTP protocol (``inline.py``) against the ASGI path, over real sockets.

Each test serves the same cluster twice, once with the inline protocol and once through the ASGI app,
sends both the same bytes and compares status and body byte for byte; ``answered_inline`` shows which
path a request took.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest

from koordpy.scheduler.extender.inline import InlineVerbProtocol
from koordpy_testkit import PodBuilder
from koordpy_testkit.bounds import HANG_BACKSTOP, eventually

Running = Any
"""conftest's ``Running``: an extender served on a loopback port."""
Make = Callable[..., Awaitable[Running]]

NODES = [f"node-{i}" for i in range(6)]


def feed(running: Running) -> None:
    # cpu usage 8 + 4i of 32 cores; node-3..5 are over the 65 % threshold with the pod's 1.7-core estimate:
    # node-3: (20 + 1.7) / 32 = 68 % > 65
    for i, name in enumerate(NODES):
        running.node(name)
        running.metric(name, cpu=str(8 + 4 * i), memory="10Gi")


async def served(make_ext: Make, inline: bool) -> Running:
    running = await make_ext(inline=inline, maxRequestBytes=64 * 1024)
    feed(running)
    return running


def port(running: Running) -> int:
    return int(running.url.rsplit(":", 1)[1])


def args(names: list[str] | None = None) -> bytes:
    pod = PodBuilder("p", "default").requests(cpu="2", memory="1Gi").build()
    pod["metadata"]["uid"] = "uid-p"
    return orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": NODES if names is None else names})


def request(path: str, body: bytes, *headers: bytes, chunked: bool = False) -> bytes:
    head = [b"POST " + path.encode() + b" HTTP/1.1", b"host: 127.0.0.1", *headers]
    if not any(h.lower().startswith(b"content-type:") for h in headers):
        head.append(b"content-type: application/json")
    if chunked:
        head.append(b"transfer-encoding: chunked")
        half = len(body) // 2
        payload = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:half], body[half:])) + b"0\r\n\r\n"
    else:
        head.append(b"content-length: %d" % len(body))
        payload = body
    return b"\r\n".join(head) + b"\r\n\r\n" + payload


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[bytes, bytes], bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HANG_BACKSTOP)
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    headers = dict(line.lower().split(b": ", 1) for line in lines[1:] if line)
    body = await asyncio.wait_for(reader.readexactly(int(headers[b"content-length"])), HANG_BACKSTOP)
    return status, headers, body


async def exchange(
    running: Running, *requests: bytes, close: bool = True
) -> list[tuple[int, dict[bytes, bytes], bytes]]:
    """Send the requests in one write (pipelined when several), read one response each."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port(running))
    try:
        writer.write(b"".join(requests))
        await writer.drain()
        return [await read_response(reader) for _ in requests]
    finally:
        if close:
            writer.close()


async def both(make_ext: Make, *requests: bytes) -> tuple[list[tuple[int, bytes]], list[tuple[int, bytes]], int]:
    """(inline answers, ASGI answers, requests the inline server answered inline)."""
    out: list[list[tuple[int, bytes]]] = []
    counted = 0
    for inline in (True, False):
        running = await served(make_ext, inline)
        before = InlineVerbProtocol.answered_inline
        answers = await exchange(running, *requests)
        if inline:
            counted = InlineVerbProtocol.answered_inline - before
        out.append([(status, body) for status, _, body in answers])
    return out[0], out[1], counted


async def test_filter_then_prioritize_answers_equal_the_asgi_path(make_ext: Make) -> None:
    inline, asgi, counted = await both(make_ext, request("/filter", args()), request("/prioritize", args(NODES[:3])))
    assert inline == asgi
    assert counted == 2
    assert inline[0][0] == 200
    result = orjson.loads(inline[0][1])
    assert result["NodeNames"] == NODES[:3]  # node-3..5 over the threshold (worked in ``feed``)
    assert set(result["FailedNodes"]) == set(NODES[3:])
    assert [row["Host"] for row in orjson.loads(inline[1][1])] == NODES[:3]


async def test_a_kept_alive_connection_answers_one_request_after_another(make_ext: Make) -> None:
    running = await served(make_ext, True)
    reader, writer = await asyncio.open_connection("127.0.0.1", port(running))
    try:
        before = InlineVerbProtocol.answered_inline
        for _ in range(3):
            writer.write(request("/filter", args()))
            status, headers, _ = await read_response(reader)
            assert status == 200
            assert b"connection" not in headers
        assert InlineVerbProtocol.answered_inline == before + 3
    finally:
        writer.close()


async def test_connection_close_is_answered_then_closed(make_ext: Make) -> None:
    running = await served(make_ext, True)
    reader, writer = await asyncio.open_connection("127.0.0.1", port(running))
    try:
        writer.write(request("/filter", args(), b"connection: close"))
        status, headers, _ = await read_response(reader)
        assert (status, headers[b"connection"]) == (200, b"close")
        assert await asyncio.wait_for(reader.read(10), HANG_BACKSTOP) == b""
    finally:
        writer.close()


async def test_a_chunked_body_is_read_whole(make_ext: Make) -> None:
    inline, asgi, counted = await both(make_ext, request("/filter", args(), chunked=True))
    assert inline == asgi
    assert (counted, inline[0][0]) == (1, 200)


async def test_a_chunked_body_over_the_bound_is_413_and_the_connection_stays_usable(make_ext: Make) -> None:
    big = args([f"node-{i:05d}-" + "x" * 40 for i in range(2000)])  # ~100 KB > the 64 KiB bound
    inline, asgi, counted = await both(make_ext, request("/filter", big, chunked=True), request("/filter", args()))
    assert [status for status, _ in inline] == [413, 200]
    assert inline == asgi
    assert counted == 2


async def test_a_declared_length_over_the_bound_goes_the_asgi_way(make_ext: Make) -> None:
    big = args([f"node-{i:05d}-" + "x" * 40 for i in range(2000)])
    inline, asgi, counted = await both(make_ext, request("/filter", big))
    assert inline == asgi
    assert (counted, inline[0][0]) == (0, 413)


async def test_a_wrong_content_type_goes_the_asgi_way(make_ext: Make) -> None:
    inline, asgi, counted = await both(make_ext, request("/prioritize", args(), b"content-type: text/plain"))
    assert inline == asgi
    assert (counted, inline[0][0]) == (0, 415)


async def test_pipelined_requests_are_answered_in_order(make_ext: Make) -> None:
    sent = [request("/filter", args()), request("/healthz", b""), request("/prioritize", args(NODES[:2]))]
    sent[1] = b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n"
    running = await served(make_ext, True)
    answers = await exchange(running, *sent)
    assert [status for status, _, _ in answers] == [200, 200, 200]
    assert "NodeNames" in orjson.loads(answers[0][2])
    assert answers[1][2] == b"ok"
    assert [row["Host"] for row in orjson.loads(answers[2][2])] == NODES[:2]


async def test_expect_100_continue_goes_the_asgi_way(make_ext: Make) -> None:
    running = await served(make_ext, True)
    before = InlineVerbProtocol.answered_inline
    reader, writer = await asyncio.open_connection("127.0.0.1", port(running))
    try:
        body = args()
        head = request("/filter", b"", b"expect: 100-continue").rsplit(b"content-length: 0", 1)[0]
        writer.write(head + b"content-length: %d\r\n\r\n" % len(body))
        assert (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HANG_BACKSTOP)).startswith(b"HTTP/1.1 100")
        writer.write(body)
        status, _, answer = await read_response(reader)
    finally:
        writer.close()
    assert status == 200
    assert orjson.loads(answer)["NodeNames"] == NODES[:3]
    assert InlineVerbProtocol.answered_inline == before


async def test_other_paths_and_methods_go_the_asgi_way(make_ext: Make) -> None:
    running = await served(make_ext, True)
    before = InlineVerbProtocol.answered_inline
    get_filter = b"GET /filter HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n"
    answers = await exchange(running, get_filter, request("/filter?x=1", args()))
    assert [status for status, _, _ in answers] == [405, 200]
    assert InlineVerbProtocol.answered_inline == before


def bind_body(name: str = "p", uid: str = "uid-p") -> bytes:
    return orjson.dumps({"PodName": name, "PodNamespace": "default", "PodUID": uid, "Node": NODES[0]})


async def until(check: Callable[[], bool], what: str) -> None:
    await eventually(check, what, interval=0.01)


async def test_bind_answers_equal_the_asgi_path(make_ext: Make) -> None:
    inline, asgi, counted = await both(make_ext, request("/bind", bind_body()), request("/bind", b"{"))
    assert inline == asgi
    assert counted == 1  # the second, pipelined behind a bind in flight, queued and went the ASGI way
    assert inline[0] == (200, b'{"Error":""}')
    assert inline[1][0] == 400


async def test_a_request_pipelined_behind_a_held_bind_is_answered_after_it(make_ext: Make) -> None:
    running = await served(make_ext, True)
    running.binder.gate = asyncio.Event()
    reader, writer = await asyncio.open_connection("127.0.0.1", port(running))
    try:
        writer.write(request("/bind", bind_body()) + request("/filter", args()))
        await until(lambda: running.binder.calls != [], "the bind reached the binder")
        running.binder.gate.set()
        first = await read_response(reader)
        second = await read_response(reader)
    finally:
        writer.close()
    assert (first[0], first[2]) == (200, b'{"Error":""}')  # the bind's reply comes first although it was slower
    assert second[0] == 200
    assert orjson.loads(second[2])["NodeNames"] == NODES[:3]


async def test_the_client_closing_during_a_bind_sets_the_services_gone_event(make_ext: Make) -> None:
    running = await served(make_ext, True)
    service = running.extender.service
    seen: list[asyncio.Event] = []

    async def finish_bind(bind: Any, gone: asyncio.Event | None = None) -> Any:
        assert gone is not None
        seen.append(gone)
        await gone.wait()
        return await original(bind, gone)

    original, service.finish_bind = service.finish_bind, finish_bind
    _, writer = await asyncio.open_connection("127.0.0.1", port(running))
    writer.write(request("/bind", bind_body()))
    await until(lambda: seen != [], "the bind reached the service")
    assert not seen[0].is_set()
    writer.close()
    await until(seen[0].is_set, "gone set after the client closed")


async def test_a_bind_in_flight_at_shutdown_is_answered_then_the_connection_closed(make_ext: Make) -> None:
    running = await served(make_ext, True)
    running.binder.gate = asyncio.Event()
    reader, writer = await asyncio.open_connection("127.0.0.1", port(running))
    try:
        writer.write(request("/bind", bind_body()))
        await until(lambda: running.binder.calls != [], "the bind reached the binder")
        running.server.should_exit = True
        # uvicorn closes its listeners, then asks each connection to shut down, in one step
        await until(lambda: not any(server.is_serving() for server in running.server.servers), "shutdown begun")
        running.binder.gate.set()
        status, headers, body = await read_response(reader)
        assert (status, body, headers[b"connection"]) == (200, b'{"Error":""}', b"close")
        assert await asyncio.wait_for(reader.read(10), HANG_BACKSTOP) == b""
    finally:
        writer.close()


def pod_args(name: str, cpu: str, names: list[str]) -> bytes:
    pod = PodBuilder(name, "default").requests(cpu=cpu, memory="1Gi").build()
    pod["metadata"]["uid"] = f"uid-{name}"
    return orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})


async def test_a_bind_read_with_the_next_filter_counts_its_pod_in_that_filter(make_ext: Make) -> None:
    """kube-scheduler sends a pod's /bind from its binding goroutine and the next pod's /filter from its
    scheduling loop, on two connections; both can arrive in one read of the server's event loop. The bind's
    placement is recorded when its request is read, so the filter read with it counts the pod.
    node-2 (32 cores, 16 used, threshold 65 %): big (4 cpu, estimate 3.4) fits: (16 + 3.4) / 32 = 61 %;
    small (2 cpu, estimate 1.7) then does not: (16 + 3.4 + 1.7) / 32 = 65.9 %, rounds to 66 > 65."""
    running = await served(make_ext, True)
    running.binder.gate = asyncio.Event()  # the binding stays in flight: only the assumed placement counts
    first = await exchange(running, request("/filter", pod_args("big", "4", ["node-2"])))
    assert orjson.loads(first[0][2])["NodeNames"] == ["node-2"]
    alone = await exchange(running, request("/filter", pod_args("small", "2", ["node-2"])))
    assert orjson.loads(alone[0][2])["NodeNames"] == ["node-2"]  # without big, small fits: (16 + 1.7) / 32 = 55 %

    bind = orjson.dumps({"PodName": "big", "PodNamespace": "default", "PodUID": "uid-big", "Node": "node-2"})
    binding = await asyncio.open_connection("127.0.0.1", port(running))
    scheduling = await asyncio.open_connection("127.0.0.1", port(running))
    try:
        # both written before the server's loop runs again: it reads them in one go, the bind first
        binding[1].write(request("/bind", bind))
        scheduling[1].write(request("/filter", pod_args("small", "2", ["node-2"])))
        status, _, body = await read_response(scheduling[0])
        await until(lambda: running.binder.calls != [], "the bind reached the binder")
        running.binder.gate.set()
        bound = await read_response(binding[0])
    finally:
        binding[1].close()
        scheduling[1].close()
    assert status == 200
    answer = orjson.loads(body)
    assert answer["NodeNames"] == [] and list(answer["FailedNodes"]) == ["node-2"], answer
    assert (bound[0], bound[2]) == (200, b'{"Error":""}')


def bind_of(name: str, node: str) -> bytes:
    return orjson.dumps({"PodName": name, "PodNamespace": "default", "PodUID": f"uid-{name}", "Node": node})


@pytest.mark.parametrize("inline", [True, False], ids=["inline", "asgi"])
async def test_a_bind_that_arrives_after_the_next_filter_is_refused_when_its_node_is_full(
    make_ext: Make, inline: bool
) -> None:
    """kube-scheduler can answer the next pod's /filter before the last pod's /bind arrives: both filters
    pass node-2, and the second bind finds the room taken. It is refused (kube-scheduler retries the pod),
    and that pod's next filter fails the node. node-2 (32 cores, 16 used, threshold 65 %):
    big (4 cpu, estimate 3.4): (16 + 3.4) / 32 = 61 %; small (2 cpu, estimate 1.7) alone: 55 %;
    small after big: (16 + 3.4 + 1.7) / 32 = 65.9 %, rounds to 66 > 65."""
    running = await served(make_ext, inline)
    first, second = await exchange(
        running,
        request("/filter", pod_args("big", "4", ["node-2"])),
        request("/filter", pod_args("small", "2", ["node-2"])),
    )
    assert orjson.loads(first[2])["NodeNames"] == ["node-2"]
    assert orjson.loads(second[2])["NodeNames"] == ["node-2"]  # big's bind has not arrived yet

    (big,) = await exchange(running, request("/bind", bind_of("big", "node-2")))
    (small,) = await exchange(running, request("/bind", bind_of("small", "node-2")))
    assert (big[0], big[2]) == (200, b'{"Error":""}')
    assert small[0] == 200
    error = orjson.loads(small[2])["Error"]
    assert "default/small no longer fits node node-2: node(s) cpu usage exceed threshold" in error, error
    assert [call[1] for call in running.binder.calls] == ["big"]  # small was never bound
    metrics = (await running.http.get("/metrics")).text
    assert "koordpy_extender_binds_refused_total 1.0" in metrics
    assert 'koordpy_extender_requests_total{outcome="no_longer_fits",verb="bind"} 1.0' in metrics

    (again,) = await exchange(running, request("/filter", pod_args("small", "2", ["node-2"])))
    assert list(orjson.loads(again[2])["FailedNodes"]) == ["node-2"]


@pytest.mark.parametrize("inline", [True, False], ids=["inline", "asgi"])
async def test_a_bind_after_another_on_its_node_goes_through_while_the_node_has_room(
    make_ext: Make, inline: bool
) -> None:
    """Both filters pass node-2 before either bind, and both pods fit together:
    (16 + 1.7 + 1.7) / 32 = 60.6 %, rounds to 61 <= 65. The second bind is checked again and goes through."""
    running = await served(make_ext, inline)
    await exchange(
        running,
        request("/filter", pod_args("one", "2", ["node-2"])),
        request("/filter", pod_args("two", "2", ["node-2"])),
    )
    answers = [(await exchange(running, request("/bind", bind_of(name, "node-2"))))[0] for name in ("one", "two")]
    assert [(status, body) for status, _, body in answers] == [(200, b'{"Error":""}')] * 2
    assert [call[1] for call in running.binder.calls] == ["one", "two"]


async def test_a_bind_is_refused_only_for_want_of_room(make_ext: Make) -> None:
    """After both filters passed node-2 and one/bind recorded a placement there, node-2's NodeMetric goes
    an hour stale: two's bind is checked again and the node now fails as expired, which no placement
    caused, so the bind goes through (the next filter sees the expiry)."""
    running = await served(make_ext, True)
    await exchange(
        running,
        request("/filter", pod_args("one", "2", ["node-2"])),
        request("/filter", pod_args("two", "2", ["node-2"])),
    )
    (one,) = await exchange(running, request("/bind", bind_of("one", "node-2")))
    running.metric("node-2", cpu="16", memory="10Gi", age=3600)
    (two,) = await exchange(running, request("/bind", bind_of("two", "node-2")))
    assert [(one[0], one[2]), (two[0], two[2])] == [(200, b'{"Error":""}')] * 2
    (probe,) = await exchange(running, request("/filter", pod_args("three", "2", ["node-2"])))
    assert orjson.loads(probe[2])["FailedNodes"] == {"node-2": "node(s) nodeMetric expired"}
