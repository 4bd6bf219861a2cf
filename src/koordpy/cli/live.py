"""Live mode for the offline tools: list the objects from a cluster instead of reading files.

Without ``-f`` a tool reads the cluster kubectl would talk to: ``--kubeconfig``, else ``$KUBECONFIG`` (a
colon-separated list is merged), else the in-cluster service account inside a pod, else
``~/.kube/config``; in it ``--context``, else the current context. So ``kubectl koordpy explain --pod
NS/NAME`` works as any kubectl plugin does.

The lists are the ones the services make (``koordpy.kube`` client, ``ApiClient.list``, paged);
each object comes back as ``("cluster: <resource>", object)``, the shape ``read_documents`` gives.
A custom resource the cluster does not serve (its CRD is not installed) is skipped with a note.

Not guaranteed: the lists are not one snapshot (each has its own resourceVersion).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from koordpy.cli.files import InputError, read_documents
from koordpy.kube.resources import ResourceRef

__all__ = ["LiveError", "list_objects", "read_input"]


class LiveError(ValueError):
    """The cluster could not be reached or refused a list; one line, naming the resource."""


def list_objects(
    kubeconfig: str | None, context: str | None, resources: Sequence[ResourceRef], notes: list[str]
) -> list[tuple[str, Any]]:
    """List every resource in ``resources``; missing custom resources are noted in ``notes``."""
    from koordpy.cli.connection import connection_source, one_line_reason
    from koordpy.kube.client import ApiClient
    from koordpy.kube.errors import ApiError, NotFound

    try:
        client = ApiClient.from_kubeconfig(kubeconfig, context=context)
    except Exception as exc:  # the kubernetes loader raises its own ConfigException, OSError or a YAML error
        where = connection_source(kubeconfig) + (f", context {context}" if context else "")
        raise LiveError(f"cannot load Kubernetes connection settings from {where}: {one_line_reason(exc)}") from None

    async def fetch() -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        async with client as api:
            for resource in resources:
                try:
                    listed = await api.list(resource, timeout=30)
                except NotFound:
                    if not resource.group:
                        raise
                    notes.append(f"the cluster does not serve {resource.qualified}: none listed")
                    continue
                out.extend((f"cluster: {resource.qualified}", item) for item in listed.items)
        return out

    try:
        return asyncio.run(fetch())
    except ApiError as exc:
        raise LiveError(f"cluster: {exc}") from None
    except (TimeoutError, OSError) as exc:
        raise LiveError(f"cluster {client.connection.server}: {exc or type(exc).__name__}") from None


def read_input(
    files: list[Path] | None, kubeconfig: str | None, context: str | None, resources: Sequence[Any]
) -> tuple[list[tuple[str, Any]], bool]:
    """The documents from ``-f`` files or, without ``-f``, from the cluster (``--kubeconfig`` and
    ``--context`` choose it, else kubectl's defaults). Returns them and whether they are live. Raises
    InputError/LiveError; prints notes on stderr."""
    if files and (kubeconfig is not None or context is not None):
        raise InputError("-f and --kubeconfig/--context are mutually exclusive: read files or a cluster")
    if files:
        return read_documents(files), False
    notes: list[str] = []
    documents = list_objects(kubeconfig, context, resources, notes)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    return documents, True
