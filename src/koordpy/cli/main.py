"""The ``koordpy`` command: one sub-command per deployable plus the offline tools.

Sub-commands are imported only when they run (or when their own help is asked for): ``koordpy --help``
and ``koordpy --version`` load neither numpy nor the models nor the server stack. Their one-line
summaries live in :data:`COMMANDS` for that reason; a test keeps them equal to each command's own help.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, NamedTuple

import typer
from typer.core import TyperArgument, TyperGroup, TyperOption

__all__ = ["COMMANDS", "EXAMPLES", "LazyGroup", "app", "main", "package_version", "show_version"]


class LazyCommand(NamedTuple):
    """Where a sub-command lives: ``module.app`` (a typer group) or ``module.register(app)`` (one command)."""

    module: str
    summary: str


COMMANDS: dict[str, LazyCommand] = {
    "scheduler": LazyCommand("koordpy.cli.scheduler", "Scheduler tools."),
    "agent": LazyCommand("koordpy.cli.agent", "Node agent: usage collection, NodeMetric reporting, waterline QoS."),
    "extender": LazyCommand(
        "koordpy.cli.extender",
        "Serve /filter, /prioritize and /bind for kube-scheduler, fed by list+watch of the cluster.",
    ),
    "manager": LazyCommand(
        "koordpy.cli.manager",
        "Run the manager: NodeMetric per node, PodGroup status, PodMigrationJobs, Reservations; /healthz, /metrics.",
    ),
    "descheduler": LazyCommand(
        "koordpy.cli.descheduler", "Descheduler tools: PodMigrationJob arbitration, the LowNodeLoad balance round."
    ),
    "thresholds": LazyCommand(
        "koordpy.cli.thresholds",
        "Check the scheduler's, descheduler's and agent's thresholds against one another and say which loop each "
        "contradiction allows (files, a helm template output, or a cluster).",
    ),
    "simulate": LazyCommand(
        "koordpy.cli.simulate",
        "Simulate a cluster running koordpy's scheduler and agent policies (no cluster needed).",
    ),
}
"""The sub-commands in the order ``koordpy --help`` lists them."""

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
"""Bundled example inputs for the offline tools (README.md and the CLI tests run them)."""


def package_version() -> str:
    """The installed distribution's version (what ``koordpy --version`` prints)."""
    from importlib.metadata import PackageNotFoundError, version  # ~40 ms: only for --version

    try:
        return version("koordpy")
    except PackageNotFoundError:  # a source tree on sys.path without an install
        from koordpy import __version__

        return __version__


def _print_help_when_bare(group: TyperGroup) -> None:
    """``koordpy agent`` without a sub-command prints its help on stdout and exits 0 (as bare ``koordpy``)."""
    if group.callback is not None or not group.no_args_is_help:
        return
    # typer vendors click; its context stack is typer's own (no public accessor in typer 0.29).
    from typer._click.globals import get_current_context

    group.no_args_is_help = False
    group.invoke_without_command = True

    def show_help() -> None:
        ctx = get_current_context()
        if ctx.invoked_subcommand is None:
            typer.echo(ctx.get_help())

    group.callback = show_help


def load_command(name: str) -> Any:
    """Import one sub-command's module and build its click command.

    A module with a typer ``app`` is a group (``koordpy agent plan``); otherwise ``register(app)`` adds one
    command. Both are built under a holder with plain help (no type placeholders, no rich import) and
    without the shell-completion options.
    """
    module = importlib.import_module(COMMANDS[name].module)
    holder = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)
    sub = getattr(module, "app", None)
    if isinstance(sub, typer.Typer):
        holder.add_typer(sub, name=name)
    else:
        module.register(holder)
    command = typer.main.get_command(holder)
    if isinstance(command, TyperGroup) and name in command.commands:
        command = command.commands[name]
    command.name = name
    _without_type_placeholders(command)
    if isinstance(command, TyperGroup):
        _print_help_when_bare(command)
    return command


