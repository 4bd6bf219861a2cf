"""README.md and the reference pages it links say what the code does: ``make demo`` prints the block and
writes the figures and picture README shows, the offline examples of docs/tools.md print exactly what they
show, and the configuration blocks (docs/configuration.md), the endpoint table and the compatibility notes
(docs/components.md) hold.

Every ```console block is run: ``$ koordpy ...`` through the real CLI (from the repository root, ``--out``
redirected to a temporary directory), ``$ make demo`` as the Makefile's recipe.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from koordpy.cli.main import EXAMPLES, app
from koordpy.config import LoadAwareSchedulingArgs, SchedulerConfiguration, validate
from koordpy.config.credentials import CredentialsSettings
from koordpy.config.manager import (
    HealthSettings,
    ManagerConfiguration,
    NodeMetricSettings,
    PeeringSettings,
    PodGroupSettings,
)
from koordpy.config.reservation import ReservationSettings
from koordpy.config.scheduler import ExtenderSettings
from koordpy.manager.policy import Create, reconcile_nodemetric
from koordpy.scheduler.extender.server import build_extender
from koordpy_testkit import NodeBuilder, PodBuilder

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
TOOLS = ROOT / "docs" / "tools.md"
CONFIGURATION = ROOT / "docs" / "configuration.md"
COMPONENTS = ROOT / "docs" / "components.md"
PAGES = (README, TOOLS, CONFIGURATION, COMPONENTS)
HEATMAP = ROOT / "docs" / "simulate-heatmap.png"


def _readme(page: Path = README) -> str:
    return page.read_text(encoding="utf-8")


def _section(title: str, page: Path = README) -> str:
    """The text of one ``## title`` section of a page (up to the next ``## ``); a page's ``# title`` is
    the whole page."""
    text = _readme(page)
    if text.startswith(f"# {title}\n"):
        return text
    for part in text.split("\n## ")[1:]:
        heading, _, body = part.partition("\n")
        if heading.strip() == title:
            return body
    raise AssertionError(f"{page.relative_to(ROOT)} has no '## {title}' section")


def _console_blocks(*pages: Path) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) of every ```console block of ``pages`` (README and docs/tools.md)."""
    blocks = []
    text = "\n".join(_readme(page) for page in (pages or (README, TOOLS)))
    for block in re.findall(r"```console\n(.*?)```", text, flags=re.S):
        first, *output = block.rstrip("\n").split("\n")
        assert first.startswith("$ "), f"console block without a '$ ' command line: {first!r}"
        blocks.append((first[2:], [line.rstrip() for line in output]))
    return blocks


def _yaml_blocks(page: Path = README) -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", _readme(page), flags=re.S)


def _yaml_block(kind: str) -> str:
    (block,) = [b for b in _yaml_blocks(CONFIGURATION) if re.search(rf"^kind: {kind}$", b, flags=re.M)]
    return block


def _run_cli(command: str, out_root: Path) -> tuple[int, list[str], str]:
    """Run ``koordpy ...`` as written, with ``--out DIR`` moved under ``out_root``; stdout shows DIR again."""
    argv = shlex.split(command)
    assert argv[0] == "koordpy", command
    args = argv[1:]
    shown = real = None
    if "--out" in args:
        at = args.index("--out") + 1
        shown, real = args[at], str(out_root / args[at])
        args[at] = real
    result = CliRunner().invoke(app, args)
    stdout = result.stdout if real is None else result.stdout.replace(real, str(shown))
    return result.exit_code, [line.rstrip() for line in stdout.rstrip("\n").split("\n")], result.stderr


@pytest.fixture(autouse=True)
def _at_the_repository_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's paths are relative to the repository root."""
    monkeypatch.chdir(ROOT)


# ---- the offline examples -----------------------------------------------------------------------------

KOORDPY_EXAMPLES = [(cmd, out) for cmd, out in _console_blocks() if cmd.startswith("koordpy ")]


