"""How tests bound work without asserting speed: CPU time and memory for what a process may do, and one
generous wall-clock backstop for waits, against a hang only.

The machine the tests run on may be loaded (a CI runner, two cores shared by several jobs): something
that takes 0.1 s on a quiet machine can take ten times longer there. So a test never fails because a
wall clock ran out while work was still progressing. Instead:

* what an input can make a program do is bounded in the child itself, by ``RLIMIT_CPU`` (CPU seconds,
  which a busy machine does not consume for it) and ``RLIMIT_AS`` (address space): :func:`limit_child`;
* a wait for a condition polls the condition and gives up only after :data:`HANG_BACKSTOP` seconds,
  which no healthy run gets near: :func:`eventually` and :func:`eventually_sync`;
* a wait on an awaitable uses :func:`within_backstop`;
* work done in the test process itself (a fuzz example) is bounded in CPU seconds: :func:`cpu_bounded`
  (hypothesis' own ``deadline`` is wall-clock time, so the fuzz tiers set it to None).

Not guaranteed: that a program which exceeds no bound is fast; speed is measured in ``bench/``.
"""

from __future__ import annotations

import asyncio
import functools
import os
import resource
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

__all__ = [
    "HANG_BACKSTOP",
    "cpu_bounded",
    "cpu_seconds_of",
    "eventually",
    "eventually_awaited",
    "eventually_sync",
    "limit_child",
    "within_backstop",
]

T = TypeVar("T")

HANG_BACKSTOP = float(os.environ.get("KOORDPY_TEST_HANG_BACKSTOP", "300"))
"""Seconds after which a wait counts as a hang (``KOORDPY_TEST_HANG_BACKSTOP`` overrides it). A healthy
run on a machine at load 12 stays far below; a wait that reaches it failed for another reason than
slowness."""


def limit_child(cpu_seconds: int, memory_bytes: int) -> Callable[[], None]:
    """A ``preexec_fn`` (or a call in a forked child) that caps the process's CPU time and address space.

    Past ``cpu_seconds`` of CPU the kernel sends ``SIGXCPU`` (the process dies with ``-SIGXCPU``), and
    ``SIGKILL`` two seconds later if it ignored that. An allocation beyond ``memory_bytes`` fails
    (``MemoryError`` in Python)."""

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 2))
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))

    return apply


def cpu_seconds_of(usage: resource.struct_rusage) -> float:
    """User plus system CPU seconds of a ``wait4`` resource usage."""
    return usage.ru_utime + usage.ru_stime


def cpu_bounded(seconds: float) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Fail a (synchronous) test function, or each hypothesis example of it, that uses more than
    ``seconds`` of this process's CPU time (every thread's; another process's load does not count)."""

    def decorate(function: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(function)
        def bounded(*args: Any, **kwargs: Any) -> T:
            started = time.process_time()
            result = function(*args, **kwargs)
            used = time.process_time() - started
            assert used <= seconds, f"{function.__name__}: {used:.2f} CPU seconds, over the bound of {seconds} s"
            return result

        return bounded

    return decorate


async def eventually(
    check: Callable[[], T], what: str, *, backstop: float = HANG_BACKSTOP, interval: float = 0.02
) -> T:
    """Poll ``check()`` until it returns something truthy and return that; after ``backstop`` seconds
    fail naming ``what`` and the last value seen."""
    loop = asyncio.get_running_loop()
    end = loop.time() + backstop
    while True:
        value = check()
        if value:
            return value
        if loop.time() >= end:
            raise AssertionError(f"{what}: not reached after {backstop:.0f} s (hang backstop; last: {value!r})")
        await asyncio.sleep(interval)


async def eventually_awaited(
    check: Callable[[], Awaitable[T]], what: str, *, backstop: float = HANG_BACKSTOP, interval: float = 0.02
) -> T:
    """:func:`eventually` for an async ``check`` (an API call, an HTTP probe)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + backstop
    while True:
        value = await check()
        if value:
            return value
        if loop.time() >= end:
            raise AssertionError(f"{what}: not reached after {backstop:.0f} s (hang backstop; last: {value!r})")
        await asyncio.sleep(interval)


def eventually_sync(check: Callable[[], T], what: str, *, backstop: float = HANG_BACKSTOP, interval: float = 0.05) -> T:
    """:func:`eventually` for code outside an event loop."""
    end = time.monotonic() + backstop
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= end:
            raise AssertionError(f"{what}: not reached after {backstop:.0f} s (hang backstop; last: {value!r})")
        time.sleep(interval)


async def within_backstop(awaitable: Awaitable[T], what: str, *, backstop: float = HANG_BACKSTOP) -> T:
    """Await ``awaitable``; after ``backstop`` seconds fail naming ``what``."""
    try:
        return await asyncio.wait_for(awaitable, backstop)
    except TimeoutError:
        raise AssertionError(f"{what}: not done after {backstop:.0f} s (hang backstop)") from None
