"""List+watch one resource into a synchronous handler, the way client-go's reflector does.

``Reflector.run()`` lists (chunked), delivers ``ADDED`` for every object, sets ``synced``, then watches
from the list's resourceVersion. A watch that ends normally (server ``timeoutSeconds``) is resumed from
the last resourceVersion seen, bookmarks included. A 410 Gone (HTTP or watch ``ERROR`` event) triggers
a relist whose result is diffed against what was delivered before: ``DELETED`` for objects that vanished
during the gap, ``MODIFIED`` for changed ones (different resourceVersion), ``ADDED`` for new ones. Other
errors back off exponentially with jitter up to ``backoff_max`` and retry the step that failed (the
list, or the watch from the last resourceVersion); a backoff ends early when the API server answers again
after an outage (:mod:`koordpy.kube.reachability`: one ``/readyz`` probe a second per client while
someone backs off), and the backoff then starts again from ``backoff_initial``. A failure loop
(:meth:`Reflector.failing`) ends with a list that succeeds, a watch event that moves the resourceVersion,
or a watch the server accepted that stays open for ``STABLE_STREAM_SECONDS`` (a resumed watch of a kind
that does not change sees no event for minutes).

Malformed input never stops the stream. A watch event or list item that is not an object, whose
``metadata`` is not an object, that has no string ``name``, whose namespace or resourceVersion is not a
string, or whose event type is unknown is *skipped*: one ``watch.object_skipped`` log line, the
``bad_objects`` counter by reason, ``on_bad_object`` (the services turn it into a Prometheus counter) and,
with ``post_events`` and only when the object has a name, a Warning Event about it (from ``event_component`` on
``event_host``, when given: the agent names its node). A skipped event whose
metadata still carries a string resourceVersion advances :attr:`resource_version` (so a resume does not
replay it). A handler that raises on a well-formed object is contained the same way (reason
``handler_error``; the object is recorded as delivered).

The reflector remembers only each delivered object's identity (apiVersion, kind and the metadata
fields name, namespace, uid, resourceVersion), not the whole object: the handler owns whatever view it
needs, and 50,000 raw pods would otherwise hold about 1 GB. So a ``DELETED`` found by a relist carries
that identity only; a ``DELETED`` watch event carries the server's full object, as usual.

Not guaranteed: exactly-once delivery across a relist (an object deleted and recreated under the same
name during the gap shows up as one ``MODIFIED``); that a skipped object's earlier version leaves the
handler's view (a ``MODIFIED`` that is skipped leaves the previous version in place); Events are best
effort (one per object, reason and resourceVersion, at most ``_EVENT_MEMORY`` remembered).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from koordpy.kube.client import ApiClient
from koordpy.kube.errors import ApiError, Gone, NotFound
from koordpy.kube.reachability import Reachability
from koordpy.kube.resources import ResourceRef

__all__ = [
    "STABLE_STREAM_SECONDS",
    "BadObject",
    "Handler",
    "Reflector",
    "malformed_reason",
    "object_key",
    "run_reflectors",
    "wait_synced",
]

Handler = Callable[[str, dict[str, Any]], None]

log = logging.getLogger(__name__)

_SHORT_WATCH_SECONDS = 1.0
STABLE_STREAM_SECONDS = 2.0
"""A watch the API server accepted (HTTP 200) and that stays open this long ends a failure loop; one that
breaks sooner (a line it cannot decode, each time at the same point) does not."""
_EVENT_MEMORY = 512
_WATCH_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED"})


def object_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` for namespaced objects, ``name`` for cluster-scoped ones."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    name = str(meta.get("name") or "")
    return f"{ns}/{name}" if ns else name


def _rv(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _carried_rv(obj: object) -> str:
    """The resourceVersion an event carries, or "" when there is no string one (malformed objects too)."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    rv = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    return rv if isinstance(rv, str) else ""


