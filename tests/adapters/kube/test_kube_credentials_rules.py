"""The rules of ``koordpy.kube.credentials`` one by one, without an API server: what an exec plugin is asked and
what of its answer is accepted (each refusal with its message), a token file's read, the reload's bookkeeping
(renewals, the failure logged once, an expired credential not run again at once), the refusal tally, the
watch's log lines and its Event, the metrics' help, and the component's Pod from the downward API.

Logs are captured as structlog event dicts (``structlog.testing.capture_logs``); exec plugins are real
processes (``sys.executable -c``); clocks are moved by hand.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from koordpy.kube.credentials import (
    RETRY_FAILED_LOAD_SECONDS,
    CredentialError,
    Credentials,
    CredentialsWatch,
    ExecPlugin,
    FixedCredential,
    TokenFile,
    pod_from_env,
    register_credentials_metrics,
)

LOGGER = "koordpy.kube.credentials"


class Clock:
    def __init__(self) -> None:
        self.now = 500.0
        self.epoch = 1_800_000_000.0

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> float:
        return self.epoch

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.epoch += seconds


class Scripted:
    """A renewable source answering ``answers`` in turn (a CredentialError instance is raised)."""

    description = "scripted source"
    renewable = True
    periodic = False

    def __init__(self, *answers: tuple[str | None, float | None] | CredentialError) -> None:
        self.answers = list(answers)
        self.loads = 0

    async def load(self) -> tuple[str | None, float | None]:
        answer = self.answers[min(self.loads, len(self.answers) - 1)]
        self.loads += 1
        if isinstance(answer, CredentialError):
            raise answer
        return answer


def credentials(source: Any, clock: Clock) -> Credentials:
    return Credentials(source, clock=clock.monotonic, wall=clock.wall)


# -- exec plugins ------------------------------------------------------------------------------------------


def test_an_exec_entry_of_a_kubeconfig(tmp_path: Path) -> None:
    """A relative command with a path separator is taken from the kubeconfig's folder; env entries become the
    plugin's environment (a missing value empty, a non-mapping entry ignored); the apiVersion defaults to v1;
    the cluster is handed over only with ``provideClusterInfo``."""
    cluster = {"server": "https://api:6443"}
    spec = {
        "command": "bin/plugin",
        "args": ["get-token", 7],
        "env": [{"name": "A", "value": "1"}, {"name": "B"}, "not-a-mapping"],
        "provideClusterInfo": True,
    }
    plugin = ExecPlugin.from_kubeconfig(spec, tmp_path, cluster)
    assert plugin.command == str(tmp_path / "bin" / "plugin")
    assert plugin.args == ("get-token", "7")
    assert plugin.env == {"A": "1", "B": ""}
    assert plugin.api_version == "client.authentication.k8s.io/v1"
    assert plugin.cluster == cluster and plugin.cluster is not cluster
    assert plugin.description == f"exec plugin {tmp_path / 'bin' / 'plugin'}"
    bare = ExecPlugin.from_kubeconfig(
        {"command": "gke-auth", "apiVersion": "client.authentication.k8s.io/v1beta1"}, tmp_path, cluster
    )
    assert bare.command == "gke-auth"  # a bare name: looked up on PATH
    assert bare.api_version == "client.authentication.k8s.io/v1beta1"
    assert bare.cluster is None and bare.env == {} and bare.args == ()
    assert ExecPlugin.from_kubeconfig({"command": "/usr/bin/x"}, tmp_path).command == "/usr/bin/x"


@pytest.mark.parametrize("spec", [{}, {"command": ""}, {"command": None}])
def test_an_exec_entry_without_a_command_is_refused(spec: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(CredentialError) as caught:
        ExecPlugin.from_kubeconfig(spec, tmp_path)
    assert str(caught.value) == "exec plugin: command is empty"


def test_what_an_exec_plugin_is_asked() -> None:
    """``KUBERNETES_EXEC_INFO``: the ExecCredential of the plugin's apiVersion, never interactive, with the
    cluster when it is handed over."""
    plain = ExecPlugin("p", api_version="client.authentication.k8s.io/v1beta1")
    assert json.loads(plain.exec_info()) == {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "kind": "ExecCredential",
        "spec": {"interactive": False},
    }
    with_cluster = ExecPlugin("p", cluster={"server": "https://api:6443"})
    assert json.loads(with_cluster.exec_info())["spec"] == {
        "interactive": False,
        "cluster": {"server": "https://api:6443"},
    }


def credential(**status: Any) -> bytes:
    return json.dumps(
        {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status}
    ).encode()


def test_an_exec_credential_gives_a_bearer_header_and_its_expiry() -> None:
    plugin = ExecPlugin("p")
    assert plugin.parse(credential(token="abc")) == ("Bearer abc", None)
    # 2027-01-15T08:00:00Z = 1,800,000,000 s after the epoch; without a zone it is read as UTC
    assert plugin.parse(credential(token="abc", expirationTimestamp="2027-01-15T08:00:00Z")) == (
        "Bearer abc",
        1_800_000_000.0,
    )
    assert plugin.parse(credential(token="abc", expirationTimestamp="2027-01-15T08:00:00")) == (
        "Bearer abc",
        1_800_000_000.0,
    )
    assert plugin.parse(credential(token="abc", expirationTimestamp="2027-01-15T10:00:00+02:00"))[1] == 1_800_000_000.0


@pytest.mark.parametrize(
    ("out", "message"),
    [
        (b"not json", "exec plugin p: output is not JSON: "),
        (b"[1]", "exec plugin p: output is not an ExecCredential"),
        (json.dumps({"kind": "Other"}).encode(), "exec plugin p: output is not an ExecCredential"),
        (
            json.dumps({"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential"}).encode(),
            "exec plugin p: answered apiVersion 'client.authentication.k8s.io/v1beta1', "
            "asked for 'client.authentication.k8s.io/v1'",
        ),
        (credential(), "exec plugin p: no status.token (client certificates are not renewed)"),
        (credential(token=""), "exec plugin p: no status.token (client certificates are not renewed)"),
        (credential(token=5), "exec plugin p: no status.token (client certificates are not renewed)"),
        (
            json.dumps(
                {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": "x"}
            ).encode(),
            "exec plugin p: no status.token (client certificates are not renewed)",
        ),
        (credential(token="t", expirationTimestamp="soon"), "exec plugin p: bad expirationTimestamp 'soon'"),
    ],
)
def test_an_exec_plugins_answer_that_is_refused(out: bytes, message: str) -> None:
    with pytest.raises(CredentialError) as caught:
        ExecPlugin("p").parse(out)
    assert str(caught.value).startswith(message), str(caught.value)
    if not message.endswith(": "):
        assert str(caught.value) == message


def python_plugin(code: str, **kwargs: Any) -> ExecPlugin:
    return ExecPlugin(sys.executable, args=("-c", code), **kwargs)


async def test_an_exec_plugin_run_hands_over_stdin_closed_and_reports_its_last_error_line() -> None:
    """The plugin reads no terminal (stdin is /dev/null: a read ends at once); a failure names the exit status
    and the last line of its stderr, cut at 300 characters."""
    reads_stdin = python_plugin(
        "import sys, json; assert sys.stdin.read() == ''; "
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential', "
        "'status': {'token': 'from-plugin'}}))"
    )
    assert await reads_stdin.load() == ("Bearer from-plugin", None)
    failing = python_plugin("import sys; sys.stderr.write('first\\nsecond\\n' + 'x' * 400 + '\\n\\n'); sys.exit(3)")
    with pytest.raises(CredentialError) as caught:
        await failing.load()
    assert str(caught.value) == f"exec plugin {sys.executable}: exit status 3: " + "x" * 300
    undecodable = python_plugin("import sys; sys.stderr.buffer.write(b'bad \\xff byte'); sys.exit(5)")
    with pytest.raises(CredentialError) as caught:
        await undecodable.load()
    assert str(caught.value) == f"exec plugin {sys.executable}: exit status 5: bad \ufffd byte"
    silent = python_plugin("import sys; sys.exit(4)")
    with pytest.raises(CredentialError) as caught:
        await silent.load()
    assert str(caught.value) == f"exec plugin {sys.executable}: exit status 4: "


async def test_an_exec_plugin_cannot_read_this_processs_stdin() -> None:
    """Whatever the process's own standard input holds (here a pipe with a line in it), the plugin reads
    nothing: a plugin that would prompt for input fails at once instead of taking the component's."""
    plugin = python_plugin(
        "import sys, json; data = sys.stdin.read(); "
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential', "
        "'status': {'token': 'read-' + str(len(data))}}))"
    )
    read, write = os.pipe()
    os.write(write, b"a line the plugin must not see\n")
    os.close(write)
    saved = os.dup(0)
    os.dup2(read, 0)
    try:
        assert await plugin.load() == ("Bearer read-0", None)
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(read)


