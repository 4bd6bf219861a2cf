"""The manager's API callers: NodeMetric actions, PodGroup status and gang Events, and PodMigrationJob steps,
all through :mod:`koordpy.kube` (which has the Eviction subresource, UID preconditions and Events).

kopf exports no public create/patch/delete calls (only its private ``kopf._cogs.clients``), so the
NodeMetric and PodGroup writes use koordpy's client with the retry policy kopf's client applies to its
own requests (:class:`RetryingWrites`): 429, 5xx and connection errors retried after 1, 1, 2, 3, 5, 8,
13 and 21 s, or after the server's ``Retry-After`` when that is longer. kopf's own watches run on the
session its login handler (:class:`KopfLogin`) hands over: an aiohttp session over the manager's own
connection, whose middleware sends the newest credentials with every request
(:mod:`koordpy.kube.credentials`), so kopf's watches and koordpy's writes renew their token alike.

Fencing: with leader election every writer here goes through a client (or, for kopf, a session) fenced by
the elector (:func:`koordpy.kube.client.fence_middleware`, :meth:`koordpy.kube.leaderelection.LeaseElector.admit`):
a write is sent only while this replica leads and its last renewal is younger than the renew deadline.
:class:`RetryingWrites` also stops retrying at the end of the term its write began in, the moment the term
ends, and never sends it in a later term.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import aiohttp
import kopf

from koordpy.crds.nodemetric import NODE_METRIC
from koordpy.descheduler.decisions import JobEvent
from koordpy.kube import errors as kube_errors
from koordpy.kube import resources
from koordpy.kube.client import ApiClient, WriteFence, abortive_socket, authorize_middleware, fence_middleware
from koordpy.kube.connection import ConnectionInfo
from koordpy.kube.leaderelection import LeaseElector, NotLeading
from koordpy.manager.cache import ManagerCache
from koordpy.manager.gang_status import API_VERSIONS, GangEvent, StatusPatch
from koordpy.manager.migration_api import EvictionRefusedError, ReservationRefusedError
from koordpy.manager.policy import Action, Create, Delete, Patch
from koordpy.manager.reservations import ClusterSnapshot, WriteRefusedError
from koordpy.scheduler.plugins.gang import API_NATIVE, API_VOLCANO
from koordpy.scheduler.plugins.reservation.controller import EventDecision

__all__ = [
    "EVENT_SOURCE",
    "MANAGER_AGENT",
    "GangWriter",
    "KopfLogin",
    "KubeBalanceApi",
    "KubeMigrationApi",
    "KubeReservationApi",
    "NodeMetricWriter",
    "Outcome",
    "RetryingWrites",
]

EVENT_SOURCE = "koordpy-manager"
MANAGER_AGENT = "koordpy-manager"
"""The client name of the manager's NodeMetric and PodGroup writes and of kopf's session (managed fields)."""

Outcome = Literal["created", "patched", "deleted", "exists", "gone"]

BASE = f"/apis/{NODE_METRIC.group}/{NODE_METRIC.version}/{NODE_METRIC.plural}"
MERGE_PATCH = "application/merge-patch+json"
BACKOFFS: tuple[float, ...] = (1, 1, 2, 3, 5, 8, 13, 21)
"""Seconds between the attempts of one write (kopf's ``networking.error_backoffs`` default)."""


class RetryingWrites:
    """POST, PATCH and DELETE through :class:`ApiClient`, a temporary failure (429, 5xx, no answer) retried
    after each of ``backoffs`` in turn (a longer ``Retry-After`` wins), then raised. Other errors raise at
    once as :mod:`koordpy.kube.errors` exceptions.

    With ``leader`` (the elector whose fence the client carries) a write belongs to the term it began in:
    once that term is over (the Lease lost or released) it raises
    :class:`~koordpy.kube.leaderelection.NotLeading` at once, in the middle of a backoff too, and is never
    sent again, even if this replica leads again meanwhile. Not guaranteed: exactly-once (a write whose answer
    was lost is sent again; its second answer may be 409 or 404)."""

    def __init__(
        self,
        client: ApiClient,
        logger: logging.Logger,
        *,
        backoffs: Iterable[float] = BACKOFFS,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        leader: LeaseElector | None = None,
    ) -> None:
        self.client = client
        self.logger = logger
        self.backoffs = tuple(backoffs)
        self.sleep = sleep
        self.leader = leader

    async def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> None:
        leader = self.leader
        term = leader.term if leader is not None else 0
        for attempt, backoff in enumerate((*self.backoffs, None), start=1):
            if leader is not None and not leader.leads(term):
                raise NotLeading(f"{method} {path} not sent: the leadership it was decided in (term {term}) is over")
            try:
                await self.client.request(method, path, body=body, content_type=content_type)
                return
            except kube_errors.ApiError as exc:
                if backoff is None or not kube_errors.is_temporary(exc):
                    raise
                after = getattr(exc, "retry_after", None)
                delay = max(backoff, after) if after is not None else backoff
                self.logger.warning("%s %s: %s (attempt %d, again in %.0f s)", method, path, exc, attempt, delay)
                await self._wait(delay, term)

    async def _wait(self, delay: float, term: int) -> None:
        """Sleep ``delay``, or less when the term ends first (the check before the next attempt then refuses)."""
        if self.leader is None:
            await self.sleep(delay)
            return
        sleeping = asyncio.ensure_future(self.sleep(delay))
        over = asyncio.ensure_future(self.leader.term_over(term))
        try:
            await asyncio.wait({sleeping, over}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeping, over):
                task.cancel()
            await asyncio.gather(sleeping, over, return_exceptions=True)


class NodeMetricWriter:
    """Applies :mod:`koordpy.manager.policy` actions. Not guaranteed: ordering between calls."""

    def __init__(self, writes: RetryingWrites) -> None:
        self._writes = writes
        self._logger = writes.logger

    async def apply(self, action: Action) -> Outcome:
        """Carry out one action. A lost race (409 on create, 404 on patch or delete) is not an error:
        the watch event that follows brings the next decision."""
        try:
            if isinstance(action, Create):
                await self._writes.request("POST", BASE, action.body)
                self._logger.info("created NodeMetric %s", action.name)
                return "created"
            if isinstance(action, Patch):
                await self._writes.request("PATCH", f"{BASE}/{action.name}", action.patch, MERGE_PATCH)
                self._logger.info("patched NodeMetric %s collect policy", action.name)
                return "patched"
            await self._writes.request("DELETE", f"{BASE}/{action.name}")
            self._logger.info("deleted NodeMetric %s (node gone)", action.name)
            return "deleted"
        except kube_errors.Conflict:
            return "exists"
        except kube_errors.NotFound:
            if isinstance(action, Delete | Patch):
                return "gone"
            raise


class KopfLogin:
    """kopf's login handler: an aiohttp session over ``connection`` whose middleware sends the newest
    credentials with every request and sends a request refused with 401 once more with renewed ones
    (:func:`koordpy.kube.client.authorize_middleware`); with ``fence``, kopf's writes (the manager's
    handlers make kopf write nothing, so none is expected) go only as the fence admits them
    (:func:`koordpy.kube.client.fence_middleware`).

    kopf runs it at start and again whenever a request of its own is still refused after that (it then
    closes the old session and blocks its API calls until a new one is handed over). While the API server
    refuses the newest credentials, each further login waits first, doubling from 0.5 s to 30 s, and reads
    the credentials again: kopf would otherwise retry at once, and forever.

    Not guaranteed: the connection's ``tls-server-name`` (kopf sends no per-request server name)."""

    def __init__(
        self,
        connection: ConnectionInfo,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        user_agent: str = MANAGER_AGENT,
        fence: WriteFence | None = None,
    ) -> None:
        self.connection = connection
        self.sleep = sleep
        self.user_agent = user_agent
        self.fence = fence
        self.logins = 0
        self._refused_logins = 0

    async def __call__(self, **_: Any) -> kopf.AiohttpSession:
        credentials = self.connection.credentials
        self.logins += 1
        if credentials.refused:
            delay = min(30.0, 0.5 * 2**self._refused_logins)
            self._refused_logins += 1
            await self.sleep(delay)
            await credentials.renew(credentials.current(), credentials.clock())
        else:
            self._refused_logins = 0
        connection = self.connection
        middlewares = [authorize_middleware(credentials)]
        if self.fence is not None:
            middlewares.append(fence_middleware(self.fence))
        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                limit=0,
                ssl=connection.ssl_context(),
                socket_factory=abortive_socket if self.fence is not None else None,
            ),
            headers={"User-Agent": self.user_agent, **connection.headers()},
            middlewares=tuple(middlewares),
        )
        return kopf.AiohttpSession(aiohttp_session=session, server=connection.server)


