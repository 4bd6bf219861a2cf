"""The bounds the hostile-input suite and the fuzz tiers rely on do stop what they promise to stop: a
computing run by its CPU seconds, a growing one by its address space, a blocked one by the hang backstop,
and an in-process example by its CPU seconds. None of them is a wall-clock bound on healthy work."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from test_hostile_inputs import check

import koordpy_testkit.hostile as hostile
from koordpy_testkit.bounds import HANG_BACKSTOP, cpu_bounded, cpu_seconds_of, limit_child
from koordpy_testkit.hostile import MEMORY_LIMIT, Case, Outcome

CASE = Case("synthetic", ("scheduler", "explain"))


def _run(code: str, cpu_seconds: int) -> tuple[int, float, str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=limit_child(cpu_seconds, MEMORY_LIMIT),  # noqa: PLW1509 - only setrlimit after fork
    )
    assert proc.stderr is not None
    stderr = proc.stderr.read()  # EOF when the child ends, however it ends
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stderr.close()
    return proc.returncode, cpu_seconds_of(usage), stderr


def test_a_busy_loop_is_stopped_by_its_cpu_seconds() -> None:
    code, cpu, _ = _run("while True: pass", cpu_seconds=1)
    # SIGXCPU: the kernel stopped it for its CPU seconds (wall-clock time plays no part, however loaded the
    # machine). The rusage figure is not compared with the limit: under load the kernel's split of run time
    # into user and system ticks can report less than the second the limit counted.
    assert code == -signal.SIGXCPU and cpu > 0
    with pytest.raises(AssertionError, match="over its 1 CPU seconds"):
        check(CASE, Outcome("synthetic", code, "", "", cpu), cpu_limit=1)


def test_an_allocation_over_the_address_space_limit_fails() -> None:
    code, _, stderr = _run(f"bytearray({MEMORY_LIMIT})", cpu_seconds=30)
    assert code == 1 and "MemoryError" in stderr


def test_a_blocked_run_is_killed_at_the_backstop_and_reported_as_hung(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hostile, "HANG_SECONDS", 0.5)  # a sleeping child never uses its CPU seconds
    proc = subprocess.Popen(["sleep", "600"])
    code, cpu = hostile._wait_bounded(proc.pid)
    proc.returncode = -signal.SIGKILL  # reaped by _wait_bounded
    assert code is None and cpu < 1.0
    with pytest.raises(AssertionError, match="hung"):
        check(CASE, Outcome("synthetic", code, "", "", cpu))


def test_the_backstop_is_generous() -> None:
    assert HANG_BACKSTOP >= 120
    assert hostile.CPU_LIMIT >= 5


def test_cpu_bounded_fails_an_example_over_its_cpu_seconds() -> None:
    @cpu_bounded(0.05)
    def spin() -> float:
        started = time.process_time()
        while time.process_time() - started < 0.2:
            pass
        return started

    @cpu_bounded(0.05)
    def idle() -> str:
        os.sched_yield()
        return "done"

    with pytest.raises(AssertionError, match="CPU seconds, over the bound of 0.05 s"):
        spin()
    assert idle() == "done"
