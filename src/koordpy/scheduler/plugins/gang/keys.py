"""Label and annotation keys gang membership and parameters are read from (reference §2.1–2.2)."""

from __future__ import annotations

__all__ = [
    "ANNOTATION_GROUPS",
    "ANNOTATION_MATCH_POLICY",
    "ANNOTATION_MATCH_POLICY_ALIAS",
    "ANNOTATION_MIN_AVAILABLE",
    "ANNOTATION_MODE",
    "ANNOTATION_NAME",
    "ANNOTATION_TOTAL_NUMBER",
    "ANNOTATION_VOLCANO_GROUP_NAME",
    "ANNOTATION_VOLCANO_GROUP_NAME_ALIAS",
    "ANNOTATION_WAITING_TIME",
    "LABEL_MIN_AVAILABLE_DEPRECATED",
    "LABEL_POD_GROUP",
    "LABEL_POD_GROUP_NAME_DEPRECATED",
    "LABEL_X_K8S_POD_GROUP",
    "MODE_NON_STRICT",
    "MODE_STRICT",
]

LABEL_POD_GROUP = "pod-group.scheduling.sigs.k8s.io"
"""Pod label naming a ``scheduling.sigs.k8s.io/v1alpha1`` PodGroup in the pod's namespace."""
LABEL_POD_GROUP_NAME_DEPRECATED = "pod-group.scheduling.sigs.k8s.io/name"
"""Deprecated (lightweight coscheduling) pod label naming an annotation-way gang."""
LABEL_MIN_AVAILABLE_DEPRECATED = "pod-group.scheduling.sigs.k8s.io/min-available"
"""Deprecated pod label; when non-empty it wins over the ``min-available`` annotation."""
LABEL_X_K8S_POD_GROUP = "scheduling.x-k8s.io/pod-group"
"""Pod label naming a ``scheduling.x-k8s.io/v1alpha1`` PodGroup (scheduler-plugins since 2023)."""
ANNOTATION_VOLCANO_GROUP_NAME = "scheduling.k8s.io/group-name"
"""Pod annotation naming a ``scheduling.volcano.sh/v1beta1`` PodGroup (Volcano's ``KubeGroupNameAnnotationKey``)."""
ANNOTATION_VOLCANO_GROUP_NAME_ALIAS = "scheduling.volcano.sh/group-name"
"""Volcano's other key for the same (``VolcanoGroupNameAnnotationKey``); read when the first is absent."""

_PREFIX = "gang.scheduling.koordinator.sh/"
ANNOTATION_NAME = _PREFIX + "name"
ANNOTATION_MIN_AVAILABLE = _PREFIX + "min-available"
ANNOTATION_WAITING_TIME = _PREFIX + "waiting-time"
ANNOTATION_TOTAL_NUMBER = _PREFIX + "total-number"
ANNOTATION_MODE = _PREFIX + "mode"
ANNOTATION_GROUPS = _PREFIX + "groups"
ANNOTATION_MATCH_POLICY = _PREFIX + "match-policy"
ANNOTATION_MATCH_POLICY_ALIAS = "pod-group.scheduling.sigs.k8s.io/match-policy"

MODE_STRICT = "Strict"
MODE_NON_STRICT = "NonStrict"
