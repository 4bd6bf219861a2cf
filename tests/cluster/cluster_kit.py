"""koordpy on the real control plane: the chart installed with the real helm, the components as host
processes with the configuration the chart rendered (read back from the installed ConfigMaps) and tokens of
the chart's own ServiceAccounts, and the ``koordpy-scheduler`` kube-scheduler from the same binary the
chart's scheduler Deployment runs, with the chart's KubeSchedulerConfiguration.

The chart's own pods (scheduler and manager Deployments, agent DaemonSet) are created by the real
controllers and "run" on kwok nodes, which runs no containers: the processes that do the work are the
ones started here, each with the identity its pod would have. Only ports and file paths are changed:
loopback listeners on free ports, the extender's ``urlPrefix`` in the KubeSchedulerConfiguration pointed
at them, and ``clientConnection.kubeconfig`` for kube-scheduler.

Not guaranteed: concurrent use of one control plane by two test runs (the release, its lease and its
ClusterKopfPeering are cluster-wide).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.cgroupfs import BusyProc, FakeCgroupTree
from koordpy_testkit.controlplane import ControlPlane, fake_node, write_kubeconfig
from koordpy_testkit.faultproxy import FaultProxy
from koordpy_testkit.processes import LOOPBACK, Proc, free_port, stop_all, wait_http

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
HELM = BIN / "helm"
KOORDPY = Path(os.environ.get("KOORDPY_SYSTEM_BIN") or BIN / "koordpy")
CHART = ROOT / "charts" / "koordpy"
RELEASE = "koordpy"
RELEASE_NAMESPACE = "koordpy-system"
PROFILE = "koordpy-scheduler"
SPACE_LABEL = "koordpy.test/space"
READINESS_PERIOD = 3.0
"""Seconds a new pod of a rollout runs beside the old one after it is ready, before the old one is stopped
(the kubelet reports readiness at its next probe: up to the probe's period, 10 s for the chart's manager;
3 s keeps the tests short and still lets two actors overlap long enough to be seen)."""
SYSTEM_NODE = "system-0"
"""A kwok node for the chart's own pods (the scheduler and manager Deployments, a DaemonSet pod)."""

__all__ = [
    "CHART",
    "PROFILE",
    "RELEASE",
    "RELEASE_NAMESPACE",
    "SYSTEM_NODE",
    "Components",
    "Kube",
    "Release",
    "deep_merge",
    "helm",
    "poll",
    "started_plane",
    "wait_until",
]


@contextlib.contextmanager
def started_plane(workdir: Path, **options: Any) -> Iterator[ControlPlane]:
    """A real control plane (``ControlPlane(**options)``, the release namespace's requests audited) with
    :data:`SYSTEM_NODE` registered, stopped on exit."""
    plane = ControlPlane(workdir=workdir, audited_groups=(f"system:serviceaccounts:{RELEASE_NAMESPACE}",), **options)
    plane.start()
    try:
        with plane.client() as api:
            api.post("/api/v1/nodes", json=fake_node(SYSTEM_NODE)).raise_for_status()
        yield plane
    finally:
        plane.stop()


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


# ---- a small typed surface over the API ------------------------------------------------------

_PLURALS = {
    "Pod": ("", "v1", "pods", True),
    "Node": ("", "v1", "nodes", False),
    "Namespace": ("", "v1", "namespaces", False),
    "ConfigMap": ("", "v1", "configmaps", True),
    "Secret": ("", "v1", "secrets", True),
    "Service": ("", "v1", "services", True),
    "Event": ("", "v1", "events", True),
    "ServiceAccount": ("", "v1", "serviceaccounts", True),
    "Deployment": ("apps", "v1", "deployments", True),
    "ReplicaSet": ("apps", "v1", "replicasets", True),
    "DaemonSet": ("apps", "v1", "daemonsets", True),
    "StatefulSet": ("apps", "v1", "statefulsets", True),
    "Job": ("batch", "v1", "jobs", True),
    "PodDisruptionBudget": ("policy", "v1", "poddisruptionbudgets", True),
    "PriorityClass": ("scheduling.k8s.io", "v1", "priorityclasses", False),
    "Lease": ("coordination.k8s.io", "v1", "leases", True),
    "ClusterRole": ("rbac.authorization.k8s.io", "v1", "clusterroles", False),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io", "v1", "clusterrolebindings", False),
    "RoleBinding": ("rbac.authorization.k8s.io", "v1", "rolebindings", True),
    "CSIStorageCapacity": ("storage.k8s.io", "v1", "csistoragecapacities", True),
    "NodeMetric": ("slo.koordinator.sh", "v1alpha1", "nodemetrics", False),
    "Reservation": ("scheduling.koordinator.sh", "v1alpha1", "reservations", False),
    "PodMigrationJob": ("scheduling.koordinator.sh", "v1alpha1", "podmigrationjobs", False),
    "PodGroup": ("scheduling.sigs.k8s.io", "v1alpha1", "podgroups", True),
    "ClusterKopfPeering": ("kopf.dev", "v1", "clusterkopfpeerings", False),
}


