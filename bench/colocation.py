"""Co-location bench (not a test): does the agent keep a latency-sensitive pod's latency when batch pods burn the
node, and at what cost to the batch work? On a real node: the guest tier's QEMU guest (cgroup v2, TCG) running
a real kubelet (containerd, runc) registered with a real control plane (``koordpy_testkit.controlplane``),
and ``koordpy agent run`` beside it, as the cluster tier's kubelet test sets them up.

Pods (all real, started by the kubelet; their containers run the host's Python through read-only hostPath
mounts, ``bench/colocation_probe.py``):

* ``probe``: Guaranteed, 500m (``cpu.weight`` 20; 400m, weight 16, on a one-vCPU guest), priority 9000: one unit of CPU work (about 1 ms on a quiet
  CPU, calibrated in the guest) every 10 ms, recording each unit's delay from its due time (open loop);
* ``probe-mem``: the same, each unit also reading 32 pages of a 64 MiB memory-mapped file (its working set);
* ``be-1``, ``be-2``: BestEffort batch (priority 5000): ``cpu.weight`` 1 for their slice;
* ``bu-1``, ``bu-2``: Burstable batch with 250m requests (200m on one vCPU): their slice's weight (with the
  agent's 50m) about equals the probe's;
* ``hog`` (a Deployment of one, so an evicted hog comes back): BestEffort, allocates memory at 20 MiB/s;
* ``koordpy-agent`` in ``kube-system``: the agent as the chart's DaemonSet runs it (50m requested: weight 2).

Cases, every round taking each in turn (the order rotates per round): ``alone``; ``be`` and ``bu``: the two
batch pods of that class burn a CPU each for the burst, with no QoS object (``noagent``), with the waterline a
Crane user writes (``util``: NodeQOS ``cpu_total_utilization`` > 60 % with a PodQOS allowing batch
priorities 0-5999; AvoidanceAction step 50 %, cool-down 4 s, thresholds 2 and 3; the agent samples every
2 s) and with koordpy's pressure
rule (``psi``: ``pod_cpu_pressure_some_avg10`` of the probes, selected by their ``app`` label, >
``--psi-line``; same action and PodQOS). Memory (``--memory``): ``mem-alone``, ``mem-noagent``, ``mem-util`` (``memory_total_utilization`` >
80 % evicts), ``mem-psi`` (``pod_memory_pressure_some_avg10`` > ``--mem-psi-line`` evicts).

Per case and round: the probe's p50/p99/max delay over the burst (as ratios to ``alone`` of the same round),
batch CPU-seconds over the burst (ratio to that class's ``noagent``), the agent's throttle/restore/evict
actions, and the time from the burst's start until the probe's p99 over a sliding 2 s window is back under
1.5 x alone's p99 and stays there (``recovery``). The figures per case are medians over the rounds.

Then the simulator agreement (``docs/simulate.md``): each agent case is replayed by ``koordpy simulate``'s
engine on a one-node scenario built from this run's measurements (node capacity, system CPU, each pod's
demand from its ``noagent`` use, the pressure model calibrated on the ``noagent`` pressure), and its
throttle actions and caps are compared with the guest's.

Run (as root, after ``scripts/install-guest.sh`` and with the binaries ``scripts/run-tests.sh`` sets up):
``nice .venv/bin/python bench/colocation.py [--rounds 2] [--cpus 2] [--burst 30] [--memory]``. On one vCPU the
requests shrink (``cpu_requests``) so that every pod and the agent fit the node's allocatable CPU: the kubelet
admits the agent's critical pod by preempting a batch pod otherwise. Prints the
table and writes ``bench/results/colocation.json``. About 25-40 minutes.

Not guaranteed: TCG timing. The guest's timer and scheduler run emulated on a shared host: the probe's
"alone" delays are mostly that noise, and a loaded host steals time from the guest's vCPUs; the host's load
average is recorded beside every case.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import colocation_guest as guestside  # this directory: the guest imports it too (PYTHONPATH)
import httpx

from koordpy.crds import RESOURCES, crd_manifest
from koordpy_testkit.controlplane import ControlPlane, ensure_kubelet
from koordpy_testkit.controlplane.pki import client_certificate
from koordpy_testkit.guest import GUEST_HOST, Guest, images, kubelet, node

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS = BENCH / "results" / "colocation.json"
API_PORT = 6443
AGENT_PORT = 9316
AGENT_INTERVAL = 2  # seconds: under TCG a tick costs about a hundred times a real CPU's
NODE = "colocation-node"
NS = "colocation"
PAUSE_IMAGE = "koordpy.local/pause:bench"
BUSYBOX_IMAGE = "koordpy.local/busybox:bench"
RUN_DIR = "/run/koordpy-bench"  # in the guest: the probes' records and the load flags
PYTHON = os.path.realpath(sys.executable)
PREFIX = sys.base_prefix
WORKSET_MIB = 64
MiB = 1 << 20


def cpu_requests(cpus: int) -> dict[str, int]:
    """Millicores the probes and each Burstable batch pod request on a node of ``cpus`` CPUs: together with the
    agent's 50m they fit its allocatable CPU."""
    return {"probe": 500, "bu": 250} if cpus >= 2 else {"probe": 400, "bu": 200}


