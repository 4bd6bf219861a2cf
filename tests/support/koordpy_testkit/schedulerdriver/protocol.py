"""The kube-scheduler side of the extender HTTP protocol: request bodies and response checks.

Mirrors ``pkg/scheduler/extender.go`` (``HTTPExtender``) for ``nodeCacheCapable: true``:

* every verb is ``POST {urlPrefix}/{verb}`` with a JSON body whose keys are Go field names;
* any status other than 200 is an error; the body is decoded like Go's ``encoding/json``
  (keys match case-insensitively, unknown keys are ignored, wrong types are errors);
* filter: non-empty ``Error`` is an error; ``NodeNames`` must be a subset of the input (an unknown
  name is an error); ``null`` ``NodeNames`` falls back to ``Nodes`` and then means zero nodes;
  ``FailedAndUnresolvableNodes`` wins over ``FailedNodes``;
* prioritize: a bare ``[{"Host", "Score"}]`` array; ``Score`` is an int64 and is *not* clamped;
* bind: ``{"Error": ""}``.

Not guaranteed: ``nodeCacheCapable: false`` (full NodeLists) and the preempt verb are not
implemented; Go's decoder quirks beyond key folding and type checks (duplicate keys, numbers
with exponents as int64) are approximated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from koordpy.model.durations import parse_duration

__all__ = [
    "MAX_EXTENDER_PRIORITY",
    "MAX_NODE_SCORE",
    "ExtenderConfig",
    "ExtenderError",
    "FilterResult",
    "PrioritizeResult",
    "bind_args",
    "extender_args",
    "is_interested",
    "parse_bind_result",
    "parse_filter_result",
    "parse_prioritize_result",
]

MAX_EXTENDER_PRIORITY = 10
MAX_NODE_SCORE = 100
DEFAULT_EXTENDER_TIMEOUT = 5.0


class ExtenderError(Exception):
    """One failed extender call, as kube-scheduler would report it."""

    def __init__(self, verb: str, message: str, *, timed_out: bool = False) -> None:
        super().__init__(f"{verb}: {message}")
        self.verb = verb
        self.message = message
        self.timed_out = timed_out


@dataclass(frozen=True, slots=True)
class ExtenderConfig:
    """One ``KubeSchedulerConfiguration.extenders[]`` entry (the fields the driver honours)."""

    url_prefix: str
    filter_verb: str = ""
    prioritize_verb: str = ""
    bind_verb: str = ""
    weight: int = 0
    http_timeout: float = DEFAULT_EXTENDER_TIMEOUT
    node_cache_capable: bool = False
    ignorable: bool = False
    managed_resources: tuple[str, ...] = ()
    bind_url_prefix: str = ""
    """The binder entry's ``urlPrefix`` when bind is configured on a second entry ("": ``url_prefix``)."""
    bind_http_timeout: float = 0.0
    """The binder entry's ``httpTimeout`` when bind is configured on a second entry (0: ``http_timeout``)."""

    @classmethod
    def from_entries(cls, entries: Sequence[Mapping[str, Any]], url_prefix: str | None = None) -> ExtenderConfig:
        """Read a whole ``extenders[]`` list as kube-scheduler uses it: filter and prioritize on the entries
        that set them, bind on the one entry with ``bindVerb``, each call with its own entry's ``httpTimeout``.

        Not supported (ValueError): more than one filter/prioritize entry, more than one binder (kube-scheduler
        refuses that too), or entries with different ``managedResources``. ``url_prefix`` replaces every
        entry's prefix (tests run the extender on a free port).
        """
        if not entries:
            raise ValueError("extenders: empty")
        binders = [i for i, e in enumerate(entries) if e.get("bindVerb")]
        if len(binders) > 1:
            raise ValueError(f"extenders[{binders[1]}].bindVerb: only one extender can implement bind")
        others = [i for i, e in enumerate(entries) if e.get("filterVerb") or e.get("prioritizeVerb")]
        if len(others) > 1:
            raise ValueError(f"extenders[{others[1]}]: the driver runs one filter/prioritize extender")
        if len(entries) == 1:
            return cls.from_dict(entries[0], url_prefix)
        unused = [i for i in range(len(entries)) if i not in binders and i not in others]
        if unused or not binders or not others:
            raise ValueError(f"extenders[{(unused or [0])[0]}]: expected one filter/prioritize entry and one binder")
        main = cls.from_dict(entries[others[0]], url_prefix)
        binder = cls.from_dict(entries[binders[0]], url_prefix)
        if main.managed_resources != binder.managed_resources:
            raise ValueError(f"extenders[{binders[0]}].managedResources: differs from extenders[{others[0]}]")
        return replace(
            main,
            bind_verb=binder.bind_verb,
            bind_url_prefix=binder.url_prefix,
            bind_http_timeout=binder.http_timeout,
        )

    @classmethod
    def from_dict(cls, entry: Mapping[str, Any], url_prefix: str | None = None) -> ExtenderConfig:
        """Read an ``extenders[]`` entry; ``url_prefix`` replaces the configured one (tests)."""
        timeout = parse_duration(entry.get("httpTimeout") or 0)
        managed = tuple(str(m["name"]) for m in entry.get("managedResources") or [])
        config = cls(
            url_prefix=url_prefix if url_prefix is not None else str(entry["urlPrefix"]),
            filter_verb=str(entry.get("filterVerb") or ""),
            prioritize_verb=str(entry.get("prioritizeVerb") or ""),
            bind_verb=str(entry.get("bindVerb") or ""),
            weight=int(entry.get("weight") or 0),
            http_timeout=timeout if timeout > 0 else DEFAULT_EXTENDER_TIMEOUT,
            node_cache_capable=bool(entry.get("nodeCacheCapable", False)),
            ignorable=bool(entry.get("ignorable", False)),
            managed_resources=managed,
        )
        config.validate()
        return config

    def validate(self) -> None:
        """kube-scheduler's configuration validation for the fields above."""
        if self.prioritize_verb and self.weight <= 0:
            raise ValueError("extenders[].weight: must be positive when prioritizeVerb is set")
        if not self.node_cache_capable:
            raise ValueError("extenders[].nodeCacheCapable: the driver only implements true")
        if self.http_timeout <= 0:
            raise ValueError("extenders[].httpTimeout: must be positive")

    def url(self, verb: str) -> str:
        prefix = self.bind_url_prefix if verb == self.bind_verb and self.bind_url_prefix else self.url_prefix
        return prefix.rstrip("/") + "/" + verb

    def timeout(self, verb: str) -> float:
        """The ``httpTimeout`` of the entry that serves ``verb``."""
        if verb == self.bind_verb and self.bind_http_timeout > 0:
            return self.bind_http_timeout
        return self.http_timeout


