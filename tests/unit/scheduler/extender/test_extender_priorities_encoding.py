"""The prioritize answer (``encode_priorities`` over ``HostFragments``) == the plain JSON of the rows kept.

Kept: known nodes with a row and a score above 0, in request order, scores clamped to 10. The bytes carry
no padding (only the space before a one-digit score), whatever the mix of name lengths and node churn.
"""

from __future__ import annotations

import random

import numpy as np
import orjson

from koordpy.model.objects import node_from_dict
from koordpy.scheduler.extender.protocol import HostFragments, encode_priorities
from koordpy.scheduler.framework import ClusterState
from koordpy_testkit import make_node


def plain(names: list[str], scores: list[int], known: set[str]) -> list[dict[str, object]]:
    return [
        {"Host": name, "Score": min(score, 10)}
        for name, score in zip(names, scores, strict=True)
        if name in known and score > 0
    ]


def state_with(names: list[str]) -> tuple[ClusterState, HostFragments]:
    fragments = HostFragments()
    state = ClusterState([fragments])
    for name in names:
        state.upsert_node(node_from_dict(make_node(name)))
    return state, fragments


def test_equal_length_names_need_no_cutting() -> None:
    names = [f"node-{i:05d}" for i in range(50)]
    state, fragments = state_with(names)
    assert not fragments.padded
    scores = [i % 12 for i in range(50)]  # 0 (left out) .. 11 (clamped)
    body = encode_priorities(fragments, state.index.lookup(names), np.array(scores, np.int64))
    assert orjson.loads(body) == plain(names, scores, set(names))
    assert b"  " not in body and b": " not in body.replace(b'"Score": ', b"")  # one space at most, before a digit


def test_mixed_lengths_unknowns_and_churn_match_the_plain_encoding() -> None:
    rng = random.Random(11)
    names = [f"n{i}" + "x" * rng.randrange(0, 30) + ".example.internal" for i in range(300)]
    state, fragments = state_with(names)
    for name in names[::9]:
        state.remove_node(name)
    late = ["a", "a-much-longer-name-than-any-other-node-so-far.example.internal"]  # grows the rows
    for name in late:
        state.upsert_node(node_from_dict(make_node(name)))
    known = (set(names) - set(names[::9])) | set(late)
    assert fragments.padded
    for _ in range(20):
        query = rng.sample([*names, *late, "ghost"], 120)
        scores = [rng.randrange(-2, 14) for _ in query]
        body = encode_priorities(fragments, state.index.lookup(query), np.array(scores, np.int64))
        assert orjson.loads(body) == plain(query, [max(s, 0) for s in scores], known)
        assert b"  " not in body and b" ," not in body and b' "' not in body  # no padding left


def test_nothing_to_report_is_an_empty_list() -> None:
    state, fragments = state_with(["a", "bb"])
    assert encode_priorities(fragments, state.index.lookup(["a", "bb", "c"]), np.array([0, -1, 5])) == b"[]"
    assert encode_priorities(fragments, np.zeros(0, np.int64), np.zeros(0, np.int64)) == b"[]"
