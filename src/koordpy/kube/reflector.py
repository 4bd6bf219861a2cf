"""List+watch one resource into a synchronous handler, the way client-go's reflector does.

``Reflector.run()`` lists (chunked), delivers ``ADDED`` for every object, sets ``synced``, then watches
from the list's resourceVersion. A watch that ends normally (server ``timeoutSeconds``) is resumed from
the last resourceVersion seen, bookmarks included. A 410 Gone (HTTP or watch ``ERROR`` event) triggers
a relist whose result is diffed against what was delivered before: ``DELETED`` for objects that vanished
during the gap, ``MODIFIED`` for changed ones (different resourceVersion), ``ADDED`` for new ones. Other
errors back off exponentially with jitter and retry the step that failed (the list, or the watch from
the last resourceVersion).

The reflector remembers only each delivered object's identity (apiVersion, kind and the metadata
fields name, namespace, uid, resourceVersion), not the whole object: the handler owns whatever view it
needs, and 50,000 raw pods would otherwise hold about 1 GB. So a ``DELETED`` found by a relist carries
that identity only; a ``DELETED`` watch event carries the server's full object, as usual.

Not guaranteed: exactly-once delivery across a relist (an object deleted and recreated under the same
name during the gap shows up as one ``MODIFIED``); handler exceptions are logged and counted in
``handler_errors`` but do not stop the reflector (the object is recorded as delivered anyway).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from koordpy.kube.client import ApiClient
from koordpy.kube.errors import ApiError, Gone
from koordpy.kube.resources import ResourceRef

__all__ = ["Handler", "Reflector", "object_key", "run_reflectors", "wait_synced"]

Handler = Callable[[str, dict[str, Any]], None]

log = logging.getLogger(__name__)

_SHORT_WATCH_SECONDS = 1.0


def object_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` for namespaced objects, ``name`` for cluster-scoped ones."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    name = str(meta.get("name") or "")
    return f"{ns}/{name}" if ns else name


def _rv(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


_IDENTITY = ("name", "namespace", "uid", "resourceVersion")


def _identity(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What a relist needs to diff against and to deliver as a ``DELETED`` tombstone."""
    meta = obj.get("metadata") or {}
    out: dict[str, Any] = {"metadata": {k: meta[k] for k in _IDENTITY if k in meta}}
    for field in ("apiVersion", "kind"):
        if field in obj:
            out[field] = obj[field]
    return out


class Reflector:
    """Keeps ``handler`` in step with one resource (optionally one namespace / selector).

    Counters: ``restarts`` (watch streams opened after the first), ``relists`` (lists after the first),
    ``errors`` (failed list or watch attempts, 410 included), ``handler_errors``; ``resource_version``
    is the last resourceVersion seen. ``synced`` is set once the first full list was delivered and
    stays set (also across relists).
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
        rng: random.Random | None = None,
    ) -> None:
        self.client = client
        self.resource = resource
        self.handler = handler
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.watch_timeout_seconds = watch_timeout_seconds
        self.page_size = page_size
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self._rng = rng or random.Random()
        self.synced = asyncio.Event()
        self.restarts = 0
        self.relists = 0
        self.errors = 0
        self.handler_errors = 0
        self.resource_version = ""
        self.last_error: BaseException | None = None
        self._store: dict[str, dict[str, Any]] = {}
        self._lists = 0
        self._watches = 0
        self._events_seen = 0

    @property
    def name(self) -> str:
        scope = f" in {self.namespace}" if self.namespace else ""
        return f"{self.resource.qualified}{scope}"

    @property
    def known(self) -> Mapping[str, dict[str, Any]]:
        """The identity of the last delivered object per key (see the module docstring); read-only."""
        return self._store

    # -- delivery ---------------------------------------------------------------------------------

    def _deliver(self, etype: str, obj: dict[str, Any]) -> None:
        try:
            self.handler(etype, obj)
        except Exception:
            self.handler_errors += 1
            log.exception("reflector %s: handler failed on %s %s", self.name, etype, object_key(obj))

    def _apply_event(self, etype: str, obj: dict[str, Any]) -> None:
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

    def _apply_list(self, items: Iterable[dict[str, Any]]) -> None:
        fresh: dict[str, dict[str, Any]] = {}
        for item in items:
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
        self.synced.set()

    async def _watch(self) -> int:
        """Watch until the server ends the stream; return how many events (bookmarks included) arrived."""
        if self._watches:
            self.restarts += 1
        self._watches += 1
        received = 0
        async for etype, obj in self.client.watch(
            self.resource,
            namespace=self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            resource_version=self.resource_version,
            timeout_seconds=self.watch_timeout_seconds,
            allow_bookmarks=True,
        ):
            received += 1
            self._events_seen += 1
            rv = _rv(obj)
            if etype != "BOOKMARK":
                self._apply_event(etype, obj)
            if rv:
                self.resource_version = rv
        return received

    def _delay(self, attempt: int) -> float:
        base = min(float(self.backoff_max), self.backoff_initial * float(2 ** min(attempt, 30)))
        return base * (0.5 + 0.5 * self._rng.random())

    async def run(self) -> None:
        """Run until cancelled. Never returns normally; never raises except CancelledError.

        Backoff grows with consecutive failures and resets once a watch delivers something. A 410 right
        after a fresh list (a server that keeps expiring versions) backs off too instead of relisting hot.
        """
        need_list = True
        attempt = 0
        gone_streak = 0
        loop = asyncio.get_running_loop()
        while True:
            seen = self._events_seen
            try:
                if need_list:
                    await self._list()
                    need_list = False
                started = loop.time()
                received = await self._watch()
                if received == 0 and loop.time() - started < _SHORT_WATCH_SECONDS:
                    # an empty stream that ended at once (a proxy or a broken server): do not spin on it
                    await asyncio.sleep(self._delay(attempt))
                    attempt += 1
                else:
                    attempt = gone_streak = 0
            except asyncio.CancelledError:
                raise
            except Gone as exc:
                self.errors += 1
                self.last_error = exc
                if self._events_seen != seen:
                    attempt = gone_streak = 0
                log.info("reflector %s: resourceVersion %s gone, relisting", self.name, self.resource_version)
                if need_list or gone_streak:  # 410 from the list itself, or again right after a relist
                    await asyncio.sleep(self._delay(attempt))
                    attempt += 1
                gone_streak += 1
                need_list = True
            except Exception as exc:  # keep watching whatever went wrong; the counters tell
                self.errors += 1
                self.last_error = exc
                if self._events_seen != seen:
                    attempt = 0
                delay = self._delay(attempt)
                attempt += 1
                if isinstance(exc, ApiError):
                    log.warning("reflector %s: %s; retrying in %.2fs", self.name, exc, delay)
                else:
                    log.exception("reflector %s: unexpected failure; retrying in %.2fs", self.name, delay)
                await asyncio.sleep(delay)


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
