"""``koordpy scheduler gangs`` through the real CLI entry point, on the bundled gangs dump."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from koordpy.cli.main import EXAMPLES, app

runner = CliRunner()
DUMP = EXAMPLES / "gangs-dump.yaml"
KEYS = {
    "id",
    "groupId",
    "group",
    "mode",
    "matchPolicy",
    "minMember",
    "totalNumber",
    "waitSeconds",
    "children",
    "waiting",
    "bound",
    "onceSatisfied",
    "phase",
    "admit",
    "permit",
}


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["scheduler", "gangs", *args])
    return result.exit_code, result.stdout, result.stderr


def gangs(*args: str) -> dict[str, dict[str, Any]]:
    code, out, err = run("-f", str(DUMP), "-o", "json", *args)
    assert code == 0, err
    report = json.loads(out)
    assert set(report) == {"gangs"}
    ids = [g["id"] for g in report["gangs"]]
    assert ids == sorted(ids)
    for gang in report["gangs"]:
        assert set(gang) == KEYS
        for field in ("children", "waiting", "bound", "group"):
            assert gang[field] == sorted(gang[field])
        assert set(gang["permit"]) == {"verdict", "reason"}
        assert gang["permit"]["verdict"] in ("allow", "wait", "reject")
        assert all(set(a) == {"ok", "reason"} for a in gang["admit"].values())
    return {g["id"]: g for g in report["gangs"]}


def test_shape_and_membership_without_holds() -> None:
    by_id = gangs()
    # team-a/web is in no gang: not listed. The annotation gangs ps and worker form one GangGroup.
    assert list(by_id) == [
        "team-a/mpi",
        "team-a/trainer",
        "team-b/ps",
        "team-b/worker",
        "team-c/ghost",
        "team-d/sim",
    ]
    trainer = by_id["team-a/trainer"]
    # sigs.k8s.io PodGroup: minMember 3, scheduleTimeoutSeconds 1200, defaults Strict / once-satisfied.
    assert (trainer["minMember"], trainer["totalNumber"], trainer["waitSeconds"]) == (3, 3, 1200)
    assert (trainer["mode"], trainer["matchPolicy"], trainer["onceSatisfied"]) == ("Strict", "once-satisfied", False)
    # 4 members exist ≥ 3: every pending member is admitted; none held, so permit waits.
    assert trainer["admit"]["team-a/trainer-0"] == {"ok": True, "reason": "gang team-a/trainer: 4 of 3 members exist"}
    assert trainer["permit"] == {
        "verdict": "wait",
        "reason": "gang team-a/trainer: 0 of 3 members waiting at the bind barrier",
    }
    # Stored Pending, 4 ≥ 3 members → PreScheduling → 0 bound < 3 → Scheduling.
    assert trainer["phase"] == "Scheduling"


def test_x_k8s_podgroup_running_and_satisfied_once() -> None:
    mpi = gangs()["team-a/mpi"]
    # Both members bound and Running: once-satisfied, allowed; x-k8s.io machine: Scheduling → Running.
    assert (mpi["bound"], mpi["onceSatisfied"], mpi["phase"]) == (["team-a/mpi-0", "team-a/mpi-1"], True, "Running")
    assert mpi["permit"]["verdict"] == "allow" and mpi["admit"] == {}


def test_missing_podgroup_is_not_found_and_waits() -> None:
    ghost = gangs()["team-c/ghost"]
    assert (ghost["phase"], ghost["permit"]["verdict"]) == ("NotFound", "wait")
    assert ghost["admit"]["team-c/ghost-0"] == {
        "ok": False,
        "reason": "gang team-c/ghost: PodGroup team-c/ghost (scheduling.sigs.k8s.io) not found",
    }


def test_a_native_podgroup_is_kube_schedulers_gang() -> None:
    """team-d/sim: a ``scheduling.k8s.io`` PodGroup (gang minCount 3); sim-0 also carries Koordinator
    annotations naming another gang, which are not read (no gang ``team-d/other``)."""
    by_id = gangs()
    sim = by_id["team-d/sim"]
    assert "team-d/other" not in by_id
    assert sim["children"] == ["team-d/sim-0", "team-d/sim-1", "team-d/sim-2"]
    assert (sim["mode"], sim["matchPolicy"], sim["minMember"], sim["phase"]) == (
        "Strict",
        "waiting-and-running",
        3,
        "Pending",
    )
    # 3 members exist ≥ minCount 3: kube-scheduler's PreEnqueue lets each through.
    assert sim["admit"]["team-d/sim-0"] == {
        "ok": True,
        "reason": "gang team-d/sim: 3 of 3 members exist (kube-scheduler's GangScheduling)",
    }
    held = gangs(*[f"--waiting=team-d/sim-{i}=node-1" for i in range(2)])["team-d/sim"]
    # 2 held + 0 bound < 3
    assert held["permit"] == {
        "verdict": "wait",
        "reason": "gang team-d/sim: 2 waiting + 0 bound of 3 members (waiting-and-running)",
    }


def test_quorum_of_held_members_allows() -> None:
    held = [f"--waiting=team-a/trainer-{i}=node-1" for i in range(3)]
    trainer = gangs(*held)["team-a/trainer"]
    assert trainer["waiting"] == ["team-a/trainer-0", "team-a/trainer-1", "team-a/trainer-2"]
    assert trainer["permit"] == {
        "verdict": "allow",
        "reason": "gang team-a/trainer: 3 of 3 members waiting at the bind barrier",
    }
    assert list(trainer["admit"]) == ["team-a/trainer-3"]


def test_gang_group_is_all_or_nothing() -> None:
    # worker (min 2, waiting-and-running) has both members held, but its group-mate ps (min 1) has none:
    # the whole group waits, naming ps.
    by_id = gangs("--waiting", "team-b/worker-0=node-1", "--waiting", "team-b/worker-1=node-1")
    for gang in ("team-b/ps", "team-b/worker"):
        assert by_id[gang]["groupId"] == "team-b/ps,team-b/worker"
        assert by_id[gang]["permit"] == {
            "verdict": "wait",
            "reason": "gang team-b/ps: 0 waiting + 0 bound of 1 members (waiting-and-running)",
        }
    by_id = gangs(
        "--waiting", "team-b/worker-0=node-1", "--waiting", "team-b/worker-1=node-1", "--waiting", "team-b/ps-0=node-1"
    )
    assert by_id["team-b/worker"]["permit"] == {
        "verdict": "allow",
        "reason": "gang group team-b/ps,team-b/worker: every gang is satisfied",
    }
    assert by_id["team-b/worker"]["waitSeconds"] == 7200  # waiting-time 2h, beyond Koordinator's ~1500 s cap


def test_strict_failure_rejects_and_releases_holds() -> None:
    trainer = gangs("--waiting", "team-a/trainer-0=node-1", "--failed", "team-a/trainer-3")["team-a/trainer"]
    # Strict: trainer-3 failed → trainer-0's hold is released (not waiting any more) and the verdict is reject.
    assert trainer["waiting"] == []
    assert trainer["permit"] == {
        "verdict": "reject",
        "reason": "gang team-a/trainer (Strict): member team-a/trainer-3 failed scheduling (marked failed by --failed)",
    }


def test_nonstrict_failure_keeps_holds() -> None:
    worker = gangs("--waiting", "team-b/worker-0=node-1", "--failed", "team-b/worker-1")["team-b/worker"]
    assert worker["waiting"] == ["team-b/worker-0"] and worker["permit"]["verdict"] == "wait"


def test_ignored_kinds_are_noted_on_stderr() -> None:
    code, out, err = run("-f", str(DUMP), "-o", "json")
    assert code == 0 and json.loads(out)["gangs"]
    assert err.splitlines() == [
        "note: ignored 1 object(s) of kind Node",
        "note: evaluated at the newest timestamp in the input (not the clock); pass --now",
    ]


def test_table_output() -> None:
    code, out, _ = run("-f", str(DUMP))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["GANG", "MODE", "POLICY", "MIN"]
    ghost = next(line for line in lines if line.startswith("team-c/ghost"))
    assert "NotFound" in ghost and " wait " in ghost


def test_config_default_timeout_applies(tmp_path: Path) -> None:
    cfg = tmp_path / "sched.yaml"
    cfg.write_text("gang: {defaultTimeout: 45m}\n")
    code, out, _ = run("-f", str(DUMP), "-o", "json", "--config", str(cfg))
    assert code == 0
    by_id = {g["id"]: g for g in json.loads(out)["gangs"]}
    assert by_id["team-a/mpi"]["waitSeconds"] == 2700  # no scheduleTimeoutSeconds → 45m


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--waiting", "team-a/trainer-0"], "error: --waiting: expected NAMESPACE/NAME=NODE, got 'team-a/trainer-0'"),
        (["--waiting", "team-a/nope=node-1"], "error: --waiting: pod team-a/nope is not in the input"),
        (["--waiting", "team-a/web=node-1"], "error: --waiting: pod team-a/web belongs to no gang"),
        (["--waiting", "team-a/mpi-0=node-1"], "error: --waiting: pod team-a/mpi-0 is already bound to node-1"),
        (["--failed", "nope"], "error: --failed: expected NAMESPACE/NAME, got 'nope'"),
        (["--failed", "team-a/mpi-1"], "error: --failed: pod team-a/mpi-1 is already bound to node-1"),
        (["--now", "yesterday"], "error: --now: not an RFC 3339 timestamp: 'yesterday'"),
        (["-o", "yaml"], "error: -o: expected json or table, got 'yaml'"),
    ],
)
def test_bad_options_exit_2_with_one_line(args: list[str], message: str) -> None:
    code, out, err = run("-f", str(DUMP), *args)
    assert (code, out, err.strip()) == (2, "", message)


def test_bad_podgroup_names_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\n"
        "metadata: {name: pg, namespace: ns}\nspec: {minMember: three}\n"
    )
    code, _, err = run("-f", str(bad))
    assert code == 2
    assert err.strip() == f"error: {bad}: PodGroup ns/pg: spec.minMember: expected an integer"


def test_bad_config_names_file_and_field(tmp_path: Path) -> None:
    cfg = tmp_path / "sched.yaml"
    cfg.write_text("gang: {defaultMatchPolicy: sometimes}\n")
    code, _, err = run("-f", str(DUMP), "--config", str(cfg))
    assert code == 2 and err.startswith(f"error: {cfg}: gang.defaultMatchPolicy: ")
    assert len(err.strip().splitlines()) == 1


def test_bad_pod_names_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "pods.json"
    bad.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ns"},
                "spec": {"priority": "high"},
            }
        )
    )
    code, _, err = run("-f", str(bad))
    assert (code, err.strip()) == (2, f"error: {bad}: Pod ns/p: spec.priority: expected an integer")


def test_object_without_kind_names_file_and_item(tmp_path: Path) -> None:
    bad = tmp_path / "list.yaml"
    bad.write_text("kind: List\nitems:\n- metadata: {name: x}\n")
    code, _, err = run("-f", str(bad))
    assert (code, err.strip()) == (2, f"error: {bad}: items[0]: kind: required")
