"""Live mode of ``koordpy scheduler gangs`` (and ``kubectl koordpy gangs``): Pods and both PodGroup kinds
listed from a cluster (the API emulator, its own process on 127.0.0.1). The emulator does not serve
``scheduling.x-k8s.io``: that list is skipped with a note, as on a cluster without scheduler-plugins."""

from __future__ import annotations

import json
import selectors
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordpy.kube.connection import write_kubeconfig
from koordpy_testkit.bounds import HANG_BACKSTOP

BIN = Path(sys.executable).parent
KOORDPY = BIN / "koordpy"
LABEL = "pod-group.scheduling.sigs.k8s.io"
NOW = "2026-11-21T10:00:00Z"


def member(name: str, node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "koordpy-scheduler",
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "labels": {LABEL: "mpi"},
            "creationTimestamp": "2027-01-15T08:00:00Z",
        },
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }


SEED = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}},
    {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "mpi", "namespace": "team-a", "creationTimestamp": "2027-01-15T08:00:00Z"},
        "spec": {"minMember": 5, "scheduleTimeoutSeconds": 300},
    },
    member("w0"),
    member("w1"),
    member("w2"),
    {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "lonely", "namespace": "team-a", "creationTimestamp": "2027-01-15T08:00:00Z"},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Pending"},
    },
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tmp_path = tmp_path_factory.mktemp("live-gangs")
    seed = tmp_path / "seed.yaml"
    seed.write_text(yaml.safe_dump_all(SEED), encoding="utf-8")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "koordpy_testkit.apiserver",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--seed",
            str(seed),
            "--token",
            "t0k=admin",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            assert sel.select(timeout=HANG_BACKSTOP), "the emulator printed no URL within 30 s"
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        yield write_kubeconfig(tmp_path / "kubeconfig", url, token="t0k")
    finally:
        proc.terminate()
        proc.wait(timeout=HANG_BACKSTOP)
        if proc.stdout is not None:
            proc.stdout.close()


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=HANG_BACKSTOP, check=False)


def test_gangs_reads_the_cluster(cluster: Path) -> None:
    done = run(KOORDPY, "scheduler", "gangs", "--kubeconfig", cluster, "--waiting", "team-a/w1=n2", "-o", "json")
    assert done.returncode == 0, done.stderr
    (gang,) = json.loads(done.stdout)["gangs"]  # "lonely" is in no gang
    assert gang["id"] == "team-a/mpi"
    assert gang["children"] == ["team-a/w0", "team-a/w1", "team-a/w2"]
    assert (gang["bound"], gang["waiting"]) == ([], ["team-a/w1"])
    # 3 of 5 members exist: quorum not met (no member ever bound, so not once-satisfied); 1 held < 5: wait.
    assert gang["admit"]["team-a/w2"] == {"ok": False, "reason": "gang team-a/mpi: 3 of 5 members exist"}
    assert gang["permit"]["verdict"] == "wait"
    assert "the cluster does not serve podgroups.scheduling.x-k8s.io" in done.stderr
    # Live: evaluated at the clock, not at a dump's newest timestamp.
    assert "newest timestamp" not in done.stderr


def test_gangs_refuses_files_and_a_cluster_together(cluster: Path, tmp_path: Path) -> None:
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump_all(SEED), encoding="utf-8")
    done = run(KOORDPY, "scheduler", "gangs", "--kubeconfig", cluster, "-f", dump)
    assert done.returncode == 2
    assert "mutually exclusive" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_kubectl_shortcut(cluster: Path) -> None:
    plugin = run(KOORDPY.parent / "kubectl-koordpy", "gangs", "--kubeconfig", cluster, "--now", NOW, "-o", "json")
    direct = run(KOORDPY, "scheduler", "gangs", "--kubeconfig", cluster, "--now", NOW, "-o", "json")
    assert plugin.returncode == direct.returncode == 0, plugin.stderr
    assert json.loads(plugin.stdout) == json.loads(direct.stdout)
