"""The agent process: collect, decide (the pure policy), act, report; plus /healthz, /readyz, /metrics.

One tick every ``collectIntervalSeconds``: read cgroups and procfs, join pods by UID, call
:func:`koordpy.agent.policy.plan`, apply throttles/restores through the one cgroup writer, start
evictions in the background (429 is retried by the evictor; a refusal makes the policy forget the
pod so it can be picked again), emit Events, persist the policy state. The NodeMetric is written
every report interval of its ``spec.metricCollectPolicy``.

Policies: NodeQOSEnsurancePolicy and Crane v0.8+ NodeQOS (converted, PodQOS-scoped), PodQOS and
AvoidanceAction are watched. Whenever one of them changes, the object warnings
(:func:`koordpy.agent.policy.objectcheck.qos_warnings`) are recomputed; each new one is logged and
recorded as a Warning Event on the object it names. An object that does not validate is not used;
it gets a ``SkippedByAgent`` Warning Event (``_on_crd``).

On start, throttled pods remembered in the state directory are re-adopted when both the policy
state and the cgroup writer know them and the cgroup still exists; every other remembered cap is
restored, so no quota is orphaned.

Not guaranteed: Events are best effort (an API error is counted, not retried) and de-duplicated
per (reason, object, message) for 5 minutes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from koordpy.agent.actuators.cgroup import ActuatorError, CgroupWriter
from koordpy.agent.actuators.evictor import Evictor, EvictOutcome
from koordpy.agent.policy import ActionKind, AgentState, NodeSample, Plan, PlanOptions, PodSample, forget, plan
from koordpy.agent.policy.objectcheck import PolicyWarning, qos_warnings
from koordpy.agent.policy.report import CollectPolicy, UsageHistory, nodemetric_status
from koordpy.agent.policy.types import check_pod
from koordpy.agent.pressure import PressureMetrics, node_pressure, pod_pressure
from koordpy.agent.reporter import NodeMetricReporter
from koordpy.agent.sources.cgroups import CgroupReader, ContainerUsage, PodUsage
from koordpy.agent.sources.procfs import ProcReader
from koordpy.config.agent import AgentConfiguration
from koordpy.config.errors import ConfigError, validate
from koordpy.crds.ensurance import AvoidanceAction, NodeQOS, NodeQOSEnsurancePolicy, PodQOS
from koordpy.descheduler.repeats import CAUSE_AGENT_EVICTION, EVENT_REASON, evicted_after_placement
from koordpy.kube import errors, resources
from koordpy.kube.client import ApiClient
from koordpy.kube.credentials import CredentialsWatch, pod_from_env, register_credentials_metrics
from koordpy.kube.reflector import Reflector
from koordpy.kube.watchmetrics import register_reflector_metrics
from koordpy.model.objects import ObjectError, PodInfo, node_from_dict, pod_from_dict
from koordpy.runtime.listeners import ListenerLimits, aiohttp_handler_args

__all__ = ["Agent", "AgentMetrics", "Collector"]

log = logging.getLogger("koordpy.agent")
EVENT_DEDUP_SECONDS = 300.0


def _meta(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """``metadata`` of a raw object, or empty when it is missing or not an object."""
    meta = raw.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


class AgentMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.ticks = Counter("koordpy_agent_ticks_total", "Collection + decision ticks.", registry=r)
        self.tick_seconds = Histogram(
            "koordpy_agent_tick_seconds",
            "Wall time of the collection + decision part of a tick.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
            registry=r,
        )
        self.actions = Counter("koordpy_agent_actions_total", "Planned actions by kind.", ["kind"], registry=r)
        self.events = Counter("koordpy_agent_policy_events_total", "Policy events by reason.", ["reason"], registry=r)
        self.evictions = Counter("koordpy_agent_evictions_total", "Eviction outcomes.", ["outcome"], registry=r)
        self.actuator_errors = Counter("koordpy_agent_actuator_errors_total", "Failed cgroup writes.", registry=r)
        self.throttled = Gauge("koordpy_agent_throttled_pods", "Pods under an agent-set CPU cap.", registry=r)
        self.evicting = Gauge("koordpy_agent_evicting_pods", "Evictions in flight.", registry=r)
        self.gap = Gauge("koordpy_agent_gap", "Open gap per action kind and metric.", ["kind", "metric"], registry=r)
        self.reports = Counter(
            "koordpy_agent_nodemetric_reports_total", "NodeMetric writes by result.", ["result"], registry=r
        )
        self.superseded = Counter(
            "koordpy_agent_restores_superseded_total",
            "Restores not written because someone else (the kubelet resizing the pod) changed the CPU quota "
            "after the agent's last write; their value stays.",
            registry=r,
        )
        self.skipped = Counter(
            "koordpy_agent_skipped_objects_total",
            "Watched objects the agent cannot use (malformed or out of range), by kind; each is logged with an Event.",
            ["kind"],
            registry=r,
        )
        # zero series from the start: the first action, eviction or failed report counts in increase()
        for kind in ActionKind:
            self.actions.labels(str(kind))
        for outcome in EvictOutcome:
            self.evictions.labels(str(outcome))
        for result in ("ok", "error"):
            self.reports.labels(result)
        self.repeats = Counter(
            "koordpy_descheduler_repeat_moves_total",
            "Repeat moves this agent made: evictions of pods placed on its node less than "
            "qos.repeatMoveWindowSeconds before (cause agent_eviction; the manager counts cause moved_again).",
            ["cause"],
            registry=r,
        )
        self.repeats.labels(CAUSE_AGENT_EVICTION)


@dataclass
class Collector:
    """Cgroups + procfs -> the policy's samples, and the usage history for the NodeMetric."""

    cgroups: CgroupReader
    proc: ProcReader
    node_name: str

    def collect(
        self,
        wall: float,
        mono: float,
        pods: Sequence[PodInfo],
        labels: Mapping[str, str],
        history: UsageHistory | None,
        *,
        containers: bool = False,
    ) -> tuple[NodeSample, list[PodSample], dict[str, PodUsage]]:
        """One sample of the node and its pods; per-container usage only when ``containers``."""
        cgroups = self.cgroups.pods(containers=containers and self.cgroups.collect_containers)
        usage: dict[str, PodUsage] = self.cgroups.collect(mono, cgroups)
        reading = self.proc.read()
        node = NodeSample(
            self.node_name, wall, reading.cpu, reading.cpu_capacity, reading.memory, reading.memory_capacity, labels
        )
        samples: list[PodSample] = []
        for pod in pods:
            found = usage.get(pod.uid)
            limit = pod.limits.get("cpu")
            cpu = found.cpu if found is not None else None
            memory = found.memory if found is not None else None
            samples.append(PodSample(pod, cpu, memory, limit / 1000 if limit else None))
            if history is not None:
                history.add_pod(pod.uid, wall, cpu, memory)
        if history is not None:
            history.add_node(wall, reading.cpu, reading.memory)
        return node, samples, usage


