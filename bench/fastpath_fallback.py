"""Fast-path fallback benchmark (not a test): what the extender's verbs cost when the start-up check of
uvicorn's internals fails and they are served through the ASGI app instead of inside the protocol.

The setup, client and bodies are ``bench/extender.py``'s (a populated cluster in its own pinned process,
kube-scheduler's filter and prioritize bodies over keep-alive loopback HTTP), once per serving mode of
``uvicorn_config``: ``inline`` (the fast path), ``limited`` (the ASGI app behind the listener limits: what
serves when only the inline protocol fails) and ``standard`` (the ASGI app on uvicorn's h11 protocol: what
serves when the limits' protocol fails too). The modes take turns over several rounds (the order reversed
every other round) and each figure is the median over the rounds, so their ratios are comparable on a busy
machine; the absolute figures are not.

Run: ``.venv/bin/python bench/fastpath_fallback.py`` (``--quick`` for a smoke run). Prints a table and
writes ``bench/results/fastpath_fallback.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing as mp
import os
import platform
import statistics
import sys
from pathlib import Path
from typing import Any

from extender import CONFIG, NOW, client_run, node_names, pin, populate

from koordpy.config import SchedulerConfiguration, validate
from koordpy.scheduler.extender.server import build_extender, uvicorn_config
from koordpy_testkit import FakeClock

RESULTS = Path(__file__).resolve().parent / "results" / "fastpath_fallback.json"
MODES = ("inline", "limited", "standard")


def server_main(count: int, mode: Any, conn: Any) -> None:
    pinned = pin(0)
    import uvicorn
    import uvloop

    extender = build_extender(validate(SchedulerConfiguration, CONFIG), None, clock=FakeClock(NOW))
    populate(extender, node_names(count))
    gc.collect()
    gc.freeze()
    config = uvicorn_config(extender.app, "127.0.0.1", 0, service=extender.service, mode=mode)
    config.log_level = "warning"
    server = uvicorn.Server(config)

    async def run() -> None:
        import asyncio

        task = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.01)
        conn.send((server.servers[0].sockets[0].getsockname()[1], pinned))
        await task

    uvloop.run(run())


def run_mode(count: int, mode: str, pairs: int, warmup: int) -> dict[str, Any]:
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=server_main, args=(count, mode, child), daemon=True)
    proc.start()
    try:
        if not parent.poll(600):
            raise RuntimeError("server did not start")
        port, _ = parent.recv()
        return client_run(port, count, pairs, warmup)
    finally:
        proc.terminate()
        proc.join(10)


def median_result(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the rounds of one mode."""

    def median(values: list[float]) -> float:
        return round(statistics.median(values), 3)

    return {
        verb: {key: median([r[verb][key] for r in runs]) for key in ("p50_ms", "p99_ms")}
        for verb in ("filter", "prioritize")
    } | {"filter_prioritize_pairs_per_s": median([r["filter_prioritize_pairs_per_s"] for r in runs])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer requests (smoke run)")
    parser.add_argument("--sizes", default="500,5000", help="node counts, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    pairs, warmup = (100, 20) if args.quick else (1000, 200)
    load_start = os.getloadavg()
    out: dict[str, Any] = {
        "machine": {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count()},
        "pairs": pairs,
        "rounds": args.rounds,
        "command": "bench/fastpath_fallback.py" + (" --quick" if args.quick else ""),
        "sizes": {},
    }
    for count in (int(s) for s in args.sizes.split(",")):
        rounds: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
        for index in range(args.rounds):
            for mode in MODES if index % 2 == 0 else tuple(reversed(MODES)):
                rounds[mode].append(run_mode(count, mode, pairs, warmup))
        results = {mode: median_result(runs) for mode, runs in rounds.items()}
        base = results["inline"]
        out["sizes"][str(count)] = {}
        for mode, result in results.items():
            summary = {
                "filter_p50_ms": result["filter"]["p50_ms"],
                "filter_p99_ms": result["filter"]["p99_ms"],
                "prioritize_p50_ms": result["prioritize"]["p50_ms"],
                "prioritize_p99_ms": result["prioritize"]["p99_ms"],
                "pairs_per_s": result["filter_prioritize_pairs_per_s"],
                "pair_p50_ratio_to_inline": round(
                    (result["filter"]["p50_ms"] + result["prioritize"]["p50_ms"])
                    / (base["filter"]["p50_ms"] + base["prioritize"]["p50_ms"]),
                    2,
                ),
            }
            out["sizes"][str(count)][mode] = summary
            print(
                f"{count:>5} nodes  {mode:<8} filter p50 {summary['filter_p50_ms']:.3f} ms p99 "
                f"{summary['filter_p99_ms']:.3f} ms | prioritize p50 {summary['prioritize_p50_ms']:.3f} ms | "
                f"{summary['pairs_per_s']:.0f} pairs/s | pair p50 {summary['pair_p50_ratio_to_inline']}x inline"
            )
    out["load_average"] = {"start": load_start, "end": os.getloadavg()}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(out, indent=2) + "\n")
    print(f"load average {load_start} -> {os.getloadavg()}; wrote {args.output}")


if __name__ == "__main__":
    main()
