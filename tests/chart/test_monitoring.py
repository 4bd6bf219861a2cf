"""What the chart gives a Prometheus Operator and Grafana: a Service and a ServiceMonitor per component with
credentials and TLS as the operator's API has them (never skipping verification by default), the
PrometheusRule and the dashboard (rendered with ``--api-versions monitoring.coreos.com/v1``), image
digests, and the ``helm test`` hooks.

Every ServiceMonitor and the PrometheusRule are decoded into the Prometheus Operator's own Go types with
unknown fields refused (``monitoringcheck``, tools/prometheus); every dashboard expression is parsed by
promtool. Which series they name a running component exposes: tests/cluster/test_cluster_monitoring.py.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from helm_render import CHART, MONITORING_API, named, of_kind, render, run_helm

from koordpy_testkit.prometheus import prometheus_bin, promtool

SM_VALUES = str(CHART / "ci" / "servicemonitor-values.yaml")
DIGEST = "sha256:" + "ab" * 32


def monitors(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {m["metadata"]["name"]: m for m in of_kind(objects, "ServiceMonitor")}


def test_with_the_operators_api_every_component_is_scraped_over_its_service() -> None:
    objects = render(*MONITORING_API)
    found = monitors(objects)
    assert sorted(found) == ["koordpy-agent", "koordpy-manager", "koordpy-scheduler"]
    for component in ("scheduler", "manager", "agent"):
        monitor = found[f"koordpy-{component}"]
        service = named(objects, "Service", f"-{component}")
        assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
        assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["koordpy-system"]}
        assert monitor["spec"]["jobLabel"] == "app.kubernetes.io/component"
        (endpoint,) = monitor["spec"]["endpoints"]  # kube-scheduler's port is opt-in
        assert endpoint["port"] == "http-metrics" and endpoint["path"] == "/metrics"
        assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
        assert {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"} in endpoint["relabelings"]
    # the manager's Service reaches its health listener, which serves /metrics
    manager = named(objects, "Service", "-manager")
    (port,) = manager["spec"]["ports"]
    deployment = named(objects, "Deployment", "-manager")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert port["targetPort"] in {p["name"] for p in container["ports"]}
    assert port["port"] == next(p["containerPort"] for p in container["ports"] if p["name"] == port["targetPort"])
    # nothing is rendered where the API is not served, or when turned off
    assert of_kind(render(), "ServiceMonitor") == []
    assert of_kind(render(*MONITORING_API, "--set", "serviceMonitor.enabled=false"), "ServiceMonitor") == []


def test_no_monitor_skips_tls_verification_or_reads_a_token_file() -> None:
    for args in ((), ("-f", SM_VALUES)):
        text = yaml.safe_dump(of_kind(render(*MONITORING_API, *args), "ServiceMonitor"))
        assert "insecureSkipVerify" not in text and "bearerTokenFile" not in text


def test_kube_scheduler_is_scraped_with_a_token_from_a_secret_and_a_verified_certificate() -> None:
    objects = render(*MONITORING_API, "-f", SM_VALUES)
    endpoint = next(
        e for e in monitors(objects)["koordpy-scheduler"]["spec"]["endpoints"] if e["port"] == "https-metrics"
    )
    assert endpoint["scheme"] == "https"
    assert endpoint["authorization"] == {
        "type": "Bearer",
        "credentials": {"name": "koordpy-metrics-reader", "key": "token"},
    }
    assert endpoint["tlsConfig"] == {
        "ca": {"secret": {"name": "koordpy-scheduler-serving", "key": "ca.crt"}},
        "serverName": "koordpy-scheduler.koordpy-system.svc",
    }
    # the token's identity: a ServiceAccount with a token Secret, allowed GET /metrics and nothing else
    secret = named(objects, "Secret", "-metrics-reader")
    assert secret["type"] == "kubernetes.io/service-account-token"
    assert secret["metadata"]["annotations"] == {"kubernetes.io/service-account.name": "koordpy-metrics-reader"}
    role = named(objects, "ClusterRole", "-metrics-reader")
    assert role["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    binding = named(objects, "ClusterRoleBinding", "-metrics-reader")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "koordpy-metrics-reader", "namespace": "koordpy-system"}
    ]
    # kube-scheduler serves the certificate of that Secret
    deployment = named(objects, "Deployment", "-scheduler")
    spec = deployment["spec"]["template"]["spec"]
    scheduler = next(c for c in spec["containers"] if c["name"] == "kube-scheduler")
    assert "--tls-cert-file=/etc/koordpy/tls/tls.crt" in scheduler["command"]
    assert "--tls-private-key-file=/etc/koordpy/tls/tls.key" in scheduler["command"]
    assert {"name": "tls", "mountPath": "/etc/koordpy/tls", "readOnly": True} in scheduler["volumeMounts"]
    assert {"name": "tls", "secret": {"secretName": "koordpy-scheduler-serving"}} in spec["volumes"]
    # a Secret of the user's own for the token replaces the chart's
    own = render(
        *MONITORING_API,
        "-f",
        SM_VALUES,
        "--set-json",
        'serviceMonitor.kubeScheduler.authorization={"type":"Bearer","credentials":{"name":"mine","key":"t"}}',
    )
    assert of_kind(own, "Secret") == [] and not [
        r for r in of_kind(own, "ClusterRole") if "metrics-reader" in r["metadata"]["name"]
    ]


def test_kube_scheduler_scraping_without_a_way_to_verify_it_is_refused() -> None:
    proc = run_helm(
        "template", "koordpy", str(CHART), *MONITORING_API, "--set", "serviceMonitor.kubeScheduler.enabled=true"
    )
    assert proc.returncode != 0
    assert "Prometheus must verify kube-scheduler's certificate" in proc.stderr
    # an explicit choice is the user's to make
    chosen = render(
        *MONITORING_API,
        "--set",
        "serviceMonitor.kubeScheduler.enabled=true",
        "--set-json",
        'serviceMonitor.kubeScheduler.tlsConfig={"insecureSkipVerify":true}',
    )
    endpoints = monitors(chosen)["koordpy-scheduler"]["spec"]["endpoints"]
    assert endpoints[1]["tlsConfig"] == {"insecureSkipVerify": True}


def test_cert_manager_issues_kube_schedulers_certificate_for_the_service_names() -> None:
    objects = render(
        *MONITORING_API,
        "--set",
        "serviceMonitor.kubeScheduler.enabled=true",
        "--set",
        "scheduler.kubeScheduler.tls.certManager.enabled=true",
        "--set-json",
        'scheduler.kubeScheduler.tls.certManager.issuerRef={"name":"ca","kind":"ClusterIssuer"}',
    )
    (certificate,) = of_kind(objects, "Certificate")
    assert certificate["apiVersion"] == "cert-manager.io/v1"
    assert certificate["spec"]["secretName"] == "koordpy-scheduler-tls"
    assert "koordpy-scheduler.koordpy-system.svc" in certificate["spec"]["dnsNames"]
    assert certificate["spec"]["issuerRef"] == {"name": "ca", "kind": "ClusterIssuer"}
    endpoint = monitors(objects)["koordpy-scheduler"]["spec"]["endpoints"][1]
    assert endpoint["tlsConfig"]["ca"] == {"secret": {"name": "koordpy-scheduler-tls", "key": "ca.crt"}}
    proc = run_helm("template", "koordpy", str(CHART), "--set", "scheduler.kubeScheduler.tls.certManager.enabled=true")
    assert proc.returncode != 0 and "issuerRef.name" in proc.stderr


def test_monitoring_objects_decode_into_the_prometheus_operators_types() -> None:
    for args in ((), ("-f", SM_VALUES), ("-f", str(CHART / "ci" / "ha-values.yaml"))):
        objects = [o for o in render(*MONITORING_API, *args) if o["apiVersion"] == "monitoring.coreos.com/v1"]
        checked = subprocess.run(
            [str(prometheus_bin() / "monitoringcheck")],
            input=yaml.safe_dump_all(objects),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert checked.returncode == 0, checked.stderr
        assert f"{len(objects)} objects checked" in checked.stdout


def test_monitoringcheck_refuses_a_field_the_operator_does_not_know() -> None:
    monitor = monitors(render(*MONITORING_API))["koordpy-manager"]
    monitor["spec"]["endpoints"][0]["bearerTokenFiel"] = "/token"
    checked = subprocess.run(
        [str(prometheus_bin() / "monitoringcheck")],
        input=yaml.safe_dump(monitor),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert checked.returncode == 1 and 'unknown field "bearerTokenFiel"' in checked.stderr


# ---- image digests ---------------------------------------------------------------------------------------


def images(objects: list[dict[str, Any]]) -> dict[str, str]:
    out = {}
    for obj in objects:
        spec = obj["spec"]["template"]["spec"] if obj["kind"] in ("Deployment", "DaemonSet") else obj.get("spec", {})
        for container in spec.get("containers", []) if isinstance(spec, dict) else []:
            out[f"{obj['metadata']['name']}/{container['name']}"] = container["image"]
    return out


def test_image_digests_pin_koordpys_and_kube_schedulers_images() -> None:
    plain = images(render())
    pinned = images(
        render("--set", f"image.digest={DIGEST}", "--set", f"scheduler.kubeScheduler.image.digest={DIGEST}")
    )
    assert plain.keys() == pinned.keys() and len(pinned) >= 6
    for name, image in pinned.items():
        assert image == f"{plain[name]}@{DIGEST}", name
    assert pinned["koordpy-scheduler/kube-scheduler"] == f"registry.k8s.io/kube-scheduler:v1.37.2@{DIGEST}"
    proc = run_helm("template", "koordpy", str(CHART), "--set", "image.digest=sha256:nothex")
    assert proc.returncode != 0 and "values don't meet the specifications of the schema" in proc.stderr


# ---- the dashboard ---------------------------------------------------------------------------------------


def dashboard(*args: str) -> tuple[dict[str, Any], dict[str, Any]]:
    (configmap,) = [c for c in of_kind(render(*args), "ConfigMap") if c["metadata"]["name"].endswith("-dashboard")]
    return configmap, json.loads(configmap["data"]["koordpy.json"])


def test_the_dashboard_configmap_is_labelled_for_the_grafana_sidecar() -> None:
    configmap, board = dashboard()
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert configmap["metadata"]["namespace"] == "koordpy-system"
    assert board == json.loads((CHART / "dashboards" / "koordpy.json").read_text())
    moved, _ = dashboard(
        "--set",
        "dashboards.namespace=monitoring",
        "--set-json",
        'dashboards.labels={"dash":"yes","grafana_dashboard":null}',
    )
    assert moved["metadata"]["namespace"] == "monitoring" and moved["metadata"]["labels"]["dash"] == "yes"
    assert "grafana_dashboard" not in moved["metadata"]["labels"]  # helm merges maps: null removes a default key
    assert not [
        c
        for c in of_kind(render("--set", "dashboards.enabled=false"), "ConfigMap")
        if "dashboard" in c["metadata"]["name"]
    ]


def panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in board["panels"] if p["type"] != "row"]


def test_the_dashboard_is_well_formed_grafana_json() -> None:
    _, board = dashboard()
    assert board["uid"] == "koordpy-overview" and board["schemaVersion"] >= 36
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert variables["namespace"]["type"] == "query"
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    occupied: set[tuple[int, int]] = set()
    for panel in board["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        cells = {(grid["y"] + dy, grid["x"] + dx) for dy in range(grid["h"]) for dx in range(grid["w"])}
        assert not cells & occupied, f"{panel['title']} overlaps another panel"
        occupied |= cells
    for panel in panels(board):
        assert panel["title"] and panel["description"], panel["id"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs))
        for target in panel["targets"]:
            assert 'namespace="$namespace"' in target["expr"], panel["title"]


def test_the_dashboard_shows_what_operators_watch() -> None:
    _, board = dashboard()
    rows = [p["title"] for p in board["panels"] if p["type"] == "row"]
    assert rows == ["Scheduling (extender)", "Gangs", "Reservations", "Migrations", "Agents", "Credentials"]
    exprs = " ".join(t["expr"] for p in panels(board) for t in p["targets"])
    for needle in (
        "sum by (verb) (rate(koordpy_extender_requests_total",  # throughput per verb
        "koordpy_extender_request_duration_seconds_bucket",  # latency per verb
        "koordpy_extender_gang_wait_seconds_bucket",  # gang waits
        "koordpy_extender_gang_releases_total",  # gang outcomes
        "max by (phase) (koordpy_reservations",
        "max by (phase) (koordpy_migration_jobs",
        "sum by (node, kind) (rate(koordpy_agent_actions_total",  # agent actions per node
    ):
        assert needle in exprs, needle


def test_every_dashboard_expression_parses_with_promtool(tmp_path: Path) -> None:
    """Each expression (Grafana's variables given values) as a recording rule: promtool parses them all."""
    _, board = dashboard()
    rules = []
    for panel in panels(board):
        for target in panel["targets"]:
            expr = target["expr"].replace("$__rate_interval", "5m").replace("$namespace", "koordpy-system")
            assert "$" not in expr, expr
            rules.append({"record": f"dashboard:panel{panel['id']}:{target['refId'].lower()}", "expr": expr})
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    checked = promtool("check", "rules", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules)} rules found" in checked.stdout
    # and promtool is a real judge: a broken expression is refused
    path.write_text(
        yaml.safe_dump({"groups": [{"name": "d", "rules": [{"record": "x:y", "expr": "sum by (verb (rate(x[5m]))"}]}]})
    )
    assert promtool("check", "rules", str(path)).returncode != 0


