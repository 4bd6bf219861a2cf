"""Per-node load bookkeeping (Koordinator's v1.7+ "assign cache").

For each node: the NodeMetric's usage vectors, and four sums over the pods assigned to it::

    nodeDelta     = Σ max(0, estimate − reported usage)   over pods that "should be estimated"
    prodDelta     = the same over Prod pods (full estimate if the metric does not call it Prod)
    nodeEstimated = Σ full estimates of all assigned pods
    prodUsage     = Σ reported usage of pods that are Prod by spec *and* by the metric
                    (+ systemUsage when prodUsageIncludeSys)

A pod "should be estimated" when it has no usage in ``podsMetric``, or it was assigned after
``updateTime − reportInterval``, or its force-estimation deadline is after ``updateTime``.

The sums are kept in plain Python integers, with the inputs each pod's share was computed from (its
reported usage, whether the metric calls it Prod, whether it should be estimated). A pod event adds
or takes back that pod's share; a NodeMetric recomputes every pod's inputs and re-accounts only the
pods whose inputs changed. Integer sums cannot drift, so this equals a recomputation from scratch.
At tens of pods per node this is faster than numpy (which has a fixed cost per array operation).

Not guaranteed: vectors are only as fresh as the last event; nothing here looks at the clock.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Collection, Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from koordpy.model.objects import NodeMetricInfo, PodInfo, PodMetricInfo
from koordpy.model.priority import PriorityClass

__all__ = ["SATURATION", "AssignedPod", "NodeLoad", "Vector", "Vectorizer", "saturate"]

Vector = npt.NDArray[np.int64]
Values = tuple[int, ...]
DEFAULT_REPORT_INTERVAL = 60.0
SATURATION = 2**53
"""Vector entries are clamped to ±2^53 (9.0e15 millicores, 8 PiB): any quantity beyond exceeds every
threshold anyway, and the clamp keeps float64 exact and the int64 arithmetic of filter and score
(a sum of two vectors, ``× 100``) from overflowing. Usage and allocatable are clamped alike, so a
clamped node can only look fuller than it is, never emptier."""
_NEG_SATURATION = -SATURATION
RECOUNT_AHEAD = 7
"""After a comparison found most pods' shares changed, this many further new podsMetrics are summed afresh
without comparing first (then one is compared again)."""


def saturate(amount: int) -> int:
    return SATURATION if amount > SATURATION else _NEG_SATURATION if amount < _NEG_SATURATION else amount


def saturated(values: Sequence[int]) -> list[int]:
    """``saturate`` of each entry."""
    return [v if _NEG_SATURATION <= v <= SATURATION else saturate(v) for v in values]


class AssignedPod:
    """A pod assigned to a node as the load bookkeeping sees it: its estimate (None: all zero), when it
    was assigned and until when it is estimated whatever the metric says (``deadline``)."""

    __slots__ = ("_deadline", "_estimate", "deadline", "key", "pod", "prod", "timestamp")

    def __init__(
        self,
        pod: PodInfo,
        timestamp: float,
        estimated: Vector | Sequence[int] | None,
        deadline: float | None,
    ) -> None:
        self.pod = pod
        self.timestamp = timestamp
        self.deadline = deadline
        self.key = (pod.namespace, pod.name)
        self.prod = pod.priority_class is PriorityClass.PROD
        if estimated is None:
            self._estimate: Values | None = None
        elif type(estimated) is tuple:  # the plugin's estimates: kept as they are (tuple() would return it)
            self._estimate = estimated
        elif isinstance(estimated, np.ndarray):
            self._estimate = tuple(estimated.tolist())
        else:
            self._estimate = tuple(estimated)
        self._deadline = -math.inf if deadline is None else deadline

    @property
    def estimated(self) -> Vector | None:
        return None if self._estimate is None else np.array(self._estimate, np.int64)

    def __repr__(self) -> str:
        return f"AssignedPod({self.pod.key!r}, timestamp={self.timestamp}, estimate={self._estimate})"


_Sums = tuple[list[int], list[int], list[int], list[int]]
_Key = tuple[str, str]
_Inputs = tuple[_Key, Values | None, bool, bool]
"""What one pod's share is computed from: its (namespace, name), reported usage (None: not reported), Prod by
the metric (False when not reported), should be estimated."""
_PROD = PriorityClass.PROD.value
_KEY_OF = operator.itemgetter(0, 1)
_NAME_OF = operator.itemgetter(1)
_USAGE_OF = operator.itemgetter(2)
_NO_KEYS: frozenset[_Key] = frozenset()


def _reported_entries(pods: Sequence[PodMetricInfo]) -> tuple[dict[_Key, PodMetricInfo], frozenset[_Key]]:
    """``podsMetric`` by (namespace, name): the last entry with usage (entries without usage count as not
    reported), and the names Prod only by an earlier entry with usage (a repeated name is Prod if any of its
    entries says so; empty unless a name repeats)."""
    with_usage = pods if all(map(_USAGE_OF, pods)) else [entry for entry in pods if entry[2]]
    last = dict(zip(map(_KEY_OF, with_usage), with_usage, strict=True))
    if len(last) == len(with_usage):
        return last, _NO_KEYS
    prod = {_KEY_OF(entry) for entry in with_usage if entry[3] == _PROD}
    return last, frozenset(key for key in prod if last[key][3] != _PROD)


def _by_name(
    pods: Sequence[PodMetricInfo], built: Mapping[str, PodMetricInfo] | None = None
) -> Mapping[str, PodMetricInfo] | None:
    """``podsMetric`` by pod name when no name repeats (what koordlet reports: one entry per pod of the node,
    and pods of one name in two namespaces on one node are rare); None otherwise. ``built``: the same index
    made by the conversion (``NodeMetricInfo.pods_by_name``), used when given. Keyed by the name alone, so no
    (namespace, name) tuple is built per entry: a lookup checks the namespace and that the entry has usage."""
    by_name = built if built is not None else dict(zip(map(_NAME_OF, pods), pods, strict=True))
    return by_name if len(by_name) == len(pods) else None


class NodeLoad:
    """One node's metric vectors and assigned pods, with the four sums above."""

    __slots__ = (
        "_agg",
        "_by_name",
        "_inputs",
        "_prod_earlier",
        "_recount_ahead",
        "_reported",
        "_sums",
        "_system",
        "_unsettled",
        "_usage",
        "_vectorizer",
        "_zeros",
        "metric",
        "node_usage_values",
        "pods",
        "report_interval",
        "update_time",
        "width",
    )

    def __init__(self, width: int) -> None:
        self.width = width
        self.pods: dict[str, AssignedPod] = {}
        self.metric: NodeMetricInfo | None = None
        self.update_time = -math.inf
        self.report_interval = DEFAULT_REPORT_INTERVAL
        self.node_usage_values: Values | None = None
        """``nodeUsage`` saturated, in resource order; None without ``status.nodeMetric``."""
        self._agg: dict[tuple[str, float], Values | None] = {}
        """(type, duration) -> usage, filled from ``metric.aggregated`` for the pairs that are looked up."""
        self._zeros: Values = (0,) * width
        self._system: Values = self._zeros
        self._usage: dict[_Key, Values] = {}
        """Reported usage vectors: those of assigned pods whose reported usage changed with the last NodeMetric,
        and those looked up since (a cache of :meth:`_entry`)."""
        self._by_name: Mapping[str, PodMetricInfo] | None = None
        """``podsMetric`` by name (see :func:`_by_name`) when no name repeats; None: ``_reported`` holds it."""
        self._reported: dict[_Key, PodMetricInfo] = {}
        """``podsMetric`` by (namespace, name), the last entry with usage, when a name repeats; else empty."""
        self._prod_earlier: frozenset[_Key] = _NO_KEYS
        """Names whose last entry with usage is not Prod but an earlier one is (Prod by the metric too)."""
        self._vectorizer: Vectorizer | None = None
        self._sums: _Sums = ([0] * width, [0] * width, [0] * width, [0] * width)
        """nodeDelta, prodDelta, nodeEstimated, prodUsage (without systemUsage), unclamped."""
        self._inputs: dict[str, _Inputs] = {}
        """uid -> the inputs of the share that is in ``_sums`` (absent: none is, as without a metric)."""
        self._unsettled: set[str] = set()
        """Pods whose share could change with a later updateTime alone: reported, and "should be estimated"
        (assigned within the report interval, or before their deadline)."""
        self._recount_ahead = 0
        """New podsMetrics still to be summed afresh without comparing each pod's inputs first: set when a
        comparison found most shares changed (koordlet reports new usage for nearly every pod each time, so
        comparing would only cost time). Either way the sums are the same."""

    # ---- metric ------------------------------------------------------------------------

    def set_metric(
        self,
        metric: NodeMetricInfo | None,
        vectorize: Vectorizer,
        include_sys: bool,
    ) -> None:
        previous = self.metric
        self.metric = metric
        self.node_usage_values = None
        if self._agg:
            self._agg = {}
        self._system = self._zeros
        if metric is None:
            width = self.width
            self._sums = ([0] * width, [0] * width, [0] * width, [0] * width)  # no share counts without a metric
            self._inputs = {}
            self._recount_ahead = 0
            self._unsettled = set()
            self._usage = {}
            self._by_name = None
            self._reported = {}
            self._prod_earlier = _NO_KEYS
            return
        if metric.node_usage is not None:
            self.node_usage_values = vectorize.saturated(metric.node_usage)
            if include_sys:
                self._system = vectorize.values(metric.system_usage)
        update_time = metric.update_time if metric.update_time is not None else -math.inf
        report_interval = metric.report_interval if metric.report_interval else DEFAULT_REPORT_INTERVAL
        # The same podsMetric as the last metric (and the same vectorizer): every pod's reported usage and
        # Prod-by-the-metric are as accounted; with the same updateTime and reportInterval too, so is
        # "should be estimated", and no share changes.
        same_pods = (
            previous is not None
            and self._vectorizer is vectorize
            and len(previous.pods) == len(metric.pods)  # tuples compare item by item before their lengths
            and previous.pods == metric.pods
        )
        if same_pods and update_time == self.update_time and report_interval == self.report_interval:
            self._vectorizer = vectorize
            return
        old_time, old_interval = self.update_time, self.report_interval
        self.update_time = update_time
        self.report_interval = report_interval
        accounted = self._inputs
        pods = self.pods
        # Incremental when every assigned pod's share is in the sums and the vectors are comparable, unless
        # the last comparisons found most shares changed (see ``_recount_ahead``).
        incremental = previous is not None and self._vectorizer is vectorize and len(accounted) == len(pods)
        if incremental and self._recount_ahead and not same_pods:
            self._recount_ahead -= 1
            incremental = False
        self._vectorizer = vectorize
        changed: list[str] = []  # pods whose reported usage or Prod-by-the-metric changed
        if not same_pods:
            by_name = self._by_name = _by_name(metric.pods, metric.pods_by_name)
            if by_name is None:
                self._reported, self._prod_earlier = _reported_entries(metric.pods)
            else:
                self._reported, self._prod_earlier = {}, _NO_KEYS
            # Vectors of the pods whose reported usage changed now (re-accounting needs them), others on first use.
            usage_of: dict[_Key, Values] = {}
            self._usage = usage_of
            if incremental:  # compare each pod's accounted inputs with the new metric's, without the old one
                resources, zeros = vectorize.resources, vectorize.zeros
                entry_of = self._entry
                moved: list[int] = []  # positions in ``accounted`` (its uids are read only for these)
                most = len(pods) // 2  # more pods than that changed: all are summed afresh, stop comparing
                for position, (key, usage, metric_prod, _should) in enumerate(accounted.values()):
                    if len(moved) > most:
                        incremental = False
                        self._recount_ahead = RECOUNT_AHEAD
                        break
                    if by_name is not None:  # _entry inline: most NodeMetrics have no repeated name
                        entry = by_name.get(key[1])
                        if entry is not None and (entry[0] != key[0] or not entry[2]):
                            entry = None
                    else:
                        entry = entry_of(key)
                    if entry is None:
                        if usage is not None:
                            moved.append(position)
                        continue
                    # Vectorizer.values inline; a name of two pods is vectorised twice
                    vector = tuple(map(entry[2].get, resources, zeros))
                    if vector != usage or metric_prod != (entry[3] == _PROD or key in self._prod_earlier):
                        moved.append(position)
                        usage_of[key] = vector  # re-accounting reads it (an unchanged pod's is read on demand)
                if moved and incremental:
                    uid_list = list(accounted)
                    changed = [uid_list[position] for position in moved]
        if not incremental:
            uids: Collection[str] = pods
        else:
            uids = changed
            if update_time != old_time or report_interval != old_interval:
                if update_time >= old_time and report_interval == old_interval:
                    # updateTime only moved on: a pod no longer "should be estimated" stays so
                    # (t > u - r and d > u can only turn false as u grows), so only the others can flip
                    uids = self._unsettled.union(changed) if changed else list(self._unsettled)
                else:
                    uids = pods
        if not incremental or len(uids) * 2 > len(pods):  # most shares change: sum them afresh (one pass)
            self._recount()
            return
        for uid in uids:
            assigned = pods[uid]
            (inputs,) = self._inputs_of((assigned,))
            old = accounted.get(uid)
            if inputs != old:
                if old is not None:
                    self._account(((assigned, old),), -1)
                self._account(((assigned, inputs),), +1)
                self._accounted(uid, inputs)

    def _recount(self) -> None:
        """Every assigned pod's share summed afresh under the current metric (which must be set)."""
        width = self.width
        self._sums = ([0] * width, [0] * width, [0] * width, [0] * width)
        pods = self.pods
        unsettled: set[str] = set()
        inputs = self._inputs_of(pods.values(), unsettled)
        self._account(zip(pods.values(), inputs, strict=True), +1)
        self._inputs = dict(zip(pods, inputs, strict=True))
        self._unsettled = unsettled

    def _entry(self, key: _Key) -> PodMetricInfo | None:
        """The pod's ``podsMetric`` entry with usage (the last one when its name repeats); None: not reported."""
        by_name = self._by_name
        if by_name is None:
            return self._reported.get(key)
        entry = by_name.get(key[1])
        return entry if entry is not None and entry[0] == key[0] and entry[2] else None

    def _reported_vector(self, key: _Key) -> Values | None:
        """The pod's reported usage as a tuple in resource order; None when not reported."""
        usage = self._usage.get(key)
        if usage is None:
            entry = self._entry(key)
            if entry is None or self._vectorizer is None:
                return None
            usage = self._usage[key] = self._vectorizer.values(entry[2])
        return usage

    @property
    def node_usage(self) -> Vector | None:
        """``nodeUsage`` as a vector; None without ``status.nodeMetric``."""
        values = self.node_usage_values
        return None if values is None else np.array(values, np.int64)

    def aggregated_values(self, kind: str, duration: float) -> Values | None:
        """Usage for (type, duration); duration 0 = longest with data, else ``nodeUsage``."""
        key = (kind, duration)
        agg = self._agg
        if key in agg:
            return agg[key]
        values = agg[key] = self._aggregated(kind, duration)
        return values

    def _aggregated(self, kind: str, duration: float) -> Values | None:
        """:meth:`aggregated_values` read from the metric: the last entry of that duration with data for the
        type (duration 0: of the longest such duration; none: ``nodeUsage``, for duration 0 only)."""
        metric, vectorize = self.metric, self._vectorizer
        if metric is None or metric.node_usage is None or vectorize is None:
            return None
        found: Mapping[str, int] | None = None
        longest = -1.0
        for entry in metric.aggregated:
            usage = entry.usage.get(kind)
            if not usage:
                continue
            if duration == 0:
                if entry.duration >= longest:
                    longest, found = entry.duration, usage
            elif entry.duration == duration:
                found = usage
        if found is None:
            return self.node_usage_values if duration == 0 else None
        return vectorize.saturated(found)

    def aggregated(self, kind: str, duration: float) -> Vector | None:
        """:meth:`aggregated_values` as a vector."""
        values = self.aggregated_values(kind, duration)
        return None if values is None else np.array(values, np.int64)

    def reported_usage(self, key: tuple[str, str]) -> Vector | None:
        """The pod's usage in the current NodeMetric's ``podsMetric``; None when not reported."""
        usage = self._reported_vector(key)
        return None if usage is None else np.array(usage, np.int64)

    # ---- pods --------------------------------------------------------------------------

    def add_pod(self, assigned: AssignedPod) -> None:
        uid = assigned.pod.uid
        old = self.pods.get(uid)
        if old is not None:
            self._take_back(old)
        self.pods[uid] = assigned
        if self.metric is not None:
            (inputs,) = self._inputs_of((assigned,))
            self._account(((assigned, inputs),), +1)
            # ``_accounted`` without its discard: the uid is in neither ``_inputs`` nor ``_unsettled`` here
            # (``_take_back`` took it out of both)
            self._inputs[uid] = inputs
            if inputs[1] is not None and inputs[3]:
                self._unsettled.add(uid)

    def remove_pod(self, uid: str) -> None:
        old = self.pods.pop(uid, None)
        if old is not None:
            self._take_back(old)

    def _take_back(self, assigned: AssignedPod) -> None:
        """Take the pod's share out of the sums (``add_pod`` puts it back)."""
        uid = assigned.pod.uid
        inputs = self._inputs.pop(uid, None)
        self._unsettled.discard(uid)
        if inputs is not None:
            self._account(((assigned, inputs),), -1)

    def _accounted(self, uid: str, inputs: _Inputs) -> None:
        """Record the inputs of the pod's share now in the sums."""
        self._inputs[uid] = inputs
        if inputs[1] is not None and inputs[3]:
            self._unsettled.add(uid)
        else:
            self._unsettled.discard(uid)

    def _inputs_of(self, pods: Iterable[AssignedPod], unsettled: set[str] | None = None) -> list[_Inputs]:
        """What each pod's share depends on under the current metric (which must be set). ``unsettled``: gets
        the uids of the pods whose share could change with a later updateTime alone (see ``_unsettled``)."""
        by_name = self._by_name
        reported = self._reported
        usage_of = self._usage
        vectorizer = self._vectorizer
        resources, zeros = (vectorizer.resources, vectorizer.zeros) if vectorizer is not None else ((), ())
        prod_earlier = self._prod_earlier
        update_time = self.update_time
        since = update_time - self.report_interval
        out: list[_Inputs] = []
        append = out.append
        for assigned in pods:
            key = assigned.key
            if by_name is not None:  # _entry inline
                entry = by_name.get(key[1])
                if entry is not None and (entry[0] != key[0] or not entry[2]):
                    entry = None
            else:
                entry = reported.get(key)
            if entry is None:  # not reported (most new pods)
                append((key, None, False, True))
                continue
            usage = usage_of.get(key)
            if usage is None and vectorizer is not None:  # Vectorizer.values inline: the entry is at hand
                usage = usage_of[key] = tuple(map(entry[2].get, resources, zeros))
            should = assigned.timestamp > since or assigned._deadline > update_time
            append((key, usage, entry[3] == _PROD or key in prod_earlier, should))
            if should and unsettled is not None and usage is not None:
                unsettled.add(assigned.pod.uid)
        return out

    def _account(self, shares: Iterable[tuple[AssignedPod, _Inputs]], sign: int) -> None:
        """Add (sign +1) or take back (-1) each pod's share from its inputs: the only place the rule lives.

        Plain integers, so taking a share back is exact and the sums cannot drift. The vectors going into
        each sum are collected first and added up column by column (``sum`` adds machine-size integers
        without building an integer object per addition).
        """
        node_delta: list[Values | list[int]] = []
        prod_delta: list[Values | list[int]] = []
        node_estimated: list[Values | list[int]] = []
        prod_usage: list[Values | list[int]] = []
        for assigned, (_key, usage, metric_prod, should) in shares:
            prod = assigned.prod
            active_prod = prod and metric_prod
            if active_prod:
                prod_usage.append(usage)  # type: ignore[arg-type]
            estimate = assigned._estimate
            if estimate is None:
                continue
            node_estimated.append(estimate)
            delta: Values | list[int] = estimate
            if should:
                if usage is not None:
                    delta = [e - u if e > u else 0 for e, u in zip(estimate, usage, strict=True)]
                node_delta.append(delta)
            if prod:
                if not active_prod and usage is not None:
                    delta, should = estimate, True  # Prod by spec, not by the metric: full estimate
                if should:
                    prod_delta.append(delta)
        for total, vectors in zip(self._sums, (node_delta, prod_delta, node_estimated, prod_usage), strict=True):
            if vectors:
                for r, column in enumerate(map(sum, zip(*vectors, strict=True))):
                    total[r] += sign * column

    # ---- sums --------------------------------------------------------------------------

    def sums(self) -> _Sums:
        """nodeDelta, prodDelta, nodeEstimated and prodUsage (with systemUsage when included), clamped.
        Read-only: the lists may be the ones kept here."""
        node_delta, prod_delta, node_estimated, prod_usage = self._sums
        if any(self._system):
            prod_usage = [u + s for u, s in zip(prod_usage, self._system, strict=True)]
        rows = (node_delta, prod_delta, node_estimated, prod_usage)
        for row in rows:
            for value in row:
                if not _NEG_SATURATION <= value <= SATURATION:
                    return (
                        saturated(node_delta),
                        saturated(prod_delta),
                        saturated(node_estimated),
                        saturated(prod_usage),
                    )
        return rows

    @property
    def node_delta(self) -> Vector:
        return np.array(self.sums()[0], np.int64)

    @property
    def prod_delta(self) -> Vector:
        return np.array(self.sums()[1], np.int64)

    @property
    def node_estimated(self) -> Vector:
        return np.array(self.sums()[2], np.int64)

    @property
    def prod_usage(self) -> Vector:
        return np.array(self.sums()[3], np.int64)


class Vectorizer:
    """Maps a resource list onto the plugin's fixed resource order."""

    def __init__(self, resources: tuple[str, ...]) -> None:
        self.resources = resources
        self.position = {name: i for i, name in enumerate(resources)}
        self.zeros = (0,) * len(resources)
        """A zero per resource (the defaults :meth:`values` reads absent resources as)."""

    def values(self, values: Mapping[str, int]) -> Values:
        """The same as a tuple of Python ints, for per-pod arithmetic."""
        return tuple(map(values.get, self.resources, self.zeros))

    def saturated(self, values: Mapping[str, int]) -> Values:
        """:meth:`values` with each entry clamped (``saturate``): the entries of ``__call__``."""
        out = tuple(map(values.get, self.resources, self.zeros))
        for value in out:
            if not _NEG_SATURATION <= value <= SATURATION:
                return tuple(saturated(out))
        return out

    def __call__(self, values: Mapping[str, int]) -> Vector:
        return np.array(self.saturated(values), np.int64)
