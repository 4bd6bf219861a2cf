"""The official ``kubernetes`` client (sync, in a thread) against the emulator: lists, reads, the legacy
``bindings`` collection, a watch, and a 409 surfacing as its own ApiException."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import kubernetes

from koordpy_testkit.apiserver import ApiServerEmulator, write_kubeconfig


def _run_official(kubeconfig: Path) -> dict[str, Any]:
    cfg = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(str(kubeconfig), client_configuration=cfg)
    out: dict[str, Any] = {}
    with kubernetes.client.ApiClient(cfg) as api:
        v1 = kubernetes.client.CoreV1Api(api)
        out["nodes"] = [n.metadata.name for n in v1.list_node().items]
        out["uid"] = v1.read_namespaced_pod("p1", "default").metadata.uid
        binding = kubernetes.client.V1Binding(
            metadata=kubernetes.client.V1ObjectMeta(name="p1"),
            target=kubernetes.client.V1ObjectReference(api_version="v1", kind="Node", name="n1"),
        )
        # The API server answers a binding with a Status, which the client cannot decode as a V1Binding
        # (a long-standing client issue, real servers included): read the raw response instead.
        raw = v1.create_namespaced_binding("default", binding, _preload_content=False)
        out["bind_status"] = json.loads(raw.data)["status"]
        try:
            v1.create_namespaced_binding("default", binding)
        except kubernetes.client.exceptions.ApiException as exc:
            out["second_bind"] = exc.status
        watch = kubernetes.watch.Watch()
        out["events"] = [
            (ev["type"], ev["object"].metadata.name, ev["object"].spec.node_name)
            for ev in watch.stream(v1.list_namespaced_pod, "default", timeout_seconds=1)
        ]
    return out


async def test_official_client_reads_binds_and_watches(apiserver: ApiServerEmulator, tmp_path: Path) -> None:
    apiserver.seed(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}},
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p1", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        },
    )
    kubeconfig = write_kubeconfig(tmp_path / "kc", apiserver.url, token="kube-scheduler")
    out = await asyncio.to_thread(_run_official, kubeconfig)
    assert out["nodes"] == ["n1"]
    assert out["uid"] == apiserver.state.objects[("", "pods")][("default", "p1")]["metadata"]["uid"]
    assert out["bind_status"] == "Success"
    assert out["second_bind"] == 409
    assert out["events"] == [("ADDED", "p1", "n1")]
    calls = [(r["user"], r["verb"], r["resource"], r["subresource"]) for r in apiserver.requests]
    assert calls == [
        ("kube-scheduler", "list", "nodes", None),
        ("kube-scheduler", "get", "pods", None),
        ("kube-scheduler", "create", "bindings", None),
        ("kube-scheduler", "create", "bindings", None),
        ("kube-scheduler", "watch", "pods", None),
    ]
