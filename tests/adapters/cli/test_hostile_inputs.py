"""Hostile inputs for ``explain``, ``agent plan`` and ``simulate``: exit 2, one line, bounded.

Every case of :mod:`koordpy_testkit.hostile` (about 100 explain dumps, 50 agent plan dumps and
configs, 100 scenarios) runs as its own process bounded by what the input can make it do: 10 CPU
seconds (``RLIMIT_CPU``) and 300 MB of address space (``RLIMIT_AS``), limits set in the child. Wall-clock
time is no bound (a loaded machine stretches it at will); a run still alive after the hang backstop
(:data:`koordpy_testkit.bounds.HANG_BACKSTOP`) is killed and fails as hung. To keep the file fast the
processes are forks of one warm interpreter (imports paid once); a few cases also run through the real
``koordpy`` console script from a fresh process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from koordpy_testkit.bounds import HANG_BACKSTOP, cpu_seconds_of, limit_child
from koordpy_testkit.hostile import CPU_LIMIT, HANG_SECONDS, MEMORY_LIMIT, Case, Outcome, all_cases, materialise

SETS = all_cases()
KOORDPY = Path(sys.executable).parent / "koordpy"


_RUNNING: dict[str, subprocess.Popen[str]] = {}


def _start(set_name: str, workdir: str) -> None:
    if set_name not in _RUNNING:
        _RUNNING[set_name] = subprocess.Popen(
            [sys.executable, "-m", "koordpy_testkit.hostile", workdir, set_name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


@cache
def outcomes(set_name: str, workdir: str) -> dict[str, Outcome]:
    """Run one set in a driver process (it forks one child per case) and index the outcomes by name.

    The three ordinary sets start together on first use (each driver waits on its children most of the time).
    """
    for name in (set_name, *(n for n in ("explain", "plan", "simulate") if set_name != "huge")):
        _start(name, workdir)
    driver = _RUNNING[set_name]
    # A hang backstop only: every case is bounded by its own limits and backstop.
    stdout, stderr = driver.communicate(timeout=len(SETS[set_name]) * HANG_SECONDS + HANG_BACKSTOP)
    assert driver.returncode == 0, stderr[-2000:]
    rows = [Outcome(**json.loads(line)) for line in stdout.splitlines()]
    assert [r.name for r in rows] == [c.name for c in SETS[set_name]]
    return {r.name: r for r in rows}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("hostile"))


def check(case: Case, outcome: Outcome, cpu_limit: float = CPU_LIMIT) -> None:
    assert outcome.code is not None, f"{case.name}: still alive after {HANG_SECONDS:.0f} s, not computing (hung)"
    assert outcome.code != -signal.SIGXCPU, f"{case.name}: over its {cpu_limit} CPU seconds (killed)"
    assert outcome.code != -signal.SIGKILL, f"{case.name}: killed ({outcome.cpu_seconds:.1f} CPU seconds)"
    assert "Traceback" not in outcome.stderr, outcome.stderr[-2000:]
    allowed = (0, 2) if case.may_succeed else (2,)
    assert outcome.code in allowed, f"{case.name}: exit {outcome.code}: {outcome.stderr[-500:]}"
    if outcome.code == 2:
        lines = outcome.stderr.splitlines()
        assert len(lines) == 1, f"{case.name}: {outcome.stderr!r}"
        assert lines[0].startswith("error: ")
        assert len(lines[0]) <= 420


def _ids(name: str) -> list[str]:
    return [c.name for c in SETS[name]]


def test_the_sets_have_the_promised_sizes():
    assert len(SETS["explain"]) >= 95
    assert len(SETS["plan"]) >= 45
    assert len(SETS["simulate"]) >= 95
    names = [c.name for cases in SETS.values() for c in cases]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("case", SETS["explain"], ids=_ids("explain"))
def test_explain(case: Case, workdir: str):
    check(case, outcomes("explain", workdir)[case.name])


@pytest.mark.parametrize("case", SETS["plan"], ids=_ids("plan"))
def test_agent_plan(case: Case, workdir: str):
    check(case, outcomes("plan", workdir)[case.name])


@pytest.mark.parametrize("case", SETS["simulate"], ids=_ids("simulate"))
def test_simulate(case: Case, workdir: str):
    check(case, outcomes("simulate", workdir)[case.name])


@pytest.mark.parametrize("case", SETS["huge"], ids=_ids("huge"))
def test_huge_exponent_quantities(case: Case, workdir: str):
    """``1e99999999``: needs quantities parsed in bounded time (the bounded quantity parser)."""
    check(case, outcomes("huge", workdir)[case.name])


def test_error_lines_name_the_file_and_the_field(workdir: str):
    explain = outcomes("explain", workdir)
    assert explain["explain-containers-null-5"].stderr.endswith(
        "dump.yaml: items[3]: Pod p: spec.containers[0]: expected an object, got NoneType\n"
    )
    assert "l.yaml: x: integer literal of 5000 characters" in explain["explain-long-int-yaml"].stderr
    assert "a.yaml: line 2: YAML alias *a is not accepted" in explain["explain-alias-bomb"].stderr
    assert explain["explain-dev-zero"].stderr == "error: /dev/zero: not a regular file or a pipe\n"
    plan = outcomes("plan", workdir)
    assert "c.yaml: collectIntervalSeconds: Input should be greater than or equal to 0.1" in (
        plan["plan-config-interval-tiny"].stderr
    )
    assert "dump.yaml#0: NodeQOSEnsurancePolicy waterline: spec.objectiveEnsurances[0].avoidanceThreshold" in (
        plan["plan-threshold-bool"].stderr
    )
    simulate = outcomes("simulate", workdir)
    assert "s.yaml: workloads[0].usage.cpu.spread: Input should be a finite number" in (
        simulate["simulate-workloads[0].usage.cpu.spread-nan"].stderr
    )
    assert "s.yaml: duration: duration out of range" in simulate["simulate-duration-inf"].stderr


@cache
def startup_cpu_seconds() -> float:
    """The CPU seconds a bare ``koordpy scheduler --help`` uses (imports and start-up, not input)."""
    proc = subprocess.Popen([str(KOORDPY), "scheduler", "--help"], stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0
    return cpu_seconds_of(usage)


@pytest.mark.parametrize("name", ["explain-alias-bomb", "explain-dev-zero"])
def test_through_the_console_script(name: str, tmp_path: Path):
    """The same bounds on a fresh ``koordpy`` process (``preexec_fn`` sets the limits).

    Its CPU limit is the forked runs' plus twice what starting ``koordpy scheduler --help`` uses here
    (imports are not what the bound is about; a slow CPU pays more for them).
    """
    case = next(c for c in SETS["explain"] if c.name == name)
    args = materialise(case, str(tmp_path))
    cpu_limit = CPU_LIMIT + 2 * int(startup_cpu_seconds() + 1)
    run = subprocess.run(
        [str(KOORDPY), *args],
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
        preexec_fn=limit_child(cpu_limit, MEMORY_LIMIT),
        check=False,
    )
    check(case, Outcome(name, run.returncode, run.stdout, run.stderr, 0.0), cpu_limit)
