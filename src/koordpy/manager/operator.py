"""kopf wiring: node and NodeMetric events -> :func:`koordpy.manager.policy.reconcile_nodemetric`; pod and
PodGroup events (both APIs) -> :mod:`koordpy.manager.gang_status` (PodGroup status, gang Events); one
migration round loop (every ``arbitrationArgs.interval``), one reservation round loop (every
``reservation.intervalSeconds``, when due) and, with ``lowNodeLoad``, one balance round loop (every
``deschedulingInterval``, :mod:`koordpy.manager.balance`), all reading the watch caches of
:mod:`koordpy.manager.cache`.

The round loops run on the leader only, from the moment kopf is ready, and stop before kopf does. There is
no per-object timer: 10,000 PodMigrationJobs cost one round every 500 ms.

Only ``on.event`` handlers and indexes are used, so kopf never writes annotations or finalizers on Nodes
or NodeMetrics (no ``patch nodes`` permission needed). kopf fills both indexes from the initial list
before any handler runs, so a NodeMetric whose node is already gone is deleted on start-up.

One actor: with ``leaderElection.leaderElect`` (the default) a replica first takes the manager's Lease
(:mod:`koordpy.kube.leaderelection`, client-go's rules) and only then starts kopf and its own writers
(:func:`act`: the rounds and the gang Event passes); until then it stands by with its watch caches warm and
its ``/healthz`` up. kopf itself runs ``standalone``. Every write about the cluster (kopf's handlers', the
rounds', the Events') goes through a client or session the elector fences
(:meth:`koordpy.kube.leaderelection.LeaseElector.admit`): sent only while this replica leads and its last
renewal started less than ``renewDeadline`` ago, each retry loop ending with its term. Not fenced: the
Lease itself and the Event about this replica's own refused credentials.

Stopping (SIGTERM, SIGINT, ``stop_flag``) or losing the Lease, at any moment: the writers stop first, then
kopf (given :data:`KOPF_STOP_SECONDS` by its stop flag, then cancelled and given as long again: kopf alone
would wait 5 s for its own leftover tasks, :func:`stop_kopf`), then a stopping leader releases the Lease
(bounded by :data:`RELEASE_SECONDS`), so a standby takes over within about ``retryPeriod``. SIGTERM and
SIGINT are the manager's at every moment: kopf installs its own handlers as it starts, and they are
replaced at once. A replica stopped while it took the Lease (its write sent, the answer not yet in) reads
the Lease and releases it if it names it. A leader that cannot renew for ``renewDeadline`` (the API server
unreachable, or another holder) stops acting and stands by again in the same process, and competes for
the Lease again when it can (client-go components exit instead and are restarted: the caches here stay
warm, and an outage of the API server ends with every replica running, none restarted). Replicas of older
versions that peer through a ClusterKopfPeering (``peering.name``) are waited out: no Lease is taken while
a live keep-alive is left in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import os
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import kopf
from prometheus_client import Counter, Gauge

from koordpy.config.gang import CoschedulingArgs
from koordpy.config.manager import ManagerConfiguration, PodGroupSettings, deprecation_warnings
from koordpy.config.scheduler import SchedulerConfiguration
from koordpy.crds.nodemetric import NODE_METRIC
from koordpy.crds.peering import CLUSTER_KOPF_PEERING
from koordpy.kube.client import ApiClient, ClientSettings
from koordpy.kube.connection import load_connection
from koordpy.kube.credentials import CredentialsWatch, pod_from_env, register_credentials_metrics
from koordpy.kube.errors import ApiError, NotFound
from koordpy.kube.leaderelection import LeaseElector
from koordpy.manager.api import (
    MANAGER_AGENT,
    GangWriter,
    KopfLogin,
    KubeBalanceApi,
    KubeMigrationApi,
    KubeReservationApi,
    NodeMetricWriter,
    Outcome,
    RetryingWrites,
)
from koordpy.manager.arbitrate import make_arbitrate
from koordpy.manager.balance import balance_from_config
from koordpy.manager.cache import ManagerCache
from koordpy.manager.gang_status import EventThrottle, occupied_by, reconcile_gang
from koordpy.manager.migration import MigrationController, controller_from_args
from koordpy.manager.migration_metrics import MigrationMetrics
from koordpy.manager.policy import Action, reconcile_nodemetric
from koordpy.manager.reservations import ReservationController, ReservationMetrics, reservation_loop
from koordpy.manager.rounds import RoundLoop
from koordpy.model.objects import pod_from_dict
from koordpy.runtime.gcfreeze import GcFreezer
from koordpy.runtime.listeners import ListenerLimits, LoopHeartbeat, threaded_health_listener
from koordpy.runtime.metrics import new_registry, render
from koordpy.scheduler.plugins.gang import (
    API_NATIVE,
    API_SIGS,
    API_VERSIONS,
    API_VOLCANO,
    API_X_K8S,
    GangCache,
    PodGroupError,
    gang_ref,
    podgroup_from_dict,
)

__all__ = [
    "KOPF_STOP_SECONDS",
    "RELEASE_SECONDS",
    "GangStatusKeeper",
    "QuietHandlers",
    "act",
    "build_registry",
    "health_report",
    "legacy_peers_gone",
    "migration_loop",
    "operator_settings",
    "readiness_report",
    "run",
    "stop_kopf",
]

Apply = Callable[[Action], Awaitable[Outcome]]
NM = (NODE_METRIC.group, NODE_METRIC.version, NODE_METRIC.plural)


def _only(store: Any) -> Any:
    """The single value an index keeps per name (None when absent)."""
    if store is None:
        return None
    for value in store:
        return value
    return None


def _rfc3339(now: datetime.datetime) -> str:
    return now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class GangStatusKeeper:
    """The manager's gang state: a ``GangCache`` fed by pod and PodGroup watch events, the stored PodGroup
    statuses, and the Event throttle; :meth:`reconcile` asks :mod:`koordpy.manager.gang_status` and writes.

    One event loop only (kopf's). Not guaranteed: a status written by someone else between two events is
    overwritten on the gang's next event only.
    """

    def __init__(self, settings: PodGroupSettings, writer: GangWriter | None, clock: Callable[[], float]) -> None:
        self.settings = settings
        self.cache = GangCache(CoschedulingArgs.model_validate({}))
        self.throttle = EventThrottle(settings.event_interval_seconds)
        self.podgroups: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
        self.pod_uids: dict[str, str] = {}
        self.owners: dict[str, tuple[float, str, str | None]] = {}
        """Member pod key → (creation time, key, occupiedBy of its owner references)."""
        self.dirty: set[str] = set()
        """Gangs changed since the last Event pass."""
        self.writer = writer
        self.clock = clock
        self._logger = logging.getLogger("koordpy.manager")

    def on_pod(self, type: str, body: Mapping[str, Any]) -> list[str]:
        """Feed one pod event; the gang ids to reconcile."""
        meta = body.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        before = self.cache.gang_of(key)
        if type == "DELETED":
            self.cache.delete_pod(str(meta.get("namespace", "")), str(meta.get("name", "")))
            self.pod_uids.pop(key, None)
            self.owners.pop(key, None)
            self.throttle.forget([f"Pod/{key}"])
        else:
            try:
                pod = pod_from_dict(body)
            except (ValueError, KeyError, TypeError) as exc:
                self._logger.warning("pod %s skipped: %s", key, exc)
                return [before] if before else []
            ref = gang_ref(pod)
            if ref is not None and ref.source == API_NATIVE:
                return []  # kube-scheduler keeps a native PodGroup's status (spec.schedulingGroup is immutable)
            if ref is None and before is None:
                return []
            self.cache.upsert_pod(pod)
            self.pod_uids[key] = pod.uid
            self.owners[key] = (pod.creation_time or 0.0, key, occupied_by(body))
        after = self.cache.gang_of(key)
        return sorted({g for g in (before, after) if g})

    def on_podgroup(self, api: str, type: str, body: Mapping[str, Any]) -> list[str]:
        meta = body.get("metadata") or {}
        gang_id = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        if type == "DELETED":
            self.podgroups.pop((api, gang_id), None)
            self.throttle.forget([f"PodGroup/{gang_id}"])
            self.cache.delete_podgroup(api, str(meta.get("namespace", "")), str(meta.get("name", "")))
            return [gang_id]
        raw = {**body, "apiVersion": API_VERSIONS[api]}
        try:
            info = podgroup_from_dict(raw)
        except PodGroupError as exc:
            self._logger.warning("PodGroup %s (%s) skipped: %s", gang_id, api, exc)
            return []
        self.cache.upsert_podgroup(info)
        self.podgroups[(api, gang_id)] = (str(meta.get("uid") or ""), dict(body.get("status") or {}))
        return [gang_id]

    def related(self, gang_ids: list[str]) -> list[str]:
        """The gangs and their GangGroup mates (a mate's quorum message depends on them)."""
        out = set(gang_ids)
        for gid in gang_ids:
            view = self.cache.view(gid)
            if view is not None:
                out.update(g for g in view.spec.group if self.cache.view(g) is not None)
        return sorted(out)

    def _occupant(self, gang_id: str) -> str | None:
        view = self.cache.view(gang_id)
        if view is None:
            return None
        members = sorted(self.owners[k] for k in view.children if k in self.owners)
        return members[0][2] if members else None

    async def reconcile(self, gang_ids: list[str], with_events: bool = False) -> None:
        """Write the gangs' PodGroup status now; their Events wait for :meth:`post_events`."""
        if self.writer is None:
            return
        now_dt = datetime.datetime.fromtimestamp(self.clock(), datetime.UTC)
        now_text = _rfc3339(now_dt)
        for gid in self.related(gang_ids):
            if with_events:
                self.throttle.pending.discard(gid)
            else:
                self.dirty.add(gid)
            patches, events = reconcile_gang(
                self.cache,
                gid,
                podgroups=self.podgroups,
                pod_uids=self.pod_uids,
                occupant=self._occupant(gid),
                throttle=self.throttle,
                pod_events=self.settings.pod_events_per_gang,
                now=now_dt.timestamp(),
                now_text=now_text,
                with_events=with_events,
            )
            for patch in patches:
                if await self.writer.patch_status(patch):
                    uid, status = self.podgroups.get((patch.api, gid), ("", {}))
                    self.podgroups[(patch.api, gid)] = (uid, {**status, **patch.status})
            for event in events:
                await self.writer.post_event(event, now_text)

    async def post_events(self) -> None:
        """Post the Events of the gangs changed since the last pass, and those the throttle held back."""
        due = self.dirty | self.throttle.pending
        self.dirty = set()
        if due:
            await self.reconcile(sorted(g for g in due if self.cache.view(g) is not None), with_events=True)


def build_registry(
    config: ManagerConfiguration,
    apply: Apply,
    gangs: GangStatusKeeper | None = None,
    login: KopfLogin | None = None,
) -> kopf.OperatorRegistry:
    """A kopf registry with the manager's indexes and handlers; ``apply`` carries out NodeMetric actions,
    ``gangs`` (when given and ``podGroup.enabled``) keeps PodGroup status, ``login`` hands kopf its session
    (default: over :func:`koordpy.kube.connection.load_connection`, loaded at the first login: in a pod the
    service account, else ``$KUBECONFIG``).

    No startup or cleanup handlers: the rounds and the gang Event passes run beside kopf, started and
    stopped by :func:`run` itself (:func:`act`), so that they stop before kopf does, whatever stops it.
    """
    registry = kopf.OperatorRegistry()
    settings = config.node_metric

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

    if gangs is not None and config.pod_group.enabled:
        _register_gangs(registry, gangs)

    logins: list[KopfLogin] = [login] if login is not None else []

    @kopf.on.login(registry=registry)
    async def login_handler(**kwargs: Any) -> kopf.AiohttpSession:
        # kopf's own login handlers read a token once per login and no kubeconfig tokenFile or exec
        # plugin; the manager's connection renews its credentials for every request (KopfLogin).
        if not logins:
            logins.append(KopfLogin(load_connection()))
        return await logins[0](**kwargs)

    return registry


def _register_gangs(registry: kopf.OperatorRegistry, gangs: GangStatusKeeper) -> None:
    # Only on.event handlers: kopf never writes annotations or finalizers on pods or PodGroups. kopf
    # watches a PodGroup API only while its CRD is served, so a cluster without scheduling.x-k8s.io works.
    # kopf fills indexes from the initial lists before any handler runs: a pod seen first thus finds its
    # PodGroup (no "not found" Event for a gang whose PodGroup simply had not been listed yet).
    @kopf.index(API_SIGS, "v1alpha1", "podgroups", id="podgroups_sigs", registry=registry)
    def podgroups_sigs(*, namespace: str | None, name: str, body: kopf.Body, **_: Any) -> dict[str, dict[str, Any]]:
        return {f"{namespace}/{name}": dict(body)}

    @kopf.index(API_X_K8S, "v1alpha1", "podgroups", id="podgroups_x_k8s", registry=registry)
    def podgroups_x_k8s(*, namespace: str | None, name: str, body: kopf.Body, **_: Any) -> dict[str, dict[str, Any]]:
        return {f"{namespace}/{name}": dict(body)}

    @kopf.index(API_VOLCANO, "v1beta1", "podgroups", id="podgroups_volcano", registry=registry)
    def podgroups_volcano(*, namespace: str | None, name: str, body: kopf.Body, **_: Any) -> dict[str, dict[str, Any]]:
        return {f"{namespace}/{name}": dict(body)}

    @kopf.on.event("v1", "pods", registry=registry)
    async def pod_event(*, type: str, body: kopf.Body, **kwargs: Any) -> None:
        touched = gangs.on_pod(type, body)
        for gang_id in touched:
            indexes = (
                (API_SIGS, kwargs["podgroups_sigs"]),
                (API_X_K8S, kwargs["podgroups_x_k8s"]),
                (API_VOLCANO, kwargs["podgroups_volcano"]),
            )
            for api, index in indexes:
                if (api, gang_id) not in gangs.podgroups and gang_id in index:
                    known = _only(index.get(gang_id))
                    if known is not None:
                        gangs.on_podgroup(api, "ADDED", known)
        if touched:
            await gangs.reconcile(touched)

    @kopf.on.event(API_SIGS, "v1alpha1", "podgroups", registry=registry)
    async def podgroup_event(*, type: str, body: kopf.Body, **_: Any) -> None:
        await gangs.reconcile(gangs.on_podgroup(API_SIGS, type, body))

    @kopf.on.event(API_X_K8S, "v1alpha1", "podgroups", registry=registry)
    async def x_k8s_podgroup_event(*, type: str, body: kopf.Body, **_: Any) -> None:
        await gangs.reconcile(gangs.on_podgroup(API_X_K8S, type, body))

    @kopf.on.event(API_VOLCANO, "v1beta1", "podgroups", registry=registry)
    async def volcano_podgroup_event(*, type: str, body: kopf.Body, **_: Any) -> None:
        await gangs.reconcile(gangs.on_podgroup(API_VOLCANO, type, body))


def health_report(
    started: bool,
    loop_alive: bool,
    loops: Sequence[RoundLoop],
    leader: dict[str, Any] | None = None,
    caches: dict[str, int] | None = None,
) -> dict[str, Any]:
    """The manager's ``/healthz`` body: ``status`` ``ok`` while the operator's event loop runs (its heartbeat
    is recent, :class:`~koordpy.runtime.listeners.LoopHeartbeat`), ``failing`` once it has stalled.
    ``checks`` says what was looked at: the event loop, whether kopf finished starting (``standby`` while
    another replica holds the Lease), each round loop (running on this replica or not, its last outcome
    and how long ago its last round started), with leader election ``leaderElection`` (``leading``, the
    holder last seen, the Lease's transitions) and ``caches`` (objects per watched kind). A standby is
    healthy.

    Called from the health thread: it only reads values. Not guaranteed: a failed or old round makes the
    status fail (a round fails on API errors, which a restart does not mend, and a standby replica runs no
    rounds at all)."""
    rounds = {f"{loop.name}Rounds": loop.health() for loop in loops}
    operator = "running" if started else "starting"
    if leader is not None and not leader.get("leading") and not started:
        operator = "standby"
    checks: dict[str, Any] = {"eventLoop": "ok" if loop_alive else "stalled", "operator": operator}
    if leader is not None:
        checks["leaderElection"] = leader
    if caches is not None:
        checks["caches"] = caches
    return {"status": "ok" if loop_alive else "failing", "checks": {**checks, **rounds}}


def readiness_report(started: bool, loop_alive: bool, caches: str | None, credentials: str | None) -> dict[str, Any]:
    """The manager's ``/readyz`` body: ``status`` ``ok`` once kopf has started, the event loop runs, the
    watch caches hold their first lists and the API server has not refused the credentials for
    ``credentials.refusedNotReadySeconds``; else ``failing`` with ``reason`` (the first of these that is
    not so). ``started`` is true for a replica that stands by for the Lease as well (it has its caches and
    takes over when the Lease is free): readiness says it can act, not that it does; a rollout waits for
    the new pod's readiness before it stops the old leader.

    Called from the health thread: it only reads values."""
    checks = [
        (credentials is None, credentials or ""),
        (loop_alive, "the operator's event loop has stalled"),
        (started, "kopf is starting"),
        (caches is None, f"caches: {caches}"),
    ]
    for ok, why in checks:
        if not ok:
            return {"status": "failing", "reason": why}
    return {"status": "ok"}


class QuietHandlers(logging.Filter):
    """Drops kopf's ``Handler '...' succeeded.`` lines: the pod, node, NodeMetric and PodGroup handlers run
    on every watch event, so at 10,000 pods they would be thousands of lines at start-up and one per pod
    change after (the manager logs what it does itself). Failures and retries still log."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO:
            return True
        message = record.getMessage()
        return not (message.startswith("Handler '") and message.endswith("' succeeded."))


KOPF_ERROR_BACKOFFS = tuple(min(2.0, 0.5 * 2**attempt) for attempt in range(60))
"""kopf's retries of a failed request (its watches' lists and streams included): 0.5 s, 1 s, then every 2 s,
for about two minutes before kopf gives up on the request. kopf's own (1, 1, 2, 3, 5, 8, 13, 21 s, which
it sleeps through without waking) left a watch asleep for up to 21 s after the API server came back."""


def operator_settings(config: ManagerConfiguration) -> kopf.OperatorSettings:
    """kopf settings: no Kubernetes events posted, no kopf peering (the Lease decides who runs kopf at all),
    request retries capped at 2 s apart (:data:`KOPF_ERROR_BACKOFFS`)."""
    settings = kopf.OperatorSettings()
    settings.posting.enabled = False
    settings.networking.error_backoffs = KOPF_ERROR_BACKOFFS
    settings.peering.standalone = True
    settings.peering.mandatory = False
    settings.persistence.consistency_timeout = 0
    return settings


def legacy_peers_gone(client: ApiClient, name: str, logger: logging.Logger) -> Callable[[], Awaitable[bool]]:
    """``may_lead`` for the elector: True once the ClusterKopfPeering ``name`` (older versions' peering) holds
    no live keep-alive (kopf's rule: ``lastseen`` + ``lifetime`` not past), or does not exist (or its kind
    is not served). A read that fails otherwise says False (try again)."""
    path = f"/apis/{CLUSTER_KOPF_PEERING.group}/{CLUSTER_KOPF_PEERING.version}/{CLUSTER_KOPF_PEERING.plural}/{name}"
    said: set[str] = set()

    async def check() -> bool:
        try:
            obj = await client.request("GET", path)
        except NotFound:
            return True
        except ApiError as exc:
            logger.warning("reading ClusterKopfPeering %s: %s", name, exc)
            return False
        now = datetime.datetime.now(datetime.UTC)
        live = []
        for peer, info in (obj.get("status") or {}).items():
            try:
                seen = datetime.datetime.fromisoformat(str(info["lastseen"]))
                if seen.tzinfo is None:
                    seen = seen.replace(tzinfo=datetime.UTC)
                if seen + datetime.timedelta(seconds=float(info.get("lifetime") or 0)) > now:
                    live.append(peer)
            except (KeyError, TypeError, ValueError, AttributeError):
                continue
        if live and ",".join(sorted(live)) not in said:
            said.add(",".join(sorted(live)))
            logger.info("waiting for older replicas peering in ClusterKopfPeering %s to stop: %s", name, sorted(live))
        return not live

    return check


def _identity() -> str:
    """client-go's candidate identity: the pod's name (``POD_ID``, else the host name) and a fresh UUID."""
    return f"{os.environ.get('POD_ID') or socket.gethostname()}_{uuid.uuid4()}"


async def _flag_set(flag: Any) -> None:
    """Wait for an asyncio Event or Future, or a threading Event (polled), as kopf accepts for its flags."""
    if isinstance(flag, asyncio.Event):
        await flag.wait()
    elif isinstance(flag, asyncio.Future):
        await asyncio.shield(flag)
    elif isinstance(flag, threading.Event):
        while not flag.is_set():
            await asyncio.sleep(0.1)
    else:  # pragma: no cover - kopf's flags are one of the above
        raise TypeError(f"unsupported stop flag {type(flag).__name__}")


async def _set_after(flag: Any, event: asyncio.Event) -> None:
    await _flag_set(flag)
    event.set()


def _raise_flag(flag: Any) -> None:
    """Set an asyncio or threading Event, or resolve a Future (kopf's kinds of ``ready_flag``)."""
    if isinstance(flag, asyncio.Future):
        if not flag.done():
            flag.set_result(None)
    else:
        flag.set()


async def _relay(ready: asyncio.Event, flag: Any) -> None:
    await ready.wait()
    _raise_flag(flag)


def _handle_signals(handler: Callable[[signal.Signals], None]) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, handler, sig)


async def _tend_gc(freezer: GcFreezer) -> None:
    """Freeze the caches' long-lived objects after each full collection (:mod:`koordpy.runtime.gcfreeze`)."""
    while True:
        freezer.tick()
        await asyncio.sleep(1.0)


KOPF_STOP_SECONDS = 1.0
"""How long kopf gets to stop by its stop flag before it is cancelled, and again after that. kopf 1.45 waits
5 s for the tasks it started and did not end: its API discovery's requests (``asyncio.as_completed``, whose
tasks outlive the discovery when it is cancelled) go on after kopf closed its session and wait for a new
login that never comes; stopped during start-up, kopf would keep the process 5 s past the stop."""

RELEASE_SECONDS = 5.0
"""How long a stopping manager tries to release the Lease (else it expires: ``leaseDuration``)."""


async def act(ready: asyncio.Event, loops: Sequence[RoundLoop], gangs: GangStatusKeeper | None) -> None:
    """The leader's own writers, from the moment kopf is ready until cancelled: each round loop, and with
    ``gangs`` the gang Event passes (every ``podGroup.eventDelaySeconds``)."""
    await ready.wait()
    async with asyncio.TaskGroup() as group:
        for loop in loops:
            group.create_task(loop.run(lambda: False, asyncio.sleep), name=f"{loop.name} rounds")
        if gangs is not None:
            group.create_task(_post_gang_events(gangs), name="gang events")


async def _post_gang_events(gangs: GangStatusKeeper) -> None:
    while True:
        await asyncio.sleep(gangs.settings.event_delay_seconds)
        try:
            await gangs.post_events()
        except Exception:  # an Event pass must never end the loop; the next pass retries
            logging.getLogger("koordpy.manager").exception("gang Event pass failed")


async def stop_kopf(operator: asyncio.Task[None], logger: logging.Logger, grace: float = KOPF_STOP_SECONDS) -> None:
    """Wait for kopf's task (``kopf.run_tasks``, its stop flag already set) for ``grace`` seconds; then cancel
    it (kopf then cancels its tasks, the orphaned ones too) and wait ``grace`` once more. A kopf that still
    runs then is left behind with an error logged: the caller goes on (releases the Lease, exits)."""
    done, _ = await asyncio.wait({operator}, timeout=grace)
    if done:
        return
    logger.warning("kopf did not stop within %gs of its stop flag: cancelling it", grace)
    operator.cancel()
    done, _ = await asyncio.wait({operator}, timeout=grace)
    if not done:
        logger.error("kopf did not stop within %gs of its cancellation: left behind", grace)


def migration_loop(controller: MigrationController, arbitrate: Any, interval: float, cache: ManagerCache) -> RoundLoop:
    """The loop of migration rounds: one per ``interval`` once the caches hold their first lists (a round
    on a half-listed cluster would find pods missing), counted in ``koordpy_migration_rounds_total``."""
    metrics = controller.metrics

    def outcome(name: str) -> None:
        if metrics is not None:
            metrics.rounds.labels(outcome=name).inc()

    return RoundLoop(
        "migration",
        lambda: controller.run_round(arbitrate),
        interval,
        due=lambda: cache.not_ready() is None,
        outcome=outcome,
    )


async def run(
    config: ManagerConfiguration,
    *,
    stop_flag: Any = None,
    ready_flag: Any = None,
    liveness: bool = True,
    limits: ListenerLimits | None = None,
    scheduler: SchedulerConfiguration | None = None,
) -> None:
    """Run the operator until ``stop_flag`` (or a signal). Credentials come from the login handler.
    ``scheduler`` is the extender's configuration the balance round judges destinations with (``lowNodeLoad``
    only; default: the extender's defaults).

    With ``liveness``, ``GET /healthz`` is served on ``health.host:health.port`` from a thread of its own
    while the operator runs, bounded by ``limits`` (default: from ``config.health``), ``GET /readyz``
    (:func:`readiness_report`) and ``GET /metrics`` with the migration, reservation and credential
    metrics. ``/healthz`` answers 200 with what it checked (:func:`health_report`), 503 once the event
    loop has not run for ``health.loopStallSeconds``.
    """
    logging.getLogger("kopf").setLevel(config.log_level.upper())
    logging.getLogger("koordpy.manager").setLevel(config.log_level.upper())
    objects_logger = logging.getLogger("kopf.objects")
    if not any(isinstance(f, QuietHandlers) for f in objects_logger.filters):
        objects_logger.addFilter(QuietHandlers())
    settings = operator_settings(config)
    logger = logging.getLogger("koordpy.manager")
    # Every write uses koordpy.kube (Eviction subresource, UID preconditions, Events) with the connection
    # kopf's login hands over too: in a pod the service account, else $KUBECONFIG. All share its
    # credentials (renewed, and counted in the credential metrics). The NodeMetric and PodGroup writes
    # carry the name kopf's session does (koordpy-manager, in managed fields); the others are koordpy's.
    connection = load_connection()
    client = ApiClient(connection)
    """Reads (the caches, the peering check), the Lease, and the Event about this replica's own refused
    credentials (every replica reports its own, a standby too): not fenced."""
    election = config.leader_election
    elector: LeaseElector | None = None
    if election.leader_elect:
        elector = LeaseElector(
            client,
            namespace=election.resource_namespace,
            name=election.resource_name,
            identity=_identity(),
            lease_duration=election.lease_duration_seconds,
            renew_deadline=election.renew_deadline_seconds,
            retry_period=election.retry_period_seconds,
            may_lead=legacy_peers_gone(client, config.peering.name, logger),
        )
    # Every write about the cluster goes through a client the elector fences: sent only while leading.
    fenced_client = ApiClient(connection, fence=elector)
    writes_client = ApiClient(connection, ClientSettings(user_agent=MANAGER_AGENT), fence=elector)
    writes = RetryingWrites(writes_client, logger, leader=elector)
    writer = NodeMetricWriter(writes)
    balancing = config.low_node_load is not None
    cache = ManagerCache(
        client,
        ("pods", "podmigrationjobs", "reservations", "nodes", "nodemetrics", "podgroups")
        + (("workloads",) if balancing else ()),
        logger=logger,
    )
    api = KubeMigrationApi(fenced_client)
    args = config.migration_controller
    metrics = MigrationMetrics(new_registry())
    controller = controller_from_args(api, args, cache, logger=logger, metrics=metrics)
    migrations = migration_loop(
        controller, make_arbitrate(api, args, controller, logger), args.arbitration_args.interval, cache
    )
    gangs = GangStatusKeeper(config.pod_group, GangWriter(writes), time.time)
    reservations = ReservationController(
        KubeReservationApi(fenced_client, cache),
        config.reservation,
        metrics=ReservationMetrics(metrics.registry),
        logger=logger,
        source=cache,
    )
    loops = [migrations, reservation_loop(reservations, config.reservation.interval_seconds)]
    if balancing:
        if scheduler is None:
            logger.warning("lowNodeLoad: no scheduler configuration given: destinations judged with its defaults")
        judge = scheduler or SchedulerConfiguration.model_validate({})
        loops.append(balance_from_config(config, judge, cache, KubeBalanceApi(fenced_client), metrics.registry))
    registry = build_registry(config, writer.apply, gangs, KopfLogin(connection, fence=elector))
    event_passes = gangs if config.pod_group.enabled else None
    register_credentials_metrics(metrics.registry, connection.credentials)
    credentials = CredentialsWatch(
        connection.credentials,
        config.credentials.refused_not_ready_seconds,
        "koordpy-manager",
        post_event=client.create_event,
        pod=pod_from_env(),
    )
    heartbeat = LoopHeartbeat(config.health.loop_stall_seconds)
    caller_ready = ready_flag  # raised once kopf has started for the first time
    running: list[asyncio.Event | None] = [None]
    """kopf's ready flag of the current run (None while standing by): /healthz tells starting from running."""

    leader_gauge = Gauge(
        "koordpy_leader_election_master_status",
        "1 while this replica holds the manager's Lease (client-go's leader_election_master_status).",
        ["name"],
        registry=metrics.registry,
    ).labels(name=election.resource_name)
    fenced_writes = Counter(
        "koordpy_leader_election_fenced_writes",
        "Writes not sent because this replica did not lead (or its last Lease renewal was older than renewDeadline).",
        ["name"],
        registry=metrics.registry,
    ).labels(name=election.resource_name)
    if elector is not None:
        elector.on_fenced = fenced_writes.inc
    for warning in deprecation_warnings(config):
        logger.warning("%s", warning)

    async def standby(stop: asyncio.Event) -> bool:
        """Wait for the Lease; False when stopped first (SIGTERM or ``stop_flag``). Stopped while an attempt
        is in flight, that attempt is given :data:`RELEASE_SECONDS` to finish (its write may take the Lease:
        then True, and the caller releases it), then abandoned (the release then reads the Lease)."""
        assert elector is not None
        acquiring = asyncio.create_task(elector.acquire(until=stop), name="manager leader election")
        stopping = asyncio.create_task(stop.wait(), name="manager standby stop")
        await asyncio.wait({acquiring, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not acquiring.done():
            await asyncio.wait({acquiring}, timeout=RELEASE_SECONDS)
        for task in (acquiring, stopping):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        return elector.state.leading

    stop = asyncio.Event()
    """The process stops (SIGTERM, SIGINT or ``stop_flag``)."""

    def on_signal(sig: signal.Signals) -> None:
        logger.info("%s received: stopping", sig.name)
        stop.set()

    async def lead(stop: asyncio.Event, signals: bool) -> bool:
        """Run kopf (handlers) and the writers (:func:`act`) until the process stops (True) or the Lease is
        lost (False). Whatever ends it, at whatever moment of kopf's start-up: the writers stop first, then
        kopf (:func:`stop_kopf`: bounded)."""
        kopf_stop, ready, ended, lost = asyncio.Event(), asyncio.Event(), asyncio.Event(), asyncio.Event()
        running[0] = ready
        helpers = [
            asyncio.create_task(_set_after(stop, ended), name="manager stop"),
            asyncio.create_task(ended.wait(), name="manager leadership ends"),
        ]
        if caller_ready is not None:
            helpers.append(asyncio.create_task(_relay(ready, caller_ready), name="manager ready"))
        if elector is not None:

            async def hold() -> None:
                assert elector is not None
                await elector.hold()
                leader_gauge.set(0)
                lost.set()
                ended.set()

            helpers.append(asyncio.create_task(hold(), name="manager lease renewal"))
        writers = asyncio.create_task(act(ready, loops, event_passes), name="manager writers")
        # kopf waits for, and in the end cancels, every task it did not find when it started: ours exist now
        ignored = asyncio.all_tasks()
        operator: asyncio.Task[None] | None = None
        try:
            kopf_tasks = await kopf.spawn_tasks(
                registry=registry,
                settings=settings,
                clusterwide=True,
                standalone=True,
                liveness_endpoint=None,  # kopf's own endpoint has no head or read-time bounds: ours below
                stop_flag=kopf_stop,
                ready_flag=ready,
            )
            if signals:  # kopf has just installed its own handlers (stopping kopf, not the manager): ours again
                _handle_signals(on_signal)
            operator = asyncio.create_task(kopf.run_tasks(kopf_tasks, ignored=ignored), name="kopf")
            await asyncio.wait({operator, helpers[1]}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            # Nothing of ours writes once leadership ends (the fence refuses anyway), and kopf's stop is bounded.
            writers.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await writers
            kopf_stop.set()
            if operator is not None:
                await stop_kopf(operator, logger)
            for task in helpers:
                task.cancel()
            for task in helpers:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        failure = operator.exception() if operator.done() and not operator.cancelled() else None
        if failure is not None and not ended.is_set():
            raise failure  # kopf failed by itself: so does the process
        return not lost.is_set()

    async def operate() -> None:
        async with client, fenced_client, writes_client:
            background = [
                asyncio.create_task(cache.run(), name="manager caches"),
                asyncio.create_task(heartbeat.beat(), name="manager heartbeat"),
                asyncio.create_task(_tend_gc(GcFreezer()), name="manager gc"),
                asyncio.create_task(credentials.run(), name="manager credentials"),
            ]
            watchers: list[asyncio.Task[Any]] = []
            signals = threading.current_thread() is threading.main_thread()
            try:
                if stop_flag is not None:
                    watchers.append(asyncio.create_task(_set_after(stop_flag, stop), name="manager stop flag"))
                while not stop.is_set():
                    if signals:
                        _handle_signals(on_signal)
                    if elector is not None:
                        if not await standby(stop):
                            logger.info("stopped while standing by")
                            break
                        if stop.is_set():
                            logger.info("stopped as it took the Lease")
                            break  # released below
                        leader_gauge.set(1)
                    if await lead(stop, signals):
                        break
                    # The Lease was not renewed in time (the API server unreachable, or another holder):
                    # nothing acts here any more; stand by and compete for it again, in this process.
                    logger.warning("stopped acting: the Lease was lost; standing by")
                    running[0] = None
            finally:
                if signals:
                    loop = asyncio.get_running_loop()
                    for sig in (signal.SIGINT, signal.SIGTERM):
                        loop.remove_signal_handler(sig)
                for task in watchers:
                    task.cancel()
                for task in watchers:
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
                if elector is not None:
                    # after kopf and the writers stopped: nothing of ours writes any more. A release that
                    # cannot be made in time (the API server unreachable) leaves the Lease to expire.
                    try:
                        async with asyncio.timeout(RELEASE_SECONDS):
                            await elector.release()
                    except TimeoutError:
                        logger.warning("the Lease was not released within %gs: it expires instead", RELEASE_SECONDS)
                    leader_gauge.set(0)
                for task in background:
                    task.cancel()
                for task in background:
                    with contextlib.suppress(asyncio.CancelledError):
                        await task

    if not liveness:
        await operate()
        return

    def alive() -> dict[str, Any]:
        leader = None
        if elector is not None:
            state = elector.state
            leader = {"leading": state.leading, "holder": state.holder, "transitions": state.transitions}
        current = running[0]
        return health_report(current is not None and current.is_set(), heartbeat.alive(), loops, leader, cache.sizes())

    def ready() -> dict[str, Any]:
        current = running[0]
        operating = current is not None and current.is_set()
        standing_by = elector is not None and current is None  # kopf starts only once the Lease is ours
        return readiness_report(
            operating or standing_by,
            heartbeat.alive(),
            cache.not_ready(),
            connection.credentials.not_ready(config.credentials.refused_not_ready_seconds),
        )

    # why: /healthz is answered from its own thread; while a round computes, that thread waits for the GIL.
    # A 1 ms switch interval (Python's default is 5 ms) bounds each wait it makes to about 1 ms.
    sys.setswitchinterval(0.001)
    if limits is None:
        limits = ListenerLimits(
            max_header_bytes=config.health.max_header_bytes,
            request_read_seconds=config.health.request_read_timeout_seconds,
        )
    exposition = lambda: render(metrics.registry)  # noqa: E731 - the listener calls it per scrape
    async with threaded_health_listener(
        config.health.host, config.health.port, alive, limits=limits, metrics=exposition, ready=ready
    ):
        await operate()
