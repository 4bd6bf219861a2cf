"""Credentials that renew, over real loopback HTTP: the API client and the binder against the emulator, which
answers 401 to any token outside ``accepted_tokens`` (a token revoked, as when its bound object is deleted).

A fake clock drives the one-minute re-read of token files, so nothing waits for it; the token files are
laid out as kubelet writes a projected volume (``..data`` swapped atomically).
"""

from __future__ import annotations

import io
import logging
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import structlog
from prometheus_client import CollectorRegistry

from koordpy.kube import errors
from koordpy.kube.binder import BindingClient
from koordpy.kube.client import ApiClient
from koordpy.kube.connection import ConnectionInfo, load_connection
from koordpy.kube.credentials import (
    TOKEN_RELOAD_SECONDS,
    Credentials,
    CredentialsWatch,
    ExecPlugin,
    TokenFile,
    register_credentials_metrics,
)
from koordpy.kube.resources import EVENTS, NODES, PODS
from koordpy.runtime.logging import configure_logging
from koordpy_testkit.apiserver import ApiServerEmulator
from koordpy_testkit.projected import ProjectedVolume


class Ticks:
    """Monotonic and wall clocks a test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.epoch = 1_800_000_000.0

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> float:
        return self.epoch

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.epoch += seconds


@pytest.fixture
def ticks() -> Ticks:
    return Ticks()


@pytest_asyncio.fixture
async def guarded(apiserver: ApiServerEmulator) -> AsyncIterator[ApiServerEmulator]:
    """The emulator accepting only the tokens a test issues."""
    apiserver.accepted_tokens = set()
    yield apiserver


def file_credentials(volume: ProjectedVolume, ticks: Ticks) -> Credentials:
    return Credentials(TokenFile(volume.path()), clock=ticks.monotonic, wall=ticks.wall)


def users(apiserver: ApiServerEmulator, resource: str) -> list[str]:
    return [r["user"] for r in apiserver.requests if r.get("resource") == resource]


def pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


async def test_a_token_file_is_read_again_once_a_minute_not_per_request(
    guarded: ApiServerEmulator, tmp_path: Path, ticks: Ticks
) -> None:
    """client-go's period (``transport/token_source.go``: one minute): 59 s after the read the copy in
    memory is sent, at 60 s the file is read again. Written as numbers, not as ``TOKEN_RELOAD_SECONDS``, so
    that a period of another length fails here."""
    volume = ProjectedVolume(tmp_path / "sa")
    volume.write(token="first")
    guarded.accepted_tokens = {"first", "second"}
    credentials = file_credentials(volume, ticks)
    async with ApiClient(ConnectionInfo(server=guarded.url, credentials=credentials)) as api:
        await api.list(NODES)
        volume.write(token="second")  # kubelet rotated the token; the old one still works
        ticks.advance(59)
        await api.list(NODES)  # younger than a minute: the copy in memory
        ticks.advance(1)
        await api.list(NODES)  # a minute old: read again
        await api.list(NODES)
    assert TOKEN_RELOAD_SECONDS == 60.0 and credentials.reload_seconds == 60.0
    assert users(guarded, "nodes") == ["first", "first", "second", "second"]
    assert (credentials.renewals, credentials.unauthorized, guarded.refused) == (1, 0, [])


async def test_a_401_reads_the_file_at_once_and_the_request_is_sent_once_more(
    guarded: ApiServerEmulator, tmp_path: Path, ticks: Ticks
) -> None:
    volume = ProjectedVolume(tmp_path / "sa")
    volume.write(token="old")
    guarded.accepted_tokens = {"old"}
    credentials = file_credentials(volume, ticks)
    registry = CollectorRegistry()
    register_credentials_metrics(registry, credentials)
    async with ApiClient(ConnectionInfo(server=guarded.url, credentials=credentials)) as api:
        await api.create(NODES, {"metadata": {"name": "n1"}})
        volume.write(token="new")
        guarded.accepted_tokens = {"new"}  # the old token's bound object is deleted: refused at once
        ticks.advance(1)  # well within the minute: only the 401 makes it read the file
        created = await api.create(NODES, {"metadata": {"name": "n2"}})
    assert created["metadata"]["name"] == "n2"
    assert guarded.refused == ["old"]
    assert users(guarded, "nodes") == ["old", "new"]  # the refused request never reached a handler
    assert registry.get_sample_value("koordpy_kube_unauthorized_total") == 1
    assert registry.get_sample_value("koordpy_kube_credentials_refused") == 0  # accepted since


async def test_credentials_that_stay_refused_are_sent_once_per_request_and_turn_not_ready(
    guarded: ApiServerEmulator, tmp_path: Path, ticks: Ticks
) -> None:
    volume = ProjectedVolume(tmp_path / "sa")
    volume.write(token="revoked")
    credentials = file_credentials(volume, ticks)
    registry = CollectorRegistry()
    register_credentials_metrics(registry, credentials)
    async with ApiClient(ConnectionInfo(server=guarded.url, credentials=credentials)) as api:
        with pytest.raises(errors.Unauthorized):
            await api.list(NODES)
        assert guarded.refused == ["revoked"]  # read again after the 401, nothing newer: not sent twice
        assert registry.get_sample_value("koordpy_kube_credentials_refused") == 1
        ticks.advance(59)
        assert credentials.not_ready(60) is None
        ticks.advance(1)
        reason = credentials.not_ready(60)
        assert reason is not None and str(volume.path()) in reason and "60 s" in reason
        with pytest.raises(errors.Unauthorized):
            await api.list(NODES)  # the minute's re-read finds the same token
        volume.write(token="fresh")  # kubelet writes a token the API server accepts
        guarded.accepted_tokens = {"fresh"}
        assert (await api.list(NODES)).items == []  # refused once more, then read at once and sent again
    assert guarded.refused == ["revoked", "revoked", "revoked"]
    assert registry.get_sample_value("koordpy_kube_unauthorized_total") == 3
    assert registry.get_sample_value("koordpy_kube_credentials_refused") == 0
    assert credentials.not_ready(60) is None


async def test_the_binder_retries_a_refused_binding_once_with_the_new_token_and_caches_its_head(
    guarded: ApiServerEmulator, tmp_path: Path, ticks: Ticks, monkeypatch: pytest.MonkeyPatch
) -> None:
    volume = ProjectedVolume(tmp_path / "sa")
    volume.write(token="old")
    guarded.accepted_tokens = {"old", "admin"}
    credentials = file_credentials(volume, ticks)
    reads = 0
    read = TokenFile.read

    def counted(self: TokenFile) -> str:
        nonlocal reads
        reads += 1
        return read(self)

    monkeypatch.setattr(TokenFile, "read", counted)
    async with ApiClient(ConnectionInfo.for_url(guarded.url, "admin")) as admin:
        uids = {n: (await admin.create(PODS, pod(n)))["metadata"]["uid"] for n in ("a", "b", "c", "d")}
        binder = BindingClient(ConnectionInfo(server=guarded.url, credentials=credentials))
        try:
            await binder.create_binding("default", "a", uids["a"], "n1")
            await binder.create_binding("default", "b", uids["b"], "n1")
            assert reads == 1  # once at first use, never per bind
            volume.write(token="new")
            guarded.accepted_tokens = {"new", "admin"}
            await binder.create_binding("default", "c", uids["c"], "n1")
            assert reads == 2  # the 401 made it read the file
            guarded.accepted_tokens = {"admin"}  # the new one revoked too, and nothing newer in the file
            with pytest.raises(errors.Unauthorized):
                await binder.create_binding("default", "d", uids["d"], "n1")
        finally:
            await binder.close()
        bound = {n: (await admin.get(PODS, n, "default"))["spec"].get("nodeName") for n in uids}
    assert bound == {"a": "n1", "b": "n1", "c": "n1", "d": None}
    bindings = [r["user"] for r in guarded.requests if r.get("subresource") == "binding"]
    assert bindings == ["old", "old", "new"]  # a refused request is never handled: the binding was not made
    assert guarded.refused == ["old", "new"]  # d: refused, the file re-read, nothing newer: no retry
    assert credentials.unauthorized == 2 and credentials.refused


async def test_a_token_file_that_cannot_be_read_keeps_the_last_good_token_and_is_tried_every_10_s(
    guarded: ApiServerEmulator, tmp_path: Path, ticks: Ticks
) -> None:
    volume = ProjectedVolume(tmp_path / "sa")
    volume.write(token="good")
    guarded.accepted_tokens = {"good"}
    credentials = file_credentials(volume, ticks)
    async with ApiClient(ConnectionInfo(server=guarded.url, credentials=credentials)) as api:
        await api.list(NODES)
        (tmp_path / "sa" / "..data").unlink()  # the volume half gone: the file cannot be read
        ticks.advance(TOKEN_RELOAD_SECONDS)
        await api.list(NODES)  # the read fails: the last good token goes on
        assert credentials.last_error is not None and "token" in credentials.last_error
        guarded.accepted_tokens = set()  # and now it is refused too: one request, no read per 401
        for _ in range(3):
            with pytest.raises(errors.Unauthorized):
                await api.list(NODES)
        volume.write(token="back")
        guarded.accepted_tokens = {"back"}
        ticks.advance(9)
        with pytest.raises(errors.Unauthorized):
            await api.list(NODES)  # still within 10 s of the failed read
        ticks.advance(1)
        await api.list(NODES)  # read again: the new token, and the request sent once more
    assert guarded.refused == ["good"] * 4  # three, then the one within 10 s: each sent once
    assert users(guarded, "nodes") == ["good", "good", "back"]
    assert credentials.last_error is None and credentials.current() == "Bearer back"


def plugin_script(tmp_path: Path) -> Path:
    """An exec plugin that hands out ``token-N`` (N counts its runs) valid for 300 s from the epoch in
    ``epoch.txt``, and records ``KUBERNETES_EXEC_INFO`` and its ``PLUGIN_GREETING`` env."""
    script = tmp_path / "plugin.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import datetime, json, os, pathlib
            here = pathlib.Path({str(tmp_path)!r})
            runs = here / "runs"
            n = int(runs.read_text()) + 1 if runs.exists() else 1
            runs.write_text(str(n))
            (here / "exec-info.json").write_text(os.environ["KUBERNETES_EXEC_INFO"])
            (here / "greeting.txt").write_text(os.environ.get("PLUGIN_GREETING", ""))
            epoch = float((here / "epoch.txt").read_text())
            expiry = datetime.datetime.fromtimestamp(epoch + 300, datetime.timezone.utc)
            print(json.dumps({{
                "apiVersion": "client.authentication.k8s.io/v1",
                "kind": "ExecCredential",
                "status": {{"token": f"token-{{n}}", "expirationTimestamp": expiry.strftime("%Y-%m-%dT%H:%M:%SZ")}},
            }}))
            """
        )
    )
    return script


