"""The mutation run: how many small changes to koordpy's rule modules the fast test tiers notice.

usage: .venv/bin/python scripts/mutation.py [GROUP ...] [--jobs N] [--keep] [--min-score 90] [--show]
       (``make mutation`` runs every group; ``make mutation GROUPS="gang limits"`` some)

For each group (a few source files and the unit/adapter tests that exercise them, :data:`GROUPS`) mutmut
(pinned in requirements/dev.lock) writes every mutant of every function of those files (an operator, a
comparison, a number, a string, an argument, a return value changed), runs the group's tests once to learn
which tests reach which function, then for each mutant only those tests, in a forked copy of one pytest
process. A mutant is *killed* when a test fails, a *timeout* when the tests run far past their measured
time (a hang: counted as detected), *survived* when they all pass, *no tests* when no selected test
reaches its function (counted as survived). Never the cluster, guest, node or system tiers: only files
under tests/unit and tests/adapters.

Each group runs in ``build/mutation/GROUP`` (a pyproject.toml with this group's ``[tool.mutmut]`` table,
links to src and tests; mutmut's copy under ``mutants/``), from scratch unless ``--keep`` (then mutmut
retests only what changed: quicker while writing tests, but a change to an unmutated module is not seen).

Scores are per source file: ``score = (killed + timeout) / (mutants - listed equivalent)``. A survivor
that no test can kill (it changes nothing observable) is listed in ``mutation/equivalent.toml`` with the
change mutmut made and why it is equivalent; a listed mutant counts as equivalent only while it still
survives with that same change. A listed mutant that is killed now, or whose change no longer matches
(the function was edited and the mutants renumbered), is reported as a stale listing and fails the run.

Writes ``mutation/results/GROUP.json`` (counts per file, the unlisted survivors with their change, stale
listings) and prints a table. Exit status 1 when a file scores below ``--min-score`` (default 90) or a
listing is stale. CPU-heavy: runs under ``nice -n 10``, ``--jobs`` forked test processes (default 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "build" / "mutation"
RESULTS = ROOT / "mutation" / "results"
EQUIVALENT = ROOT / "mutation" / "equivalent.toml"
MUTMUT = ROOT / ".venv" / "bin" / "mutmut"


@dataclasses.dataclass(frozen=True)
class Group:
    files: tuple[str, ...]
    """Source files mutated, relative to src/."""
    tests: tuple[str, ...]
    """Test files or folders run (unit and adapter tiers only), relative to the repository."""


GROUPS: dict[str, Group] = {
    "loadaware": Group(
        files=(
            "koordpy/scheduler/plugins/loadaware/plugin.py",
            "koordpy/scheduler/plugins/loadaware/estimator.py",
            "koordpy/scheduler/plugins/loadaware/nodeload.py",
            "koordpy/scheduler/plugins/loadaware/profile.py",
        ),
        tests=("tests/unit/scheduler/plugins/loadaware", "tests/unit/scheduler/test_koordinator_cases.py"),
    ),
    "gang": Group(
        files=(
            "koordpy/scheduler/plugins/gang/state.py",
            "koordpy/scheduler/plugins/gang/decisions.py",
            "koordpy/scheduler/plugins/gang/disruption.py",
        ),
        tests=(
            "tests/unit/scheduler/plugins/gang",
            "tests/unit/descheduler/test_arbitration_gangs.py",
            "tests/unit/descheduler/test_lifecycle_gangs.py",
        ),
    ),
    "arbitration": Group(
        files=("koordpy/descheduler/arbitration.py",),
        tests=(
            "tests/unit/descheduler/test_arbitration.py",
            "tests/unit/descheduler/test_arbitration_equivalence.py",
            "tests/unit/descheduler/test_arbitration_gangs.py",
            "tests/unit/descheduler/test_arbitration_reasons.py",
        ),
    ),
    "limits": Group(
        files=("koordpy/descheduler/limits.py",),
        tests=("tests/unit/descheduler/test_limits.py",),
    ),
    "lifecycle": Group(
        files=(
            "koordpy/descheduler/lifecycle.py",
            "koordpy/descheduler/job_status.py",
            "koordpy/descheduler/job_facts.py",
            "koordpy/descheduler/decisions.py",
            "koordpy/descheduler/lifecycle_inputs.py",
            "koordpy/descheduler/ratelimit.py",
            "koordpy/descheduler/eviction.py",
            "koordpy/descheduler/reservation_first_steps.py",
            "koordpy/descheduler/gang_migration.py",
            "koordpy/descheduler/reservation_first.py",
        ),
        tests=(
            "tests/unit/descheduler/test_lifecycle.py",
            "tests/unit/descheduler/test_ratelimit.py",
            "tests/unit/descheduler/test_lifecycle_gangs.py",
            "tests/unit/descheduler/test_reservation_first.py",
        ),
    ),
    "agent_policy": Group(
        files=(
            "koordpy/agent/policy/waterline.py",
            "koordpy/agent/policy/planner.py",
            "koordpy/agent/policy/throttle.py",
            "koordpy/agent/policy/ordering.py",
        ),
        tests=("tests/unit/agent/policy",),
    ),
    "credentials": Group(
        files=("koordpy/kube/credentials.py",),
        tests=(
            "tests/adapters/kube/test_kube_credentials.py",
            "tests/adapters/kube/test_kube_credentials_rules.py",
            "tests/adapters/manager/test_manager_credentials.py",
            "tests/unit/config/test_credentials_settings.py",
        ),
    ),
    "reachability": Group(
        files=("koordpy/kube/reachability.py",),
        tests=(
            "tests/adapters/kube/test_kube_reachability.py",
            "tests/adapters/kube/test_kube_reflector.py",
            "tests/adapters/kube/test_kube_reflector_poison.py",
        ),
    ),
    "leaderelection": Group(
        files=("koordpy/kube/leaderelection.py",),
        tests=(
            "tests/adapters/kube/test_kube_leaderelection.py",
            "tests/adapters/kube/test_kube_fence.py",
            "tests/adapters/manager/test_retrying_writes.py",
        ),
    ),
}

DETECTED = ("killed", "timeout", "segfault")
"""mutmut's statuses of a mutant some test noticed (``segfault``: the test process died of a signal)."""


