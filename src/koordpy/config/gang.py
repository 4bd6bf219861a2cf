"""``gang:`` section of the scheduler configuration: Koordinator's ``CoschedulingArgs`` plus koordpy's own.

Field names and defaults follow Koordinator's ``CoschedulingArgs`` (v1.8, reference §2.3), so its
``args`` can be pasted here:

* ``defaultTimeout`` 600 s (Go duration string ``"600s"`` or a number of seconds), must be > 0:
  the wait time of a gang that names none (annotation ``waiting-time`` missing, 0, negative or
  unparseable; PodGroup ``scheduleTimeoutSeconds`` unset or 0);
* ``defaultMatchPolicy`` ``once-satisfied``: the match policy of a gang whose annotation names none
  or an unknown one;
* ``controllerWorkers`` 1 (≥ 1) and ``skipCheckScheduleCycle`` false: accepted for compatibility and
  not used by koordpy (it has no per-gang schedule cycle, see the gang README);
* ``enablePreemption`` and ``awareNetworkTopology``: job-level preemption and network-topology
  placement are **not built** in koordpy, so ``true`` is refused with a field error rather than
  silently ignored.

koordpy's own fields (the bind barrier needs them; Koordinator has no equivalent because its Permit
runs inside the scheduler):

* ``binderHttpTimeoutSeconds`` 660: the ``httpTimeout`` of the kube-scheduler extender entry that
  sets ``bindVerb`` (the binder). A held bind must be answered before it runs out, or kube-scheduler
  abandons the request;
* ``binderAnswerMarginSeconds`` 5: how long before that timeout a held bind is answered with an
  error (and retried by kube-scheduler), so the answer arrives in time. Must be below the timeout;
* ``crossNamespaceGroups`` false: whether a GangGroup (the ``groups`` annotation) may name gangs of
  other namespaces. Off, such entries are left out of the group (a namespace cannot join or complete
  another namespace's gang). On, they count only when every gang of the group declares the same group;
* ``requeueSignal`` (``<namespace>/<name>``, empty by default; the chart names the CSIStorageCapacity it
  installs for it): the object the extender updates to make kube-scheduler retry the gang members it
  refused at quorum once their gang has enough members. kube-scheduler retries a pod only the extender
  refused on any cluster event it watches, a CSIStorageCapacity update among them, so the extender
  writes nothing on users' pods. Empty: no retry requests (members wait for kube-scheduler's own
  retries, up to 5 minutes);
* ``requeueQPS`` 50 and ``requeueBurst`` 100: how often the extender may write ``requeueSignal`` (a
  token bucket of this rate and depth; every member waiting when a write goes out is asked for by it);
  ``requeueQPS: 0`` turns the retry requests off;
* ``deadlockYieldSeconds`` 30 (≥ 0): after NonStrict deadlock resolution releases a GangGroup, its
  members are refused at ``/filter`` (and woken like quorum refusals afterwards) until no group the
  release helps holds a member any more, for at most this long. Without it, kube-scheduler's queue order
  decides who takes the freed room, and the released group's own members are often first. 0: no yield.

Not guaranteed: that ``binderHttpTimeoutSeconds`` matches what kube-scheduler is really configured
with; the chart renders both from one value, a hand-written configuration must keep them equal.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from koordpy.config.errors import field_problems
from koordpy.model.durations import DurationError, parse_duration
from koordpy.model.names import dns1123_label_problem, dns1123_subdomain_problem

__all__ = ["DEFAULT_TIMEOUT_SECONDS", "CoschedulingArgs", "MatchPolicy"]

DEFAULT_TIMEOUT_SECONDS = 600.0

MatchPolicy = Literal["once-satisfied", "only-waiting", "waiting-and-running"]


def _seconds(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return parse_duration(value)
        except DurationError as exc:
            raise ValueError(str(exc)) from None
    return value


Seconds = Annotated[float, BeforeValidator(_seconds)]


class CoschedulingArgs(BaseModel):
    """Gang scheduling arguments (Koordinator ``CoschedulingArgs`` names, plus koordpy bind-barrier fields)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    api_version: str | None = Field(None, alias="apiVersion")
    kind: str | None = None
    default_timeout: Seconds = Field(DEFAULT_TIMEOUT_SECONDS, alias="defaultTimeout", gt=0)
    """Seconds a member waits for its gang when the gang names no wait time."""
    default_match_policy: MatchPolicy = Field("once-satisfied", alias="defaultMatchPolicy")
    controller_workers: int = Field(1, alias="controllerWorkers", ge=1)
    """Accepted for compatibility; koordpy's manager does not read it."""
    skip_check_schedule_cycle: bool = Field(False, alias="skipCheckScheduleCycle")
    """Accepted for compatibility; koordpy has no per-gang schedule cycle."""
    enable_preemption: bool = Field(False, alias="enablePreemption")
    """Must be false: job-level preemption is not built in koordpy."""
    aware_network_topology: bool = Field(False, alias="awareNetworkTopology")
    """Must be false: network-topology-aware gang placement is not built in koordpy."""
    binder_http_timeout_seconds: float = Field(660.0, alias="binderHttpTimeoutSeconds", gt=0, le=86400)
    """koordpy: kube-scheduler's ``httpTimeout`` for the binder extender entry."""
    binder_answer_margin_seconds: float = Field(5.0, alias="binderAnswerMarginSeconds", ge=0.5, le=600)
    """koordpy: a held bind is answered this long before ``binderHttpTimeoutSeconds`` runs out."""
    cross_namespace_groups: bool = Field(False, alias="crossNamespaceGroups")
    """koordpy: a GangGroup may name gangs of other namespaces (each of them must declare the same group)."""
    requeue_qps: float = Field(50.0, alias="requeueQPS", ge=0, le=10000)
    """koordpy: parked gang members asked to be retried per second once their gang has a quorum (0: off)."""
    requeue_burst: int = Field(100, alias="requeueBurst", ge=1, le=100000)
    """koordpy: how many such requests may go out at once before ``requeueQPS`` paces them."""
    requeue_signal: str = Field("", alias="requeueSignal", max_length=317)
    """koordpy: ``<namespace>/<name>`` of the CSIStorageCapacity whose update asks kube-scheduler to retry
    parked members (empty: no retry requests)."""
    deadlock_yield_seconds: Seconds = Field(30.0, alias="deadlockYieldSeconds", ge=0, le=86400)
    """koordpy: after NonStrict deadlock resolution releases a GangGroup, its members are refused at
    ``/filter`` until no group its release helps holds a member any more (bound, or given up), for at
    most this long (0: no yield)."""

    @model_validator(mode="after")
    def _check(self) -> CoschedulingArgs:
        problems: list[str] = []
        if self.enable_preemption:
            problems.append("enablePreemption: job-level preemption is not built in koordpy; must be false")
        if self.aware_network_topology:
            problems.append(
                "awareNetworkTopology: network-topology-aware placement is not built in koordpy; must be false"
            )
        if self.requeue_signal:
            namespace, _, name = self.requeue_signal.partition("/")
            problem = dns1123_label_problem(namespace) or dns1123_subdomain_problem(name)
            if problem is not None:
                problems.append(f"requeueSignal: <namespace>/<name> of a CSIStorageCapacity: {problem}")
        if self.binder_answer_margin_seconds >= self.binder_http_timeout_seconds:
            problems.append(
                f"binderAnswerMarginSeconds: must be below binderHttpTimeoutSeconds "
                f"({self.binder_http_timeout_seconds:g}), got {self.binder_answer_margin_seconds:g}"
            )
        if problems:
            raise field_problems(problems)
        return self

    @property
    def requeue_signal_ref(self) -> tuple[str, str] | None:
        """``requeueSignal`` as (namespace, name), None when unset."""
        if not self.requeue_signal:
            return None
        namespace, _, name = self.requeue_signal.partition("/")
        return namespace, name

    @property
    def longest_hold_seconds(self) -> float:
        """How long one bind request may be held before it must be answered."""
        return self.binder_http_timeout_seconds - self.binder_answer_margin_seconds