def is_interested(pod: Mapping[str, Any], managed_resources: Sequence[str]) -> bool:
    """``HTTPExtender.IsInterested``: every pod when no managed resources are configured."""
    if not managed_resources:
        return True
    spec = pod.get("spec") or {}
    wanted = set(managed_resources)
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") or {}
        for section in ("requests", "limits"):
            if wanted & set(resources.get(section) or {}):
                return True
    return False


def extender_args(pod: Mapping[str, Any], node_names: Sequence[str]) -> bytes:
    """``ExtenderArgs`` as Go marshals it with nodeCacheCapable: Pod, Nodes (null), NodeNames."""
    return orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": list(node_names)})


def bind_args(name: str, namespace: str, uid: str, node: str) -> bytes:
    """``ExtenderBindingArgs``."""
    return orjson.dumps({"PodName": name, "PodNamespace": namespace, "PodUID": uid, "Node": node})


@dataclass(slots=True)
class FilterResult:
    passed: list[str]
    failed: dict[str, str]
    """``FailedNodes`` minus names that are also unresolvable."""
    unresolvable: dict[str, str]
    noncanonical_keys: list[str] = field(default_factory=list)
    """Keys Go accepted only by case folding (our extender should send the exact names)."""


@dataclass(slots=True)
class PrioritizeResult:
    scores: list[tuple[str, int]]
    noncanonical_keys: list[str] = field(default_factory=list)


def _decode(verb: str, status: int, body: bytes) -> Any:
    if status != 200:
        raise ExtenderError(verb, f"failed {verb} with extender, code {status}")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ExtenderError(verb, f"decode: {exc}") from None