CPU_CASES = ("alone", "be-noagent", "be-util", "be-psi", "bu-noagent", "bu-util", "bu-psi")
MEMORY_CASES = ("mem-alone", "mem-noagent", "mem-util", "mem-psi")


# ---- the control plane side -----------------------------------------------------------------------------


def api(cp: ControlPlane) -> httpx.Client:
    return cp.client(timeout=120.0)


def create(client: httpx.Client, path: str, obj: dict[str, Any]) -> dict[str, Any]:
    resp = client.post(path, json=obj)
    if resp.status_code == 409:
        return client.get(f"{path}/{obj['metadata']['name']}").json()
    resp.raise_for_status()
    return resp.json()


def wait(what: str, check: Any, timeout: float = 900.0, interval: float = 1.0) -> Any:
    end = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > end:
            raise RuntimeError(f"{what}: not done after {timeout:.0f} s")
        time.sleep(interval)


def install_crds(client: httpx.Client) -> None:
    for res in RESOURCES:
        if res.group != "ensurance.crane.io":
            continue
        create(client, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd_manifest(res))

    def established() -> bool:
        items = client.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions").json()["items"]
        done = {
            i["metadata"]["name"]
            for i in items
            if any(
                c["type"] == "Established" and c["status"] == "True"
                for c in (i.get("status") or {}).get("conditions") or []
            )
        }
        return {f"{r.plural}.{r.group}" for r in RESOURCES if r.group == "ensurance.crane.io"} <= done

    wait("the ensurance CRDs established", established)


def kubeconfig(guest: Guest, cp: ControlPlane, name: str, user: dict[str, str]) -> str:
    shutil.copy(cp.ca_cert, guest.job / "ca.crt")
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "host",
                "cluster": {
                    "server": f"https://{GUEST_HOST}:{API_PORT}",
                    "certificate-authority": str(guest.job / "ca.crt"),
                    "tls-server-name": "localhost",
                },
            }
        ],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": "host", "user": name}}],
        "current-context": name,
    }
    path = guest.job / f"{name}.kubeconfig"
    path.write_text(json.dumps(config))
    return str(path)


# ---- pods -------------------------------------------------------------------------------------------------


