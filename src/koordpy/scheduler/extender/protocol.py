"""The kube-scheduler extender wire format (``k8s.io/kube-scheduler/extender/v1``), decoded and encoded
with orjson on plain dicts: no pydantic on the hot path.

JSON keys are the Go field names, capitalised (``Pod``, ``Nodes``, ``NodeNames``, ``FailedNodes``,
``FailedAndUnresolvableNodes``, ``Error``, ``Host``, ``Score``, ``PodName``, ``PodNamespace``,
``PodUID``, ``Node``, ``NodeNameToVictims``, ``NodeNameToMetaVictims``, ``Pods``, ``UID``,
``NumPDBViolations``). Requests are matched on exactly those keys, as kube-scheduler sends them.

Not guaranteed: lower-case or mixed-case request keys are not accepted (Go's decoder would accept
them; kube-scheduler never sends them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from koordpy.model.objects import NodeInfo, NodeMetricInfo, PodInfo

__all__ = [
    "MAX_EXTENDER_PRIORITY",
    "BindArgs",
    "ExtenderArgs",
    "HostFragments",
    "PreemptionArgs",
    "ProtocolError",
    "decode_args",
    "decode_args_with_names",
    "decode_bind_args",
    "decode_preemption_args",
    "encode_bind_result",
    "encode_filter_error",
    "encode_filter_result",
    "encode_names_result",
    "encode_preemption_result",
    "encode_priorities",
    "error_body",
    "names_suffix",
    "require_strings",
]

MAX_EXTENDER_PRIORITY = 10


class ProtocolError(Exception):
    """A request the extender cannot serve; ``status`` is the HTTP status (4xx), ``reason`` one line."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(slots=True)
class ExtenderArgs:
    """``ExtenderArgs``. ``items`` holds the full Node objects when the caller is not nodeCacheCapable."""

    pod: Mapping[str, Any]
    names: list[Any]
    """Candidate node names as sent; element types are checked only where a name is not a known node."""
    items: list[Mapping[str, Any]] | None


@dataclass(frozen=True, slots=True)
class BindArgs:
    pod_name: str
    pod_namespace: str
    pod_uid: str
    node: str


@dataclass(frozen=True, slots=True)
class PreemptionArgs:
    """``ExtenderPreemptionArgs``: the preemptor and, per candidate node, its victims' uids (in order) and
    ``NumPDBViolations``."""

    pod: Mapping[str, Any]
    victims: Mapping[str, tuple[tuple[str, ...], int]]