def test_the_tools_page_has_an_example_of_each_offline_tool() -> None:
    tools = {tuple(shlex.split(cmd)[1:3]) for cmd, _ in KOORDPY_EXAMPLES}
    assert {("scheduler", "explain"), ("agent", "plan")} <= tools
    assert any(shlex.split(cmd)[1] == "simulate" for cmd, _ in KOORDPY_EXAMPLES)
    assert all(output for _, output in KOORDPY_EXAMPLES), "every example shows its output"


@pytest.mark.parametrize(("command", "expected"), KOORDPY_EXAMPLES, ids=[c for c, _ in KOORDPY_EXAMPLES])
def test_offline_example_prints_exactly_what_the_readme_shows(
    command: str, expected: list[str], tmp_path: Path
) -> None:
    code, stdout, stderr = _run_cli(command, tmp_path)
    assert code == 0, stderr
    assert stdout == expected


def test_the_examples_read_the_bundled_files() -> None:
    """The examples name files that ship in the package (src/koordpy/examples), not repository-only ones."""
    named = {Path(arg) for cmd, _ in KOORDPY_EXAMPLES for arg in shlex.split(cmd) if arg.endswith(".yaml")}
    assert named
    assert all((ROOT / path).resolve().parent == EXAMPLES for path in named), named


# ---- make demo ---------------------------------------------------------------------------------------


def _demo_recipe() -> str:
    """The one command of the Makefile's ``demo`` target, as make prints it."""
    lines = (ROOT / "Makefile").read_text(encoding="utf-8").split("\n")
    start = lines.index(next(line for line in lines if line.startswith("demo:")))
    recipe = []
    for line in lines[start + 1 :]:
        if not line.startswith("\t"):
            break
        recipe.append(line[1:])
    assert len(recipe) == 1, recipe
    return recipe[0].replace("$(BIN)", ".venv/bin")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], Path]:
    """``make demo``'s command run once: (stdout lines, output directory)."""
    recipe = _demo_recipe()
    assert recipe.startswith(".venv/bin/koordpy ")
    root = tmp_path_factory.mktemp("demo")
    code, stdout, stderr = _run_cli(recipe.removeprefix(".venv/bin/"), root)
    assert code == 0, stderr
    args = shlex.split(recipe)
    return stdout, root / args[args.index("--out") + 1]


def test_make_demo_prints_the_block_in_the_quick_start(demo: tuple[list[str], Path]) -> None:
    stdout, _ = demo
    ((_, shown),) = [(cmd, out) for cmd, out in _console_blocks(README) if cmd == "make demo"]
    assert shown[0] == _demo_recipe()
    assert shown[1:] == stdout


def test_make_demo_runs_the_simulator_on_the_default_scenario_against_the_baseline() -> None:
    args = shlex.split(_demo_recipe())[1:]
    assert args[0] == "simulate" and not args[1].endswith(".yaml")  # no scenario: the embedded default
    assert args[args.index("--compare") + 1] == "baseline"


def _figure_formatters(hot: int) -> dict[str, Callable[[dict[str, Any]], str]]:
    return {
        "CPU utilisation, mean": lambda p: f"{p['cpuUtilisationClusterMean'] * 100:.1f} %",
        "utilisation spread": lambda p: f"{p['cpuUtilisationStd']:.3f}",
        f"hot-node minutes: node-minutes above {hot} % CPU": lambda p: f"{p['hotNodeMinutes']:,.1f}",
        "pending time p50 / p99": lambda p: f"{p['pendingP50Seconds']:g} s / {p['pendingP99Seconds']:g} s",
        "pods throttled (throttle actions)": lambda p: f"{p['podsThrottled']:,} ({p['throttleActions']:,})",
        "pods evicted": lambda p: f"{p['podsEvicted']:,}",
        "pods touched by QoS": lambda p: f"{p['podsTouched']:,}",
        "descheduler (LowNodeLoad) moves, of which repeat moves": lambda p: (
            "no descheduler" if p["deschedulerMoves"] is None else f"{p['deschedulerMoves']:,}, {p['repeatMoves']:,}"
        ),
    }


