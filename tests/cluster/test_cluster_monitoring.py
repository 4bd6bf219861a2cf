"""Names that exist: every series the chart's alerts (its PrometheusRule) and its dashboard name is exposed by
the running components, with the labels the expressions select or group by.

The three components run as the real tier runs them (chart configuration, chart ServiceAccounts, the real
kube-scheduler in front of the extender) and do a little of their work first, so that series with an open
set of label values exist: a pod scheduled through the profile, a bind that fails (a pod that does not
exist), a PodMigrationJob whose status write fails once (a 500 from the fault proxy) and then evicts its
pod, an agent reporting for its kwok node. Then each one's ``/metrics`` is scraped and every expression's
selectors checked against the samples. The labels Prometheus adds itself (namespace, pod, job from the
ServiceMonitor's jobLabel, node from its relabeling) are the ServiceMonitors' (tests/chart/test_monitoring.py)
and must not be exposed by a component (Prometheus would rename them).
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml
from cluster_kit import CHART, HELM, RELEASE_NAMESPACE, Components, Kube, Space, fake_node_files, wait_until

from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.controlplane import ControlPlane
from koordpy_testkit.faultproxy import server_error

pytestmark = pytest.mark.cluster

TARGET_LABELS = {"namespace", "pod", "node", "job", "instance", "service", "endpoint", "container"}
"""Labels Prometheus attaches to every sample of a target (the ServiceMonitors')."""
CREDENTIALS = {"koordpy_kube_unauthorized_total", "koordpy_kube_credentials_refused"}
"""Exposed by every component once credentials that renew land (the credentials alert and panels use them)."""
_SELECTOR = re.compile(r"\b(koordpy_[a-z_]+)\s*(\{[^}]*\})?")
_MATCHER = re.compile(r'([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)\s*"')
_GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
_SAMPLE = re.compile(r"^([A-Za-z_:][\w:]*)(\{[^}]*\})?\s")
_LABEL = re.compile(r'([A-Za-z_]\w*)="')


@dataclass(frozen=True)
class Expression:
    where: str
    """``alert <name>`` or ``panel <title>``."""
    selectors: tuple[tuple[str, frozenset[str]], ...]
    """(series name, label names its matchers use)."""
    grouping: frozenset[str]
    """Label names of its ``by``/``without`` clauses."""


def parse(where: str, expr: str) -> Expression:
    selectors = tuple((name, frozenset(_MATCHER.findall(matchers or ""))) for name, matchers in _SELECTOR.findall(expr))
    grouping = frozenset(
        label.strip() for group in _GROUPING.findall(expr) for label in group.split(",") if label.strip()
    )
    return Expression(where, selectors, grouping)


def expressions() -> list[Expression]:
    """Every expression of the chart's PrometheusRule and dashboard, as the real helm renders them for a
    cluster with the Prometheus Operator."""
    rendered = subprocess.run(
        [
            str(HELM),
            "template",
            "koordpy",
            str(CHART),
            "-n",
            RELEASE_NAMESPACE,
            "--api-versions",
            "monitoring.coreos.com/v1",
        ],
        capture_output=True,
        text=True,
        timeout=HANG_BACKSTOP,
        check=True,
    ).stdout
    objects = [o for o in yaml.safe_load_all(rendered) if o]
    (rule,) = [o for o in objects if o["kind"] == "PrometheusRule"]
    found = [parse(f"alert {r['alert']}", r["expr"]) for g in rule["spec"]["groups"] for r in g["rules"]]
    (board,) = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-dashboard")]
    for panel in json.loads(board["data"]["koordpy.json"])["panels"]:
        for target in panel.get("targets", []):
            found.append(parse(f"panel {panel['title']}", target["expr"]))
    assert len(found) >= 40, len(found)
    return found


def scrape_labels(text: str) -> dict[str, list[frozenset[str]]]:
    """Series name -> the label-name set of each of its samples."""
    out: dict[str, list[frozenset[str]]] = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        match = _SAMPLE.match(line)
        assert match, line
        out.setdefault(match[1], []).append(frozenset(_LABEL.findall(match[2] or "")))
    return out


def problems(exprs: list[Expression], exposed: dict[str, list[frozenset[str]]], skip: set[str]) -> list[str]:
    found = []
    for expr in exprs:
        names = [name for name, _ in expr.selectors if name not in skip]
        available: set[str] = set()
        for name, matched in expr.selectors:
            if name in skip:
                continue
            samples = exposed.get(name)
            if not samples:
                found.append(f"{expr.where}: {name} is not exposed")
                continue
            for labels in samples:
                available |= labels
                if missing := (matched - TARGET_LABELS) - labels:
                    found.append(f"{expr.where}: {name} has a sample without {sorted(missing)}")
                    break
        if available and (missing := (expr.grouping - TARGET_LABELS) - available):
            found.append(f"{expr.where}: grouped by {sorted(missing)}, which none of {names} has")
    return found


# ---- the components at work ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scraped(
    module_koordpy: Components, module_space: Space, kube: Kube, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    """The three components at work (the module doc says what they do), then each one's /metrics."""
    koordpy, space, tmp_path = module_koordpy, module_space, tmp_path_factory.mktemp("scraped")
    node = space.node("n0", cpu="16", memory="64Gi")
    space.wait_nodes_ready()
    # the extender, with kube-scheduler in front of it: one pod scheduled through the profile
    koordpy.start_scheduling()
    space.create_pod("scheduled")
    wait_until("the pod bound through the profile", lambda: space.count_bound(1))
    # a bind that fails: the pod does not exist (the extender reads it from the API: 404)
    bind = {"PodName": "absent", "PodNamespace": space.namespace, "PodUID": "0-absent", "Node": node}
    answer = httpx.post(koordpy.extender_base + "/bind", json=bind, timeout=HANG_BACKSTOP)
    assert answer.status_code == 200 and answer.json()["Error"], answer.text

    # the manager behind a fault proxy: a migration whose first status write fails, then evicts its pod
    api = koordpy.api_proxy()
    koordpy.start_manager({"migrationController": {"defaultJobMode": "EvictDirectly"}}, api=api)
    api.inject(server_error(), verbs=["patch"], resource="podmigrationjobs", count=1)
    # a Deployment's pod (a bare pod is never migrated): the default scheduler places both on the node
    labels = {"app": "web"}
    template = space.pod("web", scheduler="default-scheduler", labels=labels)
    kube.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": space.namespace},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": template["spec"]},
            },
        }
    )

    def running() -> list[str]:
        pods = [p for p in space.pods().values() if labels.items() <= p["metadata"].get("labels", {}).items()]
        return sorted(p["metadata"]["name"] for p in pods if p.get("status", {}).get("phase") == "Running")

    victim = wait_until("the Deployment's pods Running", lambda: running() if len(running()) == 2 else None)[0]
    job = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {"name": f"{space.namespace}-move"},
        "spec": {"mode": "EvictDirectly", "ttl": "5m", "podRef": {"namespace": space.namespace, "name": victim}},
    }
    kube.create(job)

    # the agent for the kwok node, on a fabricated cgroup tree and /proc
    with contextlib.ExitStack() as stack:
        cgroup_root, proc_root = stack.enter_context(fake_node_files(tmp_path))
        stack.callback(kube.delete, "PodMigrationJob", job["metadata"]["name"])
        _, readyz = koordpy.start_ready_agent(node, cgroup_root, proc_root, tmp_path / "agent-state")
        agent_metrics = readyz.replace("/readyz", "/metrics")
        wait_until(
            "the agent reported its node",
            lambda: (
                'koordpy_agent_nodemetric_reports_total{result="ok"} 0.0'
                not in httpx.get(agent_metrics, timeout=HANG_BACKSTOP).text
            ),
        )
        wait_until(
            "the migration evicted its pod after a failed status write",
            lambda: (
                "koordpy_migration_errors_total{"
                in httpx.get(koordpy.manager_base + "/metrics", timeout=HANG_BACKSTOP).text
                and (kube.get("PodMigrationJob", job["metadata"]["name"]) or {}).get("status", {}).get("phase")
                == "Succeeded"
            ),
        )
        yield {
            "extender": httpx.get(koordpy.extender_ops + "/metrics", timeout=HANG_BACKSTOP).text,
            "manager": httpx.get(koordpy.manager_base + "/metrics", timeout=HANG_BACKSTOP).text,
            "agent": httpx.get(agent_metrics, timeout=HANG_BACKSTOP).text,
        }