def _mounts(extra: dict[str, str] | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """hostPath mounts that let a busybox container run the host's interpreter and this directory."""
    paths = {"usr": "/usr", "lib": "/usr/lib", "lib64": "/usr/lib64", "python": PREFIX, "bench": str(BENCH)}
    targets = {"usr": "/usr", "lib": "/lib", "lib64": "/lib64", "python": PREFIX, "bench": "/bench"}
    volumes = [{"name": n, "hostPath": {"path": p, "type": "Directory"}} for n, p in paths.items()]
    mounts = [{"name": n, "mountPath": targets[n], "readOnly": True} for n in paths]
    volumes.append({"name": "run", "hostPath": {"path": RUN_DIR, "type": "DirectoryOrCreate"}})
    mounts.append({"name": "run", "mountPath": "/run/bench"})
    for name, path in (extra or {}).items():
        volumes.append({"name": name, "hostPath": {"path": path, "type": "Directory"}})
        mounts.append({"name": name, "mountPath": f"/{name}", "readOnly": True})
    return volumes, mounts


def pod_spec(
    args: list[str], resources: dict[str, Any], priority_class: str, extra: dict[str, str] | None = None
) -> dict[str, Any]:
    volumes, mounts = _mounts(extra)
    return {
        "nodeName": NODE,
        "priorityClassName": priority_class,
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 1,
        "enableServiceLinks": False,
        "containers": [
            {
                "name": "main",
                "image": BUSYBOX_IMAGE,
                "imagePullPolicy": "Never",
                "command": [PYTHON, "-S", "/bench/colocation_probe.py", *args],
                "resources": resources,
                "volumeMounts": mounts,
            }
        ],
        "volumes": volumes,
    }


def agent_pod(job: Path) -> dict[str, Any]:
    """``koordpy agent run`` as the chart's DaemonSet runs it: its own pod (requests 50m and 96Mi, a 256Mi memory
    limit: Burstable, ``cpu.weight`` 2), the node's cgroupfs through a hostPath at ``/host/sys/fs/cgroup``, its
    state on a hostPath; plus the host network (the API server is reachable from the guest's own network only)
    and this checkout read-only (the interpreter and the virtualenv)."""
    volumes, mounts = _mounts({})
    volumes += [
        {"name": "checkout", "hostPath": {"path": str(ROOT), "type": "Directory"}},
        {"name": "job", "hostPath": {"path": str(job), "type": "Directory"}},
        {"name": "cgroup", "hostPath": {"path": "/sys/fs/cgroup", "type": "Directory"}},
        {"name": "state", "hostPath": {"path": "/run/koordpy-agent", "type": "DirectoryOrCreate"}},
        {"name": "tmp", "emptyDir": {}},
    ]
    mounts += [
        {"name": "checkout", "mountPath": str(ROOT), "readOnly": True},
        {"name": "job", "mountPath": str(job), "readOnly": True},
        {"name": "cgroup", "mountPath": "/host/sys/fs/cgroup"},
        {"name": "state", "mountPath": "/run/koordpy-agent"},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    argv = [str(ROOT / ".venv" / "bin" / "koordpy"), "agent", "run", "--config", str(job / "agent.yaml")]
    argv += ["--node", NODE, "--kubeconfig", str(job / "agent.kubeconfig"), "--cgroup-root", "/host/sys/fs/cgroup"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "koordpy-agent", "namespace": "kube-system", "labels": {"app": "koordpy-agent"}},
        "spec": {
            "nodeName": NODE,
            "hostNetwork": True,
            "priorityClassName": "system-node-critical",
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 5,
            "containers": [
                {
                    "name": "agent",
                    "image": BUSYBOX_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": argv,
                    "resources": {"requests": {"cpu": "50m", "memory": "96Mi"}, "limits": {"memory": "256Mi"}},
                    "volumeMounts": mounts,
                }
            ],
            "volumes": volumes,
        },
    }


def make_pods(client: httpx.Client, iterations: int, workset: Path, memory: bool, cpus: int) -> None:
    """The pods of the cases; ``probe-mem`` and ``hog`` only with the memory cases (under TCG every container
    started costs minutes)."""
    millis = cpu_requests(cpus)
    probe_cpu, bu_cpu = f"{millis['probe']}m", f"{millis['bu']}m"
    guaranteed = {"requests": {"cpu": probe_cpu, "memory": "160Mi"}, "limits": {"cpu": probe_cpu, "memory": "160Mi"}}
    specs = {
        "probe": (
            ["probe", "/run/bench/probe.bin", str(iterations), "10"],
            guaranteed,
            "koord-prod",
            None,
        ),
        "probe-mem": (
            ["probe", "/run/bench/probe-mem.bin", str(iterations), "10", f"/workset/{workset.name}", "32"],
            guaranteed,
            "koord-prod",
            {"workset": str(workset.parent)},
        ),
        "be-1": (["cpu", "/run/bench/cpu-be"], {}, "koord-batch", None),
        "be-2": (["cpu", "/run/bench/cpu-be"], {}, "koord-batch", None),
        "bu-1": (["cpu", "/run/bench/cpu-bu"], {"requests": {"cpu": bu_cpu, "memory": "32Mi"}}, "koord-batch", None),
        "bu-2": (["cpu", "/run/bench/cpu-bu"], {"requests": {"cpu": bu_cpu, "memory": "32Mi"}}, "koord-batch", None),
    }
    if not memory:
        del specs["probe-mem"]
    for name, (args, resources, priority, extra) in specs.items():
        obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": {"app": name}},
            "spec": pod_spec(args, resources, priority, extra),
        }
        create(client, f"/api/v1/namespaces/{NS}/pods", obj)
    if not memory:
        return
    hog = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "hog", "namespace": NS},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "hog"}},
            "template": {
                "metadata": {"labels": {"app": "hog"}},
                "spec": pod_spec(["memory", "/run/bench/memory", "900", "20"], {}, "koord-batch"),
            },
        },
    }
    create(client, f"/apis/apps/v1/namespaces/{NS}/deployments", hog)


