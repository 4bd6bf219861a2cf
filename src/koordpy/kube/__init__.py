"""The Kubernetes API adapter: the only module that talks to the API server.

Public surface: :class:`ApiClient` (+ :class:`ClientSettings`, :class:`ListResult`), :class:`Reflector`
(list+watch into a handler), :func:`load_connection` / :class:`ConnectionInfo`, the error classes in
:mod:`koordpy.kube.errors` and the resource constants in :mod:`koordpy.kube.resources`.
"""

from koordpy.kube import errors, resources
from koordpy.kube.client import ApiClient, ClientSettings, ListResult
from koordpy.kube.connection import ConnectionInfo, load_connection, write_kubeconfig
from koordpy.kube.reflector import Reflector, run_reflectors, wait_synced
from koordpy.kube.resources import ResourceRef

__all__ = [
    "ApiClient",
    "ClientSettings",
    "ConnectionInfo",
    "ListResult",
    "Reflector",
    "ResourceRef",
    "errors",
    "load_connection",
    "resources",
    "run_reflectors",
    "wait_synced",
    "write_kubeconfig",
]