def test_every_series_the_alerts_and_the_dashboard_name_is_exposed_with_its_labels(scraped: dict[str, str]) -> None:
    exprs = expressions()
    per_component = {name: scrape_labels(text) for name, text in scraped.items()}
    exposed: dict[str, list[frozenset[str]]] = {}
    for series in per_component.values():
        for name, samples in series.items():
            exposed.setdefault(name, []).extend(samples)
    assert problems(exprs, exposed, skip=CREDENTIALS) == []
    # each family from the component that owns it
    for component, prefixes in (
        ("extender", ("koordpy_extender_",)),
        ("manager", ("koordpy_migration_", "koordpy_reservation")),
        ("agent", ("koordpy_agent_",)),
    ):
        named = {n for e in exprs for n, _ in e.selectors if n.startswith(prefixes)}
        assert named and named <= per_component[component].keys(), sorted(named - per_component[component].keys())
    # no koordpy series carries a label Prometheus sets on the target itself
    clashes = {n: sorted(set().union(*s) & TARGET_LABELS) for n, s in exposed.items() if n.startswith("koordpy_")}
    assert {n: c for n, c in clashes.items() if c} == {}
    # and the check itself bites: a name or a label no component has is reported
    bogus = [
        parse("typo", "sum by (verb) (rate(koordpy_extender_requets_total[5m]))"),
        parse("label", 'koordpy_agent_ticks_total{kind="x"}'),
    ]
    assert problems(bogus, exposed, skip=set()) == [
        "typo: koordpy_extender_requets_total is not exposed",
        "label: koordpy_agent_ticks_total has a sample without ['kind']",
    ]


