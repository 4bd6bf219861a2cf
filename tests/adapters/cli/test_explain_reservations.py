"""``koordpy scheduler explain`` with Reservations in the dump: the reserved-node reason per node.

Nodes held, free: 8 cpu / 32 GiB, no NodeMetric (load-aware passes, score 0). ``x`` (2 cpu) runs on
held; Reservation ``hold-big`` (Available on held, 4 cpu, owner ``default/big``, ttl 1h from
10:00:00Z). For a pod that is not ``big``: free on held = 8 - 2 - 4 = 2 cpu.
"""

from __future__ import annotations

import json
import selectors
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from koordpy.cli.main import app
from koordpy.kube.connection import write_kubeconfig
from koordpy.model.durations import parse_rfc3339
from koordpy_testkit import NodeBuilder, PodBuilder
from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.reservations import owner_pod, reservation_manifest

runner = CliRunner()
NOW = "2026-11-21T10:30:00Z"


def dump(tmp_path: Path) -> Path:
    docs: list[dict[str, Any]] = [
        NodeBuilder(name).allocatable(cpu="8", memory="32Gi", pods="110").build() for name in ("held", "free")
    ]
    docs.append(PodBuilder("x").requests(cpu="2").node("held").phase("Running").build())
    docs.append(PodBuilder("c").requests(cpu="3").build())
    docs.append(PodBuilder("d").requests(cpu="2").build())
    docs.append(PodBuilder("big").requests(cpu="4").build())
    created = parse_rfc3339("2026-11-21T10:00:00Z")
    docs.append(
        reservation_manifest(
            "hold-big", node="held", owners=[owner_pod("default", "big")], created=created, ttl="1h", cpu="4"
        )
    )
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


def explain(path: Path, pod: str, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["scheduler", "explain", "-f", str(path), "--pod", pod, "--now", NOW, *args])
    return result.exit_code, result.stdout


def test_a_pod_that_is_not_the_owner_fails_the_held_node_with_the_numbers(tmp_path: Path) -> None:
    code, out = explain(dump(tmp_path), "default/c")
    assert code == 0, out
    assert out.splitlines() == [
        "pod default/c: selected free",
        "NODE             FIT   LOADAWARE     SCORE EXT  REASON",
        " held            ok    no NodeMetric     -   -  Reservation: cpu: requested 3, free 2 after 4 reserved",
        "*free            ok    no NodeMetric     0   0  no NodeMetric for this node: load-aware filtering passes and"
        " its score is 0",
        "reservation hold-big on held: Available, not this pod's, holds cpu 4, remaining cpu 4",
    ]
    code, out = explain(dump(tmp_path), "default/c", "-o", "json")
    held = json.loads(out)["nodes"][0]
    assert held["feasible"] is False
    assert held["failures"] == [
        {
            "plugin": "Reservation",
            "reason": "node(s) resource was(were) reserved",
            "unresolvable": False,
            "detail": "cpu: requested 3, free 2 after 4 reserved",
        }
    ]
    assert held["reservation"] == {
        "verdict": "fail",
        "detail": "cpu: requested 3, free 2 after 4 reserved",
        "preferred": False,
        "holdings": [
            {
                "name": "hold-big",
                "phase": "Available",
                "owner": False,
                "allocatedTo": [],
                "requests": {"cpu": "4"},
                "allocated": {},
                "remaining": {"cpu": "4"},
            }
        ],
    }
    assert json.loads(out)["nodes"][1]["reservation"] == {
        "verdict": "none",
        "detail": "",
        "preferred": False,
        "holdings": [],
    }


def test_a_pod_that_fits_beside_the_reservation_passes(tmp_path: Path) -> None:
    code, out = explain(dump(tmp_path), "default/d", "-o", "json")  # 2 <= 2
    held = json.loads(out)["nodes"][0]
    assert code == 0 and held["feasible"] is True and held["failures"] == []
    assert held["reservation"]["verdict"] == "pass" and held["reservation"]["detail"] == ""


def test_the_owner_is_not_blocked_and_prefers_its_reserved_node(tmp_path: Path) -> None:
    code, out = explain(dump(tmp_path), "default/big")
    assert code == 0, out
    assert out.splitlines() == [
        "pod default/big: selected held",
        "NODE             FIT   LOADAWARE     SCORE EXT  REASON",
        "*held            ok    no NodeMetric     0  10  no NodeMetric for this node: load-aware filtering passes and"
        " its score is 0",
        " free            ok    no NodeMetric     0   0  no NodeMetric for this node: load-aware filtering passes and"
        " its score is 0",
        "reservation hold-big on held: Available, this pod's (preferred), holds cpu 4, remaining cpu 4",
    ]
    code, out = explain(dump(tmp_path), "default/big", "-o", "json")
    reservation_row = json.loads(out)["nodes"][0]["reservation"]
    assert reservation_row["verdict"] == "owner" and reservation_row["preferred"] is True


def test_an_expired_reservation_holds_nothing(tmp_path: Path) -> None:
    # created 10:00:00Z with ttl 1h: expired at 11:00:00Z
    result = runner.invoke(
        app,
        ["scheduler", "explain", "-f", str(dump(tmp_path)), "--pod", "default/c", "--now", "2026-11-21T11:00:00Z"],
    )
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0] == "pod default/c: selected held"
    assert "reservation hold-big" not in result.stdout


def test_an_unreadable_reservation_names_the_file_and_field(tmp_path: Path) -> None:
    path = dump(tmp_path)
    docs = list(yaml.safe_load_all(path.read_text()))
    docs[-1]["spec"]["ttl"] = "forever"
    path.write_text(yaml.safe_dump_all(docs))
    result = runner.invoke(app, ["scheduler", "explain", "-f", str(path), "--pod", "default/c", "--now", NOW])
    assert result.exit_code == 2
    assert str(path) in result.stderr and "Reservation hold-big: spec.ttl: " in result.stderr


def test_live_mode_lists_the_reservations_too(tmp_path: Path) -> None:
    """The same verdict from the API emulator (its own process on 127.0.0.1) as from the file."""
    path = dump(tmp_path)
    emulator = [sys.executable, "-m", "koordpy_testkit.apiserver", "--host", "127.0.0.1", "--port", "0"]
    proc = subprocess.Popen(
        [*emulator, "--seed", str(path), "--token", "t0k=admin"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            assert sel.select(timeout=HANG_BACKSTOP), "the emulator printed no URL within 30 s"
        url = proc.stdout.readline().strip()
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", url, token="t0k")
        args = ["scheduler", "explain", "--kubeconfig", str(kubeconfig), "--pod", "default/c", "--now", NOW]
        live = runner.invoke(app, args)
    finally:
        proc.terminate()
        proc.wait(timeout=HANG_BACKSTOP)
        if proc.stdout is not None:
            proc.stdout.close()
    assert live.exit_code == 0, live.stderr
    # the API lists nodes by name (free before held): the same rows, in another order
    assert sorted(live.stdout.splitlines()) == sorted(explain(path, "default/c")[1].splitlines())
    assert "Reservation: cpu: requested 3, free 2 after 4 reserved" in live.stdout
