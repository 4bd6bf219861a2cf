"""The fault proxy itself, in front of the real kube-apiserver (TLS on both sides): it forwards requests and
watch streams unchanged, and each fault reaches the client as the tests that use it assume."""

from __future__ import annotations

import threading

import httpx
import pytest
from cluster_kit import Components, Space, wait_until

from koordpy_testkit.controlplane import ControlPlane
from koordpy_testkit.faultproxy import FaultProxy, conflict, lost_response, too_many_requests, watch_gone

pytestmark = pytest.mark.cluster


def client(control_plane: ControlPlane, proxy: FaultProxy) -> httpx.Client:
    """The admin, through the proxy, trusting the control plane's CA (the proxy serves its certificate)."""
    return httpx.Client(
        base_url=proxy.url,
        verify=control_plane.tls(),
        headers={"Authorization": f"Bearer {control_plane.admin_token}"},
        timeout=60,
    )


def configmap(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}


def test_faults_reach_the_client_as_kube_apiserver_would_send_them(
    control_plane: ControlPlane, koordpy: Components, space: Space
) -> None:
    proxy = koordpy.api_proxy()
    path = f"/api/v1/namespaces/{space.namespace}/configmaps"
    with client(control_plane, proxy) as api, control_plane.client() as direct:
        assert api.get(path).status_code == 200  # forwarded as is

        proxy.inject(too_many_requests(3), verbs=["list"], resource="configmaps")
        throttled = api.get(path)
        assert (throttled.status_code, throttled.headers["Retry-After"]) == (429, "3")
        assert throttled.json()["details"] == {"retryAfterSeconds": 3}
        assert api.get(path).status_code == 200  # count 1: spent

        proxy.inject(conflict(), verbs=["create"], resource="configmaps")
        assert api.post(path, json=configmap("refused")).status_code == 409
        assert direct.get(f"{path}/refused").status_code == 404  # answered by the proxy: never forwarded

        proxy.inject(lost_response(), verbs=["create"], resource="configmaps")
        with pytest.raises(httpx.RemoteProtocolError):
            api.post(path, json=configmap("written"))
        assert direct.get(f"{path}/written").status_code == 200  # forwarded: the write happened
        assert api.post(path, json=configmap("written")).status_code == 409  # a retry meets AlreadyExists

        proxy.inject(watch_gone(), verbs=["watch"], resource="configmaps")
        with api.stream("GET", path, params={"watch": "1", "resourceVersion": "1"}) as gone:
            lines = [line for line in gone.iter_lines() if line]
        assert gone.status_code == 200 and len(lines) == 1
        assert '"type":"ERROR"' in lines[0] and '"code":410' in lines[0]

    recorded = [
        (e.method, e.call.verb if e.call else None, e.status, e.upstream_status, str(e.fault or ""))
        for e in proxy.exchanges()
    ]
    assert recorded == [
        ("GET", "list", 200, 200, ""),
        ("GET", "list", 429, None, "429 Retry-After 3"),
        ("GET", "list", 200, 200, ""),
        ("POST", "create", 409, None, "409"),
        ("POST", "create", None, 201, "lost_response"),
        ("POST", "create", 409, 409, ""),
        ("GET", "watch", 200, None, "watch_gone"),
    ]


def test_a_watch_is_streamed_until_the_proxy_cuts_it(
    control_plane: ControlPlane, koordpy: Components, space: Space
) -> None:
    proxy = koordpy.api_proxy()
    path = f"/api/v1/namespaces/{space.namespace}/configmaps"
    events: list[str] = []
    ended: list[str] = []

    def watch() -> None:
        try:
            with client(control_plane, proxy) as api, api.stream("GET", path, params={"watch": "1"}) as resp:
                for line in resp.iter_lines():
                    if line:
                        events.append(line)
            ended.append("clean end")
        except httpx.HTTPError as exc:
            ended.append(type(exc).__name__)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    wait_until("the watch open through the proxy", lambda: proxy.open_watches("configmaps") == 1)
    with control_plane.client() as direct:
        assert direct.post(path, json=configmap("seen")).status_code == 201
    wait_until("the event streamed through", lambda: any('"name":"seen"' in e for e in events))
    assert proxy.cut_watches("configmaps") == 1
    watcher.join(60)
    assert ended == ["RemoteProtocolError"]  # cut mid-stream, not ended as the server ends a watch
    assert proxy.open_watches() == 0


def test_a_cut_holds_everything_and_the_restore_delivers_only_what_the_client_still_waits_for(
    control_plane: ControlPlane, koordpy: Components, space: Space
) -> None:
    """During a cut nothing reaches the server and no answer comes back, a watch included; once restored,
    the create whose client still waits is forwarded and answered, the one whose client gave up (its
    connection closed) is dropped, and the watch goes on with the event it missed."""
    proxy = koordpy.api_proxy()
    path = f"/api/v1/namespaces/{space.namespace}/configmaps"
    events: list[str] = []

    def watch() -> None:
        with client(control_plane, proxy) as api, api.stream("GET", path, params={"watch": "1"}) as resp:
            for line in resp.iter_lines():
                if line:
                    events.append(line)
                if any('"name":"waited"' in e for e in events):
                    return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    wait_until("the watch open through the proxy", lambda: proxy.open_watches("configmaps") == 1)
    answers: list[httpx.Response] = []
    with control_plane.client() as direct:
        proxy.cut()

        def create_and_wait() -> None:
            with client(control_plane, proxy) as api:
                answers.append(api.post(path, json=configmap("waited")))

        patient = threading.Thread(target=create_and_wait, daemon=True)
        patient.start()
        impatient = httpx.Client(
            base_url=proxy.url,
            verify=control_plane.tls(),
            headers={"Authorization": f"Bearer {control_plane.admin_token}"},
            timeout=0.5,
        )
        with impatient, pytest.raises(httpx.TimeoutException):
            impatient.post(path, json=configmap("given-up"))
        wait_until("both creates held", lambda: sum(p == path for _, p, _ in proxy.in_flight()) == 2)
        assert direct.post(path, json=configmap("behind-the-cut")).status_code == 201  # the watch would see it
        assert [direct.get(f"{path}/{n}").status_code for n in ("waited", "given-up")] == [404, 404]
        assert not any('"name":"behind-the-cut"' in e for e in events)
        proxy.restore()
        patient.join(60)
        watcher.join(60)
        assert [a.status_code for a in answers] == [201]
        assert [direct.get(f"{path}/{n}").status_code for n in ("waited", "given-up")] == [200, 404]
    assert any('"name":"behind-the-cut"' in e for e in events)  # delivered late, not lost
    dropped = [e for e in proxy.exchanges() if e.fault is not None and e.fault.kind == "cut"]
    assert [(e.method, e.upstream_status) for e in dropped] == [("POST", None)]