class Agent:
    def __init__(
        self,
        cfg: AgentConfiguration,
        node: str,
        client: ApiClient,
        *,
        cgroup_root: str = "/sys/fs/cgroup",
        proc_root: str = "/proc",
        wall: Callable[[], float] = time.time,
        mono: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cfg = cfg
        self.node = node
        self.client = client
        self.wall = wall
        self.mono = mono
        reader = CgroupReader(cgroup_root, collect_containers=cfg.collect_containers)
        self.collector = Collector(reader, ProcReader(proc_root), node)
        os.makedirs(cfg.state_dir, exist_ok=True)
        self.state_path = os.path.join(cfg.state_dir, "policy-state.json")
        self.writer = self._writer(cgroup_root, reader.version, os.path.join(cfg.state_dir, "throttle-originals.json"))
        self.evictor = Evictor(client, retries=cfg.qos.eviction_retries)
        nm = cfg.node_metric
        self.reporter = NodeMetricReporter(
            client,
            node,
            CollectPolicy(
                float(nm.report_interval_seconds),
                float(nm.aggregate_duration_seconds),
                tuple(float(d) for d in nm.aggregation_durations_seconds),
            ),
        )
        self.history = UsageHistory(horizon=max((*nm.aggregation_durations_seconds, nm.aggregate_duration_seconds)))
        self.options = PlanOptions(
            protected_namespaces=frozenset(cfg.qos.protected_namespaces),
            protected_priority_above=cfg.qos.protected_priority_above,
            eviction_timeout=cfg.qos.eviction_timeout_seconds,
            max_sample_gap=cfg.sample_gap,
        )
        self.metrics = AgentMetrics()
        self.credentials = client.connection.credentials
        register_credentials_metrics(self.metrics.registry, self.credentials)
        self.credentials_watch = CredentialsWatch(
            self.credentials,
            cfg.credentials.refused_not_ready_seconds,
            "koordpy-agent",
            post_event=client.create_event,
            pod=pod_from_env(),
        )
        self.state = self._load_state()
        self.pods: dict[str, PodInfo] = {}
        self.raw_pods: dict[str, dict[str, Any]] = {}
        self.policies: dict[str, NodeQOSEnsurancePolicy] = {}
        self.actions: dict[str, AvoidanceAction] = {}
        self.node_qos: dict[str, NodeQOS] = {}
        self.node_qos_policies: dict[str, NodeQOSEnsurancePolicy] = {}  # node_qos converted once, for plan()
        self.pod_qos: dict[str, PodQOS] = {}
        self.qos_raw: dict[tuple[str, str], dict[str, Any]] = {}  # (kind, name) -> object, for Events
        self.qos_warnings: set[PolicyWarning] = set()
        self._qos_changed = False
        self.node_labels: dict[str, str] = {}
        self.last_plan: Plan | None = None
        self.last_tick: float | None = None
        self.ready = False
        self._failed: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._event_seen: dict[tuple[str, str, str], float] = {}
        """(reason, object, message) → when that Event was last posted; entries older than
        ``EVENT_DEDUP_SECONDS`` are dropped (at most once per that period), pods and messages come and go."""
        self._event_pruned_at = mono()
        self._last_report = -float("inf")
        self._ticks = 0
        # Per-container usage is read once per report interval (pods every tick): it is not on the
        # decision path and would triple the per-tick file reads.
        self._container_every = max(1, round(nm.report_interval_seconds / cfg.collect_interval_seconds))
        self.containers: dict[str, tuple[ContainerUsage, ...]] = {}

        def watch(resource: resources.ResourceRef, handler: Any, field_selector: str | None = None) -> Reflector:
            return Reflector(
                client,
                resource,
                handler,
                field_selector=field_selector,
                post_events=True,
                event_component="koordpy-agent",
                event_host=node,
            )

        self._pod_watch = watch(resources.PODS, self._on_pod, f"spec.nodeName={node}")
        self.reflectors = [self._pod_watch, watch(resources.NODES, self._on_node, f"metadata.name={node}")]
        if cfg.qos.enabled:
            self.reflectors += [
                watch(resources.NODEQOSENSURANCEPOLICIES, self._on_policy),
                watch(resources.NODEQOSS, self._on_node_qos),
                watch(resources.PODQOSS, self._on_pod_qos),
                watch(resources.AVOIDANCEACTIONS, self._on_action),
            ]
        register_reflector_metrics(self.metrics.registry, "koordpy_agent", lambda: self.reflectors)
        self.pod_cgroups: dict[str, str] = {}  # pod uid -> cgroup path found by the last tick
        self.metrics.registry.register(
            PressureMetrics(
                lambda: node_pressure(self.collector.proc),
                lambda: pod_pressure(self.collector.cgroups, self.pods, self.pod_cgroups),
            )
        )

    # -- watch handlers ------------------------------------------------------------------------
    def _on_pod(self, etype: str, raw: dict[str, Any]) -> None:
        uid = str(_meta(raw).get("uid") or "")
        if etype == "DELETED":
            self.pods.pop(uid, None)
            self.raw_pods.pop(uid, None)
            return
        try:
            info = pod_from_dict(raw)
            check_pod(info)
        except ValueError as exc:
            self.pods.pop(uid, None)
            self.raw_pods.pop(uid, None)
            self._skip("Pod", raw, str(exc))
            return
        self.pods[info.uid] = info
        self.raw_pods[info.uid] = raw

    def _on_node(self, etype: str, raw: dict[str, Any]) -> None:
        if etype != "DELETED":
            with contextlib.suppress(ObjectError):
                self.node_labels = dict(node_from_dict(raw).labels)

    def _on_policy(self, etype: str, raw: dict[str, Any]) -> None:
        self._on_qos_object(etype, raw, self.policies, NodeQOSEnsurancePolicy)

    def _on_node_qos(self, etype: str, raw: dict[str, Any]) -> None:
        self._on_qos_object(etype, raw, self.node_qos, NodeQOS)
        name = str((raw.get("metadata") or {}).get("name") or "")
        current = self.node_qos.get(name)
        if current is None:
            self.node_qos_policies.pop(name, None)
        else:
            self.node_qos_policies[name] = current.to_policy()

    def _on_pod_qos(self, etype: str, raw: dict[str, Any]) -> None:
        self._on_qos_object(etype, raw, self.pod_qos, PodQOS)

    def _on_action(self, etype: str, raw: dict[str, Any]) -> None:
        self._on_qos_object(etype, raw, self.actions, AvoidanceAction)

    def _on_qos_object(self, etype: str, raw: dict[str, Any], into: dict[str, Any], model: Any) -> None:
        """Keep the raw object (Events about it need its identity) and recheck the warnings next tick."""
        key = (str(raw.get("kind") or model.__name__), str((raw.get("metadata") or {}).get("name") or ""))
        if etype == "DELETED":
            self.qos_raw.pop(key, None)
        else:
            self.qos_raw[key] = raw
        self._qos_changed = True
        self._on_crd(etype, raw, into, model)

    def check_qos_objects(self) -> list[PolicyWarning]:
        """Warnings that are new since the last check: logged and recorded as Events on their objects."""
        if not self._qos_changed:
            return []
        self._qos_changed = False
        current = qos_warnings(
            [*self.policies.values(), *self.node_qos.values()],
            self.actions,
            list(self.pod_qos.values()),
            metrics=self.options.metrics,
        )
        new = [w for w in current if w not in self.qos_warnings]
        self.qos_warnings = set(current)
        for warning in new:
            log.warning("%s", warning.text)
            raw = self.qos_raw.get((warning.kind, warning.name))
            if raw is not None:
                self._spawn(self._emit_on(raw, warning.reason, warning.message))
        return new

    def _on_crd(self, etype: str, raw: dict[str, Any], into: dict[str, Any], model: Any) -> None:
        name = str(_meta(raw).get("name") or "")
        if etype == "DELETED":
            into.pop(name, None)
            return
        try:
            into[name] = validate(model, raw)
        except ConfigError as exc:  # every problem with its field path
            into.pop(name, None)
            detail = "; ".join(f"{path}: {message}" for path, message in exc.problems)
            self._skip(str(raw.get("kind") or model.__name__), raw, detail)
        except ValueError as exc:
            into.pop(name, None)
            self._skip(str(raw.get("kind") or model.__name__), raw, str(exc))

    def _skip(self, kind: str, raw: dict[str, Any], problem: str) -> None:
        """A watched object the agent cannot use: log, count and report it on the object; the ticks go on."""
        meta = _meta(raw)
        key = "/".join(str(p) for p in (meta.get("namespace"), meta.get("name")) if p) or "<unnamed>"
        text = " ".join(problem.split())[:900]
        log.warning("%s %s skipped: %s", kind, key, text)
        self.metrics.skipped.labels(kind).inc()
        if meta.get("name"):
            with contextlib.suppress(RuntimeError):  # no running loop: called outside the agent (tests)
                self._spawn(
                    self._emit("SkippedByAgent", f"koordpy-agent cannot use this object: {text}", True, "", raw)
                )

    @staticmethod
    def _writer(root: str, version: int, path: str) -> CgroupWriter:
        """The cgroup writer; an unreadable originals file is moved aside (and logged) instead of crash-looping."""
        try:
            return CgroupWriter(root, version, path)
        except ActuatorError as exc:
            aside = f"{path}.corrupt-{int(time.time())}"
            log.error("%s; moved to %s: caps it listed can no longer be restored automatically", exc, aside)
            os.replace(path, aside)
            return CgroupWriter(root, version, path)

    # -- state ---------------------------------------------------------------------------------
    def _load_state(self) -> AgentState:
        try:
            with open(self.state_path, encoding="utf-8") as fh:
                return AgentState.from_dict(json.load(fh))
        except FileNotFoundError:
            return AgentState()
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("policy state %s unreadable (%s): starting fresh", self.state_path, exc)
            return AgentState()

    def _save_state(self) -> None:
        tmp = f"{self.state_path}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(self.state.to_dict(), fh, sort_keys=True)
        os.replace(tmp, self.state_path)

    def reconcile_throttles(self) -> list[str]:
        """Re-adopt caps both the policy state and the writer remember; restore every other one."""
        adopt = [uid for uid in self.state.throttled if uid in self.writer.originals]
        restored = self.writer.reconcile(adopt)
        unknown = [uid for uid in self.state.throttled if uid not in self.writer.originals]
        if unknown:
            self.state = forget(self.state, unknown, throttles=True)
        self._save_state()
        return restored

    # -- one tick ------------------------------------------------------------------------------
    def decide(self) -> tuple[Plan, dict[str, PodUsage]]:
        """Collect and plan (no side effects besides reading the node): what the benchmark measures."""
        now = self.wall()
        if self._failed:
            self.state = forget(self.state, self._failed)
            self._failed.clear()
        pods = [p for p in self.pods.values() if not p.terminated]
        self._ticks += 1
        containers = self._ticks % self._container_every == 0
        node, samples, usage = self.collector.collect(
            now, self.mono(), pods, self.node_labels, self.history, containers=containers
        )
        if containers:
            self.containers = {uid: u.containers for uid, u in usage.items()}
        self.pod_cgroups = {uid: u.rel for uid, u in usage.items()}
        policies = [*self.policies.values(), *self.node_qos_policies.values()]
        result = plan(
            policies if self.cfg.qos.enabled else [],
            self.actions,
            node,
            samples,
            self.state,
            now=now,
            options=self.options,
            pod_qos=list(self.pod_qos.values()),
        )
        return result, usage

    async def tick(self) -> Plan:
        self.check_qos_objects()
        started = time.perf_counter()
        result, cgroups = self.decide()
        self.metrics.tick_seconds.observe(time.perf_counter() - started)
        self.metrics.ticks.inc()
        self.state = result.state
        superseded = self.writer.superseded
        failed = self._apply_cgroups(result, cgroups)
        if failed:
            self.state = forget(self.state, failed, throttles=True)
        self._restore_unowned()
        self.metrics.superseded.inc(self.writer.superseded - superseded)
        for action in result.actions:
            self.metrics.actions.labels(str(action.kind)).inc()
            if action.kind is ActionKind.EVICT:
                self._spawn(self._evict(action.pod, action.uid, action.grace_seconds, self.pods.get(action.uid)))
        for event in result.events:
            self.metrics.events.labels(event.reason).inc()
            self._spawn(self._emit(event.reason, event.message, event.warning, event.pod))
        for kind, gaps in result.gaps.items():
            for metric, gap in gaps.items():
                self.metrics.gap.labels(kind, metric).set(gap)
        self.metrics.throttled.set(len(self.state.throttled))
        self.metrics.evicting.set(len(self.state.evicting))
        self._save_state()
        self.last_plan = result
        self.last_tick = self.mono()
        self.history.prune(self.wall(), self.pods)
        return result

    def _restore_unowned(self) -> None:
        """Safety net: a cap the writer holds but the policy no longer tracks (pod gone, failed step) goes back."""
        for uid in [u for u in self.writer.originals if u not in self.state.throttled]:
            try:
                self.writer.restore(uid)
            except ActuatorError as exc:
                log.warning("restoring unowned cap of %s failed: %s", uid, exc)
                self.metrics.actuator_errors.inc()

    def _apply_cgroups(self, result: Plan, cgroups: Mapping[str, PodUsage]) -> list[str]:
        failed: list[str] = []
        for action in result.actions:
            if action.kind is ActionKind.EVICT:
                continue
            try:
                if action.kind is ActionKind.RESTORE and (action.restore_original or action.cpu_cap is None):
                    self.writer.restore(action.uid)
                    continue
                cg = cgroups.get(action.uid)
                if cg is None or action.cpu_cap is None:
                    raise ActuatorError(f"pod {action.pod}: no cgroup found")
                self.writer.set_cap(action.uid, cg.rel, action.cpu_cap)
            except ActuatorError as exc:
                log.warning("%s %s failed: %s", action.kind, action.pod, exc)
                self.metrics.actuator_errors.inc()
                if action.kind is ActionKind.THROTTLE:
                    failed.append(action.uid)
        return failed

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _evict(self, key: str, uid: str, grace: int | None, pod: PodInfo | None = None) -> None:
        """Evict pod ``key``; ``pod`` is its view when the eviction was decided (when it was placed, its
        controller): an eviction soon after placement is a repeat move (:mod:`koordpy.descheduler.repeats`)."""
        namespace, _, name = key.partition("/")
        outcome, detail = await self.evictor.evict(namespace, name, uid, grace)
        self.metrics.evictions.labels(str(outcome)).inc()
        if outcome in (EvictOutcome.REFUSED, EvictOutcome.FAILED):
            self._failed.add(uid)
            await self._emit("EvictionRefused", f"eviction not accepted: {detail}", True, key)
        elif outcome is EvictOutcome.EVICTED:
            await self._emit("Evicted", "evicted by waterline QoS", False, key)
            if pod is not None:
                await self._repeat(pod)

    async def _repeat(self, pod: PodInfo) -> None:
        """Count an eviction of a pod placed less than the window ago, and tell its controller."""
        placed = pod.scheduled_time if pod.scheduled_time is not None else pod.creation_time
        window = self.cfg.qos.repeat_move_window_seconds
        now = self.wall()
        if not evicted_after_placement(placed, now, window):
            return
        assert placed is not None
        self.metrics.repeats.labels(CAUSE_AGENT_EVICTION).inc()
        ago = now - placed
        log.warning("pod %s evicted %.0fs after it was placed on node %s: a repeat move", pod.key, ago, self.node)
        ref = pod.controller
        if ref is None:
            return
        message = (
            f"pod {pod.key} evicted by the koordpy agent on node {self.node} {ago:.0f}s after it was placed there "
            f"(qos.repeatMoveWindowSeconds {window}): the scheduler places pods where the agent finds the node too hot"
        )
        involved = {
            "apiVersion": ref.api_version,
            "kind": ref.kind,
            "metadata": {"name": ref.name, "namespace": pod.namespace, "uid": ref.uid},
        }
        await self._emit(EVENT_REASON, message, True, "", about=involved)

    async def _emit(
        self, reason: str, message: str, warning: bool, pod_key: str, about: Mapping[str, Any] | None = None
    ) -> None:
        """An Event about the pod ``pod_key``, else about the raw object ``about``, else about the node."""
        now = self.mono()
        about_key = f"{about.get('kind')}/{_meta(about).get('name')}" if about is not None else ""
        dedup = (reason, pod_key or about_key, message)
        if now - self._event_seen.get(dedup, -float("inf")) < EVENT_DEDUP_SECONDS:
            return
        if now - self._event_pruned_at >= EVENT_DEDUP_SECONDS:
            # an Event told longer ago than the window is as if never told: keep only the recent ones
            self._event_seen = {k: t for k, t in self._event_seen.items() if now - t < EVENT_DEDUP_SECONDS}
            self._event_pruned_at = now
        self._event_seen[dedup] = now
        involved: Mapping[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": self.node}}
        if about is not None:
            involved = about
        elif pod_key:
            raw = next((r for u, r in self.raw_pods.items() if self.pods[u].key == pod_key), None)
            if raw is not None:
                involved = raw
        try:
            await self.client.create_event(
                involved,
                reason=reason,
                message=message,
                event_type="Warning" if warning else "Normal",
                component="koordpy-agent",
                host=self.node,
            )
        except errors.ApiError as exc:
            log.debug("event %s not written: %s", reason, exc)

    async def _emit_on(self, involved: Mapping[str, Any], reason: str, message: str) -> None:
        """A Warning Event about a QoS object (best effort, like every Event)."""
        try:
            await self.client.create_event(
                involved,
                reason=reason,
                message=message,
                event_type="Warning",
                component="koordpy-agent",
                host=self.node,
            )
        except errors.ApiError as exc:
            log.debug("event %s not written: %s", reason, exc)

    async def report(self, force: bool = False) -> bool:
        """Write the NodeMetric if its report interval has passed (or ``force``)."""
        now = self.mono()
        if not self.cfg.node_metric.enabled:
            return False
        policy = self.reporter.policy
        if not self.history.node:
            return False  # nothing measured yet (CPU needs two samples): publish nothing rather than zeros
        if not force and now - self._last_report < policy.report_interval:
            return False
        self._last_report = now
        try:
            policy = await self.reporter.refresh_policy()
            status = nodemetric_status(self.history, list(self.pods.values()), self.wall(), policy)
            await self.reporter.report(status)
        except errors.ApiError as exc:
            self.metrics.reports.labels("error").inc()
            log.warning("NodeMetric not written: %s", exc)
            return False
        self.metrics.reports.labels("ok").inc()
        return True

    # -- process -------------------------------------------------------------------------------
    async def start(self, sync_timeout: float = 60.0) -> None:
        self._spawn(self.credentials_watch.run())
        for reflector in self.reflectors:
            self._spawn(reflector.run())
        await asyncio.wait_for(asyncio.gather(*(r.synced.wait() for r in self.reflectors)), sync_timeout)
        self.reconcile_throttles()

    async def run(self, stop: asyncio.Event) -> None:
        await self.start()
        interval = self.cfg.collect_interval_seconds
        while not stop.is_set():
            try:
                await self.tick()
                self.ready = True
                await self.report()
            except Exception:  # a bad tick must not end the agent; it shows in /healthz
                log.exception("tick failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval)
        await self.shutdown()

    async def shutdown(self) -> None:
        if self.cfg.qos.restore_on_exit:
            self.writer.restore_all()
            self.state = forget(self.state, list(self.state.throttled), throttles=True)
            self._save_state()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def not_ready(self) -> str | None:
        """Why the agent is not ready, or None: ready once a tick completed and while no watch is in a
        failure loop (``Reflector.failing``; a skipped malformed object does not count) and the API server
        has not refused the credentials for ``credentials.refusedNotReadySeconds``."""
        refused = self.credentials.not_ready(self.cfg.credentials.refused_not_ready_seconds)
        if refused is not None:
            return refused
        if not self.ready:
            return "no tick completed yet"
        failing = [reason for r in self.reflectors if (reason := r.not_ready()) is not None]
        return "watch failing: " + "; ".join(failing) if failing else None

    def healthy(self) -> bool:
        if self.last_tick is None:
            return True  # still starting
        return self.mono() - self.last_tick < 3 * self.cfg.collect_interval_seconds + 5

    def app(self, limits: ListenerLimits | None = None) -> web.Application:
        """``/healthz``, ``/readyz``, ``/metrics``; every connection bounded by ``limits`` (default: from
        ``server`` in the configuration; head size and read time, see :mod:`koordpy.runtime.listeners`),
        whichever runner serves the app."""
        if limits is None:
            limits = ListenerLimits(
                max_header_bytes=self.cfg.server.max_header_bytes,
                request_read_seconds=self.cfg.server.request_read_timeout_seconds,
            )

        async def healthz(_: web.Request) -> web.Response:
            return web.Response(status=200 if self.healthy() else 500, text="ok" if self.healthy() else "stalled")

        async def readyz(_: web.Request) -> web.Response:
            reason = self.not_ready()
            return web.Response(status=503 if reason else 200, text=f"not ready: {reason}" if reason else "ready")

        async def metrics(_: web.Request) -> web.Response:
            return web.Response(
                body=generate_latest(self.metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
            )

        application = web.Application(handler_args=aiohttp_handler_args(limits))
        application.router.add_get("/healthz", healthz)
        application.router.add_get("/readyz", readyz)
        application.router.add_get("/metrics", metrics)
        return application
