"""Which hot node goes first, and which of its pods (Koordinator's ``sortNodesByUsage``,
``sortPodsOnOneOverloadedNode`` and ``sorter.SortPodsByUsage``, v1.8).

**Nodes**, hottest first, by the weighted usage score (upstream's ``ResourceUsageScorer``) over the pool's
resources and ``pods`` (upstream's usage rows always carry the pod count)::

    score = Σ_r w_r × (min(used_r, alloc_r) × 1000 // alloc_r) // Σ_r w_r     (0 where alloc_r is 0)

Ties (upstream: unspecified, ``sort.Slice``) go by node name.

**Pods** of one hot node, the first one moved first, by Koordinator's pod sorter (the one in
:func:`koordpy.descheduler.objects.pod_sort_key`: priority class, priority, Kubernetes QoS, Koordinator QoS,
deletion cost, eviction cost, each ascending), then by the usage score **descending** (the v1.6 piecewise score,
upstream's ``ResourceUsageScorerPod``), then newer pods first, then ``namespace/name``. The usage score weighs
only the resources the node is over its high threshold on, by their ``resourceWeights``::

    excess_r = used_r − high_r                       (over-used resources only)
    ratio_r  = pod_r / excess_r
    s_r      = ratio_r                 if ratio_r < 1
               1 / ratio_r + 1         otherwise      (2 at ratio 1: a pod the size of the excess scores highest)
    score    = Σ_r w_r × s_r / Σ_r w_r

so a pod that alone takes the node back under its threshold goes first, the smallest such pod first, then the
larger of the pods that do not. A pod without usage in the NodeMetric sorts after every pod with usage (and never
moves: its usage cannot be taken off the node).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["node_scores", "pod_order_key", "usage_score"]

I64 = npt.NDArray[np.int64]


def node_scores(usage: I64, alloc: I64, weights: I64) -> I64:
    """Weighted usage score per row (``usage``/``alloc``: rows by resource columns; ``weights``: per column)."""
    capped = np.minimum(usage, alloc)
    safe = np.where(alloc > 0, alloc, 1)
    per_resource = np.where(alloc > 0, capped * 1000 // safe, 0)
    total = weights.sum()
    if total == 0:
        return np.zeros(usage.shape[0], np.int64)
    out: I64 = (per_resource * weights[None, :]).sum(axis=1) // total
    return out


def usage_score(pod: Sequence[int], excess: Mapping[int, int], weights: Mapping[int, int]) -> float:
    """The piecewise score of a pod's usage (by column) against the excess of each over-used column."""
    total = 0.0
    weight_sum = 0
    for column, amount in enumerate(pod):
        weight = weights.get(column, 0)
        if weight == 0:
            continue
        weight_sum += weight
        capacity = excess.get(column, 0)
        if capacity == 0:
            continue
        ratio = amount / capacity
        total += (1 / ratio + 1 if ratio >= 1 else ratio) * weight
    return total / weight_sum if weight_sum else 0.0


def pod_order_key(sort_prefix: tuple[int | float, ...], score: float | None, key: str) -> tuple[object, ...]:
    """The pod's place among its node's pods: ``pod_sort_key`` with the usage score before its last field (the
    creation time), reversed; ``score`` None (no usage reported) sorts after any score; ``namespace/name`` last."""
    *ranks, creation = sort_prefix
    reported = score is not None
    return (*ranks, not reported, -(score or 0.0), creation, key)
