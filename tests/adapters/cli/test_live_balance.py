"""Live mode of ``koordpy descheduler balance`` and ``koordpy thresholds``: the objects come from a cluster (the API
emulator, its own process on 127.0.0.1) through the same list helpers as ``explain``, read only."""

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

from koordpy.cli.main import EXAMPLES
from koordpy.kube.connection import write_kubeconfig
from koordpy_testkit.bounds import HANG_BACKSTOP

BIN = Path(sys.executable).parent
KOORDPY = BIN / "koordpy"
NOW = "2027-03-01T10:00:00Z"
SERVED = {"Node", "Pod", "NodeMetric"}


def seed_objects() -> list[dict[str, Any]]:
    """The balance dump's nodes, pods and NodeMetrics (the emulator serves no apps/v1), the chart's two
    configuration ConfigMaps, an agent policy and its evicting action."""
    dump = yaml.safe_load((EXAMPLES / "balance-dump.yaml").read_text(encoding="utf-8"))
    objects = [item for item in dump["items"] if item["kind"] in SERVED]
    manager = yaml.safe_load((EXAMPLES / "balance-config.yaml").read_text(encoding="utf-8"))
    scheduler = {"apiVersion": "koordpy.io/v1alpha1", "kind": "SchedulerConfiguration", "loadAware": {}}
    for name, config in (("scheduler", scheduler), ("manager", manager)):
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"koordpy-{name}", "namespace": "koordpy-system"},
                "data": {"config.yaml": yaml.safe_dump(config)},
            }
        )
    objects.append(
        {
            "apiVersion": "ensurance.crane.io/v1alpha1",
            "kind": "NodeQOSEnsurancePolicy",
            "metadata": {"name": "evict-cpu"},
            "spec": {
                "objectiveEnsurances": [
                    {"name": "cpu", "metricRule": {"name": "cpu_total_utilization", "value": 70}, "actionName": "evict"}
                ]
            },
        }
    )
    objects.append(
        {
            "apiVersion": "ensurance.crane.io/v1alpha1",
            "kind": "AvoidanceAction",
            "metadata": {"name": "evict"},
            "spec": {"eviction": {}},
        }
    )
    return objects


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tmp_path = tmp_path_factory.mktemp("live-balance")
    seed = tmp_path / "seed.yaml"
    seed.write_text(yaml.safe_dump_all(seed_objects()), encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "koordpy_testkit.apiserver", "--host", "127.0.0.1", "--port", "0", "--seed", str(seed)],
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
        yield write_kubeconfig(tmp_path / "kubeconfig", url)
    finally:
        proc.terminate()
        proc.wait(timeout=HANG_BACKSTOP)
        if proc.stdout is not None:
            proc.stdout.close()


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=HANG_BACKSTOP, check=False)


def test_balance_reads_the_cluster(cluster: Path) -> None:
    done = run(
        KOORDPY,
        "descheduler",
        "balance",
        "--kubeconfig",
        cluster,
        "--config",
        EXAMPLES / "balance-config.yaml",
        "--now",
        NOW,
        "-o",
        "json",
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    # The same classes as from the file; without the StatefulSet (no apps/v1 here) the ExpectedReplicas guard has
    # no replica count, so db-0 (the size of the excess) moves instead of api-2.
    assert {n["name"]: n["state"] for n in report["pools"][0]["nodes"]} == {
        "node-busy": "normal",
        "node-hot": "hot",
        "node-idle": "idle",
        "node-stale": "stale",
    }
    assert [m["pod"] for m in report["moves"]] == ["batch/report-x2k9", "shop/db-0"]
    assert "the cluster does not serve deployments.apps" in done.stderr


def test_thresholds_reads_the_cluster(cluster: Path) -> None:
    done = run(KOORDPY, "thresholds", "--kubeconfig", cluster, "-o", "json")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    contradictions = {(f["loop"], f["paths"][1]) for f in report["findings"] if f["severity"] == "contradiction"}
    # node by node (the cluster's Nodes are read): the descheduler's 75 % of 16 cores (12) is above the agent's 70 %
    # of the same 16 cores (11.2); the extender's 65 % (10.4) is not
    policy = "cluster: nodeqosensurancepolicies.ensurance.crane.io: NodeQOSEnsurancePolicy/evict-cpu"
    assert contradictions == {("descheduler → agent", f"{policy}.spec.objectiveEnsurances[0].metricRule.value")}
    assert (report["checked"]["nodes"], report["checked"]["actions"]) == (4, 1)
