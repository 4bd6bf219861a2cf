"""Connection loading through the official kubernetes loaders, then used by ApiClient against the emulator."""

from __future__ import annotations

from pathlib import Path

import pytest

from koordpy.kube.client import ApiClient
from koordpy.kube.connection import ConnectionInfo, load_connection, write_kubeconfig
from koordpy.kube.resources import NODES
from koordpy_testkit.apiserver import ApiServerEmulator


async def test_kubeconfig_file_written_by_the_test_authenticates(apiserver: ApiServerEmulator, tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "kubeconfig", apiserver.url, token="agent")
    conn = load_connection(path)
    assert conn.server == apiserver.url
    assert conn.authorization == "Bearer agent"
    async with ApiClient.from_kubeconfig(str(path)) as client:
        await client.create(NODES, {"metadata": {"name": "n1"}})
    assert [(r["user"], r["verb"], r["resource"]) for r in apiserver.requests] == [("agent", "create", "nodes")]


async def test_kubeconfig_from_env_and_explicit_context(
    apiserver: ApiServerEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "config"
    path.write_text(
        f"""
apiVersion: v1
kind: Config
clusters:
- name: emu
  cluster: {{server: "{apiserver.url}"}}
- name: elsewhere
  cluster: {{server: "https://10.0.0.1:6443", insecure-skip-tls-verify: true}}
users:
- name: manager
  user: {{token: manager-token}}
- name: other
  user: {{username: admin, password: secret}}
contexts:
- name: emu
  context: {{cluster: emu, user: manager}}
- name: far
  context: {{cluster: elsewhere, user: other}}
current-context: emu
"""
    )
    monkeypatch.setenv("KUBECONFIG", str(path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    conn = load_connection()
    assert (conn.server, conn.authorization) == (apiserver.url, "Bearer manager-token")
    async with ApiClient(conn) as client:
        assert (await client.list(NODES)).items == []
    assert apiserver.requests[-1]["user"] == "manager-token"  # unmapped tokens are their own user name

    far = load_connection(path, context="far")
    assert far.server == "https://10.0.0.1:6443" and far.verify is False and far.is_tls
    assert far.authorization is not None and far.authorization.startswith("Basic ")
    ctx = far.ssl_context()
    assert not isinstance(ctx, bool) and ctx.check_hostname is False


def test_in_cluster_files_are_used_when_no_kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kubernetes.config import incluster_config

    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("sa-token")
    ca.write_text("not really a certificate")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.delenv("KUBECONFIG", raising=False)
    conn = load_connection()
    assert conn.server == "https://10.96.0.1:443"
    assert conn.authorization == "Bearer sa-token"
    assert conn.credentials.description == f"token file {token}"  # re-read: it is kubelet's projected token
    assert conn.ca_file == str(ca)
    assert load_connection(in_cluster=True) == conn


def test_connection_for_url_headers() -> None:
    conn = ConnectionInfo.for_url("http://127.0.0.1:1/", "t")
    assert conn.headers() == {}  # the Authorization header comes from the credentials, per request
    assert conn.credentials.current() == "Bearer t" and conn.credentials.description == "kubeconfig credentials"
    assert ConnectionInfo.for_url("http://127.0.0.1:1").credentials.current() is None
    assert ConnectionInfo.for_url("http://127.0.0.1:1").ssl_context() is True


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    import subprocess

    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


async def test_tls_with_the_kubeconfig_certificate_authority(tmp_path: Path) -> None:
    import ssl

    from koordpy.kube import errors

    cert, key = _self_signed(tmp_path)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    emulator = ApiServerEmulator(ssl_context=server_ctx)
    url = await emulator.start()
    try:
        assert url.startswith("https://127.0.0.1:")
        trusted = write_kubeconfig(tmp_path / "kc", url, token="agent", certificate_authority=cert)
        async with ApiClient.from_kubeconfig(str(trusted)) as client:
            await client.create(NODES, {"metadata": {"name": "n1"}})
        untrusted = write_kubeconfig(tmp_path / "kc-no-ca", url, token="agent")
        async with ApiClient.from_kubeconfig(str(untrusted)) as client:
            with pytest.raises(errors.ApiConnectionError, match="certificate"):
                await client.get(NODES, "n1")
    finally:
        await emulator.close()
    assert [r["verb"] for r in emulator.requests] == ["create"]
