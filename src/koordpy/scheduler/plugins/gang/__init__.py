"""Gang scheduling model (Koordinator v1.8 semantics, both PodGroup APIs), pure.

Membership and parameters (``spec``), the event-fed ``GangCache`` with its decisions (``state``,
``decisions``), NonStrict deadlock detection (``deadlock``), PodGroup phases (``phase``) and the offline
report (``offline``). See README.md in this folder. The extender's bind barrier
(``koordpy.scheduler.extender.gangs``) runs this model.
"""

from koordpy.scheduler.plugins.gang.deadlock import DeadlockFinding, WaitingGroup, find_deadlock, fits
from koordpy.scheduler.plugins.gang.decisions import (
    CASCADING_CAUSES,
    QUORUM_REFUSED,
    YIELD_REFUSED,
    Admission,
    BindBatch,
    Deadlock,
    Hold,
    Permit,
    Release,
    ReleaseCause,
    Verdict,
    Wakeup,
    is_admission_refusal,
)
from koordpy.scheduler.plugins.gang.outcome import CONDITION_TYPE, GangOutcome, bound_outcome, gang_condition, outcomes
from koordpy.scheduler.plugins.gang.phase import (
    MemberCounts,
    converge,
    gang_phase,
    koordinator_phase,
    volcano_phase,
    x_k8s_phase,
)
from koordpy.scheduler.plugins.gang.spec import (
    API_SIGS,
    API_VERSIONS,
    API_VOLCANO,
    API_X_K8S,
    GangRef,
    GangSpec,
    PodGroupError,
    PodGroupInfo,
    gang_ref,
    group_id,
    podgroup_from_dict,
    spec_from_pod,
    spec_from_podgroup,
)
from koordpy.scheduler.plugins.gang.state import GangCache, GangView

__all__ = [
    "API_SIGS",
    "API_VERSIONS",
    "API_VOLCANO",
    "API_X_K8S",
    "CASCADING_CAUSES",
    "CONDITION_TYPE",
    "QUORUM_REFUSED",
    "YIELD_REFUSED",
    "Admission",
    "BindBatch",
    "Deadlock",
    "DeadlockFinding",
    "GangCache",
    "GangOutcome",
    "GangRef",
    "GangSpec",
    "GangView",
    "Hold",
    "MemberCounts",
    "Permit",
    "PodGroupError",
    "PodGroupInfo",
    "Release",
    "ReleaseCause",
    "Verdict",
    "WaitingGroup",
    "Wakeup",
    "bound_outcome",
    "converge",
    "find_deadlock",
    "fits",
    "gang_condition",
    "gang_phase",
    "gang_ref",
    "group_id",
    "is_admission_refusal",
    "koordinator_phase",
    "outcomes",
    "podgroup_from_dict",
    "spec_from_pod",
    "spec_from_podgroup",
    "volcano_phase",
    "x_k8s_phase",
]