async def test_an_exec_plugin_runs_again_when_its_credential_expires_and_after_a_401(
    guarded: ApiServerEmulator, tmp_path: Path, ticks: Ticks
) -> None:
    script = plugin_script(tmp_path)
    (tmp_path / "epoch.txt").write_text(str(ticks.epoch))
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        textwrap.dedent(
            f"""
            apiVersion: v1
            kind: Config
            clusters: [{{name: emu, cluster: {{server: "{guarded.url}"}}}}]
            users:
            - name: plugin
              user:
                exec:
                  apiVersion: client.authentication.k8s.io/v1
                  command: {sys.executable}
                  args: ["{script}"]
                  env: [{{name: PLUGIN_GREETING, value: hello}}]
                  interactiveMode: Never
                  provideClusterInfo: true
            contexts: [{{name: emu, context: {{cluster: emu, user: plugin}}}}]
            current-context: emu
            """
        )
    )
    loaded = load_connection(kubeconfig)
    assert loaded.credentials.description == f"exec plugin {sys.executable}"
    assert isinstance(loaded.credentials.source, ExecPlugin)
    credentials = Credentials(loaded.credentials.source, clock=ticks.monotonic, wall=ticks.wall)
    guarded.accepted_tokens = {f"token-{n}" for n in range(1, 10)}
    async with ApiClient(ConnectionInfo(server=guarded.url, credentials=credentials)) as api:
        await api.list(NODES)
        await api.list(NODES)
        ticks.advance(299)
        await api.list(NODES)  # still valid
        ticks.advance(1)
        (tmp_path / "epoch.txt").write_text(str(ticks.epoch))
        await api.list(NODES)  # expired: the plugin runs again
        runs_before_revoke = int((tmp_path / "runs").read_text())
        guarded.accepted_tokens.discard((credentials.current() or "").removeprefix("Bearer "))
        await api.list(NODES)  # 401: the plugin runs again and the request is sent once more
    # one run by the kubernetes loader (load_connection), then ours: first use, expiry, the 401
    assert runs_before_revoke == 3
    assert int((tmp_path / "runs").read_text()) == 4
    tokens = users(guarded, "nodes")
    assert tokens == ["token-2", "token-2", "token-2", "token-3", "token-4"]
    assert guarded.refused == ["token-3"]
    info = (tmp_path / "exec-info.json").read_text()
    assert '"interactive":false' in info and guarded.url in info  # provideClusterInfo hands over the server
    assert (tmp_path / "greeting.txt").read_text() == "hello"


