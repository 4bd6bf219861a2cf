"""OS processes for the process-level tiers: each in its own session (process group), logging to a file.

:meth:`Proc.stop` sends SIGTERM to the group, then SIGKILL after a grace period; :meth:`Proc.kill` is
SIGKILL at once (the crash scenarios). Ports are picked free by binding to port 0 on loopback.

Not guaranteed: a port picked free can be taken by someone else before the process binds it
(the start then fails loudly with the log tail).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx

from koordpy_testkit.bounds import HANG_BACKSTOP

LOOPBACK = "127.0.0.1"

__all__ = ["LOOPBACK", "Proc", "free_port", "stop_all", "wait_http"]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


class Proc:
    """One child process in its own process group, logging to ``log``."""

    def __init__(
        self, name: str, args: Sequence[str], log: Path, env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> None:
        self.name = name
        self.cwd = cwd
        self.args = [str(a) for a in args]
        self.log = log
        self._env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.popen: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def environment(self, env: Mapping[str, str]) -> None:
        """The environment of the next starts: the test process's own plus ``env``."""
        self._env = {**os.environ, "PYTHONUNBUFFERED": "1", **env}

    def start(self) -> Proc:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        out = self.log.open("ab")
        out.write(f"\n==== start {self.starts}: {' '.join(self.args)}\n".encode())
        out.flush()
        self.popen = subprocess.Popen(
            self.args,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=self._env,
            cwd=self.cwd,
        )
        out.close()
        self.starts += 1
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except FileNotFoundError:
            return "<no log>"
        return "\n".join(text.splitlines()[-lines:])

    def _signal_group(self, sig: signal.Signals) -> None:
        if self.popen is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, sig)

    def group_alive(self) -> bool:
        """Whether any process of this group is still around (zombies of the group count as gone)."""
        if self.popen is None:
            return False
        try:
            os.killpg(self.popen.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        # Only zombies left? /proc tells (Linux).
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[2]) == self.popen.pid and fields[0] != "Z":
                return True
        return False

    def kill(self) -> None:
        """SIGKILL the whole group and reap it."""
        self._signal_group(signal.SIGKILL)
        if self.popen is not None:
            self.popen.wait(timeout=HANG_BACKSTOP)

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM the group, SIGKILL after ``grace`` seconds; always reaps, and kills leftovers."""
        if self.popen is None:
            return
        if self.popen.poll() is None:
            self._signal_group(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=grace)
        # Children that outlived the leader (same group) go too.
        self._signal_group(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=HANG_BACKSTOP)

    def wait_for_log(self, needle: str, timeout: float) -> str:
        """Wait until a log line (of the current start) contains ``needle``; return that line."""
        deadline = time.monotonic() + timeout
        marker = f"==== start {self.starts - 1}:"
        while time.monotonic() < deadline:
            text = self.log.read_text(errors="replace") if self.log.exists() else ""
            current = text[text.rfind(marker) :] if marker in text else text
            for line in current.splitlines():
                if needle in line and not line.startswith("===="):
                    return line
            if not self.alive():
                raise RuntimeError(f"{self.name} exited ({self.popen and self.popen.returncode}):\n{self.tail()}")
            time.sleep(0.05)
        raise TimeoutError(f"{self.name}: no {needle!r} in the log after {timeout}s:\n{self.tail()}")


def stop_all(procs: Sequence[Proc], grace: float = 5.0) -> None:
    """Stop several processes at once: SIGTERM to every group first, then each reaped within one shared
    ``grace`` (SIGKILL for what is left), so stopping n processes takes one grace period, not n."""
    for proc in procs:
        if proc.alive():
            proc._signal_group(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc in procs:
        proc.stop(grace=max(0.0, deadline - time.monotonic()))


def wait_http(
    url: str,
    timeout: float,
    proc: Proc | None = None,
    *,
    verify: ssl.SSLContext | bool = True,
    headers: dict[str, str] | None = None,
) -> None:
    """Poll ``url`` until it answers 200; fail with the process's log tail.

    ``timeout`` is a hang backstop, not an expectation: callers pass generous values.
    """
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if proc is not None and not proc.alive():
            raise RuntimeError(f"{proc.name} exited ({proc.popen and proc.popen.returncode}):\n{proc.tail()}")
        try:
            resp = httpx.get(url, timeout=HANG_BACKSTOP, verify=verify, headers=headers)
            if resp.status_code == 200:
                return
            last = f"{resp.status_code} {resp.text[:200]}"
        except httpx.HTTPError as exc:
            last = repr(exc)
        time.sleep(0.1)
    tail = proc.tail() if proc is not None else ""
    raise TimeoutError(f"{url} not ready after {timeout}s (last: {last})\n{tail}")
