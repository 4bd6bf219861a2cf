"""Leader election on a ``coordination.k8s.io`` Lease, with the rules of client-go's ``leaderelection``
package (k8s.io/client-go/tools/leaderelection, v0.37: ``tryAcquireOrRenew``, ``renew``, ``release``).

A candidate reads the Lease every ``retry_period`` (jittered up to 1.2x). It takes it when the Lease is
missing (create), free (an empty ``holderIdentity``, which a leader leaves when it releases), or not
renewed for ``leaseDurationSeconds`` as this candidate observed it: expiry is measured on the candidate's
own monotonic clock from the moment it first saw the current record, never from the timestamps written
in the Lease (clocks of two nodes need not agree). Every write is an update guarded by the
resourceVersion read, so of two candidates racing for a free Lease exactly one wins (the other gets
409 Conflict). A leader renews every ``retry_period``; when no renewal succeeded for ``renew_deadline``
it has lost the Lease (:meth:`LeaseElector.hold` returns). :meth:`LeaseElector.release` empties the
holder and sets ``leaseDurationSeconds`` to 1, so a standby takes over at its next try.

Sticky by construction: nothing a candidate carries (start time, priority) lets it take a Lease that
its holder renews.

The leader's fence (:meth:`LeaseElector.admit`, a :class:`koordpy.kube.client.WriteFence`): a write may go
out only while this candidate leads and less than ``renew_deadline`` has passed since the *start* of its
last successful renewal (the request's start, not its answer: the API server stored the renewal after
that, and a standby counts the lease from when it saw it, later still). A write admitted gets the rest of
that window to be answered. So the leader sends nothing from ``renew_deadline`` after its last renewal
on, while a standby takes over no earlier than ``leaseDurationSeconds`` after that renewal: the
difference is the margin a write sent just before the deadline has to be answered in. Each leadership
is a term (:attr:`LeaseElector.term`); :meth:`LeaseElector.term_over` wakes a retry loop at its end.

``leaseDurationSeconds`` is an integer: the configured duration is written rounded up (never below the
renew deadline: client-go truncates, so 10.4 s would be written as 10 s, below a 10.2 s renew deadline).

Not guaranteed: the Lease's timestamps are informative only. A process frozen between the fence's check
and the send (a stopped process, a stalled VM: no check can see it) still sends that one write late, and
a write already received by the API server is carried out whenever the server gets to it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from koordpy.config.manager import JITTER_FACTOR, leader_election_problems
from koordpy.kube.client import ApiClient
from koordpy.kube.errors import ApiError, Conflict, NotFound
from koordpy.kube.resources import LEASES

__all__ = ["JITTER_FACTOR", "ElectionState", "LeaseElector", "NotLeading", "lease_seconds", "micro_time"]


log = logging.getLogger(__name__)

RELEASE_ATTEMPTS = 3
"""Reads and writes a release makes when its write meets a newer Lease (409 Conflict) that still names this
candidate: a renewal already on its way when the term ended lands after the release's read."""


