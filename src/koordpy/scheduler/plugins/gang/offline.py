"""``koordpy scheduler gangs``: the gang model's decisions on a dump, as the report the CLI prints.

The dump's Pods and PodGroups (both API groups) feed one ``GangCache``, the same code the extender
runs: PodGroups first, then pods in creation order (so "first writer wins" picks the oldest member;
a live cache sees them in watch order instead). ``failed`` members are marked as failed scheduling,
then ``waiting`` members are held at the bind barrier at ``now`` (a dump cannot show holds), so a
Strict group with a failed member shows its holds released and the verdict ``reject``.

Output::

    {"gangs": [{"id", "groupId", "group", "mode", "matchPolicy", "minMember", "totalNumber",
                "waitSeconds", "children", "waiting", "bound", "onceSatisfied", "phase",
                "admit": {"ns/pod": {"ok", "reason"}}, "permit": {"verdict", "reason"}}]}

Gangs sorted by id; pod lists sorted; ``admit`` lists the members neither bound nor waiting (the ones
the quorum gate applies to). ``phase`` is what the PodGroup status settles on from its stored phase
(``NotFound`` when a label names a PodGroup that is not in the dump). ``waitSeconds`` is whole seconds.

Not guaranteed: holds are all taken at ``now``, so no wait time has run out in this report.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from koordpy.config.gang import CoschedulingArgs
from koordpy.model.dumps import DumpError, sort_dump
from koordpy.model.objects import ObjectError, PodInfo, pod_from_dict
from koordpy.scheduler.plugins.gang.spec import PodGroupError, PodGroupInfo, podgroup_from_dict
from koordpy.scheduler.plugins.gang.state import GangCache

__all__ = ["GangReportError", "gang_report"]

KINDS = ("Pod", "PodGroup")
FAILED_REASON = "marked failed by --failed"


class GangReportError(ValueError):
    """Bad input: the message names the file (or option) and the field."""


def gang_report(
    documents: Iterable[tuple[str, Any]],
    args: CoschedulingArgs,
    now: float,
    waiting: Mapping[str, str] | None = None,
    failed: Sequence[str] = (),
) -> tuple[dict[str, Any], dict[str, int]]:
    """The report and the count of ignored objects by kind. ``waiting`` maps ``ns/pod`` to a node."""
    try:
        dump = sort_dump(documents, KINDS)
    except DumpError as exc:
        raise GangReportError(str(exc)) from None
    podgroups: dict[tuple[str, str], PodGroupInfo] = {}
    for where, obj in dump.of("PodGroup"):
        try:
            pg = podgroup_from_dict(obj)
        except PodGroupError as exc:
            raise GangReportError(f"{where}: PodGroup {_name(obj)}: {exc}") from None
        podgroups[(pg.api, pg.id)] = pg
    pods: dict[str, PodInfo] = {}
    for where, obj in dump.of("Pod"):
        try:
            pod = pod_from_dict(obj)
        except ObjectError as exc:
            raise GangReportError(f"{where}: Pod {_name(obj)}: {exc}") from None
        pods[pod.key] = pod

    cache = GangCache(args)
    for pg_key in sorted(podgroups):
        cache.upsert_podgroup(podgroups[pg_key])
    for pod in sorted(pods.values(), key=lambda p: (math.inf if p.creation_time is None else p.creation_time, p.key)):
        cache.upsert_pod(pod)
    for key in failed:
        pod = _member(key, "--failed", pods, cache)
        if pod.node_name:
            raise GangReportError(f"--failed: pod {key} is already bound to {pod.node_name}")
        cache.scheduling_failed(key, FAILED_REASON)
    for key, node in sorted((waiting or {}).items()):
        pod = _member(key, "--waiting", pods, cache)
        if pod.node_name:
            raise GangReportError(f"--waiting: pod {key} is already bound to {pod.node_name}")
        if not node:
            raise GangReportError(f"--waiting: pod {key}: expected NAMESPACE/NAME=NODE")
        cache.hold(key, pod.uid, node, now)
    cache.take_releases(now)

    gangs: list[dict[str, Any]] = []
    for view in cache.views():
        spec = view.spec
        stored_pg = podgroups.get((spec.ref.source, spec.id))
        stored = stored_pg.phase if stored_pg is not None else ""
        permit = cache.permit(spec.id, now)
        gated = [p for p in view.children if p not in view.bound and p not in view.waiting]
        gangs.append(
            {
                "id": spec.id,
                "groupId": spec.group_id,
                "group": list(spec.group),
                "mode": spec.mode,
                "matchPolicy": spec.match_policy,
                "minMember": spec.min_member,
                "totalNumber": spec.total_number,
                "waitSeconds": int(spec.wait_seconds),
                "children": list(view.children),
                "waiting": list(view.waiting),
                "bound": list(view.bound),
                "onceSatisfied": view.once_satisfied,
                "phase": cache.phase(spec.id, stored),
                "admit": {p: _admission(cache, p) for p in gated},
                "permit": {"verdict": permit.verdict, "reason": permit.reason},
            }
        )
    return {"gangs": gangs}, dump.ignored


def _admission(cache: GangCache, pod: str) -> dict[str, Any]:
    admission = cache.admit(pod)
    return {"ok": admission.ok, "reason": admission.detail}


def _member(key: str, option: str, pods: Mapping[str, PodInfo], cache: GangCache) -> PodInfo:
    namespace, sep, name = key.partition("/")
    if not sep or not namespace or not name:
        raise GangReportError(f"{option}: expected NAMESPACE/NAME, got {key!r}")
    pod = pods.get(key)
    if pod is None:
        raise GangReportError(f"{option}: pod {key} is not in the input")
    if cache.gang_of(key) is None:
        raise GangReportError(f"{option}: pod {key} belongs to no gang")
    return pod


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    if isinstance(meta, Mapping):
        return f"{meta.get('namespace') or 'default'}/{meta.get('name') or '<unnamed>'}"
    return "<unnamed>"
