"""The latency-sensitive pod's probe and the batch pods' load, for ``bench/colocation.py`` (run inside the pods).

    python -S colocation_probe.py probe OUT ITERATIONS PERIOD_MS [WORKSET_FILE PAGES]
    python -S colocation_probe.py cpu FLAG
    python -S colocation_probe.py memory FLAG MIB MIB_PER_S

``probe``: one unit of fixed CPU work (``ITERATIONS`` turns of a small loop, about 1 ms on a quiet CPU) every
``PERIOD_MS``, open loop: unit ``k`` is due at ``start + k x period`` whatever happened before, so a late unit
does not postpone the next ones (no coordinated omission). With ``WORKSET_FILE``, each unit also reads
``PAGES`` pages of the memory-mapped file, spread over it (a working set the kernel may evict and the unit
then faults back in). Each unit's due and done times (the guest's monotonic clock, seconds) are appended as
two doubles to ``OUT``, flushed every second.

``cpu``: burns a CPU while ``FLAG`` exists, else sleeps 100 ms. ``memory``: while ``FLAG`` exists, grows
an anonymous buffer by ``MIB_PER_S`` (every page touched) up to ``MIB``, and keeps touching it; frees it
when ``FLAG`` goes.

Only the standard library (the pods run the host's interpreter through read-only mounts).
"""

import mmap
import os
import struct
import sys
import time


def probe(out: str, iterations: int, period_ms: float, workset: str = "", pages: int = 0) -> None:
    period = period_ms / 1000
    view = None
    stride = 0
    if workset:
        fd = os.open(workset, os.O_RDONLY)
        size = os.fstat(fd).st_size
        view = mmap.mmap(fd, size, prot=mmap.PROT_READ)
        stride = max(mmap.PAGESIZE, size // max(pages, 1) // mmap.PAGESIZE * mmap.PAGESIZE)
    buffer = bytearray()
    offset = 0
    start = time.monotonic()
    flushed = start
    k = 0
    with open(out, "ab", buffering=0) as sink:
        while True:
            due = start + k * period
            now = time.monotonic()
            if now < due:
                time.sleep(due - now)
            acc = 0
            for i in range(iterations):
                acc += i ^ (acc >> 3)
            if view is not None:
                for _ in range(pages):
                    acc += view[offset]
                    offset = (offset + stride) % len(view)
            done = time.monotonic()
            buffer += struct.pack("dd", due, done)
            k += 1
            if done - flushed >= 1.0:
                sink.write(bytes(buffer))
                buffer.clear()
                flushed = done


def cpu(flag: str) -> None:
    while True:
        if not os.path.exists(flag):
            time.sleep(0.1)
            continue
        end = time.monotonic() + 0.1
        while time.monotonic() < end:
            pass


def memory(flag: str, mib: int, per_second: int) -> None:
    held: list[bytearray] = []
    page = mmap.PAGESIZE
    while True:
        if not os.path.exists(flag):
            held.clear()
            time.sleep(0.1)
            continue
        if len(held) < mib:
            chunk = bytearray(1 << 20)
            for i in range(0, len(chunk), page):
                chunk[i] = 1
            held.append(chunk)
            time.sleep(max(0.0, 1 / per_second - 0.005))
        else:
            for chunk in held:  # keep the buffer in use
                chunk[0] ^= 1
            time.sleep(0.1)


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    if mode == "probe":
        probe(args[0], int(args[1]), float(args[2]), *(args[3:4] or [""]), *(int(a) for a in args[4:5]))
    elif mode == "cpu":
        cpu(args[0])
    else:
        memory(args[0], int(args[1]), int(args[2]))