def _without_type_placeholders(command: Any) -> None:
    """Help shows ``FILE`` or ``NAME``, never typer's ``<list[Path]>``: arguments show their own name only,
    and an option without an explicit ``metavar=`` gets its parameter name upper-cased (argparse style)."""
    for param in command.params:
        if isinstance(param, TyperArgument):
            param.display_type_rich = _no_type  # type: ignore[method-assign]
        elif isinstance(param, TyperOption) and param.metavar is None and not param.is_flag:
            param.metavar = (param.name or "value").upper()
    for sub in getattr(command, "commands", {}).values():
        _without_type_placeholders(sub)


def _no_type(ctx: Any) -> None:
    return None


class LazyGroup(TyperGroup):
    """The top-level group: sub-commands from :data:`COMMANDS`, imported on first use."""

    def list_commands(self, ctx: Any) -> list[str]:
        return [*COMMANDS, *(name for name in super().list_commands(ctx) if name not in COMMANDS)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = self.commands.get(cmd_name)
        if command is None and cmd_name in COMMANDS:
            command = load_command(cmd_name)
            self.commands[cmd_name] = command
        return command

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """As typer's, with "Did you mean ...?" drawn from every command, loaded or not."""
        from typer._click.exceptions import UsageError

        try:
            return super().resolve_command(ctx, args)
        except UsageError as exc:
            if args and "Did you mean" not in exc.message:
                import difflib

                matches = difflib.get_close_matches(args[0], self.list_commands(ctx))
                if matches:
                    exc.message = f"{exc.message.rstrip('.')}. Did you mean {', '.join(map(repr, matches))}?"
            raise

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        # Bare ``koordpy`` is ``koordpy --help`` (stdout, exit 0). Handled here, before the root callback,
        # whose parameter coercion would import pydantic (typer 0.29).
        if not args and not ctx.resilient_parsing:
            args = ["--help"]
        result: list[str] = super().parse_args(ctx, args)
        return result

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = [(name, entry.summary) for name, entry in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        """As typer's, but a usage error is one ``error: ...`` line on stderr (exit 2), spelt like every
        other error koordpy prints, instead of click's usage block and ``Error: ...``."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError

        try:
            code = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        except NoArgsIsHelpError as exc:  # a group or command run bare: its help, as click shows it
            exc.show()
            sys.exit(exc.exit_code)
        except UsageError as exc:
            typer.echo(usage_error_line(exc.format_message(), exc.ctx.command_path if exc.ctx else None), err=True)
            sys.exit(exc.exit_code)
        except ClickException as exc:
            typer.echo(usage_error_line(exc.format_message(), None), err=True)
            sys.exit(exc.exit_code)
        except typer.Abort:
            typer.echo("error: aborted", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


def usage_error_line(message: str, command_path: str | None) -> str:
    """``error: <message> (see '<command> -h')``: one line, lower-case start (``No such option`` -> ``no such
    option``) unless the message starts with an option or a name."""
    text = " ".join(message.split()).rstrip(".")
    if text[:1].isupper() and text[1:2].islower():
        text = text[0].lower() + text[1:]
    hint = f" (see '{command_path} -h')" if command_path else ""
    return f"error: {text}{hint}"


app = typer.Typer(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def show_version(value: bool) -> None:
    """``--version``'s callback (also the kubectl plugin's)."""
    if value:
        typer.echo(f"koordpy {package_version()}")
        raise typer.Exit()


@app.callback()
def root(
    show_version: Annotated[
        bool,
        typer.Option("--version", is_eager=True, callback=show_version, help="Print the version and exit."),
    ] = False,
) -> None:
    """koordpy: load-aware scheduling and node QoS for Kubernetes.

    Run a command with -h for its options.
    """


def main(prog_name: str | None = None) -> None:
    """The console script; ``python -m koordpy`` passes ``prog_name="koordpy"`` so help reads the same."""
    app(prog_name=prog_name)