# ---- helm test ---------------------------------------------------------------------------------------------


def hook_pods() -> list[dict[str, Any]]:
    return [p for p in of_kind(render(), "Pod") if p["metadata"].get("annotations", {}).get("helm.sh/hook") == "test"]


def test_helm_test_hooks_ask_each_components_health_through_its_service() -> None:
    hooks = {p["metadata"]["labels"]["koordpy.io/tested-component"]: p for p in hook_pods()}
    assert sorted(hooks) == ["agent", "manager", "scheduler"]
    urls = {name: pod["spec"]["containers"][0]["command"][3:] for name, pod in hooks.items()}
    assert urls == {
        "scheduler": [
            "http://koordpy-scheduler.koordpy-system.svc:10263/readyz",
            "https://koordpy-scheduler.koordpy-system.svc:10259/healthz",
        ],
        "manager": ["http://koordpy-manager.koordpy-system.svc:8080/healthz"],
        "agent": ["each:http://koordpy-agent.koordpy-system.svc:9316/readyz"],
    }
    for pod in hooks.values():
        assert pod["metadata"]["annotations"]["helm.sh/hook-delete-policy"] == "before-hook-creation,hook-succeeded"
        assert pod["spec"]["restartPolicy"] == "Never" and pod["spec"]["automountServiceAccountToken"] is False
        (container,) = pod["spec"]["containers"]
        assert container["command"][:2] == ["python", "-c"]
        assert container["command"][2] == (CHART / "files" / "health-check.py").read_text()
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    # each Service has the port its hook asks
    objects = render()
    for name, listed in urls.items():
        service = named(objects, "Service", f"-{name}")
        for url in listed:
            port = int(re.search(r":(\d+)/", url)[1])  # type: ignore[index]
            assert port in {p["port"] for p in service["spec"]["ports"]}, url
    assert of_kind(render("--set", "tests.enabled=false"), "Pod") == []


def test_the_scheduler_hook_verifies_kube_scheduler_with_the_configured_ca() -> None:
    (hook,) = [
        p
        for p in of_kind(render("--set", "scheduler.kubeScheduler.tls.secretName=serving"), "Pod")
        if "scheduler" in p["metadata"]["name"]
    ]
    container = hook["spec"]["containers"][0]
    assert {"name": "CA_FILE", "value": "/etc/koordpy/tls/ca.crt"} in container["env"]
    assert hook["spec"]["volumes"] == [
        {"name": "tls", "secret": {"secretName": "serving", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}
    ]


@pytest.mark.parametrize("scenario_file", ["servicemonitor-values.yaml", "networkpolicy-values.yaml"])
def test_scenarios_render_the_monitoring_objects(scenario_file: str) -> None:
    objects = render("-f", str(CHART / "ci" / scenario_file), *MONITORING_API)
    assert of_kind(objects, "PrometheusRule") and len(of_kind(objects, "ServiceMonitor")) == 3
