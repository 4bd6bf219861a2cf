"""Runs inside the test guest: a container runtime (Debian's containerd and runc) and a real kubelet, as a
kubeadm node has them, except the cgroup driver: the guest has no systemd, so both use ``cgroupfs``
(``kubepods/<qos>/pod<uid>/<container id>``).

Images come from archives made by :mod:`koordpy_testkit.guest.images` (nothing is pulled), pods get a
``ptp`` network from the Debian CNI plugins (no masquerading, no iptables), the kubelet's and
containerd's state live on tmpfs mounts of their own (overlayfs cannot stack on the guest's overlay root).

Not guaranteed: anything a pod needs beyond processes, cgroups and a loopback-routable address (no DNS,
no Services, no volumes but the kubelet's own).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from koordpy_testkit.guest.node import spawn

__all__ = ["containerd_config", "import_image", "kubelet_config", "start_containerd", "start_kubelet"]

SOCKET = "/run/containerd/containerd.sock"
STATE_MOUNTS = ("/var/lib/containerd", "/var/lib/kubelet", "/var/lib/cni", "/var/log/pods", "/etc/cni/net.d")
POD_SUBNET = "10.88.0.0/16"


def containerd_config(sandbox_image: str) -> str:
    return f"""version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
[grpc]
  address = "{SOCKET}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{sandbox_image}"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "/usr/sbin/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
"""


CNI = {
    "cniVersion": "0.4.0",
    "name": "koordpy-guest",
    "plugins": [
        {
            "type": "ptp",
            "ipMasq": False,
            "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_SUBNET}]], "routes": [{"dst": "0.0.0.0/0"}]},
        }
    ],
}


def kubelet_config(pod_cidr: str = POD_SUBNET) -> dict[str, Any]:
    """A KubeletConfiguration for the guest: cgroupfs driver, no authentication of its own server's callers
    beyond the guest (nothing outside can reach it), no eviction thresholds of its own (the guest is small
    and the agent is what is tested), no swap check."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "cgroupDriver": "cgroupfs",
        "containerRuntimeEndpoint": f"unix://{SOCKET}",
        "failSwapOn": False,
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "address": "127.0.0.1",
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "podCIDR": pod_cidr,
        "resolvConf": "",
        "evictionHard": {"memory.available": "1Mi", "nodefs.available": "0%", "imagefs.available": "0%"},
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
        "registerNode": True,
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
        "nodeStatusUpdateFrequency": "10s",
        "syncFrequency": "10s",
        "fileCheckFrequency": "20s",
        "localStorageCapacityIsolation": False,
    }


def _mount_state() -> None:
    mounts = Path("/proc/mounts").read_text()
    for path in STATE_MOUNTS:
        Path(path).mkdir(parents=True, exist_ok=True)
        if f" {path} " not in mounts:
            subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", path], check=True)


def start_containerd(config: str, log: str) -> dict[str, Any]:
    """containerd with ``config`` (TOML text) on fresh state mounts; returns its pid once its socket answers."""
    _mount_state()
    Path("/etc/cni/net.d/10-koordpy.conflist").write_text(json.dumps(CNI))
    path = Path("/run/koordpy-containerd.toml")
    path.write_text(config)
    started = time.monotonic()
    pid = spawn(["containerd", "--config", str(path)], log)
    while subprocess.run(["ctr", "--address", SOCKET, "version"], capture_output=True, check=False).returncode:
        if time.monotonic() - started > 240:
            raise RuntimeError(f"containerd did not answer within 240 s:\n{Path(log).read_text()[-3000:]}")
        time.sleep(0.5)
    return {"pid": pid, "seconds": time.monotonic() - started}


def import_image(archive: str) -> str:
    """``ctr -n k8s.io images import``: what the kubelet's runtime sees; returns ctr's output."""
    out = subprocess.run(
        ["ctr", "--address", SOCKET, "-n", "k8s.io", "images", "import", archive],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout


def start_kubelet(kubelet: str, config: dict[str, Any], kubeconfig: str, node_name: str, log: str) -> int:
    path = Path("/run/koordpy-kubelet.yaml")
    path.write_text(json.dumps(config))
    return spawn(
        [
            kubelet,
            f"--config={path}",
            f"--kubeconfig={kubeconfig}",
            f"--hostname-override={node_name}",
            "--node-ip=10.0.2.15",
            "--v=2",
        ],
        log,
    )