def test_the_credentials_series_are_exposed_by_every_component(scraped: dict[str, str]) -> None:
    """koordpy_kube_unauthorized_total and koordpy_kube_credentials_refused, on all three components."""
    for component, text in scraped.items():
        names = scrape_labels(text).keys()
        assert names >= CREDENTIALS, f"{component} exposes none of {sorted(CREDENTIALS - names)}"


def test_the_metrics_reader_token_passes_kube_schedulers_delegated_authentication_and_authorization(
    control_plane: ControlPlane, kube: Kube, tmp_path: Path
) -> None:
    """What kube-scheduler asks the API server for each scrape of its secure port (a TokenReview, then a
    SubjectAccessReview for GET /metrics), answered for the token the chart's ServiceMonitor presents: the
    chart's metrics-reader objects applied to the real cluster, its token filled in by the real token
    controller."""
    rendered = subprocess.run(
        [
            str(HELM),
            "template",
            "koordpy",
            str(CHART),
            "-n",
            RELEASE_NAMESPACE,
            "--api-versions",
            "monitoring.coreos.com/v1",
            "-f",
            str(CHART / "ci" / "servicemonitor-values.yaml"),
        ],
        capture_output=True,
        text=True,
        timeout=HANG_BACKSTOP,
        check=True,
    ).stdout
    objects = [o for o in yaml.safe_load_all(rendered) if o and o["metadata"]["name"] == "koordpy-metrics-reader"]
    assert sorted(o["kind"] for o in objects) == ["ClusterRole", "ClusterRoleBinding", "Secret", "ServiceAccount"]
    manifest = tmp_path / "metrics-reader.yaml"
    manifest.write_text(yaml.safe_dump_all(objects))
    kubectl = [str(HELM.parent / "kubectl"), "--kubeconfig", str(control_plane.admin_kubeconfig)]
    subprocess.run(
        [*kubectl, "apply", "--server-side", "-f", str(manifest)],
        check=True,
        capture_output=True,
        timeout=HANG_BACKSTOP,
    )
    try:

        def token() -> str | None:
            secret = kube.client.get(f"/api/v1/namespaces/{RELEASE_NAMESPACE}/secrets/koordpy-metrics-reader").json()
            data = (secret.get("data") or {}).get("token")
            return base64.b64decode(data).decode() if data else None

        bearer = wait_until("the token controller filled the metrics-reader Secret", token)
        review = kube.client.post(
            "/apis/authentication.k8s.io/v1/tokenreviews",
            json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": bearer}},
        ).json()["status"]
        user = "system:serviceaccount:koordpy-system:koordpy-metrics-reader"
        assert review["authenticated"] is True and review["user"]["username"] == user, review

        def allowed(path: str) -> bool:
            access = {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": {
                    "user": user,
                    "groups": review["user"]["groups"],
                    "nonResourceAttributes": {"path": path, "verb": "get"},
                },
            }
            answer: bool = kube.client.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", json=access).json()[
                "status"
            ]["allowed"]
            return answer

        assert allowed("/metrics")
        assert not allowed("/debug/pprof/profile") and not allowed("/configz")  # /metrics and nothing else
    finally:
        subprocess.run(
            [*kubectl, "delete", "--ignore-not-found", "-f", str(manifest)],
            capture_output=True,
            timeout=HANG_BACKSTOP,
            check=False,
        )