@dataclasses.dataclass
class FileScore:
    file: str
    mutants: int = 0
    killed: int = 0
    timeout: int = 0
    survived: int = 0
    no_tests: int = 0
    other: int = 0
    equivalent: int = 0

    @property
    def score(self) -> float:
        counted = self.mutants - self.equivalent
        return 100.0 * (self.killed + self.timeout) / counted if counted else 100.0


def module_of(file: str) -> str:
    return file.removesuffix(".py").replace("/", ".")


def mutmut_table(group: Group) -> str:
    """The ``[tool.mutmut]`` table of one group's run."""
    table = {
        "source_paths": ["src"],
        "only_mutate": [f"src/{f}" for f in group.files],
        "pytest_add_cli_args_test_selection": list(group.tests),
        # each forked test process starts with koordpy's memo caches empty (koordpy_testkit.fresh_caches)
        "pytest_add_cli_args": ["-p", "no:cacheprovider", "-p", "koordpy_testkit.fresh_caches"],
        "use_git_change_detection": False,
    }
    return "\n[tool.mutmut]\n" + "".join(f"{key} = {json.dumps(value)}\n" for key, value in table.items())


def prepare(name: str, group: Group, *, keep: bool) -> Path:
    for path in (*group.files, *group.tests):
        where = ROOT / ("src" if path.startswith("koordpy/") else "") / path
        if not where.exists():
            raise SystemExit(f"mutation.py: group {name}: {where.relative_to(ROOT)} does not exist")
    work = WORK / name
    if work.exists() and not keep:
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    pyproject = (ROOT / "pyproject.toml").read_text()
    if "[tool.mutmut]" in pyproject:
        raise SystemExit("mutation.py: pyproject.toml has a [tool.mutmut] table; the groups live in this script")
    (work / "pyproject.toml").write_text(pyproject + mutmut_table(group))
    for link in ("src", "tests"):
        if not (work / link).is_symlink():
            (work / link).symlink_to(ROOT / link)
    return work


