"""``reservation:`` section of the manager configuration: starving-job reservations.

.. code-block:: yaml

    reservation:
      enabled: false                  # starving-job reservations are opt-in
      starvingJobTimeThreshold: 600   # seconds a job waits before it counts as starving
      reservedNodePercent: 20         # at most floor(20 % of schedulable nodes) hold starving-job reservations
      intervalSeconds: 10             # how often the manager decides
      maxHoldSeconds: 1800            # a job's reservations are deleted after holding this long
      priorityThreshold: 0            # jobs with a lower priority never get a reservation
      loadAware: {}                   # LoadAwareSchedulingArgs for placement (paste the scheduler's)
      taintNodes: false               # hold reserved nodes against every scheduler (a taint; patch nodes and pods)
      schedulerNames: []              # only pods of these schedulers starve ([]: every pod; the chart sets its profile)

Names ``starvingJobTimeThreshold`` and ``reservedNodePercent`` are the Volcano reserve design's (seed
``002``). User-created Reservations are placed and kept whatever ``enabled`` says; ``enabled`` only turns
on the creation of reservations for starving jobs. Unknown keys are errors; numbers are strict.

Not guaranteed: ``intervalSeconds`` is a period between passes, not a deadline; a pass that takes longer
delays the next.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from koordpy.config.loadaware import LoadAwareSchedulingArgs

__all__ = ["ReservationSettings"]


class ReservationSettings(BaseModel):
    """Starving-job reservations (the Volcano seed's ``reserve``, on Koordinator Reservations)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, use_attribute_docstrings=True)

    enabled: bool = Field(False, strict=True)
    """Create Reservations for starving jobs. False: starving jobs are reported only; user-created
    Reservations are placed and kept either way."""
    starving_job_time_threshold: int = Field(600, alias="starvingJobTimeThreshold", strict=True, ge=1, le=30 * 86_400)
    """Seconds since a job's creation after which a job that is not Ready starves (1 s to 30 days)."""
    reserved_node_percent: int = Field(20, alias="reservedNodePercent", strict=True, ge=0, le=100)
    """At most ``floor(percent × schedulable nodes / 100)`` nodes hold starving-job reservations; when
    that is 0 (0 %, or too few nodes) no starving-job reservation is created."""
    interval_seconds: float = Field(10.0, alias="intervalSeconds", strict=True, allow_inf_nan=False, ge=1, le=3600)
    """Seconds between two decision passes of the manager."""
    max_hold_seconds: int = Field(1800, alias="maxHoldSeconds", strict=True, ge=1, le=30 * 86_400)
    """A starving-job reservation is deleted this many seconds after its creation even if the job is
    not Ready yet (it is also its ``spec.ttl``); the job may be reserved for again on the next pass."""
    priority_threshold: int = Field(0, alias="priorityThreshold", strict=True, ge=-(2**31), le=2**31 - 1)
    """Jobs whose priority is below this never get a starving-job reservation (they are not reported
    as starving either)."""
    taint_nodes: bool = Field(False, alias="taintNodes", strict=True)
    """Hold starving-job Reservations (and Reservations annotated ``koordpy.io/taint-node: "true"``)
    against every scheduler: taint their node ``koordpy.io/reserved:NoSchedule`` while they hold and add
    the matching toleration to their pending owner pods (:mod:`koordpy.scheduler.plugins.reservation.hold`).
    Needs ``patch`` on ``nodes`` and ``pods`` (the chart grants them when this is true). False: taints
    koordpy put on nodes earlier are removed."""
    scheduler_names: tuple[Annotated[str, StringConstraints(min_length=1, max_length=253)], ...] = Field(
        (), alias="schedulerNames", max_length=64
    )
    """Only pods whose ``spec.schedulerName`` is in this list can starve: a pod another scheduler places
    never binds through koordpy's extender, so a Reservation could not be allocated by it and would only
    hold its node. Empty (the default, kept by the simulator and offline tools): every pod. The chart
    sets it to the ``koordpy-scheduler`` profile's name when it is not given."""
    load_aware: LoadAwareSchedulingArgs = Field(
        default_factory=lambda: LoadAwareSchedulingArgs.model_validate({}), alias="loadAware"
    )
    """Koordinator ``LoadAwareSchedulingArgs`` the placement of a Reservation applies with the node's
    NodeMetric (not for ``preAllocation`` ones); give the same as the scheduler's ``loadAware`` so a
    Reservation is not placed where its owner would be refused. Default: Koordinator's defaults."""