def running(client: httpx.Client) -> dict[str, dict[str, Any]]:
    """Running pods by name (the hog as ``hog``), without those being deleted."""
    out = {}
    for pod in client.get(f"/api/v1/namespaces/{NS}/pods").json()["items"]:
        statuses = pod.get("status", {}).get("containerStatuses") or []
        if pod["metadata"].get("deletionTimestamp") or not statuses:
            continue
        if all("running" in (s.get("state") or {}) for s in statuses):
            name = "hog" if pod["metadata"]["name"].startswith("hog-") else pod["metadata"]["name"]
            out[name] = pod
    return out


def cgroup_of(pod: dict[str, Any]) -> str:
    qos = pod["status"]["qosClass"].lower()
    uid = pod["metadata"]["uid"]
    return f"kubepods/pod{uid}" if qos == "guaranteed" else f"kubepods/{qos}/pod{uid}"


# ---- the QoS objects of each case -------------------------------------------------------------------------


def qos_objects(case: str, psi_line: float, mem_psi_line: float) -> list[tuple[str, dict[str, Any]]]:
    kind = case.rsplit("-", 1)[-1]
    if kind not in ("util", "psi"):
        return []
    memory = case.startswith("mem")
    if memory:
        metric, value, action = (
            ("memory_total_utilization", 80, "evict-batch")
            if kind == "util"
            else ("pod_memory_pressure_some_avg10", mem_psi_line, "evict-batch")
        )
    else:
        metric, value, action = (
            ("cpu_total_utilization", 60, "throttle-batch")
            if kind == "util"
            else ("pod_cpu_pressure_some_avg10", psi_line, "throttle-batch")
        )
    group = "/apis/ensurance.crane.io/v1alpha1"
    rule: dict[str, Any] = {
        "name": kind,
        "avoidanceThreshold": 2,
        "restoreThreshold": 3,
        "actionName": action,
        "metricRule": {"name": metric, "value": value},
    }
    if kind == "psi":  # what the pressure rules protect: the latency-sensitive pods, by their labels
        rule["metricRule"]["selector"] = {
            "matchExpressions": [{"key": "app", "operator": "In", "values": ["probe", "probe-mem"]}]
        }
    return [
        (
            f"{group}/avoidanceactions",
            {
                "apiVersion": "ensurance.crane.io/v1alpha1",
                "kind": "AvoidanceAction",
                "metadata": {"name": "throttle-batch"},
                "spec": {"coolDownSeconds": 4, "throttle": {"cpuThrottle": {"minCPURatio": 0, "stepCPURatio": 50}}},
            },
        ),
        (
            f"{group}/avoidanceactions",
            {
                "apiVersion": "ensurance.crane.io/v1alpha1",
                "kind": "AvoidanceAction",
                "metadata": {"name": "evict-batch"},
                "spec": {"coolDownSeconds": 5, "eviction": {"terminationGracePeriodSeconds": 1}},
            },
        ),
        (
            f"{group}/podqoss",
            {
                "apiVersion": "ensurance.crane.io/v1alpha1",
                "kind": "PodQOS",
                "metadata": {"name": "batch"},
                "spec": {
                    "allowedActions": ["throttle-batch", "evict-batch"],
                    "scopeSelector": {
                        "matchExpressions": [{"scopeName": "Priority", "operator": "In", "values": ["0-5999"]}]
                    },
                },
            },
        ),
        (
            f"{group}/nodeqoss",
            {
                "apiVersion": "ensurance.crane.io/v1alpha1",
                "kind": "NodeQOS",
                "metadata": {"name": "colocation"},
                "spec": {"rules": [rule]},
            },
        ),
    ]