def _name_of(obj: object) -> tuple[str | None, str | None]:
    """(namespace, name) when they are strings, best effort on a malformed object."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping):
        return None, None
    name, namespace = meta.get("name"), meta.get("namespace")
    return (namespace if isinstance(namespace, str) and namespace else None), (
        name if isinstance(name, str) and name else None
    )


def malformed_reason(obj: object) -> str | None:
    """Why ``obj`` cannot be delivered to a handler (a short reason for labels), or None when it can.

    Checks only what the reflector itself needs (an object with a string name, optional string
    namespace and resourceVersion); the handler validates the rest.
    """
    if not isinstance(obj, Mapping):
        return "not_an_object"
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return "bad_metadata"
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return "missing_name"
    if not isinstance(meta.get("namespace", ""), str | None):
        return "bad_namespace"
    if not isinstance(meta.get("resourceVersion", ""), str | None):
        return "bad_resource_version"
    return None


_IDENTITY = ("name", "namespace", "uid", "resourceVersion")


def _identity(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What a relist needs to diff against and to deliver as a ``DELETED`` tombstone."""
    meta = obj.get("metadata") or {}
    out: dict[str, Any] = {"metadata": {k: meta[k] for k in _IDENTITY if k in meta}}
    for field in ("apiVersion", "kind"):
        if field in obj:
            out[field] = obj[field]
    return out


@dataclass(frozen=True)
class BadObject:
    """One skipped (or handler-rejected) object, as reported to ``on_bad_object``."""

    resource: str
    """The resource's plural (``pods``)."""
    reason: str
    event_type: str
    """The watch event type, ``LIST`` for a list item."""
    namespace: str | None
    name: str | None
    detail: str