def test_the_figures_table_is_the_demos_summary(demo: tuple[list[str], Path]) -> None:
    _, out = demo
    summary = json.loads((out / "summary.json").read_text())
    koordpy, baseline = summary["policies"]["koordpy"], summary["policies"]["baseline"]
    formatters = _figure_formatters(summary["hotThresholdPercent"])
    rows = re.findall(r"^\| ([^|]+?) \| ([^|]+?) \| ([^|]+?) \|$", _section("What the demo shows"), flags=re.M)
    rows = [row for row in rows if not row[0].startswith(("default scenario", "---"))]
    checked = set()
    for label, shown_koordpy, shown_baseline in rows:
        (key,) = [k for k in formatters if label.startswith(k)]
        assert (shown_koordpy, shown_baseline) == (formatters[key](koordpy), formatters[key](baseline)), label
        checked.add(key)
    assert checked == set(formatters)
    quick = _section("Quick start")
    hours = summary["simulatedSeconds"] / 3600
    assert f"{summary['nodes']} nodes, {summary['pods']:,} pods, {hours:g} simulated hours" in quick


def test_the_picture_is_the_demos_heatmap(demo: tuple[list[str], Path]) -> None:
    _, out = demo
    assert "(docs/simulate-heatmap.png)" in _section("What the demo shows")
    assert HEATMAP.read_bytes() == (out / "heatmap.png").read_bytes()


def test_the_demo_writes_the_files_the_readme_lists(demo: tuple[list[str], Path]) -> None:
    _, out = demo
    listed = set(re.findall(r"^\| `sim-out/([^`]+)` \|", _section("Quick start"), flags=re.M))
    assert listed == {p.name for p in out.iterdir()}


# ---- configuration -----------------------------------------------------------------------------------


def _aliases(model: Any) -> set[str]:
    return {field.alias or name for name, field in model.model_fields.items()} - {"apiVersion", "kind"}


def _named(block: str, key: str) -> bool:
    """``key:`` appears in the block as a key, commented out or not."""
    return re.search(rf"^\s*(#\s*)?{key}:", block, flags=re.M) is not None


def test_scheduler_configuration_block_is_the_defaults_and_names_every_field() -> None:
    block = _yaml_block("SchedulerConfiguration")
    cfg = validate(SchedulerConfiguration, yaml.safe_load(block), "README.md")
    assert cfg == validate(SchedulerConfiguration, {})
    assert [k for k in sorted(_aliases(LoadAwareSchedulingArgs)) if not _named(block, k)] == []
    assert [k for k in sorted(_aliases(ExtenderSettings)) if not _named(block, k)] == []


def test_manager_configuration_block_validates_with_default_values() -> None:
    block = _yaml_block("ManagerConfiguration")
    cfg = validate(ManagerConfiguration, yaml.safe_load(block), "README.md")
    assert [k for k in sorted(_aliases(NodeMetricSettings)) if not _named(block, k)] == []
    assert len(cfg.node_metric.overrides) == 1 and cfg.node_metric.overrides[0].report_interval_seconds == 30
    defaults = NodeMetricSettings.model_validate({})
    assert cfg.node_metric.model_copy(update={"overrides": ()}) == defaults
    assert cfg.peering == PeeringSettings.model_validate({}) and cfg.health == HealthSettings.model_validate({})
    assert cfg.pod_group == PodGroupSettings.model_validate({})
    assert [k for k in sorted(_aliases(PodGroupSettings)) if not _named(block, k)] == []
    assert cfg.reservation == ReservationSettings.model_validate({})
    assert [k for k in sorted(_aliases(ReservationSettings)) if not _named(block, k)] == []
    assert cfg.credentials == CredentialsSettings.model_validate({})
    assert [k for k in sorted(_aliases(CredentialsSettings)) if not _named(block, k)] == []


