"""The bundled ``starving`` scenario (``koordpy simulate --starving``), timed, with its figures.

The model lives in :mod:`koordpy.sim.starving` (no second copy here). Prints each mode's summary and the
wall time of the run, and writes ``bench/results/starving_sim.json``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from koordpy.cli.simulate_starving import load_starving_scenario
from koordpy.sim.starving import MODES, build_starving_trace, run_starving


def main() -> None:
    scenario = load_starving_scenario(None)
    trace = build_starving_trace(scenario, scenario.seed)
    results = []
    for mode in MODES:
        started = time.perf_counter()
        run = run_starving(scenario, scenario.seed, mode, trace)
        results.append(run.summary() | {"wall_seconds": round(time.perf_counter() - started, 2)})
        print(json.dumps(results[-1]))
    out = Path(__file__).parent / "results" / "starving_sim.json"
    out.parent.mkdir(exist_ok=True)
    document = {"scenario": scenario.name, "seed": scenario.seed, "pods": len(trace), "results": results}
    out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