OWNER_PLURALS = {
    "ReplicaSet": "replicasets",
    "Deployment": "deployments",
    "StatefulSet": "statefulsets",
    "DaemonSet": "daemonsets",
    "ReplicationController": "replicationcontrollers",
    "Job": "jobs",
    "CronJob": "cronjobs",
}
"""Controller kinds whose objects the arbitration reads (``get`` only, see the chart's RBAC)."""


class KubeMigrationApi:
    """:class:`koordpy.manager.migration_api.MigrationApi` over :class:`koordpy.kube.ApiClient`.

    Writes return the object as stored. Evictions, deletes and annotations carry the pod UID as a
    precondition, so a replacement pod that reuses the name is never touched. A refusal (429 from a
    PodDisruptionBudget, 409 from a stale UID, 404, 403 when RBAC does not grant the evictor's verb)
    raises :class:`EvictionRefusedError`; a refused Reservation create (409 exists, 403, 404 without the
    CRD, 422 invalid, 429, 5xx) raises :class:`ReservationRefusedError`; other API errors propagate.
    Reads of jobs, pods and Reservations come from the manager's cache, not from here.
    """

    def __init__(self, client: ApiClient, component: str = "koordpy-manager") -> None:
        self.client = client
        self.component = component

    async def get_owner(self, namespace: str, ref: Mapping[str, Any]) -> dict[str, Any] | None:
        """A pod's (or workload's) controller by its ownerReference; ``None`` when gone, forbidden or the
        API does not serve its kind (the arbitration then treats the workload as unknown)."""
        api_version, kind, name = str(ref.get("apiVersion") or ""), str(ref.get("kind") or ""), str(ref.get("name"))
        group, _, version = api_version.rpartition("/")
        plural = OWNER_PLURALS.get(kind)
        if plural is None or not version:
            return None
        owner = resources.ResourceRef(group, version, plural, kind, namespaced=True)
        try:
            found = await self.client.get(owner, name, namespace)
        except (kube_errors.NotFound, kube_errors.Forbidden):
            return None
        if ((found.get("metadata") or {}).get("uid") or ref.get("uid")) != ref.get("uid"):
            return None  # a new object with the old name: not this pod's owner
        return found

    async def set_pod_uid(self, job: str, uid: str) -> dict[str, Any]:
        return await self.client.patch(resources.PODMIGRATIONJOBS, job, {"spec": {"podRef": {"uid": uid}}})

    async def annotate_job(self, job: str, key: str, value: str) -> dict[str, Any]:
        return await self.client.patch(resources.PODMIGRATIONJOBS, job, {"metadata": {"annotations": {key: value}}})

    async def write_status(self, job: str, status: dict[str, Any]) -> dict[str, Any]:
        return await self.client.patch_status(resources.PODMIGRATIONJOBS, job, {"status": status})

    async def delete_job(self, job: str) -> None:
        try:
            await self.client.delete(resources.PODMIGRATIONJOBS, job)
        except kube_errors.NotFound:
            return

    async def evict_pod(self, namespace: str, name: str, uid: str, delete_options: dict[str, Any] | None) -> None:
        options = dict(delete_options or {})
        options["preconditions"] = {**(options.get("preconditions") or {}), "uid": uid}
        try:
            await self.client.evict(namespace, name, delete_options=options)
        except (kube_errors.TooManyRequests, kube_errors.Conflict, kube_errors.NotFound, kube_errors.Forbidden) as exc:
            raise EvictionRefusedError(exc.status, exc.message) from exc

    async def delete_pod(
        self, namespace: str, name: str, uid: str, delete_options: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        options = delete_options or {}
        grace = options.get("gracePeriodSeconds")
        try:
            answer = await self.client.delete(
                resources.PODS,
                name,
                namespace,
                grace_period_seconds=int(grace) if grace is not None else None,
                propagation_policy=options.get("propagationPolicy"),
                precondition_uid=uid,
            )
        except (kube_errors.Conflict, kube_errors.NotFound, kube_errors.Forbidden) as exc:
            raise EvictionRefusedError(exc.status, exc.message) from exc
        return answer if isinstance(answer.get("metadata"), dict) and "spec" in answer else None  # not a Status

    async def annotate_pod(self, namespace: str, name: str, key: str, value: str) -> dict[str, Any]:
        try:
            return await self.client.patch(
                resources.PODS, name, {"metadata": {"annotations": {key: value}}}, namespace=namespace
            )
        except (kube_errors.NotFound, kube_errors.Forbidden) as exc:
            raise EvictionRefusedError(exc.status, exc.message) from exc

    async def post_event(self, job: Mapping[str, Any], event: JobEvent) -> None:
        await self.client.create_event(
            job,
            reason=event.reason,
            message=event.message,
            event_type=event.type,
            component=self.component,
            action="Migrating",
        )

    async def create_reservation(self, body: Mapping[str, Any]) -> dict[str, Any]:
        try:
            return await self.client.create(resources.RESERVATIONS, body)
        except (
            kube_errors.Conflict,
            kube_errors.NotFound,
            kube_errors.Forbidden,
            kube_errors.UnprocessableEntity,
            kube_errors.BadRequest,
            kube_errors.TooManyRequests,
            kube_errors.ServerError,
        ) as exc:
            raise ReservationRefusedError(exc.status, exc.message) from exc

    async def delete_reservation(self, name: str, uid: str) -> None:
        try:
            await self.client.delete(resources.RESERVATIONS, name, precondition_uid=uid or None)
        except kube_errors.NotFound:
            return

    async def set_reservation_ref(self, job: str, ref: Mapping[str, Any]) -> dict[str, Any]:
        patch = {"spec": {"reservationOptions": {"reservationRef": dict(ref)}}}
        return await self.client.patch(resources.PODMIGRATIONJOBS, job, patch)


class KubeBalanceApi:
    """:class:`koordpy.manager.balance.BalanceApi` over :class:`koordpy.kube.ApiClient`: creates the jobs a balance
    round files and posts its Events (about a workload). API errors propagate as :mod:`koordpy.kube.errors`."""

    def __init__(self, client: ApiClient, component: str = EVENT_SOURCE) -> None:
        self.client = client
        self.component = component

    async def create_job(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return await self.client.create(resources.PODMIGRATIONJOBS, body)

    async def post_event(self, involved: Mapping[str, Any], reason: str, message: str) -> None:
        await self.client.create_event(
            involved,
            reason=reason,
            message=message,
            event_type="Warning",
            component=self.component,
            action="Descheduling",
        )


class GangWriter:
    """Writes PodGroup status (``/status`` subresource, JSON merge-patch; on the object itself for Volcano's
    PodGroup, whose CRD has no status subresource, the patch holding ``status`` only) and posts gang Events.

    A PodGroup gone since the decision (404) is not an error: its DELETED event follows. Event posting
    failures are logged and dropped (an Event is advice, never state). Not guaranteed: ordering between
    calls; an Event whose object was deleted meanwhile is still posted.
    """

    def __init__(self, writes: RetryingWrites) -> None:
        self._writes = writes
        self._logger = writes.logger

    async def patch_status(self, patch: StatusPatch) -> bool:
        """True when written, False when the PodGroup (or its API) is gone. A native ``scheduling.k8s.io``
        PodGroup is never written (kube-scheduler owns its status): refused here whatever asked."""
        if patch.api == API_NATIVE:
            self._logger.error("PodGroup %s/%s (%s): status not written", patch.namespace, patch.name, patch.api)
            return False
        url = f"/apis/{API_VERSIONS[patch.api]}/namespaces/{patch.namespace}/podgroups/{patch.name}"
        if patch.api != API_VOLCANO:
            url += "/status"
        try:
            await self._writes.request("PATCH", url, {"status": patch.status}, MERGE_PATCH)
        except kube_errors.NotFound:
            return False
        self._logger.info("PodGroup %s/%s (%s) status: %s", patch.namespace, patch.name, patch.api, patch.status)
        return True

    async def post_event(self, event: GangEvent, now: str) -> bool:
        """Create one core/v1 Event; False (logged) when the API refused it."""
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"namespace": event.namespace, "name": f"{event.name}.{secrets.token_hex(8)}"},
            "involvedObject": {
                "apiVersion": event.api_version,
                "kind": event.kind,
                "namespace": event.namespace,
                "name": event.name,
                "uid": event.uid,
            },
            "reason": event.reason,
            "message": event.message,
            "type": event.type,
            "source": {"component": EVENT_SOURCE},
            "reportingComponent": EVENT_SOURCE,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await self._writes.request("POST", f"/api/v1/namespaces/{event.namespace}/events", body)
        except kube_errors.ApiError as exc:
            self._logger.warning("Event for %s not posted: %s", event.key, exc)
            return False
        return True


class KubeReservationApi:
    """:class:`koordpy.manager.reservations.ReservationApi` over :class:`koordpy.kube.ApiClient` and the
    manager's watch caches.

    :meth:`snapshot` lists nothing: it copies what the caches hold (a PodGroup API whose CRD is absent is
    not watched and reads as empty; NodeMetrics only when watched). Writes: create, status merge-patch
    (``/status`` subresource) and delete (with the uid as a precondition when known, so a Reservation
    re-created under the same name is never deleted); what they return is stored in the Reservation cache
    at once. 409 and 404 raise :class:`WriteRefusedError`; other API errors propagate. Not guaranteed: the
    caches are one consistent snapshot (each kind is as fresh as its own watch).
    """

    def __init__(self, client: ApiClient, cache: ManagerCache, component: str = EVENT_SOURCE) -> None:
        self.client = client
        self.cache = cache
        self.component = component

    async def snapshot(self) -> ClusterSnapshot:
        cache = self.cache
        podgroups: list[dict[str, Any]] = []
        for api_version, store in cache.podgroup_stores():
            podgroups.extend({**item, "apiVersion": api_version} for item in store.values())
        return ClusterSnapshot(
            nodes=list(cache.nodes.values()),
            pods=list(cache.pods.values()),
            podgroups=podgroups,
            reservations=list(cache.reservations.values()),
            nodemetrics=list(cache.nodemetrics.values()),
        )

    @staticmethod
    def _refused(exc: kube_errors.ApiError) -> WriteRefusedError:
        if isinstance(exc, kube_errors.Conflict):
            return WriteRefusedError("exists" if exc.already_exists else "conflict", exc.message)
        return WriteRefusedError("gone", exc.message)

    async def create_reservation(self, body: Mapping[str, Any]) -> dict[str, Any]:
        try:
            created = await self.client.create(resources.RESERVATIONS, body)
        except kube_errors.Conflict as exc:
            raise self._refused(exc) from exc
        self.cache.reservations.observe(created)
        return created

    async def patch_reservation_status(self, name: str, status: Mapping[str, Any]) -> dict[str, Any]:
        try:
            patched = await self.client.patch_status(resources.RESERVATIONS, name, {"status": dict(status)})
        except (kube_errors.Conflict, kube_errors.NotFound) as exc:
            if isinstance(exc, kube_errors.NotFound):
                self.cache.reservations.discard(name)
            raise self._refused(exc) from exc
        self.cache.reservations.observe(patched)
        return patched

    async def delete_reservation(self, name: str, uid: str | None) -> None:
        try:
            await self.client.delete(resources.RESERVATIONS, name, precondition_uid=uid)
        except (kube_errors.Conflict, kube_errors.NotFound) as exc:
            raise self._refused(exc) from exc
        self.cache.reservations.discard(name)

    async def post_event(self, involved: Mapping[str, Any], event: EventDecision) -> None:
        await self.client.create_event(
            involved,
            reason=event.reason,
            message=event.message,
            event_type="Warning" if event.type == "Warning" else "Normal",
            component=self.component,
            action="Reserving",
        )

    # ---- the hold against every scheduler (reservation.taintNodes; koordpy.manager.reservation_hold) ----

    async def _patch_held(
        self, resource: resources.ResourceRef, name: str, namespace: str | None, patch: Mapping[str, Any]
    ) -> dict[str, Any]:
        try:
            return await self.client.patch(resource, name, patch, namespace=namespace)
        except (kube_errors.Conflict, kube_errors.NotFound) as exc:
            raise self._refused(exc) from exc
        except kube_errors.Forbidden as exc:  # the chart grants these verbs only with taintNodes
            raise WriteRefusedError("forbidden", exc.message) from exc

    async def patch_node_taints(
        self, name: str, resource_version: str, taints: Sequence[Mapping[str, Any]]
    ) -> dict[str, Any]:
        """Replace ``spec.taints`` (a merge patch replaces the list), only if the node is still at
        ``resource_version`` (409 otherwise)."""
        patch = {"metadata": {"resourceVersion": resource_version}, "spec": {"taints": [dict(t) for t in taints]}}
        written = await self._patch_held(resources.NODES, name, None, patch)
        self.cache.nodes.observe(written)
        return written

    async def patch_pod_tolerations(
        self, namespace: str, name: str, resource_version: str, tolerations: Sequence[Mapping[str, Any]]
    ) -> dict[str, Any]:
        """Replace ``spec.tolerations`` with a list that only adds to it (what a pod update allows), only if
        the pod is still at ``resource_version``."""
        patch = {
            "metadata": {"resourceVersion": resource_version},
            "spec": {"tolerations": [dict(t) for t in tolerations]},
        }
        written = await self._patch_held(resources.PODS, name, namespace, patch)
        self.cache.pods.observe(written)
        return written
