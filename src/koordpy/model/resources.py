"""Resource lists as ``dict[str, int]`` in canonical integer units, and pod requests/limits.

Canonical units: cpu in millicores, memory and every other resource in base units (bytes, count).
``pod_requests``/``pod_limits`` follow the Kubernetes resource helper: the larger of the
init-container peak and the sum of the app containers (restartable "sidecar" init containers
are counted with the app containers), plus ``spec.overhead``.

Not guaranteed: in-place resize state (``status.containerStatuses[].resources``) is not consulted;
the spec is the source of truth here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from koordpy.model.quantity import QuantityError, resource_value

__all__ = [
    "QUANTITY_MEMO",
    "ContainerResources",
    "ResourceList",
    "add_into",
    "aggregate",
    "containers",
    "parse_containers",
    "parse_resource_list",
    "pod_limits",
    "pod_requests",
]

ResourceList = dict[str, int]


def parse_resource_list(raw: Mapping[str, Any] | None) -> ResourceList:
    """Parse ``{"cpu": "500m", "memory": "1Gi"}`` into canonical integers.

    Raises ``QuantityError`` naming the resource on a malformed value.
    """
    if not raw:
        return {}
    if type(raw) is not dict and not isinstance(raw, Mapping):
        raise QuantityError(f"resource list must be a mapping, got {type(raw).__name__}")
    out: ResourceList = {}
    memo = QUANTITY_MEMO
    for name, quantity in raw.items():
        if type(quantity) is str:
            known = memo.get((name, quantity))
            if known is not None:
                out[name] = known
                continue
        key = name if type(name) is str else _key(name)
        try:
            out[key] = resource_value(key, quantity)
        except QuantityError as exc:
            raise QuantityError(f"{key}: {exc}") from None
        if type(quantity) is str and type(name) is str and out[key] >= 0 and len(memo) < QUANTITY_MEMO_MAX:
            memo[(name, quantity)] = out[key]
    return out


QUANTITY_MEMO: dict[tuple[str, str], int] = {}
"""(resource name, quantity string) -> canonical integer: the same few pairs recur on every pod and
NodeMetric event. Filled up to ``QUANTITY_MEMO_MAX`` entries, then only read (no eviction). Read it
directly only for a string quantity under a string name (what it is keyed by); it holds no negative
amount (a negative quantity is read again each time: the API server refuses them, so they are rare)."""
QUANTITY_MEMO_MAX = 8192


def _key(name: object) -> str:
    try:
        return str(name)
    except ValueError:  # an integer beyond Python's 4,300-digit conversion limit
        raise QuantityError(f"resource name of type {type(name).__name__} too long to read") from None


def add_into(target: ResourceList, other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        target[name] = target.get(name, 0) + amount


def _max_into(target: ResourceList, other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        if amount > target.get(name, 0):
            target[name] = amount


def containers(spec: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    """``spec.containers`` or ``spec.initContainers``; raises ``QuantityError`` naming the field on a wrong shape."""
    raw = spec.get(key) or []
    if not isinstance(raw, list):
        raise QuantityError(f"{key}: expected a list, got {type(raw).__name__}")
    for i, container in enumerate(raw):
        if type(container) is not dict and not isinstance(container, Mapping):  # dict first: no ABC check
            raise QuantityError(f"{key}[{i}]: expected an object, got {type(container).__name__}")
        resources = container.get("resources")
        if resources is not None and type(resources) is not dict and not isinstance(resources, Mapping):
            raise QuantityError(f"{key}[{i}].resources: expected an object, got {type(resources).__name__}")
    return raw


class ContainerResources(NamedTuple):
    """One container's ``resources.requests`` and ``resources.limits``, parsed, and whether it is a
    restartable (sidecar) init container."""

    requests: ResourceList
    limits: ResourceList
    sidecar: bool


def parse_containers(spec: Mapping[str, Any]) -> tuple[list[ContainerResources], list[ContainerResources]]:
    """Every app and init container's resource lists, each parsed once (requests, limits and the QoS
    class are all derived from these)."""
    return _parsed(containers(spec, "containers")), _parsed(containers(spec, "initContainers"))


def _parsed(raw: list[Mapping[str, Any]]) -> list[ContainerResources]:
    out = []
    for container in raw:
        resources = container.get("resources") or {}
        out.append(
            ContainerResources(
                parse_resource_list(resources.get("requests")),
                parse_resource_list(resources.get("limits")),
                container.get("restartPolicy") == "Always",
            )
        )
    return out


def aggregate(
    spec: Mapping[str, Any],
    app_containers: list[ContainerResources],
    init_containers: list[ContainerResources],
    field: str,
) -> ResourceList:
    """The pod's effective ``field`` ("requests" or "limits") from its parsed containers and ``spec.overhead``."""
    limits = field == "limits"
    total: ResourceList = {}
    for container in app_containers:
        add_into(total, container.limits if limits else container.requests)
    # Sidecars (restartPolicy: Always) run alongside everything started after them.
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for container in init_containers:
        own = container.limits if limits else container.requests
        if container.sidecar:
            add_into(sidecars, own)
            _max_into(init_peak, sidecars)
        else:
            during = dict(sidecars)
            add_into(during, own)
            _max_into(init_peak, during)
    add_into(total, sidecars)
    _max_into(total, init_peak)
    overhead = parse_resource_list(spec.get("overhead"))
    if overhead:
        if limits:
            # Overhead is added to a limit only where the pod sets that limit.
            for name in list(total):
                total[name] += overhead.get(name, 0)
        else:
            add_into(total, overhead)
    return total


def pod_requests(spec: Mapping[str, Any]) -> ResourceList:
    """Effective pod requests as the scheduler computes them."""
    return aggregate(spec, *parse_containers(spec), "requests")


def pod_limits(spec: Mapping[str, Any]) -> ResourceList:
    """Effective pod limits; a resource without a limit on any container is absent."""
    return aggregate(spec, *parse_containers(spec), "limits")
