"""``koordpy simulate [SCENARIO] [--compare baseline|lowNodeLoad] [--out DIR] [--seed N]``.

``koordpy simulate --migration [SCENARIO]`` runs a ``kind: MigrationScenario`` instead (see
:mod:`koordpy.cli.simulate_families`); ``koordpy simulate --starving [SCENARIO]`` a ``kind:
StarvingScenario``. Without the option, such a file (or the bundled ``migration`` / ``starving``) is
recognised by its ``kind:`` and run the same way, with a note on stderr.

Runs a scenario (the bundled default without an argument) through the simulator, prints a summary
table and writes ``report.html``, ``summary.json`` and ``heatmap.png`` (per-node utilisation, one
panel per policy) into ``--out``. Scenario rules that do nothing are printed on stderr as
``warning: ...`` lines (and listed in the report and ``summary.json``); they do not stop the run.
Exit 2 on a bad scenario or option, naming the file and field.

Not guaranteed: the progress bar (stderr, only on a terminal) is not part of the output.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from koordpy.cli.files import UNEXPECTED, InputError, one_line, read_mapping
from koordpy.cli.simulate_families import FAMILIES, MIGRATION, STARVING, ScenarioFamily, simulate_family
from koordpy.config.errors import ConfigError, validate
from koordpy.config.scenario import Scenario
from koordpy.sim.agentqos import PLAN_FUNCTIONS, AgentQosPlanner, load_qos, pressure_model
from koordpy.sim.engine import BASELINE, COMPARED, KOORDPY, Policy
from koordpy.sim.png import heatmaps_png
from koordpy.sim.qos import QosPlanner
from koordpy.sim.report import render_html, render_table, summary_document
from koordpy.sim.run import BUNDLED_SCENARIOS, DEFAULT_SCENARIO, bundled_scenario, simulate
from koordpy.sim.scenariocheck import scenario_warnings
from koordpy.sim.stats import HEATMAP_BUCKET_SECONDS

__all__ = ["DEFAULT_SCENARIO", "load_scenario", "qos_factory", "qos_note", "register", "scenario_source"]

BASELINES = {"baseline": BASELINE, "lowNodeLoad": COMPARED}
"""``--compare`` values: the baseline, or koordpy with the scenario's ``descheduler.compareLowNodeLoad``."""


