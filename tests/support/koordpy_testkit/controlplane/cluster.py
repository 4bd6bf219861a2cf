"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager, kwok and
the stock kube-scheduler, each an OS process built from the pinned Go modules (``tools/``).

The kube-apiserver runs as a stock one does, plus what a test needs to see: TLS with its own CA, the
Node and RBAC authorizers, ServiceAccount tokens signed by its own key, the default admission plugins
(Pod Security, ServiceAccount, TaintNodesByCondition, ValidatingAdmissionPolicy, ...), **no**
``--allow-privileged`` unless asked, and an audit log of every write (``audit.jsonl``: who did what, with
the response code). Static bearer tokens name the operators of the control plane itself: ``admin``
(``system:masters``), ``system:kube-controller-manager``, ``system:kube-scheduler`` and ``kwok``; every
other identity is a ServiceAccount whose token comes from the TokenRequest API (:meth:`ControlPlane.token`).

kwok keeps Nodes annotated ``kwok.x-k8s.io/node=fake`` Ready (heartbeats and leases) and moves pods bound
to them to Running: :func:`fake_node` builds such a Node.

Nothing here imports koordpy: the same control plane serves koordpy's tests, its benchmarks and a
developer's terminal (``python -m koordpy_testkit.controlplane``).

Not guaranteed: that ports picked free stay free until the process binds them (a start then fails with the
log tail); anything beyond loopback; kubelet behaviour beyond kwok's (no containers, no cgroups, no probes).
"""

from __future__ import annotations

import contextlib
import json
import os
import ssl
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.controlplane.binaries import ensure_binaries
from koordpy_testkit.controlplane.pki import Pki, make_pki
from koordpy_testkit.processes import LOOPBACK, Proc, free_port, wait_http

__all__ = [
    "CONTROLLERS",
    "FAKE_NODE_ANNOTATION",
    "GENERIC_WORKLOAD",
    "ControlPlane",
    "fake_node",
    "write_kubeconfig",
]

FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"
CONTROLLERS = (
    "replicaset-controller",
    "deployment-controller",
    "job-controller",
    "statefulset-controller",
    "daemonset-controller",
    "disruption-controller",
    "garbage-collector-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "namespace-controller",
    "node-lifecycle-controller",
    "pod-garbage-collector-controller",
    "clusterrole-aggregation-controller",
    "validatingadmissionpolicy-status-controller",
)
"""kube-controller-manager's controllers that run: the workload controllers that make replacement pods,
the disruption controller (PodDisruptionBudget status, without which every eviction of a covered pod is
refused), garbage collection, namespaces, ServiceAccounts and their tokens, node lifecycle (kwok keeps
fake nodes alive), aggregated ClusterRoles and ValidatingAdmissionPolicy type checks."""
GENERIC_WORKLOAD: dict[str, Any] = {
    "feature_gates": {"GenericWorkload": True},
    "runtime_config": ("scheduling.k8s.io/v1beta1=true",),
    "controllers": (*CONTROLLERS, "podgroup-protection-controller"),
}
"""``ControlPlane(**GENERIC_WORKLOAD, ...)``: Kubernetes' own Workload and PodGroup API
(``scheduling.k8s.io/v1beta1``) served, and kube-scheduler's ``GangScheduling`` plugin in its default profile
(v1.37: beta, off by default). The PodGroupProtection admission plugin puts the finalizer
``scheduling.k8s.io/podgroup-protection`` on every PodGroup; kube-controller-manager's
``podgroup-protection-controller`` removes it once no pod names the group (without it no PodGroup, and so
no namespace holding one, is ever deleted)."""

ADMIN_USER = "koordpy-test-admin"
STATIC_USERS = {
    # name in this module: (user name, groups)
    "admin": (ADMIN_USER, "system:masters"),
    "kube-controller-manager": ("system:kube-controller-manager", ""),
    "kube-scheduler": ("system:kube-scheduler", ""),
    "kwok": ("kwok", "system:masters"),
}


def audit_policy(watched_groups: Sequence[str]) -> str:
    """Every request of the users in ``watched_groups`` (reads too, so a denied list shows), every write
    of everyone else, at Metadata level (who, what, the response code); lease renewals left out."""
    watched = ""
    if watched_groups:
        watched = f"  - level: Metadata\n    userGroups: {json.dumps(list(watched_groups))}\n"
    return (
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n"
        "  # Leases are renewed every few seconds by every leader-elected component and every kwok node.\n"
        "  - level: None\n    resources: [{group: coordination.k8s.io, resources: [leases]}]\n"
        f"{watched}"
        "  - level: Metadata\n    verbs: [create, update, patch, delete, deletecollection]\n"
        "  - level: None\n"
    )


def write_kubeconfig(path: Path, server: str, ca_cert: Path, token: str, user: str) -> Path:
    """A kubeconfig with one cluster, one bearer-token user and a current context (JSON is valid YAML)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "koordpy-test", "cluster": {"server": server, "certificate-authority": str(ca_cert)}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": user, "context": {"cluster": "koordpy-test", "user": user}}],
        "current-context": user,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2) + "\n")
    path.chmod(0o600)
    return path


