"""``kubectl koordpy`` on the real control plane, run by the real kubectl (v1.37.2, built from tools/) with
nothing but ``KUBECONFIG`` set: the plugin reads the cluster and the current context that kubectl itself
would use, over TLS with the kubeconfig's CA and token.

A pod of the koordpy profile waits unscheduled (no kube-scheduler runs in this test); two kwok nodes, one
reporting 85 % cpu in its NodeMetric, one 5 %: explain must refuse the hot one and select the cool one, as
the extender would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cluster_kit import Kube, Release, Space
from test_cluster_loadaware import report_usage

from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.controlplane import ControlPlane

pytestmark = pytest.mark.cluster

BIN = Path(sys.executable).parent


def kubectl(plane: ControlPlane, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real kubectl with ``kubectl-koordpy`` on PATH, a HOME of its own and only KUBECONFIG set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBECONFIG", "KUBERNETES_"))}
    env |= {"HOME": str(home), "KUBECONFIG": str(plane.admin_kubeconfig), "PATH": f"{BIN}{os.pathsep}{env['PATH']}"}
    assert plane.bin_dir is not None
    return subprocess.run(
        [str(plane.bin_dir / "kubectl"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_BACKSTOP,
        check=False,
    )


def test_explain_reads_the_cluster_of_kubeconfig_alone(
    control_plane: ControlPlane, release: Release, space: Space, kube: Kube, tmp_path: Path
) -> None:
    hot, cool = space.node("hot"), space.node("cool")
    report_usage(kube, hot, 85)
    report_usage(kube, cool, 5)
    space.wait_nodes_ready()
    space.create_pod("web", cpu="500m", memory="1Gi")
    done = kubectl(control_plane, tmp_path, "koordpy", "explain", "--pod", f"{space.namespace}/web", "-o", "json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["pod"] == f"{space.namespace}/web" and result["nowFrom"] == "clock"
    rows = {row["name"]: row for row in result["nodes"]}
    assert rows[hot]["loadAware"]["verdict"] == "fail" and not rows[hot]["feasible"]
    assert rows[cool]["feasible"]
    assert result["selected"] not in (None, hot)

    table = kubectl(control_plane, tmp_path, "koordpy", "explain", "--pod", f"{space.namespace}/web")
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[0] == f"pod {space.namespace}/web: selected {result['selected']}"
    assert "cpu usage exceed threshold" in table.stdout


def test_plugin_help_and_gangs_on_the_real_cluster(
    control_plane: ControlPlane, release: Release, tmp_path: Path
) -> None:
    listed = kubectl(control_plane, tmp_path, "plugin", "list")
    assert str(BIN / "kubectl-koordpy") in listed.stdout, listed.stdout + listed.stderr
    helped = kubectl(control_plane, tmp_path, "koordpy", "-h")
    assert helped.returncode == 0 and "  explain " in helped.stdout and "  gangs " in helped.stdout
    gangs = kubectl(control_plane, tmp_path, "koordpy", "gangs", "-o", "json")
    assert gangs.returncode == 0, gangs.stderr
    assert isinstance(json.loads(gangs.stdout)["gangs"], list)
