"""Connection settings (server URL, credentials, TLS) for :class:`koordpy.kube.client.ApiClient`.

Credentials are loaded by the official ``kubernetes`` package's kubeconfig and in-cluster loaders (so
every kubeconfig form they understand works: tokens, client certificates, exec/auth-provider plugins
evaluated once, basic auth, ``insecure-skip-tls-verify``, ``tls-server-name``), then turned into plain
values that aiohttp can use.

Not supported: token refresh. The token is read once when :func:`load_connection` runs; a token that
expires (exec plugins, rotated service-account tokens) needs a new :class:`ConnectionInfo` and a new
client. Proxies from the kubeconfig (``proxy-url``) are recorded but not used.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ConnectionInfo", "load_connection", "write_kubeconfig"]

_SERVICE_HOST_ENV = "KUBERNETES_SERVICE_HOST"


@dataclass(frozen=True)
class ConnectionInfo:
    """Everything needed to open HTTP(S) connections to one API server.

    ``authorization`` is the full ``Authorization`` header value (``Bearer ...`` or ``Basic ...``).
    ``ca_file``/``cert_file``/``key_file`` are file paths (the kubernetes loader writes inline data to
    temporary files). ``verify`` False disables server certificate checks.
    """

    server: str
    authorization: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify: bool = True
    tls_server_name: str | None = None
    proxy: str | None = None
    extra_headers: dict[str, str] = field(default_factory=dict)

    @property
    def is_tls(self) -> bool:
        return self.server.startswith("https://")

    def headers(self) -> dict[str, str]:
        """Request headers carrying the credentials (empty when anonymous)."""
        headers = dict(self.extra_headers)
        if self.authorization:
            headers["Authorization"] = self.authorization
        return headers

    def ssl_context(self) -> ssl.SSLContext | bool:
        """What to pass to aiohttp as ``ssl=``: a context for https, True for plain http (unused)."""
        if not self.is_tls:
            return True
        ctx = ssl.create_default_context(cafile=self.ca_file) if self.ca_file else ssl.create_default_context()
        if not self.verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.cert_file:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx

    @classmethod
    def for_url(cls, server: str, token: str | None = None) -> ConnectionInfo:
        """A connection to ``server`` with an optional bearer token (tests, emulators)."""
        return cls(server=server.rstrip("/"), authorization=f"Bearer {token}" if token else None)


def _from_configuration(cfg: Any) -> ConnectionInfo:
    api_key = getattr(cfg, "api_key", {}) or {}
    authorization = api_key.get("BearerToken") or api_key.get("authorization")
    if authorization and not str(authorization).lower().startswith(("bearer ", "basic ")):
        authorization = f"Bearer {authorization}"
    return ConnectionInfo(
        server=str(cfg.host).rstrip("/"),
        authorization=str(authorization) if authorization else None,
        ca_file=getattr(cfg, "ssl_ca_cert", None) or None,
        cert_file=getattr(cfg, "cert_file", None) or None,
        key_file=getattr(cfg, "key_file", None) or None,
        verify=bool(getattr(cfg, "verify_ssl", True)),
        tls_server_name=getattr(cfg, "tls_server_name", None) or None,
        proxy=getattr(cfg, "proxy", None) or None,
    )


def load_connection(
    kubeconfig: str | os.PathLike[str] | None = None,
    *,
    context: str | None = None,
    in_cluster: bool | None = None,
) -> ConnectionInfo:
    """Load connection settings.

    Order: an explicit ``kubeconfig`` path; else ``in_cluster=True`` forces the service-account files;
    else ``$KUBECONFIG`` (colon-separated lists are merged by the kubernetes loader); else in-cluster when
    ``KUBERNETES_SERVICE_HOST`` is set and ``in_cluster`` is not False; else ``~/.kube/config``.
    Raises the kubernetes package's ``ConfigException`` (or OSError) when nothing usable is found.
    """
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config

    cfg = k8s_client.Configuration()
    if kubeconfig is None and (
        in_cluster or (in_cluster is None and not os.environ.get("KUBECONFIG") and os.environ.get(_SERVICE_HOST_ENV))
    ):
        k8s_config.load_incluster_config(client_configuration=cfg, try_refresh_token=False)  # type: ignore[no-untyped-call]
        return _from_configuration(cfg)
    path: str
    if kubeconfig is not None:
        path = os.fspath(kubeconfig)
    else:
        path = os.environ.get("KUBECONFIG") or str(Path("~/.kube/config").expanduser())
    k8s_config.load_kube_config(config_file=path, context=context, client_configuration=cfg, persist_config=False)  # type: ignore[no-untyped-call]
    return _from_configuration(cfg)


def write_kubeconfig(
    path: str | os.PathLike[str],
    server: str,
    token: str | None = None,
    *,
    user: str = "koordpy",
    certificate_authority: str | os.PathLike[str] | None = None,
) -> Path:
    """Write a minimal kubeconfig (one cluster, one user with an optional bearer token, one context).

    For tests and emulators. ``certificate_authority`` is a CA file path for an ``https://`` server.
    """
    import yaml

    user_entry: dict[str, Any] = {"token": token} if token else {}
    cluster: dict[str, Any] = {"server": server}
    if certificate_authority is not None:
        cluster["certificate-authority"] = os.fspath(certificate_authority)
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "koordpy", "cluster": cluster}],
        "users": [{"name": user, "user": user_entry}],
        "contexts": [{"name": "koordpy", "context": {"cluster": "koordpy", "user": user}}],
        "current-context": "koordpy",
        "preferences": {},
    }
    out = Path(path)
    out.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return out