async def test_a_kubeconfig_token_file_is_found_relative_to_the_kubeconfig(
    guarded: ApiServerEmulator, tmp_path: Path
) -> None:
    volume = ProjectedVolume(tmp_path / "secrets")
    volume.write(token="from-file")
    guarded.accepted_tokens = {"from-file"}
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        f"""
apiVersion: v1
kind: Config
clusters: [{{name: emu, cluster: {{server: "{guarded.url}"}}}}]
users: [{{name: sa, user: {{tokenFile: secrets/token}}}}]
contexts: [{{name: emu, context: {{cluster: emu, user: sa}}}}]
current-context: emu
"""
    )
    connection = load_connection(kubeconfig)
    assert connection.credentials.description == f"token file {tmp_path / 'secrets' / 'token'}"
    assert connection.credentials.current() == "Bearer from-file"
    assert connection.credentials.reload_seconds == 60.0  # the loader's credentials re-read it every minute
    async with ApiClient(connection) as api:
        assert (await api.list(NODES)).items == []


async def test_the_watch_logs_refusal_and_not_ready_and_posts_an_event_once_accepted_again(
    guarded: ApiServerEmulator, tmp_path: Path, ticks: Ticks
) -> None:
    stream = io.StringIO()
    root_handlers = logging.getLogger().handlers[:]
    configure_logging("info", stream)
    try:
        await check_watch(guarded, tmp_path, ticks)
    finally:
        structlog.reset_defaults()
        logging.getLogger().handlers[:] = root_handlers
    lines = stream.getvalue()
    assert '"event": "kube.credentials.refused"' in lines
    assert '"event": "kube.credentials.not_ready"' in lines and '"level": "error"' in lines
    assert '"event": "kube.credentials.recovered"' in lines