def _object(body: bytes, what: str) -> dict[str, Any]:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError(400, f"request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ProtocolError(400, f"request body must be a JSON object ({what}), got {type(data).__name__}")
    return data


def decode_args(body: bytes) -> ExtenderArgs:
    """Decode a filter/prioritize request. Raises :class:`ProtocolError` (400) on a malformed one."""
    data = _object(body, "ExtenderArgs")
    pod = data.get("Pod")
    if not isinstance(pod, dict):
        raise ProtocolError(400, "Pod: required, must be a Pod object")
    names = data.get("NodeNames")
    if names is not None:
        if not isinstance(names, list):
            raise ProtocolError(400, "NodeNames: expected an array of node names or null")
        return ExtenderArgs(pod, names, None)
    nodes = data.get("Nodes")
    if nodes is None:
        return ExtenderArgs(pod, [], None)  # both null: no candidates (kube-scheduler never sends this)
    if not isinstance(nodes, dict):
        raise ProtocolError(400, "Nodes: expected a NodeList object or null")
    items = nodes.get("items") or []
    if not isinstance(items, list):
        raise ProtocolError(400, "Nodes.items: expected an array of Node objects")
    out: list[Any] = []
    for i, item in enumerate(items):
        meta = item.get("metadata") if isinstance(item, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        if not isinstance(name, str) or not name:
            raise ProtocolError(400, f"Nodes.items[{i}].metadata.name: required string")
        out.append(name)
    return ExtenderArgs(pod, out, items)


def require_strings(names: Sequence[Any], positions: Sequence[int]) -> None:
    """Raise 400 unless every ``names[p]`` for ``p`` in ``positions`` is a string."""
    for pos in positions:
        if type(names[pos]) is not str:
            raise ProtocolError(400, f"NodeNames[{pos}]: expected a string, got {type(names[pos]).__name__}")


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", re.ASCII)
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", re.ASCII)
_NAME_RULES = {
    # Kubernetes' own validation: namespaces are DNS-1123 labels, pod and node names DNS-1123 subdomains.
    "PodNamespace": (_DNS_LABEL, 63, "a DNS-1123 label"),
    "PodName": (_DNS_SUBDOMAIN, 253, "a DNS-1123 subdomain"),
    "Node": (_DNS_SUBDOMAIN, 253, "a DNS-1123 subdomain"),
}


def decode_bind_args(body: bytes) -> BindArgs:
    """Decode ``ExtenderBindingArgs``. ``PodUID`` may be empty (then no UID precondition is sent).

    Names are checked against Kubernetes' rules before anything is built from them: ``PodNamespace:
    ".."`` would otherwise become a URL path segment."""
    data = _object(body, "ExtenderBindingArgs")
    values: dict[str, str] = {}
    for key in ("PodName", "PodNamespace", "PodUID", "Node"):
        value = data.get(key, "")
        if value is None:
            value = ""
        if not isinstance(value, str):
            raise ProtocolError(400, f"{key}: expected a string, got {type(value).__name__}")
        if not value and key != "PodUID":
            raise ProtocolError(400, f"{key}: required")
        rule = _NAME_RULES.get(key)
        if rule is not None and (len(value) > rule[1] or rule[0].fullmatch(value) is None):
            raise ProtocolError(400, f"{key}: {orjson.dumps(value[:64]).decode()} is not {rule[2]}")
        values[key] = value
    return BindArgs(values["PodName"], values["PodNamespace"], values["PodUID"], values["Node"])


def _victims(value: Any, where: str, meta: bool) -> tuple[tuple[str, ...], int]:
    if not isinstance(value, dict):
        raise ProtocolError(400, f"{where}: expected a Victims object")
    pods = value.get("Pods") or []
    if not isinstance(pods, list):
        raise ProtocolError(400, f"{where}.Pods: expected an array")
    uids = []
    for i, pod in enumerate(pods):
        if meta:
            uid = pod.get("UID") if isinstance(pod, dict) else None
        else:
            uid = ((pod.get("metadata") if isinstance(pod, dict) else None) or {}).get("uid")
        if not isinstance(uid, str) or not uid:
            raise ProtocolError(400, f"{where}.Pods[{i}]: {'UID' if meta else 'metadata.uid'} required string")
        uids.append(uid)
    violations = value.get("NumPDBViolations") or 0
    if isinstance(violations, bool) or not isinstance(violations, int):
        raise ProtocolError(400, f"{where}.NumPDBViolations: expected an integer")
    return tuple(uids), violations


def decode_preemption_args(body: bytes) -> PreemptionArgs:
    """Decode ``ExtenderPreemptionArgs``: ``NodeNameToMetaVictims`` (nodeCacheCapable) or
    ``NodeNameToVictims`` (full victim pods, read for their uid). Raises :class:`ProtocolError` (400)."""
    data = _object(body, "ExtenderPreemptionArgs")
    pod = data.get("Pod")
    if not isinstance(pod, dict):
        raise ProtocolError(400, "Pod: required, must be a Pod object")
    meta = data.get("NodeNameToMetaVictims")
    key, nodes = (
        ("NodeNameToMetaVictims", meta) if meta is not None else ("NodeNameToVictims", data.get("NodeNameToVictims"))
    )
    if nodes is None:
        return PreemptionArgs(pod, {})
    if not isinstance(nodes, dict):
        raise ProtocolError(400, f"{key}: expected an object of node name to victims")
    victims = {
        str(node): _victims(value, f"{key}[{orjson.dumps(str(node)[:64]).decode()}]", meta is not None)
        for node, value in nodes.items()
    }
    return PreemptionArgs(pod, victims)


# ---- responses ---------------------------------------------------------------------------


def encode_preemption_result(victims: Mapping[str, tuple[Sequence[str], int]]) -> bytes:
    """``ExtenderPreemptionResult``: always the meta form (uids), as kube-scheduler reads it."""
    return orjson.dumps(
        {
            "NodeNameToMetaVictims": {
                node: {"Pods": [{"UID": uid} for uid in uids], "NumPDBViolations": violations}
                for node, (uids, violations) in victims.items()
            }
        }
    )


def encode_filter_result(
    passed: list[str],
    failed: Mapping[str, str],
    unresolvable: Mapping[str, str],
    items: list[Mapping[str, Any]] | None,
    names: Sequence[Any],
) -> bytes:
    """``ExtenderFilterResult`` in the caller's form: ``NodeNames`` (cache-capable) or ``Nodes.items``."""
    if items is None:
        return encode_names_result(orjson.dumps(passed), failed, unresolvable)
    by_name: dict[str, Mapping[str, Any]] = {}
    for name, item in zip(names, items, strict=True):
        by_name.setdefault(name, item)
    return orjson.dumps(
        {
            "Nodes": {"metadata": {}, "items": [by_name[name] for name in passed]},
            "NodeNames": None,
            "FailedNodes": failed,
            "FailedAndUnresolvableNodes": unresolvable,
            "Error": "",
        }
    )


def encode_names_result(names_json: bytes, failed: Mapping[str, str], unresolvable: Mapping[str, str]) -> bytes:
    """The cache-capable ``ExtenderFilterResult`` around an already encoded ``NodeNames`` array."""
    return b"".join(
        (
            b'{"Nodes":null,"NodeNames":',
            names_json,
            b',"FailedNodes":',
            orjson.dumps(failed),
            b',"FailedAndUnresolvableNodes":',
            orjson.dumps(unresolvable),
            b',"Error":""}',
        )
    )


def names_suffix(names_json: bytes) -> bytes:
    """How a cache-capable request ends when its ``NodeNames`` is exactly ``names_json`` (Go's field order)."""
    return b',"NodeNames":' + names_json + b"}"


def decode_args_with_names(body: bytes, suffix: bytes) -> Mapping[str, Any] | None:
    """The ``Pod`` of a cache-capable request whose ``NodeNames`` bytes equal ``suffix``'s, else None.

    kube-scheduler sends prioritize exactly the names the filter returned, in the same order and, for
    DNS-name node names, byte for byte as orjson encoded them. Recognising that avoids decoding and
    hashing thousands of names again. Anything unexpected returns None (the caller decodes normally).
    """
    if not body.endswith(suffix):
        return None
    try:
        data = orjson.loads(body[: len(body) - len(suffix)] + b"}")
    except orjson.JSONDecodeError:
        return None
    if not isinstance(data, dict) or "NodeNames" in data or data.get("Nodes") is not None:
        return None
    pod = data.get("Pod")
    return pod if isinstance(pod, dict) else None


def encode_filter_error(reason: str) -> bytes:
    """A filter result carrying only ``Error``: kube-scheduler fails this scheduling attempt and retries."""
    return orjson.dumps(
        {"Nodes": None, "NodeNames": None, "FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": reason}
    )


def encode_bind_result(error: str = "") -> bytes:
    return orjson.dumps({"Error": error})


def error_body(reason: str) -> bytes:
    """The body of a 4xx answer: ``{"Error": reason}`` (readable by humans and Go's decoder alike)."""
    return orjson.dumps({"Error": reason})


_TAIL = b'"Score":00},'
"""Every row ends with this; the two digits are overwritten with the score (`` 0``..``10``)."""
_SCORE_DIGITS = np.frombuffer(b"".join(b"%2d" % s for s in range(MAX_EXTENDER_PRIORITY + 1)), np.uint8).reshape(-1, 2)


class HostFragments:
    """A cluster listener that keeps, per node index, the JSON row ``{"Host":"<name>","Score":ss},`` in a
    fixed-width byte matrix (a row shorter than the longest is padded with spaces after its name).

    A prioritize answer is then one contiguous numpy gather plus a score column write, instead of a
    Python object per node (object touches dominate on a large heap). Padding is cut out of the answer
    when the gathered rows have any (kube-scheduler's decoder reads every byte: at 5,000 rows of
    ``node-NNNNN`` names the padding cost it about 0.4 ms of CPU). Register it in the ``ClusterState``
    plugin list (it neither filters nor scores).
    """

    name = "koordpy.extender.HostFragments"

    def __init__(self) -> None:
        self._heads: list[bytes | None] = []
        self.width = 0
        self.rows: npt.NDArray[np.uint8] = np.zeros((64, 0), np.uint8)
        self.head_length: npt.NDArray[np.int64] = np.zeros(64, np.int64)
        """Bytes of each row's ``{"Host":"<name>",`` (0 for an index without a row)."""
        self.present: npt.NDArray[np.bool_] = np.zeros(64, bool)
        """Whether index ``i`` has a row: an index without one is never written (it would be bare padding)."""
        self._lengths: dict[int, int] = {}
        """Head length -> rows with it: more than one key means some rows are padded."""
        self.removals = 0
        """Node removals so far: a node index may be reused after one, so index caches must be dropped."""

    @property
    def padded(self) -> bool:
        """Whether some row is shorter than the widest (and so carries padding)."""
        return len(self._lengths) > 1

    def _row(self, head: bytes | None) -> bytes:
        if head is None:
            return b" " * self.width
        return head + b" " * (self.width - len(head) - len(_TAIL)) + _TAIL

    def _rebuild(self, capacity: int) -> None:
        rows = np.full((capacity, self.width), ord(" "), np.uint8)
        for index, head in enumerate(self._heads):
            if head is not None:
                rows[index] = np.frombuffer(self._row(head), np.uint8)
        self.rows = rows
        for name in ("present", "head_length"):
            old = getattr(self, name)
            grown = np.zeros(capacity, old.dtype)
            grown[: min(capacity, old.size)] = old[:capacity]
            setattr(self, name, grown)

    def on_capacity(self, capacity: int) -> None:
        if capacity > self.rows.shape[0]:
            self._rebuild(capacity)

    def _count(self, length: int, delta: int) -> None:
        left = self._lengths.get(length, 0) + delta
        if left > 0:
            self._lengths[length] = left
        else:
            self._lengths.pop(length, None)

    def on_node(self, index: int, node: NodeInfo) -> None:
        head = b'{"Host":' + orjson.dumps(node.name) + b","
        while len(self._heads) <= index:
            self._heads.append(None)
        old = self._heads[index]
        if old is not None:
            self._count(len(old), -1)
        self._heads[index] = head
        self._count(len(head), 1)
        capacity = max(self.rows.shape[0], index + 1)
        if len(head) + len(_TAIL) > self.width:
            self.width = len(head) + len(_TAIL)  # exact: rows of equal-length names carry no padding
            self._rebuild(capacity)
        else:
            self.on_capacity(capacity)
            self.rows[index] = np.frombuffer(self._row(head), np.uint8)
        self.present[index] = True
        self.head_length[index] = len(head)

    def on_node_removed(self, index: int, name: str) -> None:
        if index < len(self._heads):
            head = self._heads[index]
            if head is not None:
                self._count(len(head), -1)
            self._heads[index] = None
        if index < self.present.size:
            self.present[index] = False
            self.head_length[index] = 0
        self.removals += 1

    def on_metric(self, name: str, metric: NodeMetricInfo | None) -> None:
        return None

    def on_pod_assigned(self, index: int | None, node_name: str, pod: PodInfo, now: float) -> None:
        return None

    def on_pod_unassigned(self, index: int | None, node_name: str, pod: PodInfo) -> None:
        return None


def encode_priorities(fragments: HostFragments, indices: npt.NDArray[np.int64], scores: npt.NDArray[np.int64]) -> bytes:
    """``HostPriorityList`` for the known nodes (``indices >= 0`` with a row) whose score is above 0:
    kube-scheduler adds nothing for a host that is not listed, so a 0 row would only cost it a decode.

    ``scores`` are clamped to 0..10 here whatever the caller passed. A single-digit score is written
    with a space before it (valid JSON; Go's decoder skips it).
    """
    keep = indices >= 0
    keep[keep] = fragments.present[indices[keep]]  # a node a listener failed on has no row: leave it out
    keep &= scores > 0
    if not keep.all():
        indices = indices[keep]
        scores = scores[keep]
    if indices.size == 0:
        return b"[]"
    rows = fragments.rows.take(indices, axis=0)
    rows[:, -4:-2] = _SCORE_DIGITS[np.minimum(scores, MAX_EXTENDER_PRIORITY)]  # np.clip costs more; all > 0 here
    if fragments.padded:
        width = rows.shape[1]
        columns = np.arange(width)
        # each row's head, then its tail; the padding between them is cut out
        keep_bytes = (columns < fragments.head_length.take(indices)[:, None]) | (columns >= width - len(_TAIL))
        content = rows[keep_bytes]
    else:
        content = rows.reshape(-1)
    body = bytearray(content.size + 1)
    body[0] = ord("[")
    body[1:] = content.tobytes()
    body[-1] = ord("]")  # replaces the last row's trailing comma
    return bytes(body)