def mutmut(work: Path, *args: str, log: Path | None = None) -> str:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    command = ["nice", "-n", "10", str(MUTMUT), *args]
    if log is None:
        return subprocess.run(command, cwd=work, env=env, check=True, capture_output=True, text=True).stdout
    with log.open("w") as out:
        done = subprocess.run(command, cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        tail = log.read_text()[-3000:]
        raise SystemExit(f"mutation.py: mutmut run failed ({done.returncode}) in {work}; end of {log}:\n{tail}")
    return ""


DIFFS = """
import json, sys
from mutmut.mutation.diff_apply import get_diff_for_mutant
json.dump({name: get_diff_for_mutant(name, path=path) for name, path in json.load(sys.stdin)}, sys.stdout)
"""
"""mutmut's own diff of each named mutant (what ``mutmut show`` prints), for many mutants in one process."""


def changes_of(work: Path, mutants: list[tuple[str, str]]) -> dict[str, list[str]]:
    """The lines mutmut removed and added for each mutant (name, its file under src/): the ``-``/``+`` lines of
    its diff, whitespace-trimmed."""
    if not mutants:
        return {}
    done = subprocess.run(
        ["nice", "-n", "10", str(MUTMUT.parent / "python"), "-c", DIFFS],
        cwd=work,
        input=json.dumps(mutants),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"mutation.py: reading mutmut's diffs in {work} failed:\n{done.stderr[-3000:]}")
    return {
        name: [
            line[0] + " " + line[1:].strip()
            for line in diff.splitlines()
            if line[:1] in "+-" and not line.startswith(("+++", "---"))
        ]
        for name, diff in json.loads(done.stdout).items()
    }


def load_equivalent() -> dict[str, dict[str, object]]:
    if not EQUIVALENT.exists():
        return {}
    listed = tomllib.loads(EQUIVALENT.read_text()).get("mutant", [])
    by_name: dict[str, dict[str, object]] = {}
    for entry in listed:
        missing = {"name", "change", "why"} - set(entry)
        if missing:
            raise SystemExit(f"mutation.py: {EQUIVALENT.relative_to(ROOT)}: an entry lacks {sorted(missing)}: {entry}")
        by_name[str(entry["name"])] = entry
    return by_name


STATUS = re.compile(r"^\s+(\S+): (.+)$")


def natural(mutant: str) -> tuple[str, int]:
    base, _, number = mutant.rpartition("__mutmut_")
    return base, int(number) if number.isdigit() else 0


def last_survivors(name: str) -> list[str]:
    """The unlisted survivors of the group's last run (its results file)."""
    previous = RESULTS / f"{name}.json"
    if not previous.exists() or not (WORK / name / "mutants").is_dir():
        raise SystemExit(f"mutation.py: {name}: --survivors needs a previous run (results and build/mutation)")
    return [str(s["name"]) for s in json.loads(previous.read_text())["survivors"]]


def run_group(name: str, group: Group, *, jobs: int, keep: bool, run: bool, survivors: bool) -> dict[str, object]:
    work = WORK / name
    started = time.monotonic()
    if run:
        again = last_survivors(name) if survivors else []
        work = prepare(name, group, keep=keep or survivors)
        print(f"mutation.py: {name}: mutmut run in {work.relative_to(ROOT)} (log: mutmut.log)", flush=True)
        if not survivors or again:
            mutmut(work, "run", "--max-children", str(jobs), *again, log=work / "mutmut.log")
    elif not (work / "mutants").is_dir():
        raise SystemExit(f"mutation.py: {name}: --no-run, but {work.relative_to(ROOT)} has no run to report")
    elapsed = time.monotonic() - started
    statuses: dict[str, str] = {}
    for line in mutmut(work, "results", "--all", "true").splitlines():
        if m := STATUS.match(line):
            statuses[m[1]] = m[2]
    modules = {module_of(f): f for f in group.files}
    undetected = [m for m, status in statuses.items() if status not in (*DETECTED, "not checked")]
    changes = changes_of(work, [(m, f"src/{file_of(m, modules)}") for m in sorted(undetected)])
    scores, survivors, stale = classify(group.files, statuses, changes, load_equivalent())
    return {
        "group": name,
        "files": [dataclasses.asdict(s) | {"score": round(s.score, 1)} for s in scores],
        "tests": list(group.tests),
        "mutmut": mutmut(work, "--version").strip(),
        "command": f"scripts/mutation.py {name}",
        "seconds": round(elapsed) if run else None,
        "jobs": jobs if run else None,
        "survivors": survivors,
        "stale_listings": stale,
    }


def classify(
    files: tuple[str, ...],
    statuses: dict[str, str],
    changes: dict[str, list[str]],
    equivalent: dict[str, dict[str, object]],
) -> tuple[list[FileScore], list[dict[str, object]], list[dict[str, object]]]:
    """Count each mutant (its mutmut status, and for an undetected one its change) against the listed
    equivalent survivors: the scores per file, the unlisted survivors and the stale listings."""
    modules = {module_of(f): f for f in files}
    scores = {f: FileScore(f) for f in files}
    survivors: list[dict[str, object]] = []
    stale: list[dict[str, object]] = []
    for mutant, status in sorted(statuses.items(), key=lambda item: natural(item[0])):
        file = file_of(mutant, modules)
        if file is None:
            raise SystemExit(f"mutation.py: mutant {mutant} of no file of the group ({', '.join(files)})")
        score = scores[file]
        score.mutants += 1
        listed = equivalent.get(mutant)
        if status in DETECTED:
            if status == "timeout":
                score.timeout += 1
            else:
                score.killed += 1
            if listed is not None:
                stale.append({"name": mutant, "status": status, "why": "listed as equivalent, but a test kills it"})
            continue
        change = changes.get(mutant, [])
        if status in ("survived", "no tests"):
            if listed is not None and [str(c) for c in listed["change"]] == change:  # type: ignore[attr-defined]
                score.equivalent += 1
                continue
            if listed is not None:
                stale.append({"name": mutant, "status": status, "why": "listed with another change", "change": change})
            if status == "survived":
                score.survived += 1
            else:
                score.no_tests += 1
        else:
            score.other += 1  # not checked (an interrupted run), suspicious: not detected
        survivors.append({"name": mutant, "status": status, "change": change})
    for mutant, entry in equivalent.items():
        if file_of(mutant, modules) is not None and mutant not in statuses:
            stale.append({"name": mutant, "why": "listed, but mutmut made no such mutant", "listed": entry["change"]})
    return list(scores.values()), survivors, stale


def file_of(mutant: str, modules: dict[str, str]) -> str | None:
    """The source file a mutant's name (``module.x_function__mutmut_N``, ``module.xǁClassǁmethod__mutmut_N``)
    belongs to, among ``modules`` (module name: file)."""
    return next((file for module, file in modules.items() if mutant.startswith(module + ".")), None)


def print_table(results: list[dict[str, object]]) -> None:
    header = ("file", "mutants", "killed", "timeout", "survived", "no tests", "equivalent", "score")
    rows = [header]
    for result in results:
        for f in result["files"]:  # type: ignore[attr-defined]
            rows.append(
                (
                    f["file"].removeprefix("koordpy/"),
                    *(str(f[k]) for k in ("mutants", "killed", "timeout", "survived", "no_tests", "equivalent")),
                    f"{f['score']:.1f} %",
                )
            )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for r in rows:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))))