async def check_watch(guarded: ApiServerEmulator, tmp_path: Path, ticks: Ticks) -> None:
    volume = ProjectedVolume(tmp_path / "sa")
    volume.write(token="revoked")
    guarded.accepted_tokens = {"admin"}
    credentials = file_credentials(volume, ticks)
    async with (
        ApiClient(ConnectionInfo(server=guarded.url, credentials=credentials)) as api,
        ApiClient(ConnectionInfo.for_url(guarded.url, "admin")) as admin,
    ):
        await admin.create(PODS, pod("koordpy-agent-x"))
        watch = CredentialsWatch(
            credentials, 30.0, "koordpy-agent", post_event=api.create_event, pod=("default", "koordpy-agent-x")
        )
        with pytest.raises(errors.Unauthorized):
            await api.list(NODES)
        assert watch.check() is None
        ticks.advance(30)
        assert watch.check() is None  # not ready now; nothing can be posted with refused credentials
        await credentials.recheck()  # read again (still the revoked token)
        volume.write(token="fresh")
        guarded.accepted_tokens = {"fresh", "admin"}
        ticks.advance(9)
        await credentials.recheck()
        assert credentials.refused  # read again at most every 10 s while refused
        ticks.advance(1)
        await credentials.recheck()  # no request needed: the new token ends the refusal
        assert not credentials.refused and credentials.current() == "Bearer fresh"
        post = watch.check()
        assert post is not None
        await post
        events = (await admin.list(EVENTS, namespace="default")).items
    [event] = events
    assert (event["reason"], event["type"], event["involvedObject"]["name"]) == (
        "CredentialsRefused",
        "Warning",
        "koordpy-agent-x",
    )
    assert str(volume.path()) in event["message"] and "refusedNotReadySeconds" in event["message"]