def _path(kind: str, namespace: str | None = None, name: str | None = None, group: str | None = None) -> str:
    grp, version, plural, namespaced = _PLURALS[kind]
    if group is not None:
        grp = group
    base = f"/api/{version}" if not grp else f"/apis/{grp}/{version}"
    if namespaced and namespace:
        base += f"/namespaces/{namespace}"
    base += f"/{plural}"
    return base + (f"/{name}" if name else "")


@dataclass
class Kube:
    """Synchronous API calls for the tests (admin unless built with another token)."""

    client: httpx.Client

    def create(self, obj: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        kind = obj["kind"]
        group = obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else ""
        ns = namespace or obj.get("metadata", {}).get("namespace")
        resp = self.client.post(_path(kind, ns, group=group), json=dict(obj))
        if resp.status_code not in (200, 201):
            raise AssertionError(f"create {kind} {obj['metadata'].get('name')}: {resp.status_code} {resp.text[:500]}")
        result: dict[str, Any] = resp.json()
        return result

    def get(
        self, kind: str, name: str, namespace: str | None = None, group: str | None = None
    ) -> dict[str, Any] | None:
        resp = self.client.get(_path(kind, namespace, name, group))
        if resp.status_code == 404:
            return None
        resp.raise_for_status()
        result: dict[str, Any] = resp.json()
        return result

    def list(
        self, kind: str, namespace: str | None = None, group: str | None = None, **params: str
    ) -> list[dict[str, Any]]:
        resp = self.client.get(_path(kind, namespace, group=group), params=params)
        resp.raise_for_status()
        items: list[dict[str, Any]] = resp.json()["items"]
        return items

    def patch(
        self,
        kind: str,
        name: str,
        body: Mapping[str, Any],
        namespace: str | None = None,
        subresource: str = "",
        group: str | None = None,
    ) -> dict[str, Any]:
        path = _path(kind, namespace, name, group) + (f"/{subresource}" if subresource else "")
        resp = self.client.patch(path, json=dict(body), headers={"Content-Type": "application/merge-patch+json"})
        if resp.status_code != 200:
            raise AssertionError(f"patch {kind} {name}: {resp.status_code} {resp.text[:500]}")
        result: dict[str, Any] = resp.json()
        return result

    def delete(
        self, kind: str, name: str, namespace: str | None = None, group: str | None = None, grace: int | None = None
    ) -> int:
        params = {"gracePeriodSeconds": str(grace)} if grace is not None else None
        return self.client.delete(_path(kind, namespace, name, group), params=params).status_code

    def evict(self, namespace: str, name: str) -> httpx.Response:
        return self.client.post(
            f"/api/v1/namespaces/{namespace}/pods/{name}/eviction",
            json={"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}},
        )

    def events(self, namespace: str, involved: str | None = None) -> list[dict[str, Any]]:
        params = {"fieldSelector": f"involvedObject.name={involved}"} if involved else {}
        return self.list("Event", namespace, **params)


def poll(what: str, check: Callable[[], Any], timeout: float = HANG_BACKSTOP, interval: float = 0.1) -> Any:
    """Poll ``check()`` until truthy or ``timeout``; the last value either way (the caller asserts on it).

    Prints how long it waited (shown with the test's output on failure, or with ``-s``).
    """
    start = time.monotonic()
    last: Any = None
    while True:
        last = check()
        elapsed = time.monotonic() - start
        if last or elapsed >= timeout:
            print(f"[{time.strftime('%H:%M:%S')}] {what}: {'done' if last else 'NOT done'} after {elapsed:.2f} s")
            return last
        time.sleep(interval)


def wait_until(what: str, check: Callable[[], Any], timeout: float = HANG_BACKSTOP, interval: float = 0.1) -> Any:
    """Poll ``check()`` until truthy. ``timeout`` is a hang backstop, never an expectation of speed:
    reaching it raises :class:`TimeoutError` (a broken precondition, not the assertion under test)."""
    last = poll(what, check, timeout, interval)
    if not last:
        raise TimeoutError(f"{what}: still not true after {timeout} s (last: {last!r})")
    return last


# ---- helm ---------------------------------------------------------------------------------------


def helm(plane: ControlPlane, *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """The real helm binary against ``plane`` as its admin (helm's own caches under the plane's directory)."""
    assert HELM.is_file(), f"{HELM} missing: run scripts/install-helm.sh {HELM.parent.parent}"
    home = plane.workdir / "helm"
    env = {
        **os.environ,
        "KUBECONFIG": str(plane.admin_kubeconfig),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    result = subprocess.run([str(HELM), *args], capture_output=True, text=True, env=env, timeout=timeout, check=False)
    if check and result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


@dataclass
class Release:
    """The chart installed in ``plane`` as release ``name`` in ``namespace``."""

    plane: ControlPlane
    kube: Kube
    name: str = RELEASE
    namespace: str = RELEASE_NAMESPACE

    def install(self, *values: str, upgrade: bool = False) -> subprocess.CompletedProcess[str]:
        verb = ["upgrade", "--install"] if upgrade else ["install"]
        return helm(self.plane, *verb, self.name, str(CHART), "-n", self.namespace, "--create-namespace", *values)

    def uninstall(self, *args: str) -> subprocess.CompletedProcess[str]:
        return helm(self.plane, "uninstall", self.name, "-n", self.namespace, "--wait", *args)

    def user_values(self) -> dict[str, Any]:
        """The values the release was installed or last upgraded with (``helm get values``)."""
        found = json.loads(helm(self.plane, "get", "values", self.name, "-n", self.namespace, "-o", "json").stdout)
        return dict(found or {})

    def configmaps(self) -> dict[str, dict[str, str]]:
        """Every ConfigMap of the release by name (what its components read)."""
        listed = self.kube.list("ConfigMap", self.namespace, labelSelector=f"app.kubernetes.io/instance={self.name}")
        return {item["metadata"]["name"]: dict(item.get("data") or {}) for item in listed}

    @contextlib.contextmanager
    def changed(self, *values: str) -> Iterator[None]:
        """The release upgraded with ``values`` on top of its own; afterwards exactly its former values
        again, and every ConfigMap as it was (checked: a test after this one must not run on them).

        The restore is ``--reset-values`` with the saved values, not ``--reuse-values`` with the changed keys
        set to null: under ``--reuse-values`` helm makes the old values the chart's defaults, so a key set
        to null falls back to the value it had (helm v3 ``pkg/action/upgrade.go``, ``reuseValues``)."""
        saved = self.user_values()
        before = self.configmaps()
        self.install("--reuse-values", *values, upgrade=True)
        try:
            yield
        finally:
            path = self.plane.workdir / f"values-{uuid.uuid4().hex[:8]}.json"
            path.write_text(json.dumps(saved))
            self.install("--reset-values", "-f", str(path), upgrade=True)
            after = self.configmaps()
            assert after == before, f"the release's ConfigMaps differ after its values were restored: {after}"

    def configmap(self, component: str) -> dict[str, str]:
        obj = self.kube.get("ConfigMap", f"{self.name}-{component}", self.namespace)
        assert obj is not None, f"ConfigMap {self.name}-{component} not installed"
        return dict(obj.get("data") or {})

    def component_config(self, component: str, key: str = "config.yaml") -> dict[str, Any]:
        config: dict[str, Any] = yaml.safe_load(self.configmap(component)[key])
        return config

    def service_account(self, component: str) -> str:
        return f"{self.name}-{component}"

    def token(self, component: str, *, bound_pod: tuple[str, str] | None = None) -> str:
        return self.plane.token(self.namespace, self.service_account(component), bound_pod=bound_pod)


# ---- components ----------------------------------------------------------------------------------


@dataclass
class Components:
    """The koordpy processes of one test (stopped by :meth:`close`), logging under ``workdir``."""

    plane: ControlPlane
    release: Release
    workdir: Path
    procs: list[Proc] = field(default_factory=list)
    extender_base: str = ""
    extender_ops: str = ""
    manager_base: str = ""
    scheduler_proc: Proc | None = None
    extender_front: FaultProxy | None = None
    """The recording proxy kube-scheduler calls the extender through (:meth:`record_extender_calls`)."""
    proxies: list[FaultProxy] = field(default_factory=list)
    managers: list[Proc] = field(default_factory=list)
    """The manager processes started by :meth:`start_manager` (standbys included)."""

    def _proc(self, name: str, args: list[str], env: Mapping[str, str] | None = None) -> Proc:
        proc = Proc(name, args, self.workdir / f"{name}.log", env=dict(env or {}), cwd=ROOT).start()
        self.procs.append(proc)
        return proc

    def kubeconfig(self, component: str, token: str, api: FaultProxy | None = None) -> Path:
        """A kubeconfig for ``token``: to the API server, or through ``api`` (a proxy from :meth:`api_proxy`)."""
        name = f"{component}-{uuid.uuid4().hex[:6]}"
        if api is None:
            return self.plane.kubeconfig(name, token, f"{component}-sa")
        path = self.plane.workdir / "kubeconfigs" / f"{name}-via-proxy.yaml"
        return write_kubeconfig(path, api.url, self.plane.ca_cert, token, f"{component}-sa")

    def token_file_kubeconfig(self, component: str, token_file: Path, api: FaultProxy | None = None) -> Path:
        """A kubeconfig whose user reads its token from ``token_file`` (``tokenFile``, as kubectl and
        client-go read it: the file, not a copy of its content); to the API server, or through ``api``."""
        path = self.plane.workdir / "kubeconfigs" / f"{component}-{uuid.uuid4().hex[:6]}-token-file.yaml"
        server = self.plane.url if api is None else api.url
        config = yaml.safe_load(write_kubeconfig(path, server, self.plane.ca_cert, "unused", component).read_text())
        config["users"][0]["user"] = {"tokenFile": str(token_file)}
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    # -- fault proxies --

    def api_proxy(self, seed: int = 0, capture_bodies: bool = False) -> FaultProxy:
        """A fault proxy in front of the API server, serving TLS with the API server's own certificate (a
        component's kubeconfig through it differs only in the port); stopped with the components."""
        assert self.plane.pki is not None
        listen = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        listen.load_cert_chain(self.plane.pki.serving_cert, self.plane.pki.serving_key)
        proxy = FaultProxy(
            self.plane.url, upstream_ssl=self.plane.tls(), listen_ssl=listen, seed=seed, capture_bodies=capture_bodies
        ).start()
        self.proxies.append(proxy)
        return proxy

    def record_extender_calls(self) -> FaultProxy:
        """A recording proxy (bodies kept) between kube-scheduler and the extender started last: every
        filter, prioritize and bind call, with the times it was forwarded and answered. Call it after
        :meth:`start_extender` and before :meth:`start_scheduler`."""
        assert self.extender_base, "start_extender() first"
        proxy = FaultProxy(self.extender_base, capture_bodies=True).start()
        self.proxies.append(proxy)
        self.extender_front = proxy
        return proxy

    def restart(
        self, proc: Proc, ready_url: str, timeout: float = HANG_BACKSTOP, env: Mapping[str, str] | None = None
    ) -> None:
        """Start ``proc`` again with the same arguments (same ports, same files) and wait until ready; ``env``:
        its environment from now on (the test's own, plus these)."""
        if env is not None:
            proc.environment(env)
        proc.start()
        wait_http(ready_url, timeout, proc)

    # -- extender + koordpy-scheduler --

    def start_extender(
        self,
        overrides: Mapping[str, Any] | None = None,
        timeout: float = HANG_BACKSTOP,
        *,
        wait_ready: bool = True,
        api: FaultProxy | None = None,
        extra_args: Iterable[str] = (),
        kubeconfig: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Proc:
        """``koordpy extender`` on the chart's configuration (``overrides`` merged in) with a kubeconfig for
        the scheduler ServiceAccount's token (``kubeconfig``: another one; ``env`` added to its environment)."""
        config = self.release.component_config("scheduler")
        port, ops = free_port(), free_port()
        ports: dict[str, Any] = {"host": LOOPBACK, "port": port}
        if config.get("extender", {}).get("metricsPort") is not None:
            ports |= {"metricsHost": LOOPBACK, "metricsPort": ops}
        config = deep_merge(deep_merge(config, dict(overrides or {})), {"extender": ports})
        path = self.workdir / "extender-config.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        kubeconfig = kubeconfig or self.kubeconfig("extender", self.release.token("scheduler"), api)
        proc = self._proc(
            "extender",
            [str(KOORDPY), "extender", "--config", str(path), "--kubeconfig", str(kubeconfig), *extra_args],
            env,
        )
        self.extender_base = f"http://{LOOPBACK}:{port}"
        self.extender_ops = f"http://{LOOPBACK}:{ops}" if "metricsPort" in ports else self.extender_base
        if wait_ready:
            wait_http(self.extender_base + "/readyz", timeout, proc)
        else:
            wait_http(self.extender_base + "/healthz", timeout, proc)
        return proc

    def kube_scheduler_config(self) -> dict[str, Any]:
        """The chart's KubeSchedulerConfiguration with the extender entries pointed at this test's extender
        (through the recording proxy when there is one)."""
        assert self.extender_base, "start_extender() first"
        config: dict[str, Any] = yaml.safe_load(self.release.configmap("scheduler")["kube-scheduler.yaml"])
        url = self.extender_front.url if self.extender_front is not None else self.extender_base
        for extender in config.get("extenders") or []:
            extender["urlPrefix"] = url
        return config

    def start_scheduler(
        self,
        config: Mapping[str, Any] | None = None,
        timeout: float = HANG_BACKSTOP,
        extra_args: Iterable[str] = (),
        *,
        fresh_lease: bool = True,
        **options: Any,
    ) -> Proc:
        """kube-scheduler as the chart's scheduler Deployment runs it, on the scheduler ServiceAccount's token
        (``extra_args``: command-line flags added to ``--v=2``). ``fresh_lease`` deletes its Lease first (a
        previous test's scheduler may have died holding it); a rollout keeps it (the old one holds it).
        ``options`` go to :meth:`ControlPlane.start_scheduler` (``always_allow_paths``, ``serving_cert``)."""
        config = config or self.kube_scheduler_config()
        lease = (config.get("leaderElection") or {}).get("resourceName")
        if lease and fresh_lease:
            self.release.kube.delete("Lease", lease, self.release.namespace)
        proc = self.plane.start_scheduler(
            f"koordpy-scheduler-{uuid.uuid4().hex[:6]}",
            config,
            self.release.token("scheduler"),
            user="koordpy-scheduler-sa",
            timeout=timeout,
            extra_args=["--v=2", *extra_args],
            **options,
        )
        self.procs.append(proc)
        self.scheduler_proc = proc
        return proc

    def scheduler_metrics(self) -> str:
        assert self.scheduler_proc is not None, "start_scheduler() first"
        return self.plane.metrics(self.scheduler_proc.name)

    def scheduler_queue(self) -> dict[str, int]:
        """kube-scheduler's ``scheduler_pending_pods`` by queue (active, backoff, unschedulable, gated)."""
        out: dict[str, int] = {}
        for line in iter_lines(self.scheduler_metrics(), "scheduler_pending_pods{"):
            labels, value = line.rsplit(" ", 1)
            queue = labels.split('queue="', 1)[1].split('"', 1)[0]
            out[queue] = out.get(queue, 0) + int(float(value))
        return out

    def parked(self, count: int) -> bool:
        """Whether exactly ``count`` pods wait among kube-scheduler's unschedulable pods and none is active
        or backing off (so only a cluster event or the periodic flush can move them)."""
        queue = self.scheduler_queue()
        return queue.get("unschedulable", 0) == count and queue.get("active", 0) == 0 and queue.get("backoff", 0) == 0

    def start_scheduling(
        self,
        overrides: Mapping[str, Any] | None = None,
        kubeconfig: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """The extender and the koordpy-scheduler kube-scheduler in front of it."""
        self.start_extender(overrides, kubeconfig=kubeconfig, env=env)
        self.start_scheduler()

    def extender_metrics(self) -> str:
        return httpx.get(self.extender_ops + "/metrics", timeout=HANG_BACKSTOP).text

    # -- manager --

    def start_manager(
        self,
        overrides: Mapping[str, Any] | None = None,
        timeout: float = HANG_BACKSTOP,
        name: str = "manager",
        api: FaultProxy | None = None,
        extra_args: Iterable[str] = (),
        kubeconfig: Path | None = None,
        env: Mapping[str, str] | None = None,
        wait: bool = True,
        fresh_lease: bool = True,
    ) -> Proc:
        """``koordpy manager`` on the installed configuration (``overrides`` merged in), through ``api`` when
        given; returns once its ``/healthz`` answers (``wait``), else at once. The first manager of a test
        (none alive) frees the Lease first (``fresh_lease``)."""
        config = self.release.component_config("manager")
        port = free_port()
        config = deep_merge(config, {"health": {"host": LOOPBACK, "port": port}, **(overrides or {})})
        election = config.get("leaderElection") or {}
        if fresh_lease and election.get("leaderElect", True) and not any(p.alive() for p in self.managers):
            # the first manager of a test: a previous test's manager may have died holding the Lease (freed as
            # a leader frees it when it stops)
            with contextlib.suppress(AssertionError):
                self.release.kube.patch(
                    "Lease",
                    election["resourceName"],
                    {"spec": {"holderIdentity": "", "leaseDurationSeconds": 1}},
                    election["resourceNamespace"],
                )
        path = self.workdir / f"{name}-config.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        kubeconfig = kubeconfig or self.kubeconfig(name, self.release.token("manager"), api)
        proc = self._proc(
            name, [str(KOORDPY), "manager", "--config", str(path), "--kubeconfig", str(kubeconfig), *extra_args], env
        )
        self.manager_base = f"http://{LOOPBACK}:{port}"
        self.managers.append(proc)
        if wait:
            wait_http(self.manager_base + "/healthz", timeout, proc)
        return proc

    # -- rollouts: the processes of a Deployment's pods replaced as its strategy replaces the pods --

    def rollout_order(self, component: str) -> str:
        """How the installed ``<release>-<component>`` Deployment replaces its pods: ``surge`` (a new pod starts
        before an old one stops: RollingUpdate with a maxSurge of at least one pod) or ``recreate`` (old pods
        stop first: Recreate, or a maxSurge of 0). Read from the object the API server stores, defaults
        included (no ``strategy`` in the chart means RollingUpdate with 25 %: one pod of surge)."""
        deployment = self.release.kube.get("Deployment", f"{self.release.name}-{component}", self.release.namespace)
        assert deployment is not None, f"Deployment {self.release.name}-{component} not installed"
        strategy = deployment["spec"].get("strategy") or {}
        if strategy.get("type") == "Recreate":
            return "recreate"
        surge = (strategy.get("rollingUpdate") or {}).get("maxSurge", "25%")
        replicas = int(deployment["spec"].get("replicas", 1))
        pods = -(-int(surge[:-1]) * replicas // 100) if isinstance(surge, str) else int(surge)  # rounded up
        return "surge" if pods >= 1 else "recreate"

    def roll(self, component: str, stop_old: Callable[[], None], start_new: Callable[[], Any]) -> str:
        """Replace one pod's processes in the order the Deployment's strategy gives (:meth:`rollout_order`):
        surge starts the new ones (ready) before the old ones get SIGTERM; recreate stops the old ones (their
        exit awaited, as a pod's deletion awaits its containers) before the new ones start."""
        order = self.rollout_order(component)
        if order == "surge":
            start_new()
            stop_old()
        else:
            stop_old()
            start_new()
        return order

    def roll_manager(self, old: Proc, name: str, overrides: Mapping[str, Any] | None = None) -> tuple[Proc, str]:
        """The manager's pod replaced by a rollout: a new process ``name`` on the configuration now installed
        (and a token of its own), ``old`` stopped with SIGTERM and the grace the chart's pod has (30 s)."""
        started: list[Proc] = []

        def start_new() -> None:
            started.append(self.start_manager(overrides, name=name))
            # Ready as the chart's readinessProbe sees it (/readyz: the operator started, or standing by for the
            # Lease with its caches listed), and the kubelet reports it at its next probe: the old pod is
            # stopped only then.
            wait_http(self.manager_base + "/readyz", HANG_BACKSTOP, started[0])
            time.sleep(READINESS_PERIOD)

        order = self.roll("manager", lambda: old.stop(grace=30.0), start_new)
        return started[0], order

    def roll_scheduler(
        self, old: tuple[Proc, Proc], overrides: Mapping[str, Any] | None = None
    ) -> tuple[Proc, Proc, str]:
        """The scheduler's pod replaced by a rollout: a new extender (ready) and a new kube-scheduler in front
        of it, which waits for kube-scheduler's Lease while the old one holds it; ``old`` (extender,
        kube-scheduler) stopped with SIGTERM, both at once as a pod's containers are."""
        started: list[Proc] = []

        def start_new() -> None:
            started.append(self.start_extender(overrides))
            started.append(self.start_scheduler(fresh_lease=False))

        def stop_old() -> None:
            for proc in old:
                proc._signal_group(signal.SIGTERM)
            for proc in old:
                proc.stop(grace=30.0)

        order = self.roll("scheduler", stop_old, start_new)
        return started[0], started[1], order

    # -- agent --

    def agent_pod(self, node: str) -> dict[str, Any]:
        """The chart's agent DaemonSet pod on ``node`` (created by the real DaemonSet controller)."""
        kube = self.release.kube

        def find() -> dict[str, Any] | None:
            for pod in kube.list("Pod", self.release.namespace, fieldSelector=f"spec.nodeName={node}"):
                if pod["metadata"]["name"].startswith(f"{self.release.name}-agent-"):
                    return pod
            return None

        pod: dict[str, Any] = wait_until(f"agent pod on {node}", find)
        return pod

    def start_agent(
        self,
        node: str,
        args: Iterable[str],
        overrides: Mapping[str, Any] | None = None,
        api: FaultProxy | None = None,
        kubeconfig: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Proc:
        """``koordpy agent run`` for ``node`` with a token bound to the agent pod the DaemonSet put there
        (``kubeconfig``: another one; ``env`` added to its environment)."""
        config = deep_merge(self.release.component_config("agent"), overrides or {})
        path = self.workdir / f"agent-{node}-config.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        if kubeconfig is None:
            pod = self.agent_pod(node)
            token = self.release.token("agent", bound_pod=(pod["metadata"]["name"], pod["metadata"]["uid"]))
            kubeconfig = self.kubeconfig(f"agent-{node}", token, api)
        return self._proc(
            f"agent-{node}",
            [
                str(KOORDPY),
                "agent",
                "run",
                "--config",
                str(path),
                "--node",
                node,
                "--kubeconfig",
                str(kubeconfig),
                *args,
            ],
            env,
        )

    def start_ready_agent(
        self,
        node: str,
        cgroup_root: Path,
        proc_root: Path,
        state_dir: Path,
        overrides: Mapping[str, Any] | None = None,
        kubeconfig: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> tuple[Proc, str]:
        """``start_agent`` on a fake cgroup tree and /proc, collecting every 0.2 s and reporting every 1 s;
        returns once its ``/readyz`` answers, with that URL (for :meth:`restart`)."""
        port = free_port()
        settings = {
            "collectIntervalSeconds": 0.2,
            "stateDir": str(state_dir),
            "server": {"host": LOOPBACK, "port": port},
            "nodeMetric": {"reportIntervalSeconds": 1, "aggregateDurationSeconds": 1},
        }
        agent = self.start_agent(
            node,
            ["--cgroup-root", str(cgroup_root), "--proc-root", str(proc_root)],
            deep_merge(settings, overrides or {}),
            kubeconfig=kubeconfig,
            env=env,
        )
        readyz = f"http://{LOOPBACK}:{port}/readyz"
        wait_http(readyz, 180, agent)
        return agent, readyz

    def close(self) -> None:
        stop_all(list(reversed(self.procs)))
        for proxy in self.proxies:
            proxy.stop()
        leftovers = [p.name for p in self.procs if p.group_alive()]
        assert not leftovers, f"processes survived their stop: {leftovers}"


# ---- per-test objects --------------------------------------------------------------------------


@dataclass
class Space:
    """A namespace and the nodes of one test, removed afterwards."""

    kube: Kube
    namespace: str
    nodes: list[str] = field(default_factory=list)

    @property
    def selector(self) -> dict[str, str]:
        """The label every node of this space carries; pods select it unless told otherwise."""
        return {SPACE_LABEL: self.namespace}

    def node(self, suffix: str, labels: Mapping[str, str] | None = None, **kwargs: Any) -> str:
        name = f"{self.namespace}-{suffix}"
        self.kube.create(fake_node(name, labels={**self.selector, **(labels or {})}, **kwargs))
        self.nodes.append(name)
        return name

    def wait_nodes_ready(self) -> None:
        def ready() -> bool:
            for name in self.nodes:
                node = self.kube.get("Node", name)
                conditions = {c["type"]: c["status"] for c in (node or {}).get("status", {}).get("conditions", [])}
                taints = (node or {}).get("spec", {}).get("taints") or []
                if conditions.get("Ready") != "True" or any(t["key"].startswith("node.kubernetes.io/") for t in taints):
                    return False
            return True

        wait_until(f"nodes {self.nodes} Ready and untainted", ready)

    def pod(
        self,
        name: str,
        *,
        cpu: str = "100m",
        memory: str = "128Mi",
        scheduler: str = PROFILE,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        node_selector: Mapping[str, str] | None = None,
        priority_class: str | None = None,
        extra_spec: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "schedulerName": scheduler,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/app:1",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                }
            ],
        }
        spec["nodeSelector"] = dict(self.selector if node_selector is None else node_selector)
        if priority_class:
            spec["priorityClassName"] = priority_class
        spec |= dict(extra_spec or {})
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": dict(labels or {}),
                "annotations": dict(annotations or {}),
            },
            "spec": spec,
        }

    def create_pod(self, name: str, **kwargs: Any) -> dict[str, Any]:
        return self.kube.create(self.pod(name, **kwargs))

    def pods(self) -> dict[str, dict[str, Any]]:
        return {p["metadata"]["name"]: p for p in self.kube.list("Pod", self.namespace)}

    def bound(self) -> dict[str, str]:
        """Pod name -> node, for the pods of this namespace that are bound."""
        return {n: p["spec"]["nodeName"] for n, p in self.pods().items() if p["spec"].get("nodeName")}

    def count_pods(self, count: int) -> dict[str, dict[str, Any]] | None:
        """The namespace's pods when exactly ``count`` exist (for :func:`wait_until`), else None."""
        pods = self.pods()
        return pods if len(pods) == count else None

    def count_bound(self, count: int) -> dict[str, str] | None:
        """The bound pods when exactly ``count`` are bound (for :func:`wait_until`), else None."""
        bound = self.bound()
        return bound if len(bound) == count else None

    def close(self) -> None:
        """Delete the namespace, then the nodes, and wait until its pods and its nodes are gone, so the next
        test starts on a quiet cluster (pod and node deletions are cluster events that move kube-scheduler's
        unschedulable pods). The rest of the namespace's objects go in the background: the namespace
        controller's clean-up (about 5 s) concerns no later test, as every test has a namespace of its own.

        The nodes go only after the namespace's pods: kwok finishes a deleted pod only while its node exists,
        and a pod left on a deleted node waits for kube-controller-manager's pod garbage collector (its
        orphan quarantine is 40 s, checked every 20 s)."""
        with contextlib.suppress(httpx.HTTPError):
            self.kube.delete("Namespace", self.namespace)
        with contextlib.suppress(httpx.HTTPError):
            for pod in self.kube.list("Pod", self.namespace):
                self.kube.delete("Pod", pod["metadata"]["name"], self.namespace, grace=0)
        wait_until(f"pods of namespace {self.namespace} deleted", lambda: not self.kube.list("Pod", self.namespace))
        for name in self.nodes:
            with contextlib.suppress(httpx.HTTPError):
                self.kube.delete("Node", name)
        wait_until(
            f"nodes of {self.namespace} deleted", lambda: all(self.kube.get("Node", n) is None for n in self.nodes)
        )


def bindings_by_pod(plane: ControlPlane, namespace: str) -> dict[str, list[dict[str, Any]]]:
    """Every ``pods/binding`` create the API server answered for ``namespace``, by pod, from the audit log."""
    out: dict[str, list[dict[str, Any]]] = {}
    for event in plane.audit_events():
        ref = event.get("objectRef") or {}
        if ref.get("subresource") == "binding" and ref.get("namespace") == namespace and event.get("verb") == "create":
            out.setdefault(ref.get("name", ""), []).append(event)
    return out


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=1, sort_keys=True)[:4000]


def iter_lines(text: str, prefix: str) -> Iterator[str]:
    return (line for line in text.splitlines() if line.startswith(prefix))


@contextlib.contextmanager
def fake_node_files(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """The agent's cgroup tree and /proc for a kwok node (nothing runs there), /proc ticking: (cgroup root,
    proc root)."""
    busy = BusyProc(tmp_path / "proc", cpus=16, mem_total_kib=64 << 20, mem_avail_kib=48 << 20)
    tree = FakeCgroupTree(tmp_path / "cgroup", version=2, driver="systemd")
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(0.1):
            busy.tick()

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        yield tree.root, busy.root
    finally:
        stop.set()
        ticker.join(timeout=5)
