"""``kubectl-koordpy``: koordpy as a kubectl plugin (``kubectl koordpy explain ...``).

kubectl runs the first ``kubectl-<name>`` on ``PATH`` with the remaining arguments. ``explain`` is
short for ``scheduler explain``, ``gangs`` for ``scheduler gangs``; every ``koordpy`` command is there
too (``agent plan``, ``simulate``, ...). ``kubectl koordpy -h`` lists them all. Like any kubectl plugin,
the tools read the cluster of ``$KUBECONFIG`` (or ``~/.kube/config``) and its current context when
given no ``-f``.

Not guaranteed: kubectl's own global flags before the plugin name (``kubectl --context x koordpy``)
are not passed to plugins by kubectl; give ``--context``/``--kubeconfig`` after the subcommand.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any, NamedTuple

import typer

from koordpy.cli.main import COMMANDS, LazyGroup, show_version

__all__ = ["SHORTCUTS", "Shortcut", "main", "plugin"]


class Shortcut(NamedTuple):
    """A plugin command that is a ``koordpy`` sub-command of a group."""

    group: str
    command: str
    summary: str


SHORTCUTS = {
    "explain": Shortcut("scheduler", "explain", "Where a pod would go and why (koordpy scheduler explain)."),
    "gangs": Shortcut("scheduler", "gangs", "Gang verdicts: admit, permit, phase (koordpy scheduler gangs)."),
}
"""The plugin's own short names, listed first by ``kubectl koordpy -h``."""


class PluginGroup(LazyGroup):
    """``kubectl koordpy``: the shortcuts, then every ``koordpy`` command."""

    def list_commands(self, ctx: Any) -> list[str]:
        return [*SHORTCUTS, *super().list_commands(ctx)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        shortcut = SHORTCUTS.get(cmd_name)
        if shortcut is None:
            return super().get_command(ctx, cmd_name)
        group = super().get_command(ctx, shortcut.group)
        return group.commands[shortcut.command]

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = [(name, entry.summary) for name, entry in SHORTCUTS.items()]
        rows += [(name, entry.summary) for name, entry in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


plugin = typer.Typer(
    cls=PluginGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@plugin.callback()
def root(
    show: Annotated[
        bool,
        typer.Option("--version", is_eager=True, callback=show_version, help="Print the version and exit."),
    ] = False,
) -> None:
    """koordpy as a kubectl plugin: explain a pod's placement, judge gangs, plan the agent, simulate.

    Without -f a command reads the cluster kubectl would: $KUBECONFIG (or ~/.kube/config) and its current
    context; --kubeconfig and --context choose another. Run a command with -h for its options.
    """


def main() -> None:
    plugin(args=sys.argv[1:], prog_name="kubectl koordpy")
