"""``kubectl-koordpy``: koordpy as a kubectl plugin (``kubectl koordpy explain ...``).

kubectl runs the first ``kubectl-<name>`` on ``PATH`` with the remaining arguments. ``explain``
is short for ``scheduler explain``, ``gangs`` for ``scheduler gangs``; everything else (``agent plan``,
``simulate``, ``--help``) goes to ``koordpy`` unchanged.

Not guaranteed: kubectl's own global flags before the plugin name (``kubectl --context x koordpy``)
are not passed to plugins by kubectl; give ``--context``/``--kubeconfig`` after the subcommand.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main", "translate"]

SHORTCUTS = {"explain": ("scheduler", "explain"), "gangs": ("scheduler", "gangs")}


def translate(args: Sequence[str]) -> list[str]:
    """The ``koordpy`` arguments for a ``kubectl koordpy`` command line."""
    if args and args[0] in SHORTCUTS:
        return [*SHORTCUTS[args[0]], *args[1:]]
    return list(args)


def main() -> None:
    from koordpy.cli.main import app

    app(args=translate(sys.argv[1:]), prog_name="kubectl koordpy")
