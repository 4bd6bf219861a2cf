"""The bundled ``starving`` scenario (``koordpy simulate --starving``), timed, with its figures.

The model lives in :mod:`koordpy.sim.starving` (no second copy here). Prints each mode's summary and the
wall time of the run, then the koordpy run again with other ``starvingJobTimeThreshold`` /
``reservedNodePercent`` values over the same stream (the sensitivity table of docs/reservations.md), and
writes ``bench/results/starving_sim.json``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from koordpy.cli.simulate_families import STARVING
from koordpy.sim.starving import MODES, build_starving_trace, run_starving

SWEEP = ((120, 20), (300, 20), (600, 20), (300, 10))


def main() -> None:
    scenario = STARVING.load(None)
    trace = build_starving_trace(scenario, scenario.seed)
    results = []
    for mode in MODES:
        started = time.perf_counter()
        run = run_starving(scenario, scenario.seed, mode, trace)
        results.append(run.summary() | {"wall_seconds": round(time.perf_counter() - started, 2)})
        print(json.dumps(results[-1]))
    sweep = []
    for threshold, percent in SWEEP:
        settings = {**scenario.reservation, "starvingJobTimeThreshold": threshold, "reservedNodePercent": percent}
        variant = scenario.model_copy(update={"reservation": settings})
        summary = run_starving(variant, scenario.seed, "koordpy", trace).summary()
        sweep.append({"starvingJobTimeThreshold": threshold, "reservedNodePercent": percent} | summary)
        print(json.dumps(sweep[-1]))
    out = Path(__file__).parent / "results" / "starving_sim.json"
    out.parent.mkdir(exist_ok=True)
    document = {
        "scenario": scenario.name,
        "seed": scenario.seed,
        "pods": len(trace),
        "results": results,
        "sweep": sweep,
    }
    out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
