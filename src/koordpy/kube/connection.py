"""Connection settings (server URL, credentials, TLS) for :class:`koordpy.kube.client.ApiClient`.

Credentials are loaded by the official ``kubernetes`` package's kubeconfig and in-cluster loaders (so
every kubeconfig form they understand works: tokens, client certificates, exec/auth-provider plugins,
basic auth, ``insecure-skip-tls-verify``, ``tls-server-name``), then turned into plain values that
aiohttp can use. The header that renews (:mod:`koordpy.kube.credentials`) is
:attr:`ConnectionInfo.credentials`: the in-cluster token file and a kubeconfig user's ``tokenFile`` are
re-read, an ``exec`` plugin is run again; everything else is fixed.

Not supported: client certificates and auth-provider plugins that renew (read once). Proxies from the
kubeconfig (``proxy-url``) are recorded but not used.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from koordpy.kube.credentials import Credentials, CredentialSource, ExecPlugin, TokenFile

__all__ = ["ConnectionInfo", "kubeconfig_source", "load_connection", "write_kubeconfig"]

_SERVICE_HOST_ENV = "KUBERNETES_SERVICE_HOST"


@dataclass(frozen=True)
class ConnectionInfo:
    """Everything needed to open HTTP(S) connections to one API server.

    ``authorization`` is the full ``Authorization`` header value (``Bearer ...`` or ``Basic ...``) as
    loaded; ``credentials`` is where every client takes the header from (it renews a token file or an
    exec plugin's credential; fixed ``authorization`` otherwise), shared by all clients of this
    connection. ``ca_file``/``cert_file``/``key_file`` are file paths (the kubernetes loader writes
    inline data to temporary files). ``verify`` False disables server certificate checks.
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
    credentials: Credentials = field(default=None, compare=False, repr=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.credentials is None:
            object.__setattr__(self, "credentials", Credentials.fixed(self.authorization))

    @property
    def is_tls(self) -> bool:
        return self.server.startswith("https://")

    def headers(self) -> dict[str, str]:
        """Request headers other than ``Authorization`` (that one comes from :attr:`credentials`)."""
        return {k: v for k, v in self.extra_headers.items() if k.lower() != "authorization"}

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


def _from_configuration(cfg: Any, source: CredentialSource | None = None) -> ConnectionInfo:
    api_key = getattr(cfg, "api_key", {}) or {}
    authorization = api_key.get("BearerToken") or api_key.get("authorization")
    if authorization and not str(authorization).lower().startswith(("bearer ", "basic ")):
        authorization = f"Bearer {authorization}"
    header = str(authorization) if authorization else None
    if header is not None and header.lower().startswith("bearer "):
        header = "Bearer " + header[len("bearer ") :]  # the in-cluster loader writes "bearer"
    credentials = (
        Credentials.fixed(header)
        if source is None
        # a token file was just read by the loader; an exec plugin is run again for its expiry
        else Credentials(source, initial=header, loaded=isinstance(source, TokenFile))
    )
    return ConnectionInfo(
        server=str(cfg.host).rstrip("/"),
        authorization=header,
        credentials=credentials,
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
        # The loader reads the token once; Credentials re-reads the file (try_refresh_token only
        # serves the kubernetes package's own client).
        from kubernetes.config import incluster_config

        k8s_config.load_incluster_config(client_configuration=cfg, try_refresh_token=False)  # type: ignore[no-untyped-call]
        return _from_configuration(cfg, TokenFile(Path(incluster_config.SERVICE_TOKEN_FILENAME)))
    path: str
    if kubeconfig is not None:
        path = os.fspath(kubeconfig)
    else:
        path = os.environ.get("KUBECONFIG") or str(Path("~/.kube/config").expanduser())
    k8s_config.load_kube_config(config_file=path, context=context, client_configuration=cfg, persist_config=False)  # type: ignore[no-untyped-call]
    return _from_configuration(cfg, kubeconfig_source(path, context))


def kubeconfig_source(path: str, context: str | None = None) -> CredentialSource | None:
    """The renewable credential of the kubeconfig's user (``tokenFile`` or ``exec``), or None (fixed).

    ``path`` may list several files (``os.pathsep``): a named entry is taken from the first file that has
    it, ``current-context`` from the first file that sets it (client-go's merge rules). A relative
    ``tokenFile`` or exec ``command`` is resolved against the directory of the file that names it."""
    import yaml

    named: dict[str, dict[str, tuple[Mapping[str, Any], Path]]] = {"clusters": {}, "users": {}, "contexts": {}}
    current: str | None = None
    for one in (p for p in path.split(os.pathsep) if p):
        try:
            doc = yaml.safe_load(Path(one).expanduser().read_text(encoding="utf-8"))
        except OSError:
            continue
        if not isinstance(doc, Mapping):
            continue
        current = current or (str(doc["current-context"]) if doc.get("current-context") else None)
        base = Path(one).expanduser().resolve().parent
        for section, key in (("clusters", "cluster"), ("users", "user"), ("contexts", "context")):
            for entry in doc.get(section) or ():
                if isinstance(entry, Mapping) and isinstance(entry.get(key), Mapping):
                    named[section].setdefault(str(entry.get("name")), (entry[key], base))
    chosen = named["contexts"].get(context or current or "")
    if chosen is None:
        return None
    user = named["users"].get(str(chosen[0].get("user")))
    if user is None:
        return None
    entry, base = user
    if entry.get("tokenFile"):
        return TokenFile(base / os.path.expanduser(str(entry["tokenFile"])))
    if isinstance(entry.get("exec"), Mapping):
        cluster = named["clusters"].get(str(chosen[0].get("cluster")))
        return ExecPlugin.from_kubeconfig(entry["exec"], base, _exec_cluster(cluster[0]) if cluster else None)
    return None


def _exec_cluster(cluster: Mapping[str, Any]) -> dict[str, Any]:
    """``spec.cluster`` of an ExecCredential (client-go's field names) from a kubeconfig cluster entry."""
    out: dict[str, Any] = {"server": cluster.get("server", "")}
    for kube_name, exec_name in (
        ("certificate-authority-data", "certificate-authority-data"),
        ("insecure-skip-tls-verify", "insecure-skip-tls-verify"),
        ("tls-server-name", "tls-server-name"),
        ("proxy-url", "proxy-url"),
    ):
        if kube_name in cluster:
            out[exec_name] = cluster[kube_name]
    extensions = cluster.get("extensions") or ()
    for ext in extensions:
        if isinstance(ext, Mapping) and ext.get("name") == "client.authentication.k8s.io/exec":
            out["config"] = ext.get("extension")
    return out


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
