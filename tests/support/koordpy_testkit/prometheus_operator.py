"""What the Prometheus Operator makes of the chart's monitoring objects, for a real Prometheus on loopback:
each ServiceMonitor endpoint as a scrape configuration, each PrometheusRule as a rule file, and the targets
Prometheus' Kubernetes discovery (role ``endpoints``) would find, from the Services and Pods the real API
server holds.

The scrape configuration follows the operator's generator (prometheus-operator ``pkg/prometheus/promcfg.go``,
``generateServiceMonitorConfig``, v0.95, role ``endpoints``): job ``serviceMonitor/<namespace>/<name>/<i>``;
the endpoint's interval, timeout, path, params, scheme, TLS configuration and authorization; then the
relabelings in the operator's order: the job name kept in ``__tmp_prometheus_job_name``, one ``keep`` per
selector label (and per set-based expression), a ``keep`` on the endpoint's port name, ``node`` and ``pod``
from the endpoint's target, ``namespace``, ``service``, ``pod`` and ``container`` from the discovered
objects, pods that Failed or Succeeded dropped, the Service's ``targetLabels`` and the pods'
``podTargetLabels``, ``job`` from the Service's name and then from its ``jobLabel`` label, ``endpoint`` from
the port name, and last the endpoint's own ``relabelings``; its ``metricRelabelings`` become
``metric_relabel_configs``. The target labels are then Prometheus' own work, not this module's.

What differs, and why:

- Discovery. kwok runs no containers, so a pod's IP reaches nothing, and the Prometheus the tier builds has
  no Kubernetes discovery (``remove_all_sd``). Each scrape configuration reads a ``file_sd`` file per
  namespace instead, holding the targets with the meta labels Prometheus' discovery gives
  (``discovery/kubernetes/endpoints.go``: the endpoint's port, readiness and target, the Service's name,
  labels and annotations, the Pod's name, IP, node, phase, readiness, labels, annotations and the container
  that declares the port) and ``__address__`` set to the loopback address of the host process standing in
  for that pod and port (``stand_ins``), or to the pod's IP where none does (Prometheus reports such a target
  down, as it would any unreachable pod). The endpoints are computed as the endpoints controller would
  (the Service's selector over the namespace's pods that have an IP, each Service port's ``targetPort``
  resolved by name in the pod's containers): the tier's kube-controller-manager runs no endpoints controller.
  The extra targets Prometheus discovers for a pod's container ports that no Service port names are left
  out: a ServiceMonitor endpoint's port ``keep`` drops them.
- Secrets. The operator reads the Secrets (and ConfigMaps) an endpoint names and writes them into the
  configuration or its mounted assets; here ``key_file`` writes each to a file, named by ``credentials_file``
  and ``ca_file``.
- Sharding (one shard) adds nothing and is left out.

Fields this module does not translate are refused with an error naming them (basic auth, OAuth2, the
deprecated bearer token fields, ``targetPort``, proxies, limits): a ServiceMonitor of the chart that starts
using one fails here instead of being scraped differently.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "KeyFile",
    "endpoint_targets",
    "rule_file",
    "sanitize_label_name",
    "scrape_configs",
    "targets_file_name",
]

KeyFile = Callable[[str, str, str, str], str]
"""``(kind, namespace, name, key)`` -> the path of a file holding that key of that Secret or ConfigMap."""

_TRANSLATED_ENDPOINT_FIELDS = frozenset(
    {
        "port",
        "path",
        "scheme",
        "interval",
        "scrapeTimeout",
        "params",
        "honorLabels",
        "honorTimestamps",
        "authorization",
        "tlsConfig",
        "relabelings",
        "metricRelabelings",
    }
)
_TRANSLATED_SPEC_FIELDS = frozenset(
    {"endpoints", "selector", "namespaceSelector", "jobLabel", "targetLabels", "podTargetLabels"}
)
_INVALID_LABEL_CHARS = re.compile(r"[^a-zA-Z0-9_]")


def sanitize_label_name(name: str) -> str:
    """A Kubernetes label or annotation name as a Prometheus label name part (Prometheus'
    ``strutil.SanitizeLabelName``: every character outside ``[a-zA-Z0-9_]`` becomes ``_``)."""
    return _INVALID_LABEL_CHARS.sub("_", name)


def targets_file_name(namespace: str) -> str:
    """The file_sd file holding the endpoint targets of ``namespace``."""
    return f"endpoints-{namespace}.json"


def _relabel(config: Mapping[str, Any]) -> dict[str, Any]:
    """One operator RelabelConfig as Prometheus' relabel_config (the operator's ``generateRelabelConfig``)."""
    out: dict[str, Any] = {}
    if config.get("sourceLabels"):
        out["source_labels"] = list(config["sourceLabels"])
    if "separator" in config:
        out["separator"] = config["separator"]
    if config.get("targetLabel"):
        out["target_label"] = config["targetLabel"]
    if config.get("regex"):
        out["regex"] = config["regex"]
    if config.get("modulus"):
        out["modulus"] = config["modulus"]
    if "replacement" in config:
        out["replacement"] = config["replacement"]
    if config.get("action"):
        out["action"] = str(config["action"]).lower()
    return out


def _selector_relabelings(selector: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for key in sorted(selector.get("matchLabels") or {}):
        name = sanitize_label_name(key)
        out.append(
            {
                "action": "keep",
                "source_labels": [
                    f"__meta_kubernetes_service_label_{name}",
                    f"__meta_kubernetes_service_labelpresent_{name}",
                ],
                "regex": f"({selector['matchLabels'][key]});true",
            }
        )
    for expression in selector.get("matchExpressions") or []:
        name = sanitize_label_name(expression["key"])
        label, present = f"__meta_kubernetes_service_label_{name}", f"__meta_kubernetes_service_labelpresent_{name}"
        values = "|".join(expression.get("values") or [])
        operator = expression["operator"]
        if operator == "In":
            out.append({"action": "keep", "source_labels": [label, present], "regex": f"({values});true"})
        elif operator == "NotIn":
            out.append({"action": "drop", "source_labels": [label, present], "regex": f"({values});true"})
        elif operator == "Exists":
            out.append({"action": "keep", "source_labels": [present], "regex": "true"})
        elif operator == "DoesNotExist":
            out.append({"action": "drop", "source_labels": [present], "regex": "true"})
        else:
            raise ValueError(f"selector.matchExpressions: operator {operator!r} is not a label selector operator")
    return out


def _tls_config(tls: Mapping[str, Any], namespace: str, key_file: KeyFile, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    unknown = set(tls) - {"ca", "serverName", "insecureSkipVerify"}
    if unknown:
        raise ValueError(f"{where}.tlsConfig: {sorted(unknown)} not translated")
    if "insecureSkipVerify" in tls:
        out["insecure_skip_verify"] = bool(tls["insecureSkipVerify"])
    ca = tls.get("ca") or {}
    if ca.get("secret"):
        out["ca_file"] = key_file("Secret", namespace, ca["secret"]["name"], ca["secret"]["key"])
    elif ca.get("configMap"):
        out["ca_file"] = key_file("ConfigMap", namespace, ca["configMap"]["name"], ca["configMap"]["key"])
    if tls.get("serverName"):
        out["server_name"] = tls["serverName"]
    return out


def _authorization(auth: Mapping[str, Any], namespace: str, key_file: KeyFile) -> dict[str, Any]:
    out: dict[str, Any] = {"type": str(auth.get("type") or "Bearer").strip()}
    credentials = auth.get("credentials")
    if credentials:
        out["credentials_file"] = key_file("Secret", namespace, credentials["name"], credentials["key"])
    return out


def scrape_configs(monitors: Iterable[Mapping[str, Any]], key_file: KeyFile, targets_dir: str) -> list[dict[str, Any]]:
    """One Prometheus scrape configuration per endpoint of each ServiceMonitor in ``monitors``, reading its
    targets from the file_sd files of ``targets_dir`` (:func:`targets_file_name`)."""
    out: list[dict[str, Any]] = []
    for monitor in monitors:
        meta, spec = monitor["metadata"], monitor["spec"]
        namespace, name = meta["namespace"], meta["name"]
        where = f"ServiceMonitor {namespace}/{name}"
        unknown = set(spec) - _TRANSLATED_SPEC_FIELDS
        if unknown:
            raise ValueError(f"{where}: spec fields {sorted(unknown)} not translated")
        selected = spec.get("namespaceSelector") or {}
        if selected.get("any"):
            files = [f"{targets_dir}/{targets_file_name('*')}"]
        else:
            names = selected.get("matchNames") or [namespace]
            files = [f"{targets_dir}/{targets_file_name(n)}" for n in names]
        for index, endpoint in enumerate(spec["endpoints"]):
            at = f"{where}: endpoints[{index}]"
            unknown = set(endpoint) - _TRANSLATED_ENDPOINT_FIELDS
            if unknown:
                raise ValueError(f"{at}: {sorted(unknown)} not translated")
            if not endpoint.get("port"):
                raise ValueError(f"{at}: no port name (only named Service ports are translated)")
            config: dict[str, Any] = {
                "job_name": f"serviceMonitor/{namespace}/{name}/{index}",
                "honor_labels": bool(endpoint.get("honorLabels", False)),
            }
            if "honorTimestamps" in endpoint:
                config["honor_timestamps"] = bool(endpoint["honorTimestamps"])
            config["file_sd_configs"] = [{"files": files}]
            for field, key in (
                ("interval", "scrape_interval"),
                ("scrapeTimeout", "scrape_timeout"),
                ("path", "metrics_path"),
                ("params", "params"),
                ("scheme", "scheme"),
            ):
                if endpoint.get(field):
                    config[key] = endpoint[field]
            if endpoint.get("tlsConfig"):
                config["tls_config"] = _tls_config(endpoint["tlsConfig"], namespace, key_file, at)
            if endpoint.get("authorization"):
                config["authorization"] = _authorization(endpoint["authorization"], namespace, key_file)
            config["relabel_configs"] = _relabelings(spec, endpoint)
            if endpoint.get("metricRelabelings"):
                config["metric_relabel_configs"] = [_relabel(r) for r in endpoint["metricRelabelings"]]
            out.append(config)
    return out


def _relabelings(spec: Mapping[str, Any], endpoint: Mapping[str, Any]) -> list[dict[str, Any]]:
    target = ["__meta_kubernetes_endpoint_address_target_kind", "__meta_kubernetes_endpoint_address_target_name"]
    out: list[dict[str, Any]] = [{"source_labels": ["job"], "target_label": "__tmp_prometheus_job_name"}]
    out += _selector_relabelings(spec.get("selector") or {})
    out.append({"action": "keep", "source_labels": ["__meta_kubernetes_endpoint_port_name"], "regex": endpoint["port"]})
    out += [
        {
            "source_labels": target,
            "separator": ";",
            "regex": "Node;(.*)",
            "replacement": "${1}",
            "target_label": "node",
        },
        {"source_labels": target, "separator": ";", "regex": "Pod;(.*)", "replacement": "${1}", "target_label": "pod"},
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
        {"action": "drop", "source_labels": ["__meta_kubernetes_pod_phase"], "regex": "(Failed|Succeeded)"},
    ]
    for label in spec.get("targetLabels") or []:
        name = sanitize_label_name(label)
        out.append(
            {
                "source_labels": [f"__meta_kubernetes_service_label_{name}"],
                "target_label": name,
                "regex": "(.+)",
                "replacement": "${1}",
            }
        )
    for label in spec.get("podTargetLabels") or []:
        name = sanitize_label_name(label)
        out.append(
            {
                "source_labels": [f"__meta_kubernetes_pod_label_{name}"],
                "target_label": name,
                "regex": "(.+)",
                "replacement": "${1}",
            }
        )
    out.append({"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job", "replacement": "${1}"})
    if spec.get("jobLabel"):
        out.append(
            {
                "source_labels": [f"__meta_kubernetes_service_label_{sanitize_label_name(spec['jobLabel'])}"],
                "target_label": "job",
                "regex": "(.+)",
                "replacement": "${1}",
            }
        )
    out.append({"target_label": "endpoint", "replacement": endpoint["port"]})
    out += [_relabel(r) for r in endpoint.get("relabelings") or []]
    return out


def rule_file(rules: Mapping[str, Any]) -> dict[str, Any]:
    """A PrometheusRule as the rule file the operator writes for it: its groups, unchanged."""
    return {"groups": list(rules["spec"]["groups"])}


def _object_labels(prefix: str, meta: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for kind, plural in (("label", "labels"), ("annotation", "annotations")):
        for key, value in (meta.get(plural) or {}).items():
            name = sanitize_label_name(key)
            out[f"{prefix}_{kind}_{name}"] = str(value)
            out[f"{prefix}_{kind}present_{name}"] = "true"
    return out


def _selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _container_port(pod: Mapping[str, Any], target: int | str) -> tuple[Mapping[str, Any], Mapping[str, Any]] | None:
    """The container and container port a Service port's ``targetPort`` resolves to (by name, or number)."""
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if (isinstance(target, str) and port.get("name") == target) or port.get("containerPort") == target:
                return container, port
    return None