# ---- figures ---------------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


def summarise(result: dict[str, Any], probe: str, batch: list[str], burst: float) -> dict[str, Any]:
    """One case of one round: the probe over the burst, the batch pods' CPU-seconds, the timeline."""
    delays = [d for t, d in result["probes"][probe] if 0 <= t < burst]
    samples = result["samples"]
    inside = [s for s in samples if 0 <= s["t"] <= burst]
    first, last = inside[0], inside[-1]

    def used(name: str) -> float:
        a, b = first["pods"].get(name), last["pods"].get(name)
        return 0.0 if a is None or b is None else (b["usage_usec"] - a["usage_usec"]) / 1e6

    windows = []
    for start in range(int(burst) - 1):
        window = [d for t, d in result["probes"][probe] if start <= t < start + 2]
        windows.append((start, percentile(window, 99) if window else float("nan")))
    node_busy = (last["node"]["busy_jiffies"] - first["node"]["busy_jiffies"]) / 100
    seconds = last["t"] - first["t"]
    return {
        "units": len(delays),
        "p50_ms": percentile(delays, 50) * 1000,
        "p99_ms": percentile(delays, 99) * 1000,
        "max_ms": max(delays) * 1000 if delays else float("nan"),
        "batch_cpu_seconds": sum(used(n) for n in batch),
        "batch_cpu_seconds_each": {n: used(n) for n in batch},
        "probe_cpu_seconds": used(probe),
        "pods_cpu_seconds": {n: used(n) for n in first["pods"]},
        "probe_cpu_avg10": statistics.median(
            s["pods"][probe]["cpu_pressure"].get("some_avg10", 0.0)
            for s in inside
            if s["t"] >= burst / 2 and s["pods"].get(probe)
        ),
        "node_cpu_seconds": node_busy,
        "seconds": seconds,
        "window_p99_ms": [(s, p * 1000) for s, p in windows],
        "actions": result["actions"],
        "guest_loadavg": result["guest_loadavg"],
    }


def recovery(windows: list[tuple[int, float]], alone_p99_ms: float) -> float | None:
    """Seconds from the burst's start to the first 2 s window from which every window's p99 is under 1.5 x
    alone's; None when the probe never recovered within the burst."""
    bound = 1.5 * alone_p99_ms
    for i, (start, _) in enumerate(windows):
        if all(p <= bound for _, p in windows[i:] if p == p):
            return float(start)
    return None


def timeline(result: dict[str, Any], names: list[str], probe: str) -> list[dict[str, Any]]:
    """Per sample: each batch pod's cpu.max and CPU use since the previous sample, the probe's pressure."""
    out = []
    prev = None
    for sample in result["samples"]:
        row: dict[str, Any] = {"t": round(sample["t"], 2)}
        for name in names:
            pod = sample["pods"].get(name)
            if pod is None:
                row[name] = None
                continue
            cores = None
            if prev is not None and prev["pods"].get(name) is not None:
                dt = sample["t"] - prev["t"]
                cores = (pod["usage_usec"] - prev["pods"][name]["usage_usec"]) / 1e6 / dt if dt > 0 else None
            row[name] = {"cpu_max": pod["cpu_max"], "cores": cores}
        probe_pod = sample["pods"].get(probe) or {}
        row["probe_cpu_avg10"] = (probe_pod.get("cpu_pressure") or {}).get("some_avg10")
        row["probe_mem_avg10"] = (probe_pod.get("memory_pressure") or {}).get("some_avg10")
        row["mem_available"] = sample["node"]["mem_available"]
        prev = sample
        out.append(row)
    return out


