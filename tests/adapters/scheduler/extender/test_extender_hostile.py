"""Malformed and hostile requests: always a 4xx with a one-line reason or the protocol's Error, never a
500, and the server keeps answering afterwards."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

GOOD_POD = {"metadata": {"name": "p", "namespace": "default", "uid": "u1"}, "spec": {"containers": []}}

CASES: list[tuple[str, str, bytes, str]] = [
    # (id, verb, body, expected reason fragment)
    ("garbage", "filter", b"\x00\xff\xfe garbage {{{", "not valid JSON"),
    ("truncated", "filter", b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": ["a"', "not valid JSON"),
    ("array", "filter", b"[1, 2, 3]", "must be a JSON object"),
    ("string", "prioritize", b'"hello"', "must be a JSON object"),
    ("empty", "filter", b"", "not valid JSON"),
    ("missing-pod", "filter", b'{"Nodes": null, "NodeNames": ["a"]}', "Pod: required"),
    ("pod-number", "prioritize", b'{"Pod": 7, "NodeNames": ["a"]}', "Pod: required"),
    ("pod-nameless", "filter", b'{"Pod": {"metadata": {}}, "NodeNames": ["a"]}', "metadata.name"),
    (
        "pod-bad-quantity",
        "filter",
        orjson.dumps(
            {
                "Pod": {
                    "metadata": {"name": "p"},
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]},
                },
                "NodeNames": ["a"],
            }
        ),
        "Pod:",
    ),
    (
        "pod-containers-wrong-type",
        "filter",
        orjson.dumps({"Pod": {"metadata": {"name": "p"}, "spec": {"containers": "nope"}}, "NodeNames": ["a"]}),
        "Pod:",
    ),
    ("names-string", "filter", orjson.dumps({"Pod": GOOD_POD, "NodeNames": "n1"}), "NodeNames"),
    ("names-ints", "filter", orjson.dumps({"Pod": GOOD_POD, "NodeNames": ["n1", 5]}), "NodeNames[1]"),
    ("names-nested", "prioritize", orjson.dumps({"Pod": GOOD_POD, "NodeNames": [["n1"]]}), "NodeNames[0]"),
    ("names-objects", "filter", orjson.dumps({"Pod": GOOD_POD, "NodeNames": [{"a": 1}]}), "NodeNames[0]"),
    ("nodes-wrong", "filter", orjson.dumps({"Pod": GOOD_POD, "Nodes": [1], "NodeNames": None}), "Nodes"),
    ("nodes-nameless", "filter", orjson.dumps({"Pod": GOOD_POD, "Nodes": {"items": [{}]}}), "Nodes.items[0]"),
    ("deep-nesting", "filter", b"[" * 200_000 + b"]" * 200_000, "not valid JSON"),
    (
        "deep-in-pod",
        "filter",
        b'{"Pod": {"metadata": {"name": "p", "labels": ' + b'{"a":' * 5000 + b"1" + b"}" * 5000 + b"}}}",
        "",
    ),
    ("bind-empty", "bind", b"{}", "PodName: required"),
    ("bind-types", "bind", b'{"PodName": 1, "PodNamespace": "d", "PodUID": "u", "Node": "n"}', "PodName"),
    ("bind-no-node", "bind", b'{"PodName": "p", "PodNamespace": "d", "PodUID": "u"}', "Node: required"),
    ("bind-garbage", "bind", b"\xff" * 100, "not valid JSON"),
]


async def assert_alive(ext: Any) -> None:
    ext.node("n1")
    assert (await ext.http.get("/healthz")).status_code == 200
    resp = await ext.post("filter", {"Pod": GOOD_POD, "Nodes": None, "NodeNames": ["n1"]})
    assert resp.status_code == 200 and orjson.loads(resp.content)["NodeNames"] == ["n1"]


@pytest.mark.parametrize(("verb", "body", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
async def test_malformed_requests_get_a_4xx_with_a_reason(ext: Any, verb: str, body: bytes, fragment: str) -> None:
    ext.node("n1")
    resp = await ext.http.post(f"/{verb}", content=body, headers={"Content-Type": "application/json"})
    assert 400 <= resp.status_code < 500, resp.text
    reason = orjson.loads(resp.content)["Error"]
    assert fragment in reason
    assert "\n" not in reason
    await assert_alive(ext)


async def test_oversized_bodies_get_413(ext: Any) -> None:
    ext.node("n1")
    limit = ext.extender.service.settings.max_request_bytes
    big = b'{"Pod": {}, "NodeNames": ["' + b"x" * (limit + 10) + b'"]}'
    resp = await ext.http.post("/filter", content=big, headers={"Content-Type": "application/json"})
    assert resp.status_code == 413
    assert "maxRequestBytes" in orjson.loads(resp.content)["Error"]

    async def chunks() -> Any:  # no Content-Length: the limit applies while streaming
        for _ in range(limit // 65536 + 2):
            yield b" " * 65536

    resp = await ext.http.post("/prioritize", content=chunks(), headers={"Content-Type": "application/json"})
    assert resp.status_code == 413
    await assert_alive(ext)


async def test_wrong_content_type_gets_415(ext: Any) -> None:
    ext.node("n1")
    body = orjson.dumps({"Pod": GOOD_POD, "NodeNames": ["n1"]})
    for content_type in ("text/plain", "application/x-www-form-urlencoded"):
        resp = await ext.http.post("/filter", content=body, headers={"Content-Type": content_type})
        assert resp.status_code == 415
    resp = await ext.http.post("/bind", content=body)  # no Content-Type at all
    assert resp.status_code == 415
    await assert_alive(ext)


async def test_unknown_and_huge_name_lists_are_answered(ext: Any) -> None:
    ext.node("n1")
    names = ["n1"] + [f"ghost-{i}.example.internal" for i in range(100_000)]
    resp = await ext.post("filter", {"Pod": GOOD_POD, "Nodes": None, "NodeNames": names})
    assert resp.status_code == 200
    result = orjson.loads(resp.content)
    assert result["NodeNames"] == ["n1"]
    assert len(result["FailedNodes"]) == 100_000
    resp = await ext.post("prioritize", {"Pod": GOOD_POD, "Nodes": None, "NodeNames": names})
    assert orjson.loads(resp.content) == []  # n1 has no NodeMetric: score 0, left out like the ghosts
    await assert_alive(ext)


async def test_wrong_methods_and_paths(ext: Any) -> None:
    assert (await ext.http.get("/filter")).status_code == 405
    assert (await ext.http.post("/nope", json={})).status_code == 404
    assert (await ext.http.get("/debug/nodes/absent")).status_code == 404
    await assert_alive(ext)


async def test_non_http_garbage_on_the_socket(ext: Any) -> None:
    host, port = ext.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\xaa" * 500 + b"\r\n\r\n")
    await writer.drain()
    await reader.read(1000)  # uvicorn answers 400 or closes; either way it must not die
    writer.close()
    await assert_alive(ext)


async def test_an_internal_error_becomes_the_protocol_error(ext: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ext.node("n1")

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(ext.extender.state, "filter", broken)
    monkeypatch.setattr(ext.extender.state, "score", broken)
    resp = await ext.post("filter", {"Pod": GOOD_POD, "Nodes": None, "NodeNames": ["n1"]})
    assert resp.status_code == 200
    result = orjson.loads(resp.content)
    assert result["NodeNames"] is None and "internal error" in result["Error"]
    resp = await ext.post("prioritize", {"Pod": GOOD_POD, "Nodes": None, "NodeNames": ["n1"]})
    assert resp.status_code == 200 and orjson.loads(resp.content) == []
    metrics = (await ext.http.get("/metrics")).text
    assert 'koordpy_extender_requests_total{outcome="error",verb="filter"} 1.0' in metrics


async def test_an_exception_escaping_a_verb_is_answered_by_the_fast_path(
    ext: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The verbs catch everything themselves; should one ever raise, the fast path (in front of
    Starlette's routing) still answers the protocol's error shape, and the connection stays usable."""

    def escaping(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("escaped")

    fast = ext.extender.app.user_middleware[0].kwargs["service"]
    assert fast is ext.extender.service
    monkeypatch.setattr(ext.extender.service, "filter", escaping)
    monkeypatch.setattr(ext.extender.service, "prioritize", escaping)
    # the middleware bound the verbs when the app was built: rebuild its stack so it binds the broken ones
    ext.extender.app.middleware_stack = ext.extender.app.build_middleware_stack()
    resp = await ext.post("filter", {"Pod": GOOD_POD, "Nodes": None, "NodeNames": ["n1"]})
    assert resp.status_code == 200
    result = orjson.loads(resp.content)
    assert result["NodeNames"] is None and result["Error"] == "koordpy extender internal error: RuntimeError"
    resp = await ext.post("prioritize", {"Pod": GOOD_POD, "Nodes": None, "NodeNames": ["n1"]})
    assert resp.status_code == 200 and orjson.loads(resp.content) == []
    assert (await ext.http.get("/healthz")).status_code == 200