def endpoint_targets(
    services: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    stand_ins: Mapping[tuple[str, int], str],
) -> list[dict[str, Any]]:
    """file_sd target groups for the ``services`` of one namespace: one per Service port and selected pod
    with an IP (``pods``: that namespace's), with the meta labels of Prometheus' Kubernetes discovery (role
    ``endpoints``). ``stand_ins`` maps ``(pod name, container port number)`` to the ``host:port`` that
    answers for it; a pod and port without one keeps its pod IP."""
    groups: list[dict[str, Any]] = []
    for service in services:
        meta, spec = service["metadata"], service.get("spec") or {}
        selector = spec.get("selector") or {}
        common = {
            "__meta_kubernetes_namespace": meta["namespace"],
            "__meta_kubernetes_endpoints_name": meta["name"],
            "__meta_kubernetes_service_name": meta["name"],
            **_object_labels("__meta_kubernetes_service", meta),
            **_object_labels("__meta_kubernetes_endpoints", {"labels": meta.get("labels") or {}}),
        }
        for pod in pods:
            pod_meta, status = pod["metadata"], pod.get("status") or {}
            ip = status.get("podIP")
            if not ip or not _selects(selector, pod_meta.get("labels") or {}):
                continue
            for service_port in spec.get("ports") or []:
                target = service_port.get("targetPort", service_port["port"])
                found = _container_port(pod, target)
                if found is None and not isinstance(target, int):
                    continue  # a named targetPort no container declares: no endpoint (the controller's rule)
                container, port = found if found is not None else ({}, {"containerPort": target})
                number = int(port["containerPort"])
                node = (pod.get("spec") or {}).get("nodeName", "")
                labels = {
                    **common,
                    "__meta_kubernetes_endpoint_port_name": service_port.get("name", ""),
                    "__meta_kubernetes_endpoint_port_protocol": service_port.get("protocol", "TCP"),
                    "__meta_kubernetes_endpoint_ready": str(_ready(pod)).lower(),
                    "__meta_kubernetes_endpoint_address_target_kind": "Pod",
                    "__meta_kubernetes_endpoint_address_target_name": pod_meta["name"],
                    "__meta_kubernetes_endpoint_node_name": node,
                    "__meta_kubernetes_pod_name": pod_meta["name"],
                    "__meta_kubernetes_pod_uid": pod_meta.get("uid", ""),
                    "__meta_kubernetes_pod_ip": ip,
                    "__meta_kubernetes_pod_node_name": node,
                    "__meta_kubernetes_pod_host_ip": status.get("hostIP", ""),
                    "__meta_kubernetes_pod_phase": status.get("phase", ""),
                    "__meta_kubernetes_pod_ready": str(_ready(pod)).lower(),
                    **_object_labels("__meta_kubernetes_pod", pod_meta),
                }
                if container:  # the port a container declares (a bare number may be declared by none)
                    labels |= {
                        "__meta_kubernetes_pod_container_name": container["name"],
                        "__meta_kubernetes_pod_container_image": container.get("image", ""),
                        "__meta_kubernetes_pod_container_init": "false",
                        "__meta_kubernetes_pod_container_port_name": port.get("name", ""),
                        "__meta_kubernetes_pod_container_port_number": str(number),
                        "__meta_kubernetes_pod_container_port_protocol": port.get("protocol", "TCP"),
                    }
                for owner in pod_meta.get("ownerReferences") or []:
                    if owner.get("controller"):
                        labels["__meta_kubernetes_pod_controller_kind"] = owner["kind"]
                        labels["__meta_kubernetes_pod_controller_name"] = owner["name"]
                address = stand_ins.get((pod_meta["name"], number), f"{ip}:{number}")
                groups.append({"targets": [address], "labels": labels})
    return groups