# ---- the run ------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--burst", type=float, default=30.0)
    parser.add_argument("--lead", type=float, default=4.0)
    parser.add_argument("--settle", type=float, default=40.0)
    parser.add_argument("--psi-line", type=float, default=15.0)
    parser.add_argument("--mem-psi-line", type=float, default=5.0)
    parser.add_argument("--memory", action="store_true", help="also run the memory cases")
    parser.add_argument("--cases", default="", help="comma-separated subset of the cases")
    parser.add_argument("--guest-memory-mib", type=int, default=1536)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    cases = list(CPU_CASES) + (list(MEMORY_CASES) if args.memory else [])
    if args.cases:
        cases = [c for c in args.cases.split(",") if c]
    started = time.monotonic()
    load_start = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="koordpy-colocation-"))
    workset = work / "workset" / "ws.bin"
    workset.parent.mkdir()
    workset.write_bytes(os.urandom(WORKSET_MIB * MiB))  # before the boot: the guest reads it through 9p
    kubelet_binary = ensure_kubelet()
    cp = ControlPlane(work / "controlplane", default_scheduler=False, kwok=False).start()
    client = api(cp)
    guest = Guest(
        work / "guest",
        memory_mib=args.guest_memory_mib,
        forwards={API_PORT: urlparse(cp.url).port or 0},
        cpus=args.cpus,
        env={"PYTHONPATH": str(BENCH)},
    )
    rows: dict[str, list[dict[str, Any]]] = {c: [] for c in cases}
    raw_runs: dict[str, list[dict[str, Any]]] = {c: [] for c in cases}
    info: dict[str, Any] = {}
    try:
        install_crds(client)
        for name, value in (("koord-prod", 9000), ("koord-batch", 5000)):
            create(
                client,
                "/apis/scheduling.k8s.io/v1/priorityclasses",
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": name},
                    "value": value,
                },
            )
        create(client, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        guest.start()
        info["boot_seconds"] = guest.boot_seconds
        images.oci_archive(guest.job / "pause.tar", PAUSE_IMAGE, entrypoint=["/bin/busybox", "sleep", "2147483647"])
        images.oci_archive(guest.job / "busybox.tar", BUSYBOX_IMAGE, entrypoint=["/bin/busybox", "sh"])
        guest.call(
            kubelet.start_containerd,
            config=kubelet.containerd_config(PAUSE_IMAGE),
            log=str(guest.job / "containerd.log"),
        )
        for archive in ("pause.tar", "busybox.tar"):
            guest.call(kubelet.import_image, archive=str(guest.job / archive))
        assert cp.pki is not None
        cert, key = client_certificate(
            cp.pki, guest.job, "kubelet", common_name=f"system:node:{NODE}", organization="system:nodes"
        )
        kubelet_config = kubeconfig(guest, cp, "kubelet", {"client-certificate": str(cert), "client-key": str(key)})
        kubelet_pid = guest.call(
            kubelet.start_kubelet,
            kubelet=str(kubelet_binary),
            # Under TCG a container's start can take minutes: the CRI calls get ten (the default is two).
            config=kubelet.kubelet_config() | {"runtimeRequestTimeout": "10m"},
            kubeconfig=kubelet_config,
            node_name=NODE,
            log=str(guest.job / "kubelet.log"),
        )

        def ready() -> bool:
            if not guest.call(node.alive, pid=kubelet_pid):
                raise RuntimeError((guest.job / "kubelet.log").read_text()[-3000:])
            resp = client.get(f"/api/v1/nodes/{NODE}")
            found = resp.json() if resp.status_code == 200 else {}
            conditions = ((found if isinstance(found, dict) else {}).get("status") or {}).get("conditions") or []
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

        wait("the kubelet's Node Ready", ready)
        calibration = guest.call(guestside.calibrate, work_us=1000.0)
        info["calibration"] = calibration
        memory = any(c.startswith("mem") for c in cases)
        make_pods(client, calibration["iterations"], workset, memory, args.cpus)
        wanted = {"probe", "be-1", "be-2", "bu-1", "bu-2"} | ({"probe-mem", "hog"} if memory else set())
        wait("every pod running", lambda: wanted <= set(running(client)), timeout=1800)
        # The agent: collecting every second, no NodeMetric (no scheduler reads it here), the admin's token.
        config = {
            "apiVersion": "koordpy.io/v1alpha1",
            "kind": "AgentConfiguration",
            "collectIntervalSeconds": AGENT_INTERVAL,
            "stateDir": "/run/koordpy-agent",
            "qos": {"enabled": True},
            "nodeMetric": {"enabled": False},
            "server": {"host": "127.0.0.1", "port": AGENT_PORT},
        }
        (guest.job / "agent.yaml").write_text(json.dumps(config))
        kubeconfig(guest, cp, "agent", {"token": cp.admin_token})
        create(client, "/api/v1/namespaces/kube-system/pods", agent_pod(guest.job))
        metrics_url = f"http://127.0.0.1:{AGENT_PORT}/metrics"

        def agent_ready() -> bool:
            pod = client.get("/api/v1/namespaces/kube-system/pods/koordpy-agent").json()
            for status in (pod.get("status") or {}).get("containerStatuses") or []:
                if (status.get("lastState") or {}).get("terminated"):
                    raise RuntimeError(f"the agent's container ended: {status['lastState']['terminated']}")
            answer = guest.call(node.http_get, url=f"http://127.0.0.1:{AGENT_PORT}/readyz")
            return answer is not None and answer[0] == 200

        wait("the agent ready", agent_ready, timeout=1800)
        info["setup_seconds"] = time.monotonic() - started
        print(f"set up in {info['setup_seconds']:.0f} s (boot {guest.boot_seconds:.0f} s); calibration {calibration}")
        probes = {"probe": f"{RUN_DIR}/probe.bin"} | ({"probe-mem": f"{RUN_DIR}/probe-mem.bin"} if memory else {})
        for round_no in range(args.rounds):
            order = cases[round_no % len(cases) :] + cases[: round_no % len(cases)]
            for case in order:
                pods = wait("the pods running", lambda: wanted <= set(running(client)) and running(client), timeout=900)
                watch = {name: cgroup_of(pod) for name, pod in pods.items()}
                objects = qos_objects(case, args.psi_line, args.mem_psi_line)
                for path, obj in objects:
                    create(client, path, obj)
                time.sleep(3)  # the agent's watches deliver them
                flags = []
                if case.startswith(("be-", "bu-")):
                    flags = [f"{RUN_DIR}/cpu-{case.split('-')[0]}"]
                elif case.startswith("mem-") and case != "mem-alone":
                    flags = [f"{RUN_DIR}/memory"]
                load = os.getloadavg()
                result = guest.call(
                    guestside.run_case,
                    pods=watch,
                    flags=flags,
                    probes=probes,
                    metrics_url=metrics_url,
                    lead=args.lead,
                    burst=args.burst + (15 if case.startswith("mem") else 0),
                    settle=args.settle,
                    backstop=900,
                )
                for path, obj in reversed(objects):
                    client.delete(f"{path}/{obj['metadata']['name']}")
                probe = "probe-mem" if case.startswith("mem") else "probe"
                batch = ["hog"] if case.startswith("mem") else [f"{case.split('-')[0]}-1", f"{case.split('-')[0]}-2"]
                if case in ("alone", "mem-alone"):
                    batch = []
                row = summarise(result, probe, batch, result["burst_seconds"])
                row["host_loadavg"] = [round(x, 2) for x in (*load, *os.getloadavg())]
                row["round"] = round_no
                rows[case].append(row)
                names = ["be-1", "be-2", "bu-1", "bu-2", "hog"]
                raw_runs[case].append(
                    {"timeline": timeline(result, names, probe), "probe_delays": result["probes"][probe]}
                )
                print(
                    f"round {round_no} {case:<12} p50 {row['p50_ms']:6.2f} p99 {row['p99_ms']:7.2f} max {row['max_ms']:7.1f} ms"
                    f"  batch {row['batch_cpu_seconds']:6.1f} cpu-s  actions {row['actions']}  load {row['host_loadavg'][0]}"
                )
                time.sleep(2)
        client.delete("/api/v1/namespaces/kube-system/pods/koordpy-agent")
        client.delete(f"/apis/apps/v1/namespaces/{NS}/deployments/hog")
        for name in ("probe", "probe-mem", "be-1", "be-2", "bu-1", "bu-2"):
            client.delete(f"/api/v1/namespaces/{NS}/pods/{name}")
        guest.call(node.terminate, pid=kubelet_pid)
    finally:
        guest.stop()
        cp.stop()
        info["qemu_cpu_seconds"] = guest.cpu_seconds
    report(args, cases, rows, raw_runs, info, load_start, time.monotonic() - started)


def report(
    args: argparse.Namespace,
    cases: list[str],
    rows: dict[str, list[dict[str, Any]]],
    raw_runs: dict[str, list[dict[str, Any]]],
    info: dict[str, Any],
    load_start: tuple[float, float, float],
    wall: float,
) -> None:
    table = []
    for case in cases:
        runs = rows[case]
        if not runs:
            continue
        alone_case = "mem-alone" if case.startswith("mem") else "alone"
        noagent_case = f"{case.split('-')[0]}-noagent" if case.startswith(("be-", "bu-")) else "mem-noagent"
        ratios = []
        for run in runs:
            alone = next((r for r in rows.get(alone_case, []) if r["round"] == run["round"]), None)
            noagent = next((r for r in rows.get(noagent_case, []) if r["round"] == run["round"]), None)
            ratios.append(
                {
                    "p50": run["p50_ms"] / alone["p50_ms"] if alone else None,
                    "p99": run["p99_ms"] / alone["p99_ms"] if alone else None,
                    "max": run["max_ms"] / alone["max_ms"] if alone else None,
                    "batch": run["batch_cpu_seconds"] / noagent["batch_cpu_seconds"]
                    if noagent and noagent["batch_cpu_seconds"] > 0 and run["batch_cpu_seconds"] > 0
                    else None,
                    "recovery_s": recovery(run["window_p99_ms"], alone["p99_ms"]) if alone else None,
                }
            )

        def med(values: list[Any]) -> Any:
            known = [v for v in values if v is not None]
            return round(statistics.median(known), 3) if known else None

        table.append(
            {
                "case": case,
                "rounds": len(runs),
                "p50_ms": med([r["p50_ms"] for r in runs]),
                "p99_ms": med([r["p99_ms"] for r in runs]),
                "max_ms": med([r["max_ms"] for r in runs]),
                "p50_x_alone": med([r["p50"] for r in ratios]),
                "p99_x_alone": med([r["p99"] for r in ratios]),
                "max_x_alone": med([r["max"] for r in ratios]),
                "batch_cpu_seconds": med([r["batch_cpu_seconds"] for r in runs]),
                "batch_x_noagent": med([r["batch"] for r in ratios]),
                "throttle": med([r["actions"].get("throttle", 0) for r in runs]),
                "restore": med([r["actions"].get("restore", 0) for r in runs]),
                "evict": med([r["actions"].get("evict", 0) for r in runs]),
                "recovery_s": med([r["recovery_s"] for r in ratios]),
                "never_recovered": sum(1 for r in ratios if r["recovery_s"] is None and r["p99"] is not None),
                "host_load_1m": [r["host_loadavg"][0] for r in runs],
            }
        )
    out = {
        "benchmark": "co-location on a real kubelet node (QEMU guest, TCG)",
        "command": " ".join([".venv/bin/python", "bench/colocation.py", *sys.argv[1:]]),
        "python": platform.python_version(),
        "host_cpus": os.cpu_count(),
        "guest_cpus": args.cpus,
        "cpu_requests_m": cpu_requests(args.cpus),
        "agent_interval": AGENT_INTERVAL,
        "burst_seconds": args.burst,
        "psi_line": args.psi_line,
        "mem_psi_line": args.mem_psi_line,
        "wall_seconds": round(wall),
        "host_loadavg_start": [round(x, 2) for x in load_start],
        "host_loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "setup": info,
        "table": table,
        "rounds": rows,
        "timelines": raw_runs,
    }
    print(
        f"\n{'case':<12} {'p50 x':>6} {'p99 x':>6} {'max x':>6} {'p99 ms':>7} {'batch x':>8} "
        f"{'thr':>4} {'rst':>4} {'evi':>4} {'recov s':>8} {'load':>10}"
    )
    for row in table:

        def fmt(value: Any, spec: str) -> str:
            return "-" if value is None else format(value, spec)

        print(
            f"{row['case']:<12} {fmt(row['p50_x_alone'], '.2f'):>6} {fmt(row['p99_x_alone'], '.2f'):>6} "
            f"{fmt(row['max_x_alone'], '.2f'):>6} {fmt(row['p99_ms'], '.2f'):>7} {fmt(row['batch_x_noagent'], '.2f'):>8} "
            f"{fmt(row['throttle'], '.0f'):>4} {fmt(row['restore'], '.0f'):>4} {fmt(row['evict'], '.0f'):>4} "
            f"{fmt(row['recovery_s'], '.0f'):>8} {row['host_load_1m']!s:>10}"
        )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
