"""The Prometheus Operator's translation of a ServiceMonitor (koordpy_testkit.prometheus_operator), without a
cluster: the scrape configuration's fields and relabelings in the operator's order, the endpoint targets with
the meta labels Prometheus' Kubernetes discovery gives, and the fields it refuses."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy_testkit.prometheus_operator import (
    endpoint_targets,
    rule_file,
    sanitize_label_name,
    scrape_configs,
    targets_file_name,
)

SELECTOR = {"app.kubernetes.io/component": "scheduler", "app.kubernetes.io/name": "koordpy"}


def monitor(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "jobLabel": "app.kubernetes.io/component",
        "selector": {"matchLabels": SELECTOR},
        "namespaceSelector": {"matchNames": ["koordpy-system"]},
        "endpoints": [
            {
                "port": "http-metrics",
                "path": "/metrics",
                "interval": "1s",
                "relabelings": [{"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}],
            },
            {
                "port": "https-metrics",
                "scheme": "https",
                "path": "/metrics",
                "authorization": {"type": "Bearer", "credentials": {"name": "reader", "key": "token"}},
                "tlsConfig": {"ca": {"secret": {"name": "serving", "key": "ca.crt"}}, "serverName": "sched.svc"},
            },
        ],
    }
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": "koordpy-scheduler", "namespace": "koordpy-system"},
        "spec": base | spec,
    }


def key_file(kind: str, namespace: str, name: str, key: str) -> str:
    return f"/keys/{kind}/{namespace}/{name}/{key}"


def test_each_endpoint_is_one_job_with_the_endpoints_fields_and_secrets_as_files() -> None:
    plain, secure = scrape_configs([monitor()], key_file, "/targets")
    assert plain["job_name"] == "serviceMonitor/koordpy-system/koordpy-scheduler/0"
    assert secure["job_name"] == "serviceMonitor/koordpy-system/koordpy-scheduler/1"
    assert plain["file_sd_configs"] == [{"files": ["/targets/endpoints-koordpy-system.json"]}]
    assert (plain["scrape_interval"], plain["metrics_path"], plain["honor_labels"]) == ("1s", "/metrics", False)
    assert "scheme" not in plain and "tls_config" not in plain and "authorization" not in plain
    assert secure["scheme"] == "https"
    assert secure["authorization"] == {
        "type": "Bearer",
        "credentials_file": "/keys/Secret/koordpy-system/reader/token",
    }
    assert secure["tls_config"] == {
        "ca_file": "/keys/Secret/koordpy-system/serving/ca.crt",
        "server_name": "sched.svc",
    }


def test_relabelings_come_in_the_operators_order_the_endpoints_own_last() -> None:
    (plain, _) = scrape_configs([monitor()], key_file, "/targets")
    relabel = plain["relabel_configs"]
    assert relabel[0] == {"source_labels": ["job"], "target_label": "__tmp_prometheus_job_name"}
    # one keep per selector label, sorted by key
    assert relabel[1:3] == [
        {
            "action": "keep",
            "source_labels": [
                "__meta_kubernetes_service_label_app_kubernetes_io_component",
                "__meta_kubernetes_service_labelpresent_app_kubernetes_io_component",
            ],
            "regex": "(scheduler);true",
        },
        {
            "action": "keep",
            "source_labels": [
                "__meta_kubernetes_service_label_app_kubernetes_io_name",
                "__meta_kubernetes_service_labelpresent_app_kubernetes_io_name",
            ],
            "regex": "(koordpy);true",
        },
    ]
    assert relabel[3] == {
        "action": "keep",
        "source_labels": ["__meta_kubernetes_endpoint_port_name"],
        "regex": "http-metrics",
    }
    targets = [r.get("target_label") for r in relabel[4:]]
    assert targets == [
        "node",
        "pod",
        "namespace",
        "service",
        "pod",
        "container",
        None,
        "job",
        "job",
        "endpoint",
        "node",
    ]
    assert relabel[-4] == {
        "source_labels": ["__meta_kubernetes_service_name"],
        "target_label": "job",
        "replacement": "${1}",
    }
    assert relabel[-3]["source_labels"] == ["__meta_kubernetes_service_label_app_kubernetes_io_component"]
    assert relabel[-2] == {"target_label": "endpoint", "replacement": "http-metrics"}
    assert relabel[-1] == {"source_labels": ["__meta_kubernetes_pod_node_name"], "target_label": "node"}


@pytest.mark.parametrize(
    ("operator", "expected"),
    [
        ("In", {"action": "keep", "regex": "(a|b);true"}),
        ("NotIn", {"action": "drop", "regex": "(a|b);true"}),
        ("Exists", {"action": "keep", "regex": "true"}),
        ("DoesNotExist", {"action": "drop", "regex": "true"}),
    ],
)
def test_set_based_selectors_become_keep_or_drop(operator: str, expected: dict[str, str]) -> None:
    expression = {"key": "tier", "operator": operator, "values": ["a", "b"]}
    (config, _) = scrape_configs([monitor(selector={"matchExpressions": [expression]})], key_file, "/targets")
    rule = config["relabel_configs"][1]
    assert {k: rule[k] for k in ("action", "regex")} == expected
    assert rule["source_labels"][-1] == "__meta_kubernetes_service_labelpresent_tier"


def test_target_labels_pod_target_labels_metric_relabelings_and_any_namespace() -> None:
    endpoint = {
        "port": "web",
        "metricRelabelings": [{"action": "Drop", "sourceLabels": ["__name__"], "regex": "go_.*"}],
    }
    (config,) = scrape_configs(
        [monitor(endpoints=[endpoint], targetLabels=["team"], podTargetLabels=["app.kubernetes.io/version"],
                 namespaceSelector={"any": True})],
        key_file,
        "/targets",
    )  # fmt: skip
    assert config["file_sd_configs"] == [{"files": ["/targets/endpoints-*.json"]}]
    assert config["metric_relabel_configs"] == [{"source_labels": ["__name__"], "regex": "go_.*", "action": "drop"}]
    copied = [r for r in config["relabel_configs"] if r.get("regex") == "(.+)" and r["target_label"] != "job"]
    assert [(r["source_labels"], r["target_label"]) for r in copied] == [
        (["__meta_kubernetes_service_label_team"], "team"),
        (["__meta_kubernetes_pod_label_app_kubernetes_io_version"], "app_kubernetes_io_version"),
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"endpoints": [{"port": "web", "basicAuth": {}}]}, r"endpoints\[0\]: \['basicAuth'\] not translated"),
        ({"endpoints": [{"targetPort": 8080}]}, r"endpoints\[0\]: \['targetPort'\] not translated"),
        ({"sampleLimit": 10}, r"spec fields \['sampleLimit'\] not translated"),
        ({"endpoints": [{"port": "web", "tlsConfig": {"cert": {}}}]}, r"tlsConfig: \['cert'\] not translated"),
    ],
)
def test_what_is_not_translated_is_refused(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        scrape_configs([monitor(**change)], key_file, "/targets")


def service(name: str, ports: list[dict[str, Any]], selector: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "labels": {"app.kubernetes.io/component": "x"}},
        "spec": {"selector": selector, "ports": ports},
    }


def pod(name: str, labels: dict[str, str], ip: str | None = "10.0.0.5", ready: bool = True) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "labels": labels,
            "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": True}],
        },
        "spec": {
            "nodeName": "n1",
            "containers": [
                {"name": "main", "image": "img:1", "ports": [{"name": "http-metrics", "containerPort": 9316}]},
                {"name": "side", "image": "img:2", "ports": [{"name": "other", "containerPort": 7000}]},
            ],
        },
        "status": {
            "phase": "Running",
            **({"podIP": ip} if ip else {}),
            "hostIP": "10.0.0.1",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def test_endpoint_targets_carry_the_discovery_meta_labels_and_the_stand_in_address() -> None:
    svc = service("agent", [{"name": "http-metrics", "port": 9316, "targetPort": "http-metrics"}], {"app": "a"})
    pods = [
        pod("a-1", {"app": "a"}),
        pod("a-2", {"app": "a"}, ip="10.0.0.6", ready=False),
        pod("b-1", {"app": "b"}),  # not selected
        pod("a-3", {"app": "a"}, ip=None),  # no IP yet: no endpoint
    ]
    groups = endpoint_targets([svc], pods, {("a-1", 9316): "127.0.0.1:40001"})
    assert [g["targets"] for g in groups] == [["127.0.0.1:40001"], ["10.0.0.6:9316"]]
    labels = groups[0]["labels"]
    assert labels["__meta_kubernetes_namespace"] == "ns"
    assert labels["__meta_kubernetes_service_name"] == "agent"
    assert labels["__meta_kubernetes_service_label_app_kubernetes_io_component"] == "x"
    assert labels["__meta_kubernetes_service_labelpresent_app_kubernetes_io_component"] == "true"
    assert labels["__meta_kubernetes_endpoint_port_name"] == "http-metrics"
    assert labels["__meta_kubernetes_endpoint_address_target_kind"] == "Pod"
    assert labels["__meta_kubernetes_endpoint_address_target_name"] == "a-1"
    assert labels["__meta_kubernetes_pod_node_name"] == "n1"
    assert labels["__meta_kubernetes_pod_container_name"] == "main"
    assert labels["__meta_kubernetes_pod_container_port_number"] == "9316"
    assert labels["__meta_kubernetes_pod_controller_kind"] == "ReplicaSet"
    assert labels["__meta_kubernetes_pod_label_app"] == "a"
    assert groups[1]["labels"]["__meta_kubernetes_endpoint_ready"] == "false"
    assert all(isinstance(v, str) for g in groups for v in g["labels"].values())


def test_a_numeric_target_port_no_container_declares_still_has_an_endpoint() -> None:
    svc = service("s", [{"name": "raw", "port": 80, "targetPort": 8080}, {"name": "gone", "port": 81, "targetPort": "nope"}], {"app": "a"})  # fmt: skip
    (group,) = endpoint_targets([svc], [pod("a-1", {"app": "a"})], {})
    assert group["targets"] == ["10.0.0.5:8080"]
    assert "__meta_kubernetes_pod_container_name" not in group["labels"]


def test_helpers() -> None:
    assert sanitize_label_name("app.kubernetes.io/name") == "app_kubernetes_io_name"
    assert targets_file_name("koordpy-system") == "endpoints-koordpy-system.json"
    groups = [{"name": "g", "rules": [{"alert": "A", "expr": "up == 0"}]}]
    assert rule_file({"spec": {"groups": groups}}) == {"groups": groups}