def markdown() -> str:
    """The scores of every group's last run (``mutation/results``), as the table in docs/testing.md."""
    lines = [
        "| group | file | mutants | killed | timeout | survived | no tests | equivalent | score |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in GROUPS:
        path = RESULTS / f"{name}.json"
        if not path.exists():
            continue
        for f in json.loads(path.read_text())["files"]:
            counts = " | ".join(
                str(f[k]) for k in ("mutants", "killed", "timeout", "survived", "no_tests", "equivalent")
            )
            lines.append(f"| {name} | `{f['file'].removeprefix('koordpy/')}` | {counts} | {f['score']:.1f} % |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("groups", nargs="*", metavar="GROUP", help=f"default: all ({', '.join(GROUPS)})")
    parser.add_argument("--jobs", type=int, default=2, help="forked test processes at once (default 2)")
    parser.add_argument("--keep", action="store_true", help="reuse build/mutation/GROUP (mutmut's cache)")
    parser.add_argument("--min-score", type=float, default=90.0, help="per-file floor, percent (default 90)")
    parser.add_argument(
        "--survivors", action="store_true", help="with the last run kept, test its unlisted survivors again"
    )
    parser.add_argument("--no-run", action="store_true", help="report the last run of build/mutation/GROUP again")
    parser.add_argument("--show", action="store_true", help="print each unlisted survivor's change")
    parser.add_argument("--markdown", action="store_true", help="print the last runs' scores as a Markdown table")
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown())
        return 0
    unknown = [g for g in args.groups if g not in GROUPS]
    if unknown:
        parser.error(f"unknown group(s) {unknown}; groups: {', '.join(GROUPS)}")
    if not MUTMUT.exists():
        raise SystemExit(f"mutation.py: {MUTMUT.relative_to(ROOT)} not found: make .venv/.dev-installed first")
    results = []
    RESULTS.mkdir(parents=True, exist_ok=True)
    for name in args.groups or list(GROUPS):
        result = run_group(
            name, GROUPS[name], jobs=args.jobs, keep=args.keep, run=not args.no_run, survivors=args.survivors
        )
        if args.no_run or args.survivors:
            previous = RESULTS / f"{name}.json"
            if previous.exists():
                old = json.loads(previous.read_text())
                result["seconds"], result["jobs"] = old.get("seconds"), old.get("jobs")
        (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
        results.append(result)
        if args.show:
            for s in result["survivors"]:  # type: ignore[attr-defined]
                print(f"  {s['status']}: {s['name']}\n    " + "\n    ".join(s["change"]))
    print_table(results)
    failed = False
    for result in results:
        for stale in result["stale_listings"]:  # type: ignore[attr-defined]
            print(f"mutation.py: stale listing in mutation/equivalent.toml: {stale['name']}: {stale['why']}")
            failed = True
        for f in result["files"]:  # type: ignore[attr-defined]
            if f["score"] < args.min_score:
                print(f"mutation.py: {f['file']} scores {f['score']:.1f} %, below {args.min_score:g} %")
                failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