def fake_node(
    name: str,
    *,
    cpu: str = "16",
    memory: str = "64Gi",
    pods: str = "110",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
) -> dict[str, Any]:
    """A Node that kwok keeps Ready and whose pods it runs (the annotation selects it)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok", **(labels or {})},
            "annotations": {FAKE_NODE_ANNOTATION: "fake", **(annotations or {})},
        },
        "spec": {"taints": [dict(t) for t in taints]} if taints else {},
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
            "capacity": {"cpu": cpu, "memory": memory, "pods": pods},
            "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux", "kubeletVersion": "fake"},
        },
    }


@dataclass
class ControlPlane:
    """The processes of one control plane, their files under ``workdir`` (certificates, tokens, logs).

    ``allow_privileged`` adds ``--allow-privileged=true`` (a stock kube-apiserver refuses privileged
    containers without it). ``default_scheduler`` and ``kwok`` can be left out for a bare API server.
    ``feature_gates`` go to kube-apiserver, kube-controller-manager and every kube-scheduler started here
    (``--feature-gates``); ``runtime_config`` to kube-apiserver (``--runtime-config``), e.g.
    :data:`GENERIC_WORKLOAD` for Kubernetes' own gang API.
    """

    workdir: Path
    allow_privileged: bool = False
    default_scheduler: bool = True
    kwok: bool = True
    controllers: tuple[str, ...] = CONTROLLERS
    apiserver_args: tuple[str, ...] = ()
    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    runtime_config: tuple[str, ...] = ()
    audited_groups: tuple[str, ...] = ()
    """Users of these groups have every request audited, reads included (writes are audited for everyone)."""
    default_scheduler_args: tuple[str, ...] = ()
    """Command-line flags added to the stock default-scheduler's (``--v=2`` for its informers' log lines)."""
    bin_dir: Path | None = None
    procs: dict[str, Proc] = field(default_factory=dict)
    secure_ports: dict[str, int] = field(default_factory=dict)
    """The HTTPS port of each kube-scheduler and the kube-controller-manager (``/metrics``, ``/readyz``)."""
    url: str = ""
    pki: Pki | None = None
    _tokens: dict[str, str] = field(default_factory=dict)

    # ---- lifecycle -----------------------------------------------------------------------

    def start(self, timeout: float = 300.0) -> ControlPlane:
        """Start every process and wait until each is ready; ``timeout`` is a hang backstop per process."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.bin_dir = self.bin_dir or ensure_binaries()
        self.pki = make_pki(self.workdir / "pki")
        self._write_tokens()
        try:
            self._start_etcd(timeout)
            self._start_apiserver(timeout)
            self._start_controller_manager(timeout)
            if self.kwok:
                self._start_kwok()
            if self.default_scheduler:
                self._start_default_scheduler(timeout)
        except BaseException:
            self.stop()
            raise
        (self.workdir / "controlplane.json").write_text(
            json.dumps({"url": self.url, "kubeconfig": str(self.admin_kubeconfig), "pids": self.pids()}, indent=2)
            + "\n"
        )
        return self

    def stop(self) -> None:
        """Stop every process by its process group, in reverse start order (etcd last)."""
        for name in reversed(list(self.procs)):
            self.procs[name].stop()

    def kill_apiserver_and_etcd(self) -> None:
        """SIGKILL kube-apiserver and etcd (no clean shutdown: what a node crash or an OOM kill does). Their
        data directory, ports and arguments stay; :meth:`restart_apiserver_and_etcd` starts them again."""
        for name in ("kube-apiserver", "etcd"):
            self.procs[name].kill()

    def restart_apiserver_and_etcd(self, timeout: float = 300.0) -> float:
        """Start etcd and kube-apiserver again with the arguments they had (same ports, same etcd data
        directory, same certificates and tokens), each once the previous is ready; returns the monotonic
        time at which kube-apiserver's ``/readyz`` first answered 200 (polled every 0.1 s).
        ``timeout`` is a hang backstop per process."""
        etcd, apiserver = self.procs["etcd"], self.procs["kube-apiserver"]
        assert not etcd.alive() and not apiserver.alive(), "kill_apiserver_and_etcd() first"
        etcd.start()
        wait_http(f"{self._etcd_url}/health", timeout, etcd)
        apiserver.start()
        wait_http(
            f"{self.url}/readyz",
            timeout,
            apiserver,
            verify=self.tls(),
            headers={"Authorization": f"Bearer {self.admin_token}"},
        )
        return time.monotonic()

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def pids(self) -> dict[str, int]:
        return {name: proc.pid for name, proc in self.procs.items() if proc.popen is not None}

    def logs(self) -> dict[str, Path]:
        return {name: proc.log for name, proc in self.procs.items()}

    def check_alive(self) -> None:
        """Raise, with the log tail, if a control-plane process has exited."""
        for name, proc in self.procs.items():
            if not proc.alive():
                raise RuntimeError(f"control plane process {name} exited:\n{proc.tail()}")

    # ---- identities ---------------------------------------------------------------------

    @property
    def ca_cert(self) -> Path:
        assert self.pki is not None, "start() the control plane first"
        return self.pki.ca_cert

    def tls(self) -> ssl.SSLContext:
        """A TLS context that trusts this control plane's CA."""
        return ssl.create_default_context(cafile=str(self.ca_cert))

    @property
    def admin_token(self) -> str:
        return self._tokens["admin"]

    @property
    def admin_kubeconfig(self) -> Path:
        return self.kubeconfig("admin", self.admin_token, ADMIN_USER)

    def kubeconfig(self, name: str, token: str, user: str | None = None) -> Path:
        """A kubeconfig file named after ``name`` for this API server and ``token``."""
        return write_kubeconfig(
            self.workdir / "kubeconfigs" / f"{name}.yaml", self.url, self.ca_cert, token, user or name
        )

    def client(self, token: str | None = None, timeout: float = 60.0) -> httpx.Client:
        """An HTTP client for the API server (the admin's token unless another is given)."""
        return httpx.Client(
            base_url=self.url,
            verify=self.tls(),
            headers={"Authorization": f"Bearer {token or self.admin_token}"},
            timeout=timeout,
        )

    def token(
        self,
        namespace: str,
        service_account: str,
        *,
        bound_pod: tuple[str, str] | None = None,
        seconds: int = 86400,
    ) -> str:
        """A ServiceAccount token from the TokenRequest API, as a pod's projected token is made.

        ``bound_pod`` (name, uid) binds it to a pod: the API server then puts the pod's node name in the
        token (``authentication.kubernetes.io/node-name`` in the user's extra info) and revokes it with the pod.
        """
        spec: dict[str, Any] = {"expirationSeconds": seconds}
        if bound_pod is not None:
            spec["boundObjectRef"] = {"apiVersion": "v1", "kind": "Pod", "name": bound_pod[0], "uid": bound_pod[1]}
        with self.client() as api:
            resp = api.post(
                f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token",
                json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec},
            )
        if resp.status_code != 201:
            raise RuntimeError(f"token for {namespace}/{service_account}: {resp.status_code} {resp.text[:300]}")
        token: str = resp.json()["status"]["token"]
        return token

    # ---- audit ----------------------------------------------------------------------------

    @property
    def audit_log(self) -> Path:
        return self.workdir / "audit.jsonl"

    def audit_events(self) -> Iterator[dict[str, Any]]:
        """Every write the API server answered, oldest first (``ResponseComplete`` audit events).

        The API server appends while this reads: a last line without its newline is an event still being
        written and is left for the next read (an event written after this call began may or may not be seen).
        """
        if not self.audit_log.exists():
            return
        with self.audit_log.open() as lines:
            for line in lines:
                if not line.endswith("\n"):
                    return
                if line.strip():
                    event: dict[str, Any] = json.loads(line)
                    if event.get("stage") == "ResponseComplete":
                        yield event

    # ---- processes ------------------------------------------------------------------------

    def _gate_args(self) -> list[str]:
        if not self.feature_gates:
            return []
        gates = ",".join(f"{name}={'true' if on else 'false'}" for name, on in sorted(self.feature_gates.items()))
        return [f"--feature-gates={gates}"]

    def _bin(self, name: str) -> str:
        assert self.bin_dir is not None
        return str(self.bin_dir / name)

    def _proc(self, name: str, args: list[str]) -> Proc:
        proc = Proc(name, args, self.workdir / "logs" / f"{name}.log", cwd=self.workdir).start()
        self.procs[name] = proc
        return proc

    def _write_tokens(self) -> None:
        path = self.workdir / "tokens.csv"
        if path.exists():
            for row in path.read_text().splitlines():
                token, user, *_ = row.split(",")
                name = next(k for k, (u, _) in STATIC_USERS.items() if u == user)
                self._tokens[name] = token
            return
        rows = []
        for index, (name, (user, groups)) in enumerate(STATIC_USERS.items()):
            token = os.urandom(24).hex()
            self._tokens[name] = token
            rows.append(f'{token},{user},uid-{index},"{groups}"' if groups else f"{token},{user},uid-{index}")
        path.write_text("\n".join(rows) + "\n")
        path.chmod(0o600)

    def _start_etcd(self, timeout: float) -> None:
        client_port, peer_port = free_port(), free_port()
        self._etcd_url = f"http://{LOOPBACK}:{client_port}"
        proc = self._proc(
            "etcd",
            [
                self._bin("etcd"),
                f"--data-dir={self.workdir / 'etcd'}",
                f"--client-port={client_port}",
                f"--peer-port={peer_port}",
            ],
        )
        wait_http(f"{self._etcd_url}/health", timeout, proc)

    def _start_apiserver(self, timeout: float) -> None:
        assert self.pki is not None
        port = free_port()
        self.url = f"https://{LOOPBACK}:{port}"
        (self.workdir / "audit-policy.yaml").write_text(audit_policy(self.audited_groups))
        args = [
            self._bin("kube-apiserver"),
            f"--etcd-servers={self._etcd_url}",
            f"--bind-address={LOOPBACK}",
            f"--advertise-address={LOOPBACK}",
            # The default reconciler refuses a loopback advertise address; nothing here reaches the
            # kubernetes Service from a pod anyway.
            "--endpoint-reconciler-type=none",
            f"--secure-port={port}",
            f"--tls-cert-file={self.pki.serving_cert}",
            f"--tls-private-key-file={self.pki.serving_key}",
            f"--client-ca-file={self.pki.ca_cert}",
            # Front-proxy settings as a kubeadm cluster has them (components reading the
            # extension-apiserver-authentication ConfigMap then find every CA they look for).
            f"--requestheader-client-ca-file={self.pki.ca_cert}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={self.pki.sa_pub}",
            f"--service-account-signing-key-file={self.pki.sa_key}",
            f"--token-auth-file={self.workdir / 'tokens.csv'}",
            "--authorization-mode=Node,RBAC",
            "--service-cluster-ip-range=10.96.0.0/16",
            f"--audit-policy-file={self.workdir / 'audit-policy.yaml'}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
            "--audit-log-maxsize=0",
            "--profiling=false",
            "--v=1",
        ]
        if self.allow_privileged:
            args.append("--allow-privileged=true")
        args.extend(self._gate_args())
        if self.runtime_config:
            args.append(f"--runtime-config={','.join(self.runtime_config)}")
        args.extend(self.apiserver_args)
        proc = self._proc("kube-apiserver", args)
        wait_http(
            f"{self.url}/readyz",
            timeout,
            proc,
            verify=self.tls(),
            headers={"Authorization": f"Bearer {self.admin_token}"},
        )

    def _start_controller_manager(self, timeout: float) -> None:
        assert self.pki is not None
        port = free_port()
        kubeconfig = self.kubeconfig("kube-controller-manager", self._tokens["kube-controller-manager"])
        proc = self._proc(
            "kube-controller-manager",
            [
                self._bin("kube-controller-manager"),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                f"--bind-address={LOOPBACK}",
                f"--secure-port={port}",
                f"--cert-dir={self.workdir / 'kcm-certs'}",
                f"--controllers={','.join(self.controllers)}",
                f"--service-account-private-key-file={self.pki.sa_key}",
                f"--root-ca-file={self.pki.ca_cert}",
                "--use-service-account-credentials=true",
                "--leader-elect=false",
                "--concurrent-gc-syncs=5",
                "--profiling=false",
                "--v=1",
                *self._gate_args(),
            ],
        )
        self.secure_ports["kube-controller-manager"] = port
        wait_http(f"https://{LOOPBACK}:{port}/healthz", timeout, proc, verify=False)

    def _start_kwok(self) -> None:
        kubeconfig = self.kubeconfig("kwok", self._tokens["kwok"])
        self._proc(
            "kwok",
            [
                self._bin("kwok"),
                f"--kubeconfig={kubeconfig}",
                f"--config={self._bin('kwok-stages.yaml')}",
                "--node-lease-duration-seconds=40",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={FAKE_NODE_ANNOTATION}=fake",
                "--cidr=10.0.0.1/16",
                "--node-ip=10.0.0.1",
                f"--server-address={LOOPBACK}:{free_port()}",
            ],
        )

    def start_scheduler(
        self,
        name: str,
        config: Mapping[str, Any],
        token: str,
        *,
        user: str | None = None,
        timeout: float = 300.0,
        extra_args: Sequence[str] = (),
        always_allow_paths: Sequence[str] = ("/healthz", "/readyz", "/livez", "/metrics"),
        serving_cert: tuple[Path, Path] | None = None,
    ) -> Proc:
        """A kube-scheduler with ``config`` (a KubeSchedulerConfiguration) whose client uses ``token``.

        ``clientConnection.kubeconfig`` is set to a kubeconfig for ``token``; the rest of the configuration
        is taken as given. ``always_allow_paths`` are served without authorization (by default ``/metrics``
        too, for the tests and benchmarks that read it; kube-scheduler's own default leaves it out, and then
        every scrape is authorized through the API server). ``serving_cert`` (certificate, key) replaces the
        self-signed certificate kube-scheduler makes. Returns once its ``/readyz`` answers.
        """
        kubeconfig = self.kubeconfig(name, token, user)
        merged = dict(config)
        merged["clientConnection"] = {**dict(config.get("clientConnection") or {}), "kubeconfig": str(kubeconfig)}
        path = self.workdir / f"{name}-config.yaml"
        path.write_text(json.dumps(merged, indent=2) + "\n")
        port = free_port()
        proc = self._proc(
            name,
            [
                self._bin("kube-scheduler"),
                f"--config={path}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--authentication-tolerate-lookup-failure=true",
                f"--authorization-always-allow-paths={','.join(always_allow_paths)}",
                f"--bind-address={LOOPBACK}",
                f"--secure-port={port}",
                f"--cert-dir={self.workdir / (name + '-certs')}",
                *(
                    [f"--tls-cert-file={serving_cert[0]}", f"--tls-private-key-file={serving_cert[1]}"]
                    if serving_cert
                    else []
                ),
                "--profiling=false",
                *self._gate_args(),
                *extra_args,
            ],
        )
        self.secure_ports[name] = port
        wait_http(f"https://{LOOPBACK}:{port}/readyz", timeout, proc, verify=False)
        return proc

    def metrics(self, name: str) -> str:
        """The Prometheus text a kube-scheduler or the kube-controller-manager exposes."""
        resp = httpx.get(
            f"https://{LOOPBACK}:{self.secure_ports[name]}/metrics",
            verify=False,
            headers={"Authorization": f"Bearer {self.admin_token}"},
            timeout=HANG_BACKSTOP,
        )
        resp.raise_for_status()
        return resp.text

    def _start_default_scheduler(self, timeout: float) -> None:
        config = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "leaderElection": {"leaderElect": False},
            "profiles": [{"schedulerName": "default-scheduler"}],
        }
        self.start_scheduler(
            "default-scheduler",
            config,
            self._tokens["kube-scheduler"],
            user="system:kube-scheduler",
            extra_args=self.default_scheduler_args,
        )

    # ---- convenience ----------------------------------------------------------------------

    def wait_for(self, what: str, check: Any, timeout: float = HANG_BACKSTOP, interval: float = 0.2) -> Any:
        """Poll ``check()`` until it returns something truthy; ``timeout`` is a hang backstop."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                last = check()
                if last:
                    return last
            self.check_alive()
            time.sleep(interval)
        raise TimeoutError(f"{what}: not after {timeout} s (last: {last!r})")