class NotLeading(ApiError):  # noqa: N818 - named for what it says, as the HTTP errors are
    """A write refused by the leader's fence before it was sent (:meth:`LeaseElector.admit`): this process
    does not hold the Lease, or its last renewal is older than the renew deadline. ``status`` 0, as nothing
    was sent; never temporary (:func:`koordpy.kube.errors.is_temporary` is False)."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "NotLeading", message)


def lease_seconds(duration: float) -> int:
    """``leaseDurationSeconds`` for a configured duration: whole seconds, rounded up (so the written lease
    is never shorter than configured, and stays longer than the renew deadline)."""
    return max(1, math.ceil(duration))


def micro_time(now: dt.datetime) -> str:
    """A ``metav1.MicroTime`` (RFC 3339 with microseconds, UTC), as the Lease's times are written."""
    return now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class ElectionState:
    """What :meth:`LeaseElector.state` reports (``/healthz``, metrics); plain values only."""

    leading: bool = False
    holder: str = ""
    """The holder this candidate last observed ("" for a free Lease)."""
    transitions: int = 0
    """``spec.leaseTransitions`` as last observed."""
    acquired: int = 0
    """How often this process took the Lease."""
    failed_attempts: int = 0
    """Reads or writes of the Lease that failed (any error but a lost race)."""
    fenced_writes: int = 0
    """Writes the fence refused (:meth:`LeaseElector.admit`)."""
    last_error: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class LeaseElector:
    """One candidate ``identity`` for the Lease ``namespace/name`` (see the module docstring).

    ``may_lead`` (optional) is asked before each attempt to take a Lease this candidate does not hold;
    False postpones the attempt to the next try (the manager waits out older replicas that peer without
    the Lease). ``on_fenced`` (optional) is called for each write :meth:`admit` refuses (a metric).
    ``monotonic``, ``wall`` and ``sleep`` are injected for tests. One event loop only.
    """

    def __init__(
        self,
        client: ApiClient,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        may_lead: Callable[[], Awaitable[bool]] | None = None,
        on_fenced: Callable[[], None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        problems = leader_election_problems(lease_duration, renew_deadline, retry_period)
        if problems:
            raise ValueError("; ".join(problems))
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.may_lead = may_lead
        self.on_fenced = on_fenced
        self._monotonic = monotonic
        self._wall = wall
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._observed: dict[str, Any] | None = None
        """The Lease's spec as last read or written."""
        self._observed_at = 0.0
        """Monotonic time at which the observed spec last changed (client-go's ``observedTime``)."""
        self._may_hold = False
        """The Lease may name this candidate: last seen so, or a write that would make it so was sent and its
        outcome is not known (:meth:`release` then looks)."""
        self._valid_until = 0.0
        """Monotonic time until which this leader may write: the start of its last successful renewal plus
        ``renew_deadline``."""
        self._term_over = asyncio.Event()
        self.term = 0
        """Leaderships so far (1 during the first): a write decided in one term is never sent in another."""
        self.state = ElectionState()

    # -- one attempt ------------------------------------------------------------------------------

    def _spec(self, holder: str, *, acquire: str, transitions: int, duration: int) -> dict[str, Any]:
        now = micro_time(self._wall())
        return {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration,
            "acquireTime": acquire or now,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    def _observe(self, lease: dict[str, Any]) -> None:
        spec = dict(lease.get("spec") or {})
        if spec != self._observed:
            self._observed = spec
            self._observed_at = self._monotonic()
        self._may_hold = str(spec.get("holderIdentity") or "") == self.identity
        self.state.holder = str(spec.get("holderIdentity") or "")
        self.state.transitions = int(spec.get("leaseTransitions") or 0)

    def _held_by_other(self) -> bool:
        spec = self._observed or {}
        holder = str(spec.get("holderIdentity") or "")
        if not holder or holder == self.identity:
            return False
        duration = float(spec.get("leaseDurationSeconds") or 0)
        return self._observed_at + duration > self._monotonic()

    async def try_acquire_or_renew(self) -> bool:
        """One read and at most one write; True when this candidate holds the Lease afterwards.

        A lost race (409 Conflict, or 409 AlreadyExists on create) is False; other API errors propagate."""
        try:
            lease = await self.client.get(LEASES, self.name, self.namespace)
        except NotFound:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(
                    self.identity, acquire="", transitions=0, duration=lease_seconds(self.lease_duration)
                ),
            }
            if self.may_lead is not None and not await self.may_lead():
                return False
            self._may_hold = True
            try:
                created = await self.client.create(LEASES, body, namespace=self.namespace)
            except Conflict:
                self._may_hold = False
                return False
            self._observe(created)
            return True
        self._observe(lease)
        spec = self._observed or {}
        holder = str(spec.get("holderIdentity") or "")
        mine = holder == self.identity
        if not mine:
            if self._held_by_other():
                return False
            if self.may_lead is not None and not await self.may_lead():
                return False
        transitions = int(spec.get("leaseTransitions") or 0)
        updated = {
            **lease,
            "spec": self._spec(
                self.identity,
                acquire=str(spec.get("acquireTime") or "") if mine else "",
                transitions=transitions if mine else transitions + 1,
                duration=lease_seconds(self.lease_duration),
            ),
        }
        self._may_hold = True
        try:
            written = await self.client.replace(LEASES, updated, namespace=self.namespace)
        except Conflict:
            self._may_hold = mine
            return False
        self._observe(written)
        return True

    # -- the loops --------------------------------------------------------------------------------

    def _wait(self) -> float:
        return self.retry_period * (1.0 + JITTER_FACTOR * self._rng.random())

    async def _attempt(self) -> bool:
        try:
            return await self.try_acquire_or_renew()
        except ApiError as exc:
            self.state.failed_attempts += 1
            self.state.last_error = str(exc)[:300]
            log.warning("leader election %s/%s: %s", self.namespace, self.name, exc)
            return False

    def _begin_term(self, renewal_started: float) -> None:
        self.term += 1
        self._term_over = asyncio.Event()
        self._valid_until = renewal_started + self.renew_deadline
        self.state.leading = True
        self.state.acquired += 1

    def _end_term(self) -> None:
        self.state.leading = False
        self._term_over.set()

    async def acquire(self, until: asyncio.Event | None = None) -> bool:
        """Try every ``retry_period`` (jittered) until this candidate holds the Lease (True: a new term
        begins), or ``until`` is set (False). An attempt in flight when ``until`` is set is finished, not
        abandoned: its write may take the Lease, and only its answer says so (then True: the caller
        releases it)."""
        announced = ""
        while until is None or not until.is_set():
            started = self._monotonic()
            if await self._attempt():
                self._begin_term(started)
                log.info(
                    "leader election %s/%s: acquired as %s (transitions %d)",
                    self.namespace,
                    self.name,
                    self.identity,
                    self.state.transitions,
                )
                return True
            if self.state.holder != announced:
                announced = self.state.holder
                log.info(
                    "leader election %s/%s: standing by; held by %s",
                    self.namespace,
                    self.name,
                    announced or "nobody (waiting for older replicas)",
                )
            await self._sleep_unless(self._wait(), until)
        return False

    async def _sleep_unless(self, seconds: float, until: asyncio.Event | None) -> None:
        if until is None:
            await self._sleep(seconds)
            return
        sleeping = asyncio.ensure_future(self._sleep(seconds))
        stopping = asyncio.ensure_future(until.wait())
        try:
            await asyncio.wait({sleeping, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeping, stopping):
                task.cancel()
            await asyncio.gather(sleeping, stopping, return_exceptions=True)

    async def hold(self) -> None:
        """Renew every ``retry_period`` while leading; return once no renewal succeeded for ``renew_deadline``
        (counted from the start of the last successful one) or another candidate holds the Lease: the term
        is over, stop acting. Each attempt is bounded by what is left of the deadline, so a hung request
        cannot outlast it."""
        while True:
            await self._sleep(self.retry_period)
            while True:
                started = self._monotonic()
                left = self._valid_until - started
                renewed = False
                if left > 0:
                    try:
                        async with asyncio.timeout(left):  # no task of its own (kopf stops tasks it did not start)
                            renewed = await self._attempt()
                    except TimeoutError:
                        renewed = False
                if renewed:
                    self._valid_until = started + self.renew_deadline
                    break
                if self._held_by_other() or self._monotonic() >= self._valid_until:
                    self._end_term()
                    log.error(
                        "leader election %s/%s: lost (last renewal started %.1fs ago; holder now %r)",
                        self.namespace,
                        self.name,
                        self._monotonic() - (self._valid_until - self.renew_deadline),
                        self.state.holder,
                    )
                    return
                await self._sleep(min(self.retry_period / 4, max(0.0, left)))

    # -- the fence --------------------------------------------------------------------------------

    def admit(self, method: str, url: str) -> float:
        """The fence (:class:`koordpy.kube.client.WriteFence`): the seconds a write sent now may take, while
        this candidate leads and its last renewal started less than ``renew_deadline`` ago; else
        :class:`NotLeading` (counted in ``state.fenced_writes``, logged), and the write is not sent."""
        left = self._valid_until - self._monotonic() if self.state.leading else 0.0
        if left > 0:
            return left
        self.state.fenced_writes += 1
        if self.on_fenced is not None:
            self.on_fenced()
        why = "renewal overdue" if self.state.leading else "not the holder"
        message = f"{method} {url} not sent: not leading on Lease {self.namespace}/{self.name} ({why})"
        log.warning("leader election %s/%s: %s", self.namespace, self.name, message)
        raise NotLeading(message)

    def leads(self, term: int) -> bool:
        """Whether term ``term`` is still on and inside its renew deadline (what :meth:`admit` asks)."""
        return term == self.term and self.state.leading and self._monotonic() < self._valid_until

    async def term_over(self, term: int) -> None:
        """Return once term ``term`` is over (at once when it already is): the Lease was lost or released."""
        over = self._term_over
        if term != self.term or not self.state.leading:
            return
        await over.wait()

    async def release(self) -> bool:
        """Give the Lease up (empty holder, ``leaseDurationSeconds`` 1) if it names this candidate; True when
        released. The term ends first (the fence refuses from now on). The Lease is read only when it may
        name this candidate (leading, or a write taking it was sent whose answer never came: stopped in the
        middle of taking it). Errors are logged, not raised (the Lease then simply expires)."""
        leading = self.state.leading
        if leading:
            self._end_term()
        if not leading and not self._may_hold:
            return False
        spec = self._observed or {}
        try:
            for attempt in range(1, RELEASE_ATTEMPTS + 1):
                lease = await self.client.get(LEASES, self.name, self.namespace)
                if str((lease.get("spec") or {}).get("holderIdentity") or "") != self.identity:
                    self._may_hold = False
                    return False
                released = {
                    **lease,
                    "spec": self._spec("", acquire="", transitions=int(spec.get("leaseTransitions") or 0), duration=1),
                }
                try:
                    await self.client.replace(LEASES, released, namespace=self.namespace)
                    break
                except Conflict:
                    # A renewal sent before the term ended (its task cancelled, the request already on its way)
                    # landed after the read above: read again; the Lease still names this candidate.
                    if attempt == RELEASE_ATTEMPTS:
                        raise
        except ApiError as exc:
            log.warning(
                "leader election %s/%s: release failed (%s); it expires instead", self.namespace, self.name, exc
            )
            return False
        self._may_hold = False
        log.info("leader election %s/%s: released", self.namespace, self.name)
        return True
