"""kopf wiring: node and NodeMetric events -> :func:`koordpy.manager.policy.reconcile_nodemetric`.

Only ``on.event`` handlers and indexes are used, so kopf never writes annotations or finalizers on Nodes
or NodeMetrics (no ``patch nodes`` permission needed). kopf fills both indexes from the initial list
before any handler runs, so a NodeMetric whose node is already gone is deleted on start-up.

High availability: with ``peering.enabled`` the replicas share a ClusterKopfPeering and each starts with
a random 31-bit priority, so exactly one (the highest) acts and the others stand by; kopf freezes all of
them only if two priorities are equal (probability about n^2/2^32). Without peering the process runs
``standalone``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import kopf

from koordpy.config.manager import ManagerConfiguration
from koordpy.crds.nodemetric import NODE_METRIC
from koordpy.crds.podmigrationjob import POD_MIGRATION_JOB
from koordpy.kube.client import ApiClient
from koordpy.kube.connection import load_connection
from koordpy.manager.api import KubeMigrationApi, NodeMetricWriter, Outcome, ensure_peering
from koordpy.manager.migration import MigrationMetrics, RoundGate, controller_from_args, make_arbitrate
from koordpy.manager.policy import Action, reconcile_nodemetric
from koordpy.runtime.listeners import ListenerLimits, health_listener
from koordpy.runtime.metrics import new_registry, render

__all__ = ["build_registry", "operator_settings", "run"]

Apply = Callable[[Action], Awaitable[Outcome]]
NM = (NODE_METRIC.group, NODE_METRIC.version, NODE_METRIC.plural)
PMJ = (POD_MIGRATION_JOB.group, POD_MIGRATION_JOB.version, POD_MIGRATION_JOB.plural)
MIGRATION_TIMER_ID = "migration_round"


def _only(store: Any) -> Any:
    """The single value an index keeps per name (None when absent)."""
    if store is None:
        return None
    for value in store:
        return value
    return None


def build_registry(
    config: ManagerConfiguration, apply: Apply, migration: RoundGate | None = None
) -> kopf.OperatorRegistry:
    """A kopf registry with the manager's indexes and handlers; ``apply`` carries out actions.

    With ``migration``, every PodMigrationJob gets a timer (every ``arbitrationArgs.interval``) that
    knocks on the round gate: one round (arbitration, then one lifecycle step per job) runs per interval
    however many jobs exist. Timers are frozen with the other handlers on a standby replica, so only the
    active replica migrates. kopf would put a finalizer on every job for a timer; the manager never needs
    one (it has no cleanup to do), so the timer is registered without, and a job deletes at once even
    while no manager runs.
    """
    registry = kopf.OperatorRegistry()
    settings = config.node_metric

    if migration is not None:
        gate = migration

        @kopf.timer(*PMJ, interval=gate.interval, id=MIGRATION_TIMER_ID, registry=registry)
        async def migration_round(**_: Any) -> None:
            try:
                await gate.knock()
            except Exception:  # why: a failed round (API error) is retried next interval, never kills the timer
                logging.getLogger("koordpy.manager").exception("migration round failed")

        # why: kopf has no public switch for a timer's finalizer; its handlers are frozen dataclasses
        # kept in the registry's spawning list (kopf 1.45), replaced here once at build time.
        spawning = registry._spawning
        spawning._handlers = [
            dataclasses.replace(h, requires_finalizer=False) if h.id == MIGRATION_TIMER_ID else h
            for h in spawning._handlers
        ]

    @kopf.index("v1", "nodes", id="node_labels", registry=registry)
    def node_labels(name: str, labels: Any, **_: Any) -> dict[str, dict[str, str]]:
        return {name: dict(labels)}

    @kopf.index(*NM, id="nodemetric_specs", registry=registry)
    def nodemetric_specs(name: str, spec: Any, **_: Any) -> dict[str, dict[str, Any]]:
        return {name: dict(spec)}

    @kopf.on.event("v1", "nodes", registry=registry)
    async def node_event(*, type: str, name: str, labels: Mapping[str, str], **kwargs: Any) -> None:
        specs: kopf.Index[str, dict[str, Any]] = kwargs["nodemetric_specs"]
        if type == "DELETED":
            action = reconcile_nodemetric(name, settings, None, None, exists=True)
        else:
            current = _only(specs.get(name))
            action = reconcile_nodemetric(name, settings, dict(labels), current, exists=name in specs)
        if action is not None:
            await apply(action)

    @kopf.on.event(*NM, registry=registry)
    async def nodemetric_event(*, type: str, name: str, spec: kopf.Spec, **kwargs: Any) -> None:
        nodes: kopf.Index[str, dict[str, str]] = kwargs["node_labels"]
        labels = _only(nodes.get(name)) if name in nodes else None
        if type == "DELETED":
            action = reconcile_nodemetric(name, settings, labels, None, exists=False)
        else:
            action = reconcile_nodemetric(name, settings, labels, dict(spec), exists=True)
        if action is not None:
            await apply(action)

    if config.peering.enabled:
        pending: list[asyncio.Task[bool]] = []

        @kopf.on.startup(registry=registry)
        async def create_peering(
            *, settings: kopf.OperatorSettings, logger: logging.Logger | logging.LoggerAdapter[Any], **_: Any
        ) -> None:
            # kopf authenticates only after the startup handlers, so the object is created in the background
            # once credentials exist. Until it exists each replica sees no peers and acts; the NodeMetric
            # actions are idempotent, so that short overlap is harmless. (The chart also creates it.)
            pending.append(asyncio.create_task(ensure_peering(config.peering.name, settings, logger)))

        @kopf.on.cleanup(registry=registry)
        async def stop_peering_creation(**_: Any) -> None:
            for task in pending:
                task.cancel()

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        # In a pod: the service account. Elsewhere (or with --kubeconfig, which sets KUBECONFIG): kubeconfig.
        info: kopf.ConnectionInfo | None = kopf.login_with_service_account(**kwargs)
        return info or kopf.login_with_kubeconfig(**kwargs)

    return registry


def operator_settings(config: ManagerConfiguration) -> kopf.OperatorSettings:
    """kopf settings: no Kubernetes events posted, peering per ``config.peering``."""
    settings = kopf.OperatorSettings()
    settings.posting.enabled = False
    settings.peering.clusterwide = True
    settings.peering.standalone = not config.peering.enabled
    settings.peering.mandatory = config.peering.enabled
    settings.peering.name = config.peering.name
    settings.peering.priority = 1 + secrets.randbelow(2**31 - 1)
    settings.persistence.consistency_timeout = 0
    return settings


async def run(
    config: ManagerConfiguration,
    *,
    stop_flag: Any = None,
    ready_flag: Any = None,
    liveness: bool = True,
    limits: ListenerLimits | None = None,
) -> None:
    """Run the operator until ``stop_flag`` (or a signal). Credentials come from the login handler.

    With ``liveness``, ``GET /healthz`` is served on ``health.host:health.port`` while the operator
    runs (200 ``{}``, the answer of kopf's liveness endpoint, which it replaces), bounded by ``limits``
    (default: from ``config.health``), and ``GET /metrics`` with the migration metrics.
    """
    logging.getLogger("kopf").setLevel(config.log_level.upper())
    logging.getLogger("koordpy.manager").setLevel(config.log_level.upper())
    settings = operator_settings(config)
    writer = NodeMetricWriter(settings)
    logger = logging.getLogger("koordpy.manager")
    # The PodMigrationJob steps use koordpy.kube (Eviction subresource, UID preconditions, Events) with
    # the same credentials kopf's login finds: in a pod the service account, else $KUBECONFIG.
    client = ApiClient(load_connection())
    api = KubeMigrationApi(client)
    args = config.migration_controller
    metrics = MigrationMetrics(new_registry())
    controller = controller_from_args(api, args, logger=logger, metrics=metrics)
    gate = RoundGate(controller, make_arbitrate(api, args, controller, logger), args.arbitration_args.interval)
    registry = build_registry(config, writer.apply, gate)

    async def operate() -> None:
        async with client:
            await kopf.operator(
                registry=registry,
                settings=settings,
                clusterwide=True,
                standalone=not config.peering.enabled,
                liveness_endpoint=None,  # kopf's own endpoint has no head or read-time bounds: ours below
                stop_flag=stop_flag,
                ready_flag=ready_flag,
            )

    if not liveness:
        await operate()
        return

    async def alive() -> bool:
        return True  # answering at all means the operator's event loop runs, as with kopf's endpoint

    if limits is None:
        limits = ListenerLimits(
            max_header_bytes=config.health.max_header_bytes,
            request_read_seconds=config.health.request_read_timeout_seconds,
        )
    exposition = lambda: render(metrics.registry)  # noqa: E731 - the listener calls it per scrape
    async with health_listener(config.health.host, config.health.port, alive, limits=limits, metrics=exposition):
        await operate()
