"""``koordpy thresholds``: the threshold contract checked on a set of objects (files, a ``helm template`` output, or a
cluster), as the report the command prints.

Reads, from already-parsed documents: a ``SchedulerConfiguration`` (its ``loadAware``), a ``ManagerConfiguration``
(its ``lowNodeLoad``), ``NodeQOSEnsurancePolicy``/``NodeQOS`` and ``AvoidanceAction`` objects, and Nodes (then the
check runs node by node). A configuration inside a ConfigMap (the chart's ``config.yaml``) is given by the caller
as its own document (reading YAML text is the adapter's). Other kinds are counted as ignored. Field paths are
prefixed with where each object came from (``scheduler.yaml: loadAware.usageThresholds.cpu``).

Output::

    {"findings": [{"severity", "loop", "paths", "message"}],
     "checked": {"scheduler": source | null, "descheduler": source | null, "policies": n, "actions": n | null,
                 "nodes": n}}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from koordpy.config.errors import ConfigError, validate
from koordpy.config.manager import ManagerConfiguration
from koordpy.config.scheduler import SchedulerConfiguration
from koordpy.crds.ensurance import AvoidanceAction, NodeQOS, NodeQOSEnsurancePolicy
from koordpy.descheduler.contract import Finding, Policy, check_thresholds
from koordpy.model.dumps import DumpError, sort_dump
from koordpy.model.objects import NodeInfo, ObjectError, node_from_dict

__all__ = ["KINDS", "ThresholdsReportError", "thresholds_report"]

KINDS = (
    "SchedulerConfiguration",
    "ManagerConfiguration",
    "NodeQOSEnsurancePolicy",
    "NodeQOS",
    "AvoidanceAction",
    "Node",
)


class ThresholdsReportError(ValueError):
    """Bad input: names the source and the field."""


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name") or "<unnamed>") if isinstance(meta, Mapping) else "<unnamed>"


def _one(dump: Any, kind: str) -> tuple[str, Mapping[str, Any]] | None:
    found = dump.of(kind)
    if len(found) > 1:
        raise ThresholdsReportError(f"{kind}: {len(found)} given ({', '.join(w for w, _ in found)}): give one")
    return found[0] if found else None


def thresholds_report(
    documents: Iterable[tuple[str, Any]], *, actions_listed: bool = False
) -> tuple[dict[str, Any], list[Finding], dict[str, int]]:
    """The report, its findings and the ignored objects by kind. ``actions_listed``: the AvoidanceActions were listed
    (a cluster was read), so a rule whose action is not among them does not act, even when none is."""
    try:
        dump = sort_dump(documents, KINDS)
    except DumpError as exc:
        raise ThresholdsReportError(str(exc)) from None
    scheduler_source = _one(dump, "SchedulerConfiguration")
    manager_source = _one(dump, "ManagerConfiguration")
    scheduler = descheduler = None
    try:
        if scheduler_source is not None:
            scheduler = validate(SchedulerConfiguration, dict(scheduler_source[1]), scheduler_source[0]).load_aware
        if manager_source is not None:
            descheduler = validate(ManagerConfiguration, dict(manager_source[1]), manager_source[0]).low_node_load
    except ConfigError as exc:
        raise ThresholdsReportError(str(exc)) from None
    policies: list[Policy] = []
    for kind in ("NodeQOSEnsurancePolicy", "NodeQOS"):
        for where, obj in dump.of(kind):
            try:
                policy = (
                    NodeQOS.model_validate(obj).to_policy()
                    if kind == "NodeQOS"
                    else NodeQOSEnsurancePolicy.model_validate(obj)
                )
            except ValidationError as exc:
                raise ThresholdsReportError(f"{where}: {kind} {_name(obj)}: {_first(exc)}") from None
            policies.append(Policy(f"{where}: {kind}/{policy.metadata.name}", policy))
    actions: dict[str, AvoidanceAction] | None = None
    listed = dump.of("AvoidanceAction")
    if listed or actions_listed:
        actions = {}
        for where, obj in listed:
            try:
                action = AvoidanceAction.model_validate(obj)
            except ValidationError as exc:
                raise ThresholdsReportError(f"{where}: AvoidanceAction {_name(obj)}: {_first(exc)}") from None
            actions[action.metadata.name] = action
    nodes: list[NodeInfo] = []
    for where, obj in dump.of("Node"):
        try:
            nodes.append(node_from_dict(obj))
        except ObjectError as exc:
            raise ThresholdsReportError(f"{where}: Node {_name(obj)}: {exc}") from None
    findings = check_thresholds(
        scheduler=scheduler,
        descheduler=descheduler,
        policies=policies,
        actions=actions,
        nodes=nodes,
        scheduler_path=f"{scheduler_source[0]}: loadAware" if scheduler_source else "loadAware",
        descheduler_path=f"{manager_source[0]}: lowNodeLoad" if manager_source else "lowNodeLoad",
    )
    report = {
        "findings": [finding.as_json() for finding in findings],
        "checked": {
            "scheduler": scheduler_source[0] if scheduler_source else None,
            "descheduler": manager_source[0] if manager_source and descheduler is not None else None,
            "policies": len(policies),
            "actions": None if actions is None else len(actions),
            "nodes": len(nodes),
        },
    }
    return report, findings, dict(dump.ignored)


def _first(exc: ValidationError) -> str:
    error = exc.errors(include_url=False)[0]
    path = ".".join(str(part) for part in error["loc"])
    return f"{path}: {error['msg']}" if path else str(error["msg"])
