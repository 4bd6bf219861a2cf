"""A container's stand-in: uses a known share of one CPU, optionally holds anonymous memory and reads a file
into the page cache, until killed. Runs with ``python -S`` (no site: 0.4 s to start in the guest).

    python -S burner.py DUTY [ANON_MIB] [READ_PATH]

DUTY (0..1) is kept per period of 100 ms against the process's own CPU time: it spins until its CPU time
in the period reaches DUTY x 100 ms, then sleeps until the period ends (bursts, like a real request
handler, rather than a fine mix that a tick-sampling counter would see askew). A period it could not
fill (the CPU had no room, or the cgroup is throttled) is not made up later, so a throttled burner does
not burst when released. It prints ``ready`` once its memory is in place.
"""

import sys
import time

PERIOD = 0.1


def main() -> None:
    duty = float(sys.argv[1])
    anon_mib = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    held = bytearray(anon_mib << 20)
    for offset in range(0, len(held), 4096):  # fault every page in: the memory is really used
        held[offset] = 1
    if len(sys.argv) > 3 and sys.argv[3]:
        with open(sys.argv[3], "rb") as fh:
            while fh.read(1 << 20):
                pass
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    if duty <= 0:
        while True:
            time.sleep(3600)
    period_end = time.monotonic()
    while True:
        period_end += PERIOD
        target = time.process_time() + duty * PERIOD
        while time.process_time() < target and time.monotonic() < period_end:
            pass
        rest = period_end - time.monotonic()
        if rest > 0:
            time.sleep(rest)
        else:
            period_end = time.monotonic()


if __name__ == "__main__":
    main()