class Reflector:
    """Keeps ``handler`` in step with one resource (optionally one namespace / selector).

    Counters: ``restarts`` (watch streams opened after the first), ``relists`` (lists after the first),
    ``errors`` (failed list or watch attempts, 410 included), ``handler_errors``, ``bad_objects`` (by
    reason, handler errors included); ``resource_version`` is the last resourceVersion seen. ``synced``
    is set once the first full list was delivered and stays set (also across relists).

    ``sleep`` and ``monotonic`` are injected for tests (default: ``asyncio.sleep`` and ``time.monotonic``).
    """

    def __init__(
        self,
        client: ApiClient,
        resource: ResourceRef,
        handler: Handler,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        watch_timeout_seconds: int = 300,
        page_size: int = 500,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
        failure_threshold: int = 3,
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[Any]] | None = None,
        monotonic: Callable[[], float] | None = None,
        on_bad_object: Callable[[BadObject], None] | None = None,
        post_events: bool = False,
        event_component: str = "koordpy",
        event_host: str | None = None,
        optional: bool = False,
        wake_on_recovery: bool = True,
    ) -> None:
        self.client = client
        self.optional = optional
        """A resource the API server may not serve (a CRD another project installs): its absence (404 on the
        list) is logged once at info, looked for again every ``backoff_max`` seconds quietly, and is not a
        failure (:meth:`failing`); ``absent`` says whether it is absent now."""
        self.absent = False
        self.resource = resource
        self.handler = handler
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.watch_timeout_seconds = watch_timeout_seconds
        self.page_size = page_size
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.failure_threshold = failure_threshold
        self.on_bad_object = on_bad_object
        self.post_events = post_events
        self.event_component = event_component
        self.event_host = event_host
        self._rng = rng or random.Random()
        self._sleep = sleep or asyncio.sleep
        self._wake: Callable[[float], Awaitable[bool]] | None = None
        if sleep is None and wake_on_recovery:
            self._wake = Reachability.of(client).sleep
        self._monotonic = monotonic or time.monotonic
        self.synced = asyncio.Event()
        self.restarts = 0
        self.relists = 0
        self.errors = 0
        self.handler_errors = 0
        self.bad_objects: Counter[str] = Counter()
        self.consecutive_failures = 0
        """Failed list/watch attempts since the last healthy stream (see :meth:`failing`)."""
        self.delays: list[float] = []
        """The last backoff delays slept (at most 64), for tests and debugging."""
        self.wakeups = 0
        """Backoffs cut short because the API server answered again (:mod:`koordpy.kube.reachability`)."""
        self.resource_version = ""
        self.last_error: BaseException | None = None
        self.events_posted = 0
        self.event_errors = 0
        self._store: dict[str, dict[str, Any]] = {}
        self._lists = 0
        self._watches = 0
        self._events_seen = 0
        self._gone_streak = 0
        self._stream_since: float | None = None
        self._evented: OrderedDict[tuple[str, str, str], None] = OrderedDict()
        self._event_tasks: set[asyncio.Task[None]] = set()

    @property
    def name(self) -> str:
        scope = f" in {self.namespace}" if self.namespace else ""
        return f"{self.resource.qualified}{scope}"

    @property
    def known(self) -> Mapping[str, dict[str, Any]]:
        """The identity of the last delivered object per key (see the module docstring); read-only."""
        return self._store

    def _now(self) -> float:
        return self._monotonic()

    # -- health -----------------------------------------------------------------------------------

    def failing(self) -> bool:
        """True while the reflector is in a failure loop.

        That is: ``failure_threshold`` or more list/watch attempts failed in a row (410 Gone right after
        a relist included) without progress in between (a completed list, or a watch event that moved
        the resourceVersion), and the current watch stream, if any, has not been open (accepted by the
        server) for :data:`STABLE_STREAM_SECONDS`. A single dropped connection (an API server restart) is not a failure
        loop. Skipped objects are not failures: one poison object must not take a component out of
        service.
        """
        if self._stream_since is not None and self._now() - self._stream_since >= min(
            self.backoff_max, STABLE_STREAM_SECONDS
        ):
            return False
        return max(self.consecutive_failures, self._gone_streak) >= self.failure_threshold

    def not_ready(self) -> str | None:
        """Why this reflector's view cannot be trusted for decisions, or None when it can.

        Ready means: the first full list was delivered (``synced``) and the reflector is not in a
        failure loop (:meth:`failing`). Not guaranteed: freshness beyond that (a healthy stream can
        still lag the API server by the network's delay).
        """
        if not self.synced.is_set():
            return f"{self.resource.plural}: waiting for the first list"
        if self.failing():
            error = f": {type(self.last_error).__name__}" if self.last_error is not None else ""
            return f"{self.resource.plural}: {self.consecutive_failures} failed attempts in a row{error}"
        return None

    # -- bad objects ------------------------------------------------------------------------------

    def _bad(self, reason: str, etype: str, obj: object, detail: str) -> None:
        """Count, log and report one skipped or rejected object. Never raises."""
        try:
            self.bad_objects[reason] += 1
            namespace, name = _name_of(obj)
            label = f"{namespace}/{name}" if namespace else (name or "<unnamed>")
            log.warning(
                "watch.object_skipped resource=%s reason=%s type=%s object=%s detail=%s",
                self.resource.plural,
                reason,
                etype,
                label,
                detail[:300],
            )
            report = BadObject(self.resource.plural, reason, etype, namespace, name, detail[:300])
            if self.on_bad_object is not None:
                self.on_bad_object(report)
            if self.post_events and name is not None:
                self._post_event(report, obj)
        except Exception:  # reporting must never be what stops the stream
            log.exception("reflector %s: reporting a bad object failed", self.name)

    def _post_event(self, report: BadObject, obj: object) -> None:
        key = (f"{report.namespace}/{report.name}", report.reason, _carried_rv(obj))
        if key in self._evented:
            return
        self._evented[key] = None
        while len(self._evented) > _EVENT_MEMORY:
            self._evented.popitem(last=False)
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
        uid = meta.get("uid") if isinstance(meta, Mapping) else None
        involved: dict[str, Any] = {
            "apiVersion": self.resource.api_version,
            "kind": self.resource.kind,
            "metadata": {
                "name": report.name,
                **({"namespace": report.namespace} if report.namespace else {}),
                **({"uid": uid} if isinstance(uid, str) else {}),
            },
        }
        message = f"{self.event_component} ignored this {self.resource.kind} ({report.reason}): {report.detail}"

        async def post() -> None:
            try:
                await self.client.create_event(
                    involved,
                    reason="MalformedObjectIgnored",
                    message=message,
                    event_type="Warning",
                    component=self.event_component,
                    host=self.event_host,
                )
                self.events_posted += 1
            except Exception as exc:
                self.event_errors += 1
                log.info("reflector %s: Event not posted: %s", self.name, exc)

        task = asyncio.get_running_loop().create_task(post())
        self._event_tasks.add(task)
        task.add_done_callback(self._event_tasks.discard)

    def report_rejected(self, etype: str, obj: Mapping[str, Any], reason: str, detail: str) -> None:
        """For a handler that refuses a well-formed object without raising (a value it cannot convert):
        counted in ``bad_objects`` under ``reason``, logged and, with ``post_events``, an Event. Never raises."""
        self._bad(reason, etype, obj, detail)

    # -- delivery ---------------------------------------------------------------------------------

    def _deliver(self, etype: str, obj: dict[str, Any]) -> None:
        try:
            self.handler(etype, obj)
        except Exception as exc:
            self.handler_errors += 1
            log.debug("reflector %s: handler failed on %s %s", self.name, etype, object_key(obj), exc_info=True)
            self._bad("handler_error", etype, obj, f"{type(exc).__name__}: {exc}")

    def _apply_event(self, etype: str, obj: dict[str, Any]) -> None:
        """Apply one watch event; a malformed one is skipped (see the module docstring). Never raises."""
        try:
            if etype not in _WATCH_TYPES:
                self._bad("unknown_type", str(etype)[:40], obj, f"event type {str(etype)[:40]!r}")
                return
            reason = malformed_reason(obj)
            if reason is not None:
                self._bad(reason, etype, obj, f"{reason.replace('_', ' ')} in a watch event")
                return
            key = object_key(obj)
            if etype == "DELETED":
                self._store.pop(key, None)
                self._deliver("DELETED", obj)
                return
            previous = self._store.get(key)
            rv = _rv(obj)
            if previous is not None and rv and _rv(previous) == rv:
                return  # the same version again (a replay after a resume); already delivered
            self._store[key] = _identity(obj)
            self._deliver(etype if previous is None or etype != "ADDED" else "MODIFIED", obj)
        except Exception as exc:  # a bug of ours on odd input: count it, keep the stream
            self._bad("internal_error", str(etype)[:40], obj, f"{type(exc).__name__}: {exc}")

    def _apply_list(self, items: Iterable[Any]) -> None:
        fresh: dict[str, dict[str, Any]] = {}
        for item in items:
            reason = malformed_reason(item)
            if reason is not None:
                self._bad(reason, "LIST", item, f"{reason.replace('_', ' ')} in a list item")
                continue
            fresh[object_key(item)] = item
        old = self._store
        self._store = {}
        for key, obj in fresh.items():
            prev = old.get(key)
            self._store[key] = _identity(obj)
            if prev is None:
                self._deliver("ADDED", obj)
            elif _rv(prev) != _rv(obj) or not _rv(obj):
                self._deliver("MODIFIED", obj)
        for key, prev in old.items():
            if key not in fresh:
                self._deliver("DELETED", prev)

    # -- the loop ---------------------------------------------------------------------------------

    async def _list(self) -> None:
        result = await self.client.list(
            self.resource,
            namespace=self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            page_size=self.page_size,
        )
        if self._lists:
            self.relists += 1
        self._lists += 1
        self._apply_list(result.items)
        self.resource_version = result.resource_version
        self.consecutive_failures = 0
        self.synced.set()

    async def _watch(self) -> int:
        """Watch until the server ends the stream; return how many events (bookmarks included) arrived."""
        if self._watches:
            self.restarts += 1
        self._watches += 1
        received = 0
        started = self._now()
        self._stream_since = None

        def opened() -> None:
            self._stream_since = self._now()

        try:
            async for etype, obj in self.client.watch(
                self.resource,
                namespace=self.namespace,
                label_selector=self.label_selector,
                field_selector=self.field_selector,
                resource_version=self.resource_version,
                timeout_seconds=self.watch_timeout_seconds,
                allow_bookmarks=True,
                on_open=opened,
            ):
                received += 1
                self._events_seen += 1
                if etype == "BOOKMARK":
                    if not _carried_rv(obj):
                        self._bad("bad_bookmark", etype, obj, "bookmark without a string resourceVersion")
                else:
                    self._apply_event(etype, obj)
                rv = _carried_rv(obj)
                if rv and rv != self.resource_version:  # progress: whatever failed before works again
                    self.resource_version = rv
                    self.consecutive_failures = 0
        finally:
            lasted = self._now() - started
            self._stream_since = None
            if lasted >= self.backoff_max:  # a long healthy stream ends any failure streak
                self.consecutive_failures = 0
        return received

    def _delay(self, attempt: int) -> float:
        base = min(float(self.backoff_max), self.backoff_initial * float(2 ** min(attempt, 30)))
        return base * (0.5 + 0.5 * self._rng.random())

    async def _back_off(self, attempt: int, delay: float | None = None) -> bool:
        """Sleep the backoff delay; True when the API server came back meanwhile (:mod:`reachability`): the
        caller then retries at once and starts its backoff again from the initial delay."""
        delay = self._delay(attempt) if delay is None else delay
        self.delays = [*self.delays[-63:], delay]
        if self._wake is not None:
            woken = await self._wake(delay)
            if woken:
                self.wakeups += 1
            return woken
        await self._sleep(delay)
        return False

    async def _absent(self, exc: NotFound) -> None:
        if not self.absent:
            log.info(
                "reflector %s: not served by this API server (%s); looking again every %.0fs",
                self.name,
                exc,
                self.backoff_max,
            )
        self.absent = True
        self.consecutive_failures = 0
        await self._back_off(0, self.backoff_max)

    async def run(self) -> None:
        """Run until cancelled. Never returns normally; never raises except CancelledError.

        Backoff grows with consecutive failures and resets when a watch ends normally or once an attempt
        made progress (the resourceVersion moved): a stream that fails at the same point each time
        (events replayed up to an undecodable line) must not reconnect hot. A 410 right after a fresh
        list backs off too instead of relisting hot.
        """
        need_list = True
        attempt = 0
        while True:
            seen = self._events_seen
            rv_before = self.resource_version
            try:
                if need_list:
                    await self._list()
                    need_list = False
                    if self.absent:
                        self.absent = False
                        log.info("reflector %s: now served by the API server", self.name)
                started = self._now()
                received = await self._watch()
                if received == 0 and self._now() - started < _SHORT_WATCH_SECONDS:
                    # an empty stream that ended at once (a proxy or a broken server): do not spin on it
                    self.consecutive_failures += 1
                    attempt = 0 if await self._back_off(attempt) else attempt + 1
                else:
                    attempt = self._gone_streak = self.consecutive_failures = 0
            except asyncio.CancelledError:
                raise
            except Gone as exc:
                self.errors += 1
                self.last_error = exc
                if self._events_seen != seen:  # the stream delivered, then expired: normal compaction
                    attempt = self._gone_streak = 0
                log.info("reflector %s: resourceVersion %s gone, relisting", self.name, self.resource_version)
                if need_list or self._gone_streak:  # 410 from the list itself, or again right after a relist
                    attempt = 0 if await self._back_off(attempt) else attempt + 1
                self._gone_streak += 1
                need_list = True
            except Exception as exc:  # keep watching whatever went wrong; the counters tell
                if self.optional and need_list and isinstance(exc, NotFound):
                    await self._absent(exc)
                    continue
                self.errors += 1
                self.last_error = exc
                if self.resource_version != rv_before:
                    attempt = 0  # this attempt made progress: start again from the initial delay
                self.consecutive_failures += 1
                delay = self._delay(attempt)
                if isinstance(exc, ApiError):
                    log.warning("reflector %s: %s; retrying in %.2fs", self.name, exc, delay)
                else:
                    log.exception("reflector %s: unexpected failure; retrying in %.2fs", self.name, delay)
                attempt = 0 if await self._back_off(attempt, delay) else attempt + 1


async def wait_synced(reflectors: Iterable[Reflector], timeout: float | None = None) -> None:
    """Wait until every reflector delivered its first list (raises TimeoutError after ``timeout``)."""
    async with asyncio.timeout(timeout):
        for reflector in reflectors:
            await reflector.synced.wait()


async def run_reflectors(reflectors: Iterable[Reflector]) -> None:
    """Run several reflectors until cancelled (cancelling this cancels them all)."""
    async with asyncio.TaskGroup() as group:
        for reflector in reflectors:
            group.create_task(reflector.run(), name=f"reflector {reflector.name}")