def test_the_quoted_configuration_error_is_what_the_cli_prints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (quoted,) = re.findall(
        r"\(`(sched\.yaml: [^`]+)`\)", _section("Configuration reference", CONFIGURATION).replace("\n", " ")
    )
    monkeypatch.chdir(tmp_path)
    Path("sched.yaml").write_text("loadAware:\n  usageThresholds: {cpu: 120}\n")
    result = CliRunner().invoke(
        app,
        ["scheduler", "explain", "-f", str(EXAMPLES / "cluster-dump.yaml"), "--pod", "x/y", "--config", "sched.yaml"],
    )
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: {quoted}"


def test_the_values_example_sets_the_scheduler_configuration() -> None:
    """The chart renders ``scheduler.config`` as the SchedulerConfiguration: the example's keys must fit it."""
    (block,) = [b for b in _yaml_blocks() if "my-values.yaml" in b]
    values = yaml.safe_load(block)
    cfg = validate(SchedulerConfiguration, values["scheduler"]["config"], "README.md")
    assert cfg.load_aware.usage_thresholds == {"cpu": 60, "memory": 90}


# ---- components and compatibility --------------------------------------------------------------------


async def test_the_endpoint_table_lists_exactly_the_extenders_routes() -> None:
    documented = set(re.findall(r"^\| `(GET|POST) (/[^`]*)` \|", _section("Components", COMPONENTS), flags=re.M))
    extender = build_extender(validate(SchedulerConfiguration, {}), None, freeze_gc=False)
    served = {
        (method, route.path)
        for route in extender.app.router.routes
        for method in getattr(route, "methods", None) or ()
        if method != "HEAD"
    }
    assert documented == served
    transport = httpx.ASGITransport(app=extender.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://extender") as client:
        body = (await client.get("/metrics")).text
    for name in re.findall(r"`(koordpy_extender_[a-z_]+)[{`]", _section("Components", COMPONENTS)):
        assert f"\n{name}" in body, name


def test_a_nodemetric_without_update_time_is_expired_as_the_readme_says(tmp_path: Path) -> None:
    """Compatibility: the NodeMetric the manager creates (no status) blocks its node until an agent reports."""
    note = _section("Compatibility", COMPONENTS).replace("\n", " ")
    assert "without `status.updateTime`" in note and "`node(s) nodeMetric expired`" in note
    created = reconcile_nodemetric("n1", NodeMetricSettings.model_validate({}), {}, None, exists=False)
    assert isinstance(created, Create) and "status" not in created.body
    docs = [
        NodeBuilder("n1").allocatable(cpu="16", memory="64Gi", pods="110").build(),
        NodeBuilder("n2").allocatable(cpu="16", memory="64Gi", pods="110").build(),  # no NodeMetric: passes
        created.body,
        PodBuilder("web").requests(cpu="1", memory="1Gi").build(),
    ]
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump_all(docs))

    def explain(*extra: str) -> dict[str, Any]:
        args = ["scheduler", "explain", "-f", str(dump), "--pod", "default/web", "-o", "json", *extra]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.stderr
        return {n["name"]: n for n in json.loads(result.stdout)["nodes"]}

    nodes = explain()
    assert nodes["n1"]["feasible"] is False
    assert [f["reason"] for f in nodes["n1"]["failures"]] == ["node(s) nodeMetric expired"]
    assert nodes["n2"]["feasible"] is True
    lenient = tmp_path / "lenient.yaml"
    lenient.write_text("loadAware:\n  filterExpiredNodeMetrics: false\n")
    nodes = explain("--config", str(lenient))
    assert nodes["n1"]["feasible"] is True and nodes["n1"]["scores"]["LoadAwareScheduling"] == 0


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_relative_links_point_at_existing_files_and_headings(page: Path) -> None:
    def slug(heading: str) -> str:  # GitHub's anchor for a heading
        return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")

    links = re.findall(r"\]\(([^)#:]*)(?:#([^)]*))?\)", _readme(page))
    assert links
    for target, anchor in links:
        path = page if not target else (page.parent / target).resolve()
        assert path.exists(), target
        if anchor:
            headings = re.findall(r"^#+ (.*)$", path.read_text(encoding="utf-8"), flags=re.M)
            assert anchor in {slug(h) for h in headings}, f"{target}#{anchor}"
