"""``koordpy scheduler explain`` gives kube-scheduler's verdicts on a ``kubectl get -o yaml`` dump.

The dump is what ``kubectl get nodes,pods,nodemetrics -A -o yaml`` prints: one ``List`` whose
items carry the server's fields (resourceVersion, managedFields, conditions). Taken at T0 =
2026-11-21T10:00:00Z; the newest timestamp in it is node heartbeat T0 + 30 s.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from koordpy.cli.main import app
from koordpy_testkit import NodeBuilder, NodeMetricBuilder, PodBuilder

runner = CliRunner()
T0 = 1795255200.0  # 2026-11-21T10:00:00Z
STAMP = "2026-11-21T10:00:30Z"  # newest in the dump: the node heartbeats


def _node(name: str, cpu: str = "32", **spec: Any) -> dict[str, Any]:
    raw = NodeBuilder(name).allocatable(cpu=cpu, memory="64Gi", pods="110").build()
    raw["metadata"].update(resourceVersion="4711", managedFields=[{"manager": "kubelet"}])
    raw["spec"] = spec
    raw["status"]["conditions"] = [
        {"type": "Ready", "status": "True", "lastHeartbeatTime": STAMP, "lastTransitionTime": "2026-11-01T00:00:00Z"}
    ]
    return raw


def _metric(name: str, cpu: str, at: float = T0) -> dict[str, Any]:
    return NodeMetricBuilder(name).updated(at).report_interval(60).usage(cpu=cpu, memory="8Gi").build()


def _pod(name: str, cpu: str, node: str | None = None, **kw: Any) -> dict[str, Any]:
    builder = PodBuilder(name).requests(cpu=cpu, memory="1Gi").limits(cpu=cpu, memory="1Gi")
    if node:
        builder = builder.node(node).phase("Running").scheduled_at(T0 - 3600)
    raw = builder.build()
    raw["metadata"]["creationTimestamp"] = "2026-11-21T08:00:00Z"
    raw["spec"].update(kw)
    return raw


def dump() -> dict[str, Any]:
    items = [
        # 15.92 cores allocatable, 4.1 requested by db-0: free 11.82
        _node("full", cpu="15920m"),
        # cordoned by kubectl drain: unschedulable and the matching taint
        _node(
            "cordoned",
            unschedulable=True,
            taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}],
        ),
        _node("tainted", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
        _node("hot"),
        _node("cool"),
        _node("bare"),  # no NodeMetric
        _metric("full", "2"),
        _metric("cordoned", "1"),
        _metric("tainted", "1"),
        # 20 + 15 × 0.85 = 32.75 of 32 cores: 102% > 65%
        _metric("hot", "20"),
        _metric("cool", "4"),
        _pod("db-0", "4100m", node="full"),
        _pod("web-big", "15"),  # the pending pod
        _pod("batch", "1", schedulerName="default-scheduler"),
        _pod("done", "30", node="cool"),
    ]
    items[-1]["status"]["phase"] = "Succeeded"  # its 30 cores no longer count on cool
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}


@pytest.fixture
def dump_file(tmp_path: Path) -> Path:
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump(dump()), encoding="utf-8")
    return path


def run(path: Path, pod: str, *extra: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["scheduler", "explain", "-f", str(path), "--pod", pod, *extra])
    return result.exit_code, result.stdout, result.stderr


def rows(out: str) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in json.loads(out)["nodes"]}


def test_kube_scheduler_verdicts_with_numbers(dump_file: Path) -> None:
    code, out, err = run(dump_file, "default/web-big", "-o", "json")
    assert code == 0, err
    result = json.loads(out)
    by = rows(out)
    fail = {name: row["failures"][0] for name, row in by.items() if row["failures"]}
    assert fail["full"]["plugin"] == "NodeResourcesFit"
    assert fail["full"]["reason"] == "Insufficient cpu"
    assert fail["full"]["detail"] == "Insufficient cpu: requested 15, free 11.82 of 15.92"
    assert (fail["cordoned"]["plugin"], fail["cordoned"]["reason"]) == (
        "NodeUnschedulable",
        "node(s) were unschedulable",
    )
    assert fail["cordoned"]["unresolvable"] is True
    assert fail["tainted"]["reason"] == "node(s) had untolerated taint {dedicated: gpu}"
    # hot passes the fit but not load-aware: 20 + 12.75 estimate = 32.75 of 32 → round(102.3) = 102 > 65
    assert by["hot"]["fit"]["feasible"] is True
    assert fail["hot"]["plugin"] == "LoadAwareScheduling"
    assert fail["hot"]["detail"].endswith("cpu usage 102% (usage 20 + estimate 12.75 of 32) > threshold 65%")
    # bare: no NodeMetric, so load-aware passes with score 0; cool scores higher and is chosen
    assert by["bare"]["loadAware"]["verdict"] == "no NodeMetric"
    assert "no NodeMetric" in by["bare"]["loadAware"]["detail"]
    assert by["bare"]["scores"] == {"LoadAwareScheduling": 0}
    # cool: (4 + 12.75) of 32 → cpu (32 − 16.75)·100//32 = 47; memory (8 + 0.85)Gi of 64Gi → 86; (47+86)//2 = 66
    assert by["cool"]["scores"] == {"LoadAwareScheduling": 66}
    assert result["selected"] == "cool" and result["schedulable"] is True and result["notes"] == []
    # not the clock: the newest timestamp in the dump, said on stderr
    assert (result["now"], result["nowFrom"]) == (STAMP, "dump")
    assert f"note: evaluated at {STAMP}, the newest timestamp in the input" in err


def test_an_old_dump_without_now_does_not_expire_every_metric(dump_file: Path) -> None:
    # Evaluated at the dump's own instant every metric is 30 s old (expiration 180 s): fresh.
    code, out, _ = run(dump_file, "default/web-big", "-o", "json")
    assert code == 0
    assert not any(r["loadAware"]["verdict"].startswith("pass (metric") for r in rows(out).values())
    # 40 minutes later (what the wall clock on an old dump would give) every metric has expired, and
    # only the node without one is left: that is what the extender would really do at that instant.
    code, out, err = run(dump_file, "default/web-big", "-o", "json", "--now", "2026-11-21T10:40:00Z")
    assert code == 0 and "newest timestamp" not in err
    result = json.loads(out)
    assert rows(out)["cool"]["failures"][0]["detail"].startswith(
        "node(s) nodeMetric expired: NodeMetric expired (updated 40m ago, expiration 3m)"
    )
    assert result["selected"] == "bare" and result["nowFrom"] == "--now"


def test_a_bound_pod_gets_a_note_and_where_it_runs(dump_file: Path) -> None:
    code, out, _ = run(dump_file, "default/db-0", "-o", "json")
    assert code == 0
    result = json.loads(out)
    assert result["schedulable"] is False and result["selected"] is None
    assert result["boundTo"] == "full"
    assert result["notes"] == [
        "pod is already bound to full (phase Running): kube-scheduler does not schedule it again"
    ]
    # evaluated as if pending: its own 4.1 cores are not counted on full (15.92 free ≥ 4.1)
    assert rows(out)["full"]["fit"]["feasible"] is True
    assert result["wouldSelect"] is not None
    code, table, _ = run(dump_file, "default/db-0", "-o", "table")
    assert table.splitlines()[:3] == [
        "pod default/db-0: kube-scheduler would not schedule it",
        "  note: pod is already bound to full (phase Running): kube-scheduler does not schedule it again",
        f"  if it were pending: would select {result['wouldSelect']}",
    ]


def test_other_scheduler_and_terminated_pods_get_notes(dump_file: Path) -> None:
    code, out, _ = run(dump_file, "default/batch", "-o", "json")
    assert code == 0
    result = json.loads(out)
    assert result["selected"] is None
    assert result["notes"] == [
        "pod has spec.schedulerName default-scheduler, not koordpy-scheduler: another scheduler places it "
        "and the extender is never asked"
    ]
    code, out, _ = run(dump_file, "default/done", "-o", "json")
    notes = json.loads(out)["notes"]
    assert notes[0] == "pod is terminated (phase Succeeded): kube-scheduler does not schedule it"
    assert notes[1].startswith("pod is already bound to cool")


def test_table_shows_each_verdict_at_a_glance(dump_file: Path) -> None:
    code, out, _ = run(dump_file, "default/web-big", "-o", "table")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "pod default/web-big: selected cool"
    assert lines[1].split() == ["NODE", "FIT", "LOADAWARE", "SCORE", "EXT", "REASON"]
    table = {line[1:].split()[0]: line for line in lines[2:]}
    assert table["full"].split()[1:4] == ["fail", "fail", "-"]  # load-aware too: 2 + 3.49 + 12.75 of 15.92
    assert table["full"].endswith("NodeResourcesFit: Insufficient cpu: requested 15, free 11.82 of 15.92")
    assert "NodeUnschedulable: node(s) were unschedulable" in table["cordoned"]
    assert table["hot"].split()[1:3] == ["ok", "fail"]
    assert table["bare"].split()[1:4] == ["ok", "no", "NodeMetric"]
    assert table["cool"].startswith("*cool")


def test_node_selector_and_affinity_from_the_pod_spec(tmp_path: Path) -> None:
    doc = dump()
    pending = next(i for i in doc["items"] if i["metadata"]["name"] == "web-big")
    pending["spec"]["resources"] = None
    pending["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    pending["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["hot"]}]}]
            }
        }
    }
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    code, out, _ = run(path, "default/web-big", "-o", "json")
    assert code == 0
    by = rows(out)
    assert by["cool"]["failures"][0]["reason"] == "node(s) didn't match Pod's node affinity/selector"
    assert "term[0] field metadata.name In [hot] (node: cool)" in by["cool"]["failures"][0]["detail"]
    assert by["hot"]["fit"]["feasible"] is True


def test_a_dump_without_any_timestamp_falls_back_to_the_clock_and_says_so(tmp_path: Path) -> None:
    docs = [NodeBuilder("n1").allocatable(cpu="4", memory="8Gi", pods="110").build(), PodBuilder("p").build()]
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump_all(docs), encoding="utf-8")
    code, out, err = run(path, "default/p", "-o", "json")
    assert code == 0
    assert json.loads(out)["nowFrom"] == "clock"
    assert "note: the input carries no timestamp: evaluated at the clock" in err