def scenario_source(path: Path | None) -> Path:
    """The file to read: ``path`` when it exists; else the bundled scenario of that name
    (``default``, ``gangs``, ``loop``, ``migration``, ``starving``); no argument: the bundled default. A missing
    bare name (no directory, no suffix) raises InputError listing the bundled names; any other path is
    returned as given (reading it then fails naming it)."""
    if path is None:
        return DEFAULT_SCENARIO
    if not path.exists():
        bundled = bundled_scenario(str(path))
        if bundled is not None:
            return bundled
        if path.parent == Path() and not path.suffix:
            import difflib

            names = ", ".join(BUNDLED_SCENARIOS)
            close = difflib.get_close_matches(str(path), BUNDLED_SCENARIOS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise InputError(f"{path}: no such file, and no bundled scenario of that name (bundled: {names}){hint}")
    return path


def scenario_kind(source: Path) -> str | None:
    """The ``kind:`` of a readable scenario file (None when unreadable or absent: loading reports that)."""
    try:
        document = read_mapping(source)
    except InputError:
        return None
    kind = document.get("kind")
    return kind if isinstance(kind, str) else None


def load_scenario(path: Path | None) -> Scenario:
    """The scenario file, a bundled scenario's name, or (None) the bundled default. Raises
    InputError/ConfigError naming the file."""
    source = scenario_source(path)
    scenario = validate(Scenario, read_mapping(source), str(source))
    try:
        load_qos(scenario)
    except ConfigError as exc:
        raise ConfigError(exc.problems, str(source)) from None
    return scenario


def qos_factory(scenario: Scenario, policy: Policy) -> QosPlanner | None:
    """The agent's planner for a policy: ``plan`` for koordpy, ``naive_plan`` for the baseline."""
    if not scenario.qos.enabled or not scenario.qos.policies:
        return None
    objects = load_qos(scenario)
    return AgentQosPlanner(
        policy.qos,
        objects.policies,
        objects.actions,
        PLAN_FUNCTIONS[policy.qos],
        pod_qos=objects.pod_qos,
        pressure=pressure_model(scenario, objects),
    )


def qos_note(scenario: Scenario) -> str:
    if not scenario.qos.enabled:
        return "disabled by the scenario"
    if not scenario.qos.policies:
        return "no NodeQOSEnsurancePolicy or NodeQOS in the scenario"
    return "koordpy runs the agent's plan(); the baseline runs the agent's naive_plan() (acts on every candidate)"


class _Progress:
    """A one-line progress bar on stderr, only when stderr is a terminal."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.shown = False

    def __call__(self, name: str, fraction: float) -> None:
        if not self.enabled:
            return
        width = 30
        done = int(width * fraction)
        sys.stderr.write(f"\r{name:<10} [{'#' * done}{'.' * (width - done)}] {fraction:4.0%}")
        sys.stderr.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\r" + " " * 60 + "\r")
            sys.stderr.flush()


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {one_line(message)}", err=True)
    return typer.Exit(2)


def simulate_command(  # noqa: PLR0917 - typer maps each parameter to an option
    scenario: Annotated[
        Path | None,
        typer.Argument(
            metavar="SCENARIO",
            help="Scenario YAML (kind: Scenario, MigrationScenario or StarvingScenario) or a bundled scenario's"
            f" name ({', '.join(BUNDLED_SCENARIOS)}); the bundled default if omitted.",
        ),
    ] = None,
    compare: Annotated[
        str | None,
        typer.Option(
            "--compare",
            metavar="BASELINE",
            help=(
                "Also replay the same trace under a baseline: 'baseline' (stock kube-scheduler, no descheduler),"
                " or 'lowNodeLoad' (koordpy with the scenario's descheduler.compareLowNodeLoad)."
            ),
        ),
    ] = None,
    out: Annotated[
        Path, typer.Option("--out", metavar="DIR", help="Directory for report.html and summary.json.")
    ] = Path("out/simulate"),
    seed: Annotated[
        int | None, typer.Option("--seed", metavar="N", help="Override the scenario's seed.", min=0)
    ] = None,
    migration: Annotated[
        bool,
        typer.Option(
            "--migration",
            help="Run a MigrationScenario (the bundled 'migration' drain if SCENARIO is omitted):"
            " arbitration against evicting everything at once.",
        ),
    ] = False,
    starving: Annotated[
        bool,
        typer.Option(
            "--starving",
            help="Run a StarvingScenario (the bundled 'starving' stream if SCENARIO is omitted):"
            " big jobs among small pods, koordpy's reservations against the stock kube-scheduler.",
        ),
    ] = False,
) -> None:
    """Simulate a cluster running koordpy's scheduler and agent policies (no cluster needed)."""
    if migration and starving:
        raise _fail("--migration and --starving: choose one")
    try:
        source = scenario_source(scenario) if scenario is not None else None
    except InputError as exc:
        raise _fail(str(exc)) from None
    kind = scenario_kind(source) if source is not None else None
    chosen: ScenarioFamily[Any, Any] | None = STARVING if starving else MIGRATION if migration else None
    family = chosen or FAMILIES.get(kind or "")
    if family is not None:
        if kind is not None and kind != family.kind:
            other = FAMILIES.get(kind)
            fix = f"use {other.option}" if other is not None else f"run it without {family.option}"
            raise _fail(f"{source}: a {kind}, not a {family.kind}: {fix}")
        if compare is not None:
            raise _fail(f"--compare: not used with a {family.kind} (it always compares {family.compares})")
        if chosen is None:
            typer.echo(f"note: {scenario} is a {family.kind}: running it as with {family.option}", err=True)
        simulate_family(family, source, out, seed)
        return
    if compare is not None and compare not in BASELINES:
        raise _fail(f"--compare: unknown baseline {compare!r} (known: {', '.join(sorted(BASELINES))})")
    try:
        parsed = load_scenario(scenario)
    except (InputError, ConfigError) as exc:
        raise _fail(str(exc)) from None
    except UNEXPECTED as exc:  # a malformed scenario the validators did not attribute to a field
        raise _fail(f"{scenario_source(scenario)}: cannot load: {type(exc).__name__}: {exc}") from None
    if compare == "lowNodeLoad" and (parsed.descheduler is None or parsed.descheduler.compare_low_node_load is None):
        raise _fail(f"--compare lowNodeLoad: {scenario_source(scenario)} has no descheduler.compareLowNodeLoad")
    warnings = scenario_warnings(parsed)
    for warning in warnings:
        typer.echo(f"warning: {warning}", err=True)
    chosen_seed = parsed.seed if seed is None else seed
    policies = [KOORDPY] + ([BASELINES[compare]] if compare is not None else [])
    progress = _Progress(sys.stderr.isatty())
    try:
        runs = simulate(parsed, chosen_seed, policies, qos_factory, progress)
    finally:
        progress.close()
    note = qos_note(parsed)
    document = summary_document(parsed, chosen_seed, runs, note, warnings)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").write_text(json.dumps(document, indent=2, allow_nan=False) + "\n", encoding="utf-8")
        (out / "report.html").write_text(render_html(parsed, chosen_seed, runs, note, warnings), encoding="utf-8")
        picture = heatmaps_png(
            [run.stats.heatmap() for run in runs],
            [run.policy.name for run in runs],
            [(pool.name, pool.count) for pool in parsed.node_pools],
            HEATMAP_BUCKET_SECONDS,
            parsed.duration,
            threshold=parsed.hot_threshold,
        )
        (out / "heatmap.png").write_bytes(picture)
    except OSError as exc:
        raise _fail(f"--out {out}: {exc.strerror or exc}") from None
    typer.echo(render_table(parsed, chosen_seed, runs))
    typer.echo(f"\nQoS: {note}")
    typer.echo(f"wrote {out / 'report.html'}, {out / 'summary.json'} and {out / 'heatmap.png'}")


def register(app: typer.Typer) -> None:
    """Add ``koordpy simulate`` to the top-level command."""
    app.command("simulate")(simulate_command)
