"""Credentials that renew: the ``Authorization`` header a process sends to the API server, kept fresh,
and a tally of what the API server made of it.

Where the header comes from, and when it is read again (client-go's rules):

- a **token file** (the in-cluster ServiceAccount token ``/var/run/secrets/kubernetes.io/serviceaccount/token``,
  a kubeconfig user's ``tokenFile``): re-read once the copy in memory is :data:`TOKEN_RELOAD_SECONDS`
  old, and at once after a 401 to a request sent with a copy read before it (client-go
  ``transport/token_source.go``: ``cachingTokenSource`` over ``fileTokenSource`` with a one-minute
  period, and ``ResetTokenOlderThan`` on 401). Kubelet rewrites a projected token once it is older than
  80 % of its lifetime or 24 h, by swapping the ``..data`` symlink of the volume (so a read sees the old
  file or the new one, never half of either); the API server keeps accepting the old token until it
  expires or the object it is bound to is deleted.
- an **exec plugin** (``users[].user.exec``): run again once its credential's
  ``status.expirationTimestamp`` has passed, and after a 401 (client-go
  ``plugin/pkg/client/auth/exec``). Only a token credential renews this way.
- anything else (a ``token`` or basic auth written in the kubeconfig, a client certificate, an
  auth-provider plugin): fixed for the life of the process.

Every client reports each answer it gets (:meth:`Credentials.observe`): a 401 is counted
(``koordpy_kube_unauthorized_total``), and the credentials count as refused
(``koordpy_kube_credentials_refused``) from a 401 to the newest header until the API server accepts a
request (any answer but 401) or the header is renewed. A client retries a request refused with 401
once, with the header :meth:`Credentials.renew` returns, when that differs from the one refused.

Not guaranteed: client certificates that renew (from an exec plugin or a file, they are loaded once);
an exec plugin that needs a terminal (``interactive`` is always false); thread safety (one event loop,
the metrics collector aside, which only reads).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from koordpy.runtime.logging import get_logger

__all__ = [
    "TOKEN_RELOAD_SECONDS",
    "CredentialError",
    "CredentialSource",
    "Credentials",
    "CredentialsCollector",
    "CredentialsWatch",
    "ExecPlugin",
    "FixedCredential",
    "TokenFile",
    "pod_from_env",
    "register_credentials_metrics",
]

TOKEN_RELOAD_SECONDS = 60.0
"""A token file is re-read once the copy in memory is this old (client-go: one minute)."""
RETRY_FAILED_LOAD_SECONDS = 10.0
"""After a failed read or plugin run (or a plugin's credential that had expired already), the last good
header is used this long before the next attempt, 401 or not; while the header is refused, the source is
read again this often."""
EXEC_TIMEOUT_SECONDS = 60.0
"""An exec plugin that has not answered by then is killed (the load fails)."""


def _log() -> Any:
    """The structured logger, bound at each use (so it follows ``configure_logging`` made later)."""
    return get_logger("koordpy.kube.credentials")


class CredentialError(Exception):
    """A token file or an exec plugin gave nothing usable."""


class CredentialSource(Protocol):
    """Where an ``Authorization`` header comes from."""

    @property
    def description(self) -> str:
        """For logs and Events: ``token file PATH``, ``exec plugin COMMAND``, ``kubeconfig credentials``."""
        ...

    @property
    def renewable(self) -> bool:
        """False: the header never changes (nothing is ever re-read)."""
        ...

    @property
    def periodic(self) -> bool:
        """True: re-read every :data:`TOKEN_RELOAD_SECONDS` (a file); False: only on expiry or a 401."""
        ...

    async def load(self) -> tuple[str | None, float | None]:
        """The header now and when it expires (wall-clock seconds; None: no expiry known)."""
        ...


@dataclass(frozen=True)
class FixedCredential:
    """A header that never changes (a token in the kubeconfig, basic auth, or none: a client certificate)."""

    header: str | None
    description: str = "kubeconfig credentials"
    renewable: bool = False
    periodic: bool = False

    async def load(self) -> tuple[str | None, float | None]:
        return self.header, None


@dataclass(frozen=True)
class TokenFile:
    """A bearer token in a file (a projected ServiceAccount token, a kubeconfig ``tokenFile``)."""

    path: Path
    renewable: bool = True
    periodic: bool = True

    @property
    def description(self) -> str:
        return f"token file {self.path}"

    async def load(self) -> tuple[str | None, float | None]:
        return self.read(), None

    def read(self) -> str:
        try:
            token = self.path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise CredentialError(f"{self.description}: {exc}") from exc
        if not token:
            raise CredentialError(f"{self.description}: empty")
        return f"Bearer {token}"


@dataclass(frozen=True)
class ExecPlugin:
    """A kubeconfig ``users[].user.exec`` credential plugin (``client.authentication.k8s.io`` ExecCredential)."""

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    api_version: str = "client.authentication.k8s.io/v1"
    cluster: Mapping[str, Any] | None = None
    """``spec.cluster`` handed to the plugin when the kubeconfig sets ``provideClusterInfo``."""
    timeout: float = EXEC_TIMEOUT_SECONDS
    renewable: bool = True
    periodic: bool = False

    @classmethod
    def from_kubeconfig(
        cls, spec: Mapping[str, Any], base_dir: Path, cluster: Mapping[str, Any] | None = None
    ) -> ExecPlugin:
        """From a kubeconfig ``exec`` entry. A relative ``command`` with a path separator is taken relative
        to the kubeconfig's directory (as client-go does); a bare name is looked up on ``PATH``."""
        command = str(spec.get("command") or "")
        if not command:
            raise CredentialError("exec plugin: command is empty")
        if os.sep in command and not os.path.isabs(command):
            command = str(base_dir / command)
        env = {str(e.get("name")): str(e.get("value", "")) for e in spec.get("env") or () if isinstance(e, Mapping)}
        return cls(
            command=command,
            args=tuple(str(a) for a in spec.get("args") or ()),
            env=env,
            api_version=str(spec.get("apiVersion") or "client.authentication.k8s.io/v1"),
            cluster=dict(cluster) if cluster is not None and spec.get("provideClusterInfo") else None,
        )

    @property
    def description(self) -> str:
        return f"exec plugin {self.command}"

    def exec_info(self) -> str:
        """``KUBERNETES_EXEC_INFO``: what the plugin is asked for."""
        spec: dict[str, Any] = {"interactive": False}
        if self.cluster is not None:
            spec["cluster"] = dict(self.cluster)
        return orjson.dumps({"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec}).decode()

    async def load(self) -> tuple[str | None, float | None]:
        env = {**os.environ, **self.env, "KUBERNETES_EXEC_INFO": self.exec_info()}
        try:
            proc = await asyncio.create_subprocess_exec(
                self.command,
                *self.args,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
            )
        except OSError as exc:
            raise CredentialError(f"{self.description}: {exc}") from exc
        try:
            async with asyncio.timeout(self.timeout):
                out, err = await proc.communicate()
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise CredentialError(f"{self.description}: no answer within {self.timeout:g} s") from None
        if proc.returncode != 0:
            tail = err.decode(errors="replace").strip().splitlines()[-1:] or [""]
            raise CredentialError(f"{self.description}: exit status {proc.returncode}: {tail[0][:300]}")
        return self.parse(out)

    def parse(self, out: bytes) -> tuple[str, float | None]:
        """The header and expiry of an ExecCredential the plugin printed."""
        try:
            doc = orjson.loads(out)
        except orjson.JSONDecodeError as exc:
            raise CredentialError(f"{self.description}: output is not JSON: {exc}") from None
        if not isinstance(doc, dict) or doc.get("kind") != "ExecCredential":
            raise CredentialError(f"{self.description}: output is not an ExecCredential")
        if doc.get("apiVersion") != self.api_version:
            raise CredentialError(
                f"{self.description}: answered apiVersion {doc.get('apiVersion')!r}, asked for {self.api_version!r}"
            )
        status = doc.get("status")
        token = status.get("token") if isinstance(status, dict) else None
        if not isinstance(token, str) or not token:
            raise CredentialError(f"{self.description}: no status.token (client certificates are not renewed)")
        expires: float | None = None
        stamp = status.get("expirationTimestamp") if isinstance(status, dict) else None
        if stamp is not None:
            try:
                parsed = dt.datetime.fromisoformat(str(stamp))
            except ValueError:
                raise CredentialError(f"{self.description}: bad expirationTimestamp {stamp!r}") from None
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=dt.UTC)
            expires = parsed.timestamp()
        return f"Bearer {token}", expires


class Credentials:
    """The header a process's API clients send (all of them share one), and how the API server answers it.

    ``header()`` is cheap while nothing is due (one comparison); a due reload happens once for all the
    callers waiting on it. ``clock`` is monotonic seconds, ``wall`` the epoch (exec expiry)."""

    def __init__(
        self,
        source: CredentialSource,
        *,
        initial: str | None = None,
        loaded: bool = False,
        reload_seconds: float = TOKEN_RELOAD_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.source = source
        self.reload_seconds = reload_seconds
        self.clock = clock
        self.wall = wall
        self._value = initial
        self._expires: float | None = None
        self._loaded_at = clock() if loaded else float("-inf")
        """When the value was last read (monotonic); -inf: not from the source yet (read on first use)."""
        self._retry_at = float("-inf")
        self._lock: asyncio.Lock | None = None
        self.unauthorized = 0
        """401 answers received, by every client (``koordpy_kube_unauthorized_total``)."""
        self.renewals = 0
        """Times a reload changed the header (the first read from the source aside)."""
        self.refused_since: float | None = None
        """Monotonic time of the first 401 to the newest header with no request accepted since."""
        self.refused_since_wall: float | None = None
        self.last_error: str | None = None
        """Why the last reload failed (None once one succeeded)."""

    @classmethod
    def fixed(cls, header: str | None, description: str = "kubeconfig credentials") -> Credentials:
        return cls(FixedCredential(header, description), initial=header, loaded=True)

    @property
    def description(self) -> str:
        return self.source.description

    def current(self) -> str | None:
        """The header as held now (no reload)."""
        return self._value

    def _due(self, now: float) -> bool:
        if not self.source.renewable or now < self._retry_at:
            return False
        if self._loaded_at == float("-inf"):
            return True
        if self._expires is not None and self.wall() >= self._expires:
            return True
        return self.source.periodic and now - self._loaded_at >= self.reload_seconds

    async def header(self) -> str | None:
        """The header to send now: reloaded first when due (period over, credential expired)."""
        if self._due(self.clock()):
            await self._reload(None)
        return self._value

    async def recheck(self) -> None:
        """While the header is refused, read the source again every :data:`RETRY_FAILED_LOAD_SECONDS`
        (else when due), so that a token written meanwhile ends the refusal even when no request is made (a
        not-ready component may make none: the extender answers no filter while not ready)."""
        if self.refused and self.source.renewable and self.clock() - self._loaded_at >= RETRY_FAILED_LOAD_SECONDS:
            await self._reload(self._loaded_at)
        elif self._due(self.clock()):
            await self._reload(None)

    async def renew(self, refused: str | None, sent_at: float) -> str | None:
        """After a 401 to a request sent at ``sent_at`` (monotonic) with ``refused``: the newest header.

        Reloaded unless it was reloaded after ``sent_at`` already (by another caller that got a 401 too,
        or by the period): the answer then is what that reload found. A caller retries when the header
        returned differs from ``refused``."""
        if self.source.renewable and self._loaded_at <= sent_at and self.clock() >= self._retry_at:
            await self._reload(sent_at)
        return self._value

    async def _reload(self, older_than: float | None) -> None:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            now = self.clock()
            if older_than is None and not self._due(now):
                return  # another caller reloaded while this one waited
            if older_than is not None and self._loaded_at > older_than:
                return
            try:
                header, expires = await self.source.load()
            except CredentialError as exc:
                self._retry_at = self.clock() + RETRY_FAILED_LOAD_SECONDS
                if self.last_error != str(exc):
                    _log().warning("kube.credentials.reload_failed", source=self.description, error=str(exc))
                self.last_error = str(exc)
                return
            self.last_error = None
            first = self._loaded_at == float("-inf")
            self._loaded_at = self.clock()
            self._expires = expires
            if expires is not None and expires <= self.wall():  # expired already: not run again at once
                self._retry_at = self._loaded_at + RETRY_FAILED_LOAD_SECONDS
            if header != self._value:
                self._value = header
                self.refused_since = self.refused_since_wall = None  # the newest header has not been refused
                if not first:
                    self.renewals += 1
                    _log().info("kube.credentials.renewed", source=self.description, renewals=self.renewals)

    def observe(self, status: int, sent: str | None) -> None:
        """Record one answer of the API server to a request sent with header ``sent``."""
        if status == 401:
            self.unauthorized += 1
            if sent == self._value and self.refused_since is None:
                self.refused_since = self.clock()
                self.refused_since_wall = self.wall()
        elif self.refused_since is not None:
            self.refused_since = self.refused_since_wall = None

    @property
    def refused(self) -> bool:
        """The newest header was answered 401 and no request was accepted since."""
        return self.refused_since is not None

    def refused_for(self) -> float:
        """Seconds the newest header has been refused (0 when it is not)."""
        return 0.0 if self.refused_since is None else max(0.0, self.clock() - self.refused_since)

    def not_ready(self, after_seconds: float) -> str | None:
        """Why the component is not ready, once the header has been refused for ``after_seconds``; else None."""
        refused_for = self.refused_for()
        if self.refused_since is None or refused_for < after_seconds:
            return None
        return (
            f"the API server has refused the credentials from {self.description} for {refused_for:.0f} s "
            f"({self.unauthorized} answers 401 in all)"
        )


class CredentialsCollector(Collector):
    """``koordpy_kube_unauthorized_total`` and ``koordpy_kube_credentials_refused``, read when scraped."""

    def __init__(self, credentials: Callable[[], Iterable[Credentials]]) -> None:
        self.credentials = credentials

    def collect(self) -> Iterable[Metric]:
        every = list(self.credentials())
        unauthorized = CounterMetricFamily(
            "koordpy_kube_unauthorized",
            "API answers 401 received by any of this process's API clients.",
            value=sum(c.unauthorized for c in every),
        )
        refused = GaugeMetricFamily(
            "koordpy_kube_credentials_refused",
            "1 while the API server refuses the newest credentials and has accepted no request since.",
            value=1.0 if any(c.refused for c in every) else 0.0,
        )
        yield unauthorized
        yield refused


def register_credentials_metrics(registry: CollectorRegistry, *credentials: Credentials) -> None:
    """Add the two credential metrics of ``credentials`` (usually the process's one) to ``registry``."""
    registry.register(CredentialsCollector(lambda: credentials))


EventPoster = Callable[..., Awaitable[Any]]
"""``ApiClient.create_event``."""


@dataclass
class CredentialsWatch:
    """Says why the component turns not ready: a log line when the credentials are first refused, an error
    line when they have been refused for ``after_seconds`` (``/readyz`` fails from then on), and, once the
    API server accepts them again, a Warning Event ``CredentialsRefused`` on the component's own Pod
    (``pod``: namespace and name from the downward API) saying for how long they were refused.

    The refusal ends with an answer other than 401 or with new credentials read from the source, which
    :meth:`run` reads again every 10 s while refused (so a not-ready component that makes no request
    still notices a token kubelet wrote). The Event waits for that: it cannot be written with
    credentials the API server refuses. Meanwhile the log, the metrics and ``/readyz`` say it (and the
    kubelet's ``Unhealthy`` Event for the failing readiness probe)."""

    credentials: Credentials
    after_seconds: float
    component: str
    post_event: EventPoster | None = None
    pod: tuple[str, str] | None = None
    period: float = 1.0
    _refused_logged: bool = False
    _not_ready_since_wall: float | None = None

    def check(self) -> Awaitable[None] | None:
        """One look (from :meth:`run`, or a test with its own clock): logs transitions; returns the Event
        post to await when one is due."""
        creds = self.credentials
        logger = _log()
        if creds.refused:
            if not self._refused_logged:
                self._refused_logged = True
                logger.warning("kube.credentials.refused", source=creds.description, unauthorized=creds.unauthorized)
            reason = creds.not_ready(self.after_seconds)
            if reason is not None and self._not_ready_since_wall is None:
                self._not_ready_since_wall = creds.refused_since_wall or creds.wall()
                logger.error(
                    "kube.credentials.not_ready",
                    source=creds.description,
                    refused_seconds=round(creds.refused_for(), 1),
                    unauthorized=creds.unauthorized,
                    reason=reason,
                )
            return None
        if not self._refused_logged:
            return None
        self._refused_logged = False
        since = self._not_ready_since_wall
        self._not_ready_since_wall = None
        logger.info("kube.credentials.recovered", source=creds.description, was_not_ready=since is not None)
        if since is None or self.post_event is None or self.pod is None:
            return None
        return self._post(since, self.pod, self.post_event)

    async def _post(self, since: float, pod: tuple[str, str], post_event: EventPoster) -> None:
        creds = self.credentials
        namespace, name = pod
        started = dt.datetime.fromtimestamp(since, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        message = (
            f"The API server refused this {self.component}'s credentials from {creds.description} from "
            f"{started} for about {creds.wall() - since:.0f} s; /readyz failed from "
            f"{self.after_seconds:g} s on (credentials.refusedNotReadySeconds), until new credentials were "
            "read or the API server accepted them again."
        )
        involved = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}}
        try:
            await post_event(
                involved, reason="CredentialsRefused", message=message, event_type="Warning", component=self.component
            )
        except Exception as exc:  # an Event is best effort: the log line above says it too
            _log().warning("kube.credentials.event_failed", error=f"{type(exc).__name__}: {exc}")

    async def run(self, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        while True:
            await self.credentials.recheck()
            post = self.check()
            if post is not None:
                await post
            await sleep(self.period)


def pod_from_env(environ: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """The component's own Pod (``POD_NAMESPACE``, ``POD_NAME`` from the downward API), or None."""
    env = os.environ if environ is None else environ
    namespace, name = env.get("POD_NAMESPACE", "").strip(), env.get("POD_NAME", "").strip()
    return (namespace, name) if namespace and name else None
