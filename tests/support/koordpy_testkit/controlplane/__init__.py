"""A real Kubernetes control plane for tests, benchmarks and a developer's terminal (see ``cluster``)."""

from koordpy_testkit.controlplane.binaries import BINARIES, ensure_binaries, ensure_kubelet
from koordpy_testkit.controlplane.cluster import (
    CONTROLLERS,
    FAKE_NODE_ANNOTATION,
    GENERIC_WORKLOAD,
    ControlPlane,
    fake_node,
    write_kubeconfig,
)

__all__ = [
    "BINARIES",
    "CONTROLLERS",
    "FAKE_NODE_ANNOTATION",
    "GENERIC_WORKLOAD",
    "ControlPlane",
    "ensure_binaries",
    "ensure_kubelet",
    "fake_node",
    "write_kubeconfig",
]