def _fields(verb: str, obj: Any, names: Sequence[str], where: str, noncanonical: list[str]) -> dict[str, Any]:
    """Go struct decoding: exact key first, else case-insensitive; unknown keys ignored."""
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        raise ExtenderError(verb, f"decode: cannot unmarshal {type(obj).__name__} into Go value of type {where}")
    folded = {name.lower(): name for name in names}
    out: dict[str, Any] = {}
    for key, value in obj.items():
        name = key if key in names else folded.get(key.lower())
        if name is None:
            continue
        if name != key:
            noncanonical.append(f"{where}.{key}")
        out[name] = value
    return out


def _string_map(verb: str, value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ExtenderError(verb, f"decode: {where} must be a map of strings")
    return dict(value)


def parse_filter_result(status: int, body: bytes, input_names: Sequence[str], verb: str = "filter") -> FilterResult:
    """Validate an ``ExtenderFilterResult`` against the request's ``NodeNames``."""
    raw = _decode(verb, status, body)
    noncanonical: list[str] = []
    names = ("Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error")
    result = _fields(verb, raw, names, "ExtenderFilterResult", noncanonical)
    error = result.get("Error")
    if error is not None and not isinstance(error, str):
        raise ExtenderError(verb, "decode: Error must be a string")
    if error:
        raise ExtenderError(verb, error)
    failed = _string_map(verb, result.get("FailedNodes"), "FailedNodes")
    unresolvable = _string_map(verb, result.get("FailedAndUnresolvableNodes"), "FailedAndUnresolvableNodes")
    passed: list[str] = []
    node_names = result.get("NodeNames")
    if node_names is not None:
        if not isinstance(node_names, list) or not all(isinstance(n, str) for n in node_names):
            raise ExtenderError(verb, "decode: NodeNames must be an array of strings")
        known = set(input_names)
        for name in node_names:
            if name not in known:
                raise ExtenderError(
                    verb, f"extender claims a filtered node {name!r} which is not found in the input node list"
                )
        passed = list(node_names)
    elif result.get("Nodes") is not None:
        nodes = _fields(verb, result["Nodes"], ("Items",), "NodeList", noncanonical)
        items = nodes.get("Items") or []
        if not isinstance(items, list):
            raise ExtenderError(verb, "decode: Nodes.items must be an array")
        passed = [str(((item or {}).get("metadata") or {}).get("name") or "") for item in items]
    for name in unresolvable:
        failed.pop(name, None)
    return FilterResult(passed, failed, unresolvable, noncanonical)


def parse_prioritize_result(status: int, body: bytes, verb: str = "prioritize") -> PrioritizeResult:
    """Validate a ``HostPriorityList``; scores are returned as sent (no clamping)."""
    raw = _decode(verb, status, body)
    if raw is None:
        return PrioritizeResult([])
    if not isinstance(raw, list):
        raise ExtenderError(verb, "decode: cannot unmarshal object into Go value of type HostPriorityList")
    noncanonical: list[str] = []
    scores: list[tuple[str, int]] = []
    for item in raw:
        entry = _fields(verb, item, ("Host", "Score"), "HostPriority", noncanonical)
        host = entry.get("Host", "")
        score = entry.get("Score", 0)
        if not isinstance(host, str):
            raise ExtenderError(verb, "decode: HostPriority.Host must be a string")
        if isinstance(score, bool) or not isinstance(score, int):
            raise ExtenderError(verb, f"decode: cannot unmarshal {score!r} into HostPriority.Score of type int64")
        scores.append((host, score))
    return PrioritizeResult(scores, noncanonical)


def parse_bind_result(status: int, body: bytes, verb: str = "bind") -> list[str]:
    """Validate an ``ExtenderBindingResult``; returns the non-canonical keys seen."""
    raw = _decode(verb, status, body)
    noncanonical: list[str] = []
    result = _fields(verb, raw, ("Error",), "ExtenderBindingResult", noncanonical)
    error = result.get("Error")
    if error is not None and not isinstance(error, str):
        raise ExtenderError(verb, "decode: Error must be a string")
    if error:
        raise ExtenderError(verb, error)
    return noncanonical