async def test_an_exec_plugin_that_cannot_start_or_hangs_fails_the_load(tmp_path: Path) -> None:
    missing = ExecPlugin(str(tmp_path / "no-such-plugin"))
    with pytest.raises(CredentialError) as caught:
        await missing.load()
    assert str(caught.value).startswith(f"exec plugin {tmp_path / 'no-such-plugin'}: [Errno 2]")
    hanging = python_plugin("import time; time.sleep(600)", timeout=0.2)
    with pytest.raises(CredentialError) as caught:
        await hanging.load()
    assert str(caught.value) == f"exec plugin {sys.executable}: no answer within 0.2 s"


# -- token files ---------------------------------------------------------------------------------------------


@pytest.fixture
def kolkata(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's local time zone UTC+05:30, so that a local-time conversion shows in the result."""
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_an_expiry_without_a_zone_is_utc_whatever_the_local_zone(kolkata: None) -> None:
    assert time.localtime(0).tm_gmtoff == 19800  # the zone is in force: 5 h 30 min
    assert ExecPlugin("p").parse(credential(token="t", expirationTimestamp="2027-01-15T08:00:00"))[1] == 1_800_000_000.0


async def test_the_event_says_when_the_refusal_started_in_utc_whatever_the_local_zone(kolkata: None) -> None:
    clock = Clock()
    creds = Credentials(
        Scripted(("Bearer a", None)), initial="Bearer a", loaded=True, clock=clock.monotonic, wall=clock.wall
    )
    posted: list[str] = []

    async def post_event(involved: Any, **fields: Any) -> None:
        posted.append(fields["message"])

    watch = CredentialsWatch(creds, 0.0, "c", post_event=post_event, pod=("ns", "p"))
    creds.observe(401, "Bearer a")
    watch.check()
    creds.observe(200, "Bearer a")
    post = watch.check()
    assert post is not None
    await post
    assert "from 2027-01-15T08:00:00Z for about 0 s" in posted[0]  # epoch 1,800,000,000 s


def test_a_token_file_is_read_as_utf8_and_trimmed(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_bytes("  tökén\n".encode())
    assert TokenFile(path).read() == "Bearer tökén"
    path.write_text(" \n")
    with pytest.raises(CredentialError) as caught:
        TokenFile(path).read()
    assert str(caught.value) == f"token file {path}: empty"
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(CredentialError, match=f"^token file {path}: 'utf-8' codec can't decode"):
        TokenFile(path).read()


# -- the reload's bookkeeping ------------------------------------------------------------------------------


def test_fixed_credentials_never_reload() -> None:
    fixed = Credentials.fixed("Bearer t")
    assert fixed.current() == "Bearer t"
    assert fixed.description == "kubeconfig credentials"
    assert fixed.source == FixedCredential("Bearer t", "kubeconfig credentials")
    assert Credentials.fixed(None, "client certificate").description == "client certificate"
    assert fixed._loaded_at != float("-inf")  # loaded: never read again, not even on first use


async def test_a_renewal_is_counted_and_logged_and_the_first_read_is_not() -> None:
    clock = Clock()
    source = Scripted(("Bearer a", None), ("Bearer a", None), ("Bearer b", None), ("Bearer c", None))
    creds = credentials(source, clock)
    assert creds.refused_since is None and creds.refused_since_wall is None and creds.last_error is None
    with capture_logs() as logs:
        assert await creds.header() == "Bearer a"  # first use: read, not a renewal
        await creds.renew("Bearer a", clock.now)  # the same header again: not a renewal
        for _ in range(2):
            clock.advance(1)
            await creds.renew(creds.current(), clock.now)
    assert (source.loads, creds.renewals, creds.current()) == (4, 2, "Bearer c")
    renewed = {"logger": LOGGER, "event": "kube.credentials.renewed", "log_level": "info", "source": "scripted source"}
    assert logs == [{**renewed, "renewals": 1}, {**renewed, "renewals": 2}]


async def test_a_failed_reload_is_logged_once_per_error_and_retried_after_10_s() -> None:
    clock = Clock()
    source = Scripted(
        ("Bearer a", None),
        CredentialError("gone"),
        CredentialError("gone"),
        CredentialError("other"),
        ("Bearer b", None),
    )
    creds = credentials(source, clock)
    await creds.header()
    with capture_logs() as logs:
        await creds.renew("Bearer a", clock.now)
        assert creds.last_error == "gone"
        clock.advance(RETRY_FAILED_LOAD_SECONDS - 1)
        await creds.renew("Bearer a", clock.now)  # within 10 s of the failure: not tried
        assert source.loads == 2
        clock.advance(1)
        await creds.renew("Bearer a", clock.now)  # the same error again: not logged again
        clock.advance(RETRY_FAILED_LOAD_SECONDS)
        await creds.renew("Bearer a", clock.now)
        clock.advance(RETRY_FAILED_LOAD_SECONDS)
        await creds.renew("Bearer a", clock.now)
    assert source.loads == 5 and creds.current() == "Bearer b" and creds.last_error is None
    warning = {
        "logger": LOGGER,
        "event": "kube.credentials.reload_failed",
        "log_level": "warning",
        "source": "scripted source",
    }
    assert [entry for entry in logs if entry["event"] == "kube.credentials.reload_failed"] == [
        {**warning, "error": "gone"},
        {**warning, "error": "other"},
    ]


@pytest.mark.parametrize("expired_for", [5.0, 0.0])
async def test_a_credential_that_expired_already_is_not_run_again_for_10_s(expired_for: float) -> None:
    """An exec plugin handing out a credential whose expiry has passed (or is this very second): used, and
    asked again 10 s later (not on every request), then at its next expiry."""
    clock = Clock()
    source = Scripted(("Bearer old", clock.epoch - expired_for), ("Bearer new", clock.epoch + 100))
    creds = credentials(source, clock)
    assert await creds.header() == "Bearer old"
    clock.advance(RETRY_FAILED_LOAD_SECONDS - 1)
    assert await creds.header() == "Bearer old" and source.loads == 1
    clock.advance(1)
    assert await creds.header() == "Bearer new" and source.loads == 2
    clock.advance(80)  # expires at the original epoch + 100: 10 s later
    assert await creds.header() == "Bearer new" and source.loads == 2


async def test_a_401_to_a_request_sent_before_the_last_reload_does_not_read_again() -> None:
    """``renew`` after a 401 to a request sent at ``sent_at`` reads the source again unless the last reload
    is newer than ``sent_at``: a reload at that same moment is not newer (the request may have carried the
    header it replaced), one after it is."""
    clock = Clock()
    source = Scripted(("Bearer a", None), ("Bearer b", None), ("Bearer c", None), ("Bearer d", None))
    creds = credentials(source, clock)
    await creds.header()
    first_read = clock.now
    clock.advance(1)
    sent = clock.now
    assert await creds.renew("Bearer a", sent) == "Bearer b"  # read at 1 s, after the read at 0 s
    assert await creds.renew("Bearer a", sent) == "Bearer c"  # the last read at the sending moment: again
    assert await creds.renew("Bearer a", first_read) == "Bearer c"  # sent before the last read: not again
    assert source.loads == 3


def test_the_refusal_tally() -> None:
    """A 401 to the newest header starts the refusal (at the clocks of that moment); a later 401 keeps its
    start; one to an older header counts but starts nothing; any other answer ends it."""
    clock = Clock()
    creds = Credentials(
        Scripted(("Bearer a", None)), initial="Bearer a", loaded=True, clock=clock.monotonic, wall=clock.wall
    )
    creds.observe(401, "Bearer old")
    assert (creds.unauthorized, creds.refused) == (1, False)
    assert creds.refused_for() == 0.0
    creds.observe(401, "Bearer a")
    assert creds.refused and creds.refused_for() == 0.0  # refused this very moment
    started, started_wall = clock.now, clock.epoch
    clock.advance(7)
    creds.observe(401, "Bearer a")
    assert (creds.refused_since, creds.refused_since_wall) == (started, started_wall)
    assert creds.refused_for() == 7.0 and creds.unauthorized == 3
    assert creds.not_ready(7.5) is None
    assert creds.not_ready(7.0) == (
        "the API server has refused the credentials from scripted source for 7 s (3 answers 401 in all)"
    )
    creds.observe(200, "Bearer a")
    assert (creds.refused_since, creds.refused_since_wall, creds.refused) == (None, None, False)
    assert creds.not_ready(0.0) is None


# -- the watch: log lines and the Event ----------------------------------------------------------------------


async def test_the_watch_logs_each_transition_and_posts_the_event_it_promised() -> None:
    clock = Clock()
    creds = Credentials(
        Scripted(("Bearer a", None)), initial="Bearer a", loaded=True, clock=clock.monotonic, wall=clock.wall
    )
    posted: list[tuple[Any, dict[str, Any]]] = []

    async def post_event(involved: Any, **fields: Any) -> None:
        posted.append((involved, fields))

    watch = CredentialsWatch(creds, 30.0, "koordpy-agent", post_event=post_event, pod=("koordpy", "agent-x"))
    refused_at = clock.epoch
    with capture_logs() as logs:
        assert watch.check() is None  # nothing refused: nothing said
        creds.observe(401, "Bearer a")
        clock.advance(12)
        creds.observe(401, "Bearer a")
        assert watch.check() is None
        assert watch.check() is None  # said once
        clock.advance(18.26)  # refused for 30.26 s: not ready
        assert watch.check() is None
        clock.advance(100)
        assert watch.check() is None  # the not-ready line once
        creds.observe(200, "Bearer a")
        post = watch.check()
        assert post is not None
        await post
        assert watch.check() is None  # recovered once
    source = {"logger": LOGGER, "source": "scripted source"}
    assert logs == [
        {**source, "event": "kube.credentials.refused", "log_level": "warning", "unauthorized": 2},
        {
            **source,
            "event": "kube.credentials.not_ready",
            "log_level": "error",
            "refused_seconds": 30.3,  # 30.26 rounded to a tenth
            "unauthorized": 2,
            "reason": "the API server has refused the credentials from scripted source for 30 s (2 answers 401 in all)",
        },
        {**source, "event": "kube.credentials.recovered", "log_level": "info", "was_not_ready": True},
    ]
    [(involved, fields)] = posted
    assert involved == {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "agent-x", "namespace": "koordpy"}}
    started = dt.datetime.fromtimestamp(refused_at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert started == "2027-01-15T08:00:00Z"
    assert fields == {
        "reason": "CredentialsRefused",
        "event_type": "Warning",
        "component": "koordpy-agent",
        "message": (
            "The API server refused this koordpy-agent's credentials from scripted source from "
            f"{started} for about 130 s; /readyz failed from 30 s on (credentials.refusedNotReadySeconds), "
            "until new credentials were read or the API server accepted them again."
        ),
    }


async def test_a_refusal_that_ends_before_not_ready_posts_nothing_and_a_failed_post_is_logged() -> None:
    clock = Clock()
    creds = Credentials(
        Scripted(("Bearer a", None)), initial="Bearer a", loaded=True, clock=clock.monotonic, wall=clock.wall
    )

    async def failing(involved: Any, **fields: Any) -> None:
        raise ConnectionError("api down")

    short = CredentialsWatch(creds, 30.0, "koordpy-manager", post_event=failing, pod=("koordpy", "m"))
    with capture_logs() as logs:
        creds.observe(401, "Bearer a")
        assert short.check() is None
        creds.observe(200, "Bearer a")
        assert short.check() is None  # recovered before 30 s: no Event
        creds.observe(401, "Bearer a")
        short.check()
        clock.advance(30)
        short.check()
        creds.observe(200, "Bearer a")
        post = short.check()
        assert post is not None
        await post  # the post fails: logged, not raised
    assert [entry["event"] for entry in logs] == [
        "kube.credentials.refused",
        "kube.credentials.recovered",
        "kube.credentials.refused",
        "kube.credentials.not_ready",
        "kube.credentials.recovered",
        "kube.credentials.event_failed",
    ]
    assert logs[1]["was_not_ready"] is False
    assert logs[-1] == {
        "logger": LOGGER,
        "event": "kube.credentials.event_failed",
        "log_level": "warning",
        "error": "ConnectionError: api down",
    }
    for missing in ({"post_event": None, "pod": ("koordpy", "m")}, {"post_event": failing, "pod": None}):
        watch = CredentialsWatch(creds, 0.0, "c", **missing)  # type: ignore[arg-type]
        creds.observe(401, "Bearer a")
        watch.check()
        creds.observe(200, "Bearer a")
        assert watch.check() is None  # nowhere to post: nothing to await


async def test_the_watch_runs_recheck_check_and_the_post_every_period() -> None:
    clock = Clock()
    creds = Credentials(
        Scripted(("Bearer a", None)), initial="Bearer a", loaded=True, clock=clock.monotonic, wall=clock.wall
    )
    posted: list[str] = []

    async def post_event(involved: Any, **fields: Any) -> None:
        posted.append(fields["reason"])

    watch = CredentialsWatch(creds, 0.0, "c", post_event=post_event, pod=("ns", "p"), period=2.5)
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 1:
            creds.observe(401, "Bearer a")
        elif len(slept) == 2:
            creds.observe(200, "Bearer a")
        elif len(slept) == 4:
            raise EOFError("enough")

    with pytest.raises(EOFError):
        await watch.run(sleep)
    assert slept == [2.5, 2.5, 2.5, 2.5] and posted == ["CredentialsRefused"]


# -- metrics and the downward API -----------------------------------------------------------------------------


def test_the_metrics_help_says_what_they_count() -> None:
    registry = CollectorRegistry()
    register_credentials_metrics(registry, Credentials.fixed("Bearer t"))
    helps = {family.name: family.documentation for family in registry.collect()}
    assert helps == {
        "koordpy_kube_unauthorized": "API answers 401 received by any of this process's API clients.",
        "koordpy_kube_credentials_refused": (
            "1 while the API server refuses the newest credentials and has accepted no request since."
        ),
    }


@pytest.mark.parametrize(
    ("environ", "pod"),
    [
        ({"POD_NAMESPACE": "koordpy", "POD_NAME": "agent-x"}, ("koordpy", "agent-x")),
        ({"POD_NAMESPACE": " koordpy ", "POD_NAME": " agent-x\n"}, ("koordpy", "agent-x")),
        ({"POD_NAMESPACE": "koordpy"}, None),
        ({"POD_NAME": "agent-x"}, None),
        ({"POD_NAMESPACE": " ", "POD_NAME": "agent-x"}, None),
        ({"pod_namespace": "koordpy", "pod_name": "agent-x"}, None),
        ({}, None),
    ],
)
def test_the_components_pod_from_the_downward_api(environ: dict[str, str], pod: tuple[str, str] | None) -> None:
    assert pod_from_env(environ) == pod


def test_the_components_pod_from_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "koordpy")
    monkeypatch.setenv("POD_NAME", "manager-0")
    assert pod_from_env() == ("koordpy", "manager-0")
    assert pod_from_env({}) is None  # a mapping given is read, not the process's
