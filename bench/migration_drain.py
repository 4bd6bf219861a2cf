"""The bundled ``migration`` drain (``koordpy simulate --migration``), timed, with its figures.

The model lives in :mod:`koordpy.sim.migration` (no second copy here). Prints each mode's summary and the
wall time of the run, and writes ``bench/results/migration_drain.json``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from koordpy.cli.simulate_families import MIGRATION
from koordpy.sim.migration import MODES, run_migration


def main() -> None:
    scenario = MIGRATION.load(None)
    results = []
    for mode in MODES:
        started = time.perf_counter()
        run = run_migration(scenario, scenario.seed, mode)
        results.append(run.summary() | {"wall_seconds": round(time.perf_counter() - started, 2)})
        print(json.dumps(results[-1]))
    out = Path(__file__).parent / "results" / "migration_drain.json"
    out.parent.mkdir(exist_ok=True)
    document = {"scenario": scenario.name, "seed": scenario.seed, "results": results}
    out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
