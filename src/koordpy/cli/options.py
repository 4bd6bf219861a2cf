"""Options shared by the offline tools: where the objects come from (dump files or a live cluster).

Not guaranteed: that a command accepts both sources; ``koordpy.cli.live.read_input`` refuses ``-f``
together with ``--kubeconfig``/``--context``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["DumpFiles", "KubeContext", "Kubeconfig"]

DumpFiles = Annotated[
    list[Path] | None, typer.Option("-f", "--filename", metavar="FILE", help="YAML or JSON dump; repeatable.")
]
Kubeconfig = Annotated[
    str | None,
    typer.Option("--kubeconfig", metavar="FILE", help="Read the cluster this kubeconfig names instead of files."),
]
KubeContext = Annotated[
    str | None, typer.Option("--context", metavar="NAME", help="Kubeconfig context (implies live mode).")
]
