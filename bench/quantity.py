"""Quantity benchmark (not a test): time to parse (or refuse) hostile quantities (``1e99999999``, ``1e400``) and
common ones.

Without bounds, ``"1e99999999"`` would compute 10**99999999 (minutes on the extender's event loop); every
string is decided in time linear in its length, the exponent checked before any arithmetic.
Memoisation is bypassed (``_parse_text`` directly) so each call does the whole work.

Run: ``.venv/bin/python bench/quantity.py [--repeat N]``. Prints a table and writes
``bench/results/quantity.json``.

Not guaranteed: stable figures on a shared machine (the median of the repeats is reported).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import statistics
import sys
import time
from pathlib import Path

from koordpy.model.quantity import QuantityError, _parse_text

CASES = {
    "250m": "250m",
    "2Gi": "2Gi",
    "1e99999999": "1e99999999",
    "1e400": "1e400",
    "1e-99999999": "1e-99999999",
    "100k-digit tail + Ki": "1." + "0" * 100_000 + "1Ki",
}


def _once(text: str) -> float:
    started = time.perf_counter()
    with contextlib.suppress(QuantityError):
        _parse_text(text, text)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2000)
    args = parser.parse_args()
    rows = {}
    for name, text in CASES.items():
        repeat = args.repeat if len(text) < 100 else max(1, args.repeat // 100)
        samples = [_once(text) for _ in range(repeat)]
        rows[name] = {"median_us": statistics.median(samples) * 1e6, "max_us": max(samples) * 1e6, "repeat": repeat}
        print(f"{name:24} median {rows[name]['median_us']:9.1f} us   max {rows[name]['max_us']:9.1f} us")
    out = Path(__file__).parent / "results" / "quantity.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(
        json.dumps({"python": sys.version.split()[0], "machine": platform.machine(), "cases": rows}, indent=2)
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
