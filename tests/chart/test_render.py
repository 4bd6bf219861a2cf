"""helm lint / helm template for the defaults and every ci/*-values.yaml scenario; every object validated."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from helm_render import (
    CHART,
    MONITORING_API,
    NAMESPACE,
    ROOT,
    helm_binary,
    named,
    of_kind,
    render,
    render_scenario,
    run_helm,
    scenario_args,
)

from koordpy.config.errors import validate
from koordpy.config.manager import ManagerConfiguration
from koordpy.config.scheduler import SchedulerConfiguration
from koordpy.crds import RESOURCES, crd_manifest
from koordpy.crds.structural import structural_problems

K8S_VERSION = "1.35"
CUSTOM: dict[str, dict[str, Any]] = {}
for _res in RESOURCES:
    _schema = crd_manifest(_res)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    CUSTOM.setdefault(_res.api_version, {})[_res.kind] = _schema
POD_KINDS = ("Deployment", "DaemonSet", "StatefulSet", "Job")


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]["template"]["spec"]
    return spec


def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = pod_spec(obj)
    return [*spec.get("initContainers", []), *spec["containers"]]


def test_lint_is_clean(scenario: str) -> None:
    values = scenario_args(scenario)[:2]  # helm lint takes no --api-versions
    proc = run_helm("lint", "--strict", str(CHART), *values)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 chart(s) failed" in proc.stdout


def test_every_rendered_object_validates_against_kubernetes(scenario: str) -> None:
    objects = render_scenario(scenario)
    assert objects
    for obj in objects:
        where = f"{obj['kind']}/{obj['metadata']['name']}"
        if obj["kind"] == "ServiceMonitor":
            check_service_monitor(obj, objects)
            continue
        if obj["kind"] == "PrometheusRule":
            continue  # its fields: tests/chart/test_monitoring.py (the operator's own types); its rules: test_alerts.py
        if obj["apiVersion"] in CUSTOM:
            # Our own kinds: validated against the schema of the CRD the chart installs for them.
            jsonschema.validate(obj, CUSTOM[obj["apiVersion"]][obj["kind"]])
            continue
        try:
            kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            pytest.fail(f"{scenario}: {where} invalid at {path}: {exc.message}")
        assert obj["metadata"].get("labels", {}).get("app.kubernetes.io/instance") == "koordpy", where
        if obj["kind"] not in ("ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"):
            assert obj["metadata"].get("namespace") in (NAMESPACE, "kube-system"), where


def check_service_monitor(obj: dict[str, Any], objects: list[dict[str, Any]]) -> None:
    """No bundled schema for ServiceMonitor: check it selects a rendered Service by a port it has."""
    selector = obj["spec"]["selector"]["matchLabels"]
    services = [s for s in of_kind(objects, "Service") if selector.items() <= s["metadata"].get("labels", {}).items()]
    assert len(services) == 1, obj["metadata"]["name"]
    ports = {p["name"] for p in services[0]["spec"]["ports"]}
    assert {e["port"] for e in obj["spec"]["endpoints"]} <= ports


def test_crds_are_apiextensions_v1_and_structural() -> None:
    crds = of_kind(render(), "CustomResourceDefinition")
    assert {c["metadata"]["name"] for c in crds} == {r.name for r in RESOURCES}
    for crd in crds:
        kubernetes_validate.validate(crd, K8S_VERSION, strict=True)
        for version in crd["spec"]["versions"]:
            problems = structural_problems(version["schema"]["openAPIV3Schema"])
            assert problems == [], f"{crd['metadata']['name']}: {problems}"
        model = {r.name: r for r in RESOURCES}[crd["metadata"]["name"]]
        assert crd["metadata"]["annotations"] == {**model.annotations, "helm.sh/resource-policy": "keep"}


def test_crd_switches() -> None:
    assert of_kind(render("--set", "crds.enabled=false"), "CustomResourceDefinition") == []
    unkept = of_kind(render("--set", "crds.keep=false"), "CustomResourceDefinition")
    assert unkept and all("helm.sh/resource-policy" not in c["metadata"].get("annotations", {}) for c in unkept)
    approved = {c["metadata"]["name"]: c["metadata"].get("annotations") for c in unkept}
    assert approved["podgroups.scheduling.sigs.k8s.io"] == {
        "api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/scheduler-plugins/pull/50"
    }
    skipped = render("--set", "crds.exclude={nodemetrics.slo.koordinator.sh,podgroups.scheduling.sigs.k8s.io}")
    names = {c["metadata"]["name"] for c in of_kind(skipped, "CustomResourceDefinition")}
    assert names == {r.name for r in RESOURCES} - {"nodemetrics.slo.koordinator.sh", "podgroups.scheduling.sigs.k8s.io"}
    crane = {"nodeqoss.ensurance.crane.io", "podqoss.ensurance.crane.io"}
    assert crane <= {r.name for r in RESOURCES}
    skipped = render("--set", "crds.exclude={nodeqoss.ensurance.crane.io,podqoss.ensurance.crane.io}")
    names = {c["metadata"]["name"] for c in of_kind(skipped, "CustomResourceDefinition")}
    assert names == {r.name for r in RESOURCES} - crane


def test_no_container_is_privileged_and_only_the_agent_touches_the_host(scenario: str) -> None:
    for obj in render_scenario(scenario):
        if obj["kind"] not in POD_KINDS:
            continue
        is_agent = obj["kind"] == "DaemonSet" and obj["metadata"]["name"].endswith("-agent")
        spec = pod_spec(obj)
        assert not spec.get("hostPID") and not spec.get("hostNetwork") and not spec.get("hostIPC")
        for container in containers(obj):
            ctx = container.get("securityContext", {})
            where = f"{obj['metadata']['name']}/{container['name']}"
            assert ctx.get("privileged") is False, where
            assert ctx.get("allowPrivilegeEscalation") is False, where
            assert ctx.get("readOnlyRootFilesystem") is True, where
            assert ctx.get("capabilities") == {"drop": ["ALL"]}, where
            if is_agent:
                # the owner of the cgroup files (uid 0) needs no capability to write them
                assert (ctx["runAsUser"], ctx["runAsGroup"]) == (0, 0), where
                assert ctx["seccompProfile"] == {"type": "RuntimeDefault"}, where
        host_paths = [v for v in spec.get("volumes", []) if "hostPath" in v]
        assert bool(host_paths) is is_agent, obj["metadata"]["name"]


def agent_container(*args: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The agent's pod spec and its one container."""
    spec = pod_spec(named(render(*args), "DaemonSet", "-agent"))
    (container,) = spec["containers"]
    return spec, container


def test_agent_privileged_and_selinux_options_are_opt_in() -> None:
    _, container = agent_container("--set", "agent.privileged=true")
    ctx = container["securityContext"]
    # Kubernetes refuses privileged with allowPrivilegeEscalation false; no capability list is needed then
    assert (ctx["privileged"], ctx["allowPrivilegeEscalation"], "capabilities" in ctx) == (True, True, False)
    _, container = agent_container("--set", "agent.seLinuxOptions.type=spc_t")
    assert container["securityContext"]["seLinuxOptions"] == {"type": "spc_t"}
    assert container["securityContext"]["privileged"] is False
    _, container = agent_container()
    assert "seLinuxOptions" not in container["securityContext"]


def test_agent_daemonset_mounts_updates_and_tolerates() -> None:
    agent = named(render(), "DaemonSet", "-agent")
    assert agent["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}
    spec = pod_spec(agent)
    volumes = {v["name"]: v for v in spec["volumes"] if "hostPath" in v}
    (container,) = spec["containers"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    # cgroupfs and the state directory, nothing else of the host: /proc/stat and /proc/meminfo are node-wide
    assert {name: v["hostPath"]["path"] for name, v in volumes.items()} == {
        "host-cgroup": "/sys/fs/cgroup",
        "state": "/var/lib/koordpy-agent",
    }
    assert mounts["host-cgroup"].get("readOnly", False) is False
    assert not any(arg.startswith("--proc-root") for arg in container["command"])
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert {"operator": "Exists"} in spec["tolerations"]


def test_a_host_proc_is_mounted_read_only_only_when_set() -> None:
    spec, container = agent_container("--set", "agent.hostPaths.proc=/proc")
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert volumes["host-proc"]["hostPath"] == {"path": "/proc", "type": "Directory"}
    assert mounts["host-proc"] == {"name": "host-proc", "mountPath": "/host/proc", "readOnly": True}
    assert "--proc-root=/host/proc" in container["command"]


def pod_ip_listeners(objects: list[dict[str, Any]]) -> dict[str, str]:
    """``<workload>/<container>`` -> the listen-address argument it gets, for every container that has one;
    each such container must take POD_IP from the downward API."""
    flags = ("--host=", "--health-host=", "--metrics-host=", "--bind-address=")
    out = {}
    for obj in objects:
        if obj["kind"] not in POD_KINDS:
            continue
        for container in containers(obj):
            found = [a for a in container.get("command", []) if a.startswith(flags)]
            if not found:
                continue
            env = {e["name"]: e for e in container.get("env", [])}
            assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP", container["name"]
            (out[f"{obj['metadata']['name']}/{container['name']}"],) = found
    return out


def test_health_and_metrics_listen_on_the_pod_ip_only() -> None:
    assert pod_ip_listeners(render()) == {
        "koordpy-scheduler/kube-scheduler": "--bind-address=$(POD_IP)",
        "koordpy-scheduler/extender": "--metrics-host=$(POD_IP)",
        "koordpy-manager/manager": "--health-host=$(POD_IP)",
        "koordpy-agent/agent": "--host=$(POD_IP)",
    }
    # without the extender's ops port its probes run inside the container: no pod-IP listener to set
    loopback = pod_ip_listeners(render("--set", "scheduler.config.extender.metricsPort=null"))
    assert "koordpy-scheduler/extender" not in loopback


def test_each_component_has_its_own_service_account() -> None:
    objects = render()
    accounts = {o["metadata"]["name"] for o in of_kind(objects, "ServiceAccount")}
    assert accounts == {"koordpy-scheduler", "koordpy-manager", "koordpy-agent"}
    used = {pod_spec(o)["serviceAccountName"] for o in objects if o["kind"] in POD_KINDS}
    assert used == accounts


def config_of(objects: list[dict[str, Any]], suffix: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(named(objects, "ConfigMap", suffix)["data"]["config.yaml"])
    return data


def test_component_configs_validate_with_koordpys_models(scenario: str) -> None:
    objects = render_scenario(scenario)
    names = {o["metadata"]["name"] for o in of_kind(objects, "ConfigMap")}
    if "koordpy-scheduler" in names:
        cfg = validate(SchedulerConfiguration, config_of(objects, "-scheduler"), f"{scenario}: scheduler config")
        assert cfg.kind == "SchedulerConfiguration"
    if "koordpy-manager" in names:
        manager = validate(ManagerConfiguration, config_of(objects, "-manager"), f"{scenario}: manager config")
        deployment = named(objects, "Deployment", "-manager")
        assert manager.leader_election.leader_elect is True  # every replica count: one actor
        assert (manager.leader_election.resource_name, manager.leader_election.resource_namespace) == (
            "koordpy-manager",
            deployment["metadata"]["namespace"],
        )
        port = pod_spec(deployment)["containers"][0]["ports"][0]["containerPort"]
        assert port == manager.health.port


def test_with_low_node_load_the_manager_reads_the_schedulers_own_configuration() -> None:
    """One source: the manager's scheduler.yaml is scheduler.config rendered as the scheduler's ConfigMap renders it,
    and the manager is pointed at it; without lowNodeLoad neither is there."""
    balancing = render("-f", str(CHART / "ci" / "tuned-values.yaml"))
    manager_cm = named(balancing, "ConfigMap", "-manager")["data"]
    assert yaml.safe_load(manager_cm["scheduler.yaml"]) == config_of(balancing, "-scheduler")
    assert validate(SchedulerConfiguration, yaml.safe_load(manager_cm["scheduler.yaml"])).extender.scheduler_name == (
        "batch-scheduler"
    )
    (manager,) = containers(named(balancing, "Deployment", "-manager"))
    assert "--scheduler-config=/etc/koordpy/scheduler.yaml" in manager["command"]
    assert {"name": "config", "mountPath": "/etc/koordpy", "readOnly": True} in manager["volumeMounts"]
    plain = render()
    assert "scheduler.yaml" not in named(plain, "ConfigMap", "-manager")["data"]
    (manager,) = containers(named(plain, "Deployment", "-manager"))
    assert not any(arg.startswith("--scheduler-config") for arg in manager["command"])
    # a change of the scheduler's configuration restarts the manager that reads it
    moved = render(
        "-f", str(CHART / "ci" / "tuned-values.yaml"), "--set", "scheduler.config.loadAware.usageThresholds.cpu=60"
    )
    checksum = [
        named(objects, "Deployment", "-manager")["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
        for objects in (balancing, moved)
    ]
    assert checksum[0] != checksum[1]


def extender_ops(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """Where the extender's ops port shows up: container ports, probes, Service ports, ServiceMonitor."""
    deployment = named(objects, "Deployment", "-scheduler")
    (extender,) = [c for c in containers(deployment) if c["name"] == "extender"]
    monitors = [m for m in of_kind(objects, "ServiceMonitor") if m["metadata"]["name"].endswith("-scheduler")]
    return {
        "ports": extender.get("ports", []),
        "probes": {k: extender[k] for k in ("livenessProbe", "readinessProbe")},
        "service": [p["name"] for p in named(objects, "Service", "-scheduler")["spec"]["ports"]],
        "monitor": [e["port"] for m in monitors for e in m["spec"]["endpoints"]],
        "config": validate(SchedulerConfiguration, config_of(objects, "-scheduler")).extender,
    }


def test_extender_ops_port_is_the_configured_one(scenario: str) -> None:
    objects = render_scenario(scenario)
    if not any(d["metadata"]["name"] == "koordpy-scheduler" for d in of_kind(objects, "Deployment")):
        return  # scheduler disabled in this scenario
    ops = extender_ops(objects)
    port = ops["config"].metrics_port
    assert port is not None, "the chart's default keeps the ops listener"
    assert ops["ports"] == [{"name": "http-metrics", "containerPort": port, "protocol": "TCP"}]
    assert ops["probes"]["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http-metrics"}
    assert ops["probes"]["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http-metrics"}
    assert ops["service"] == ["https-metrics", "http-metrics"]
    # the extender's ops port, then kube-scheduler's secure port where it is scraped too (opt-in)
    assert ops["monitor"] in ([], ["http-metrics"], ["http-metrics", "https-metrics"])
    if scenario != "default":
        assert ops["monitor"][:1] == ["http-metrics"]  # rendered as for a cluster with the Prometheus Operator
    assert ops["config"].metrics_host == "0.0.0.0"
    port_of = {p["name"]: p["port"] for p in named(objects, "Service", "-scheduler")["spec"]["ports"]}
    assert port_of["http-metrics"] == port


def test_without_metrics_port_the_extender_stays_on_loopback() -> None:
    sm = (str(CHART / "ci" / "servicemonitor-values.yaml"), *MONITORING_API)
    assert extender_ops(render("-f", *sm))["monitor"] == ["http-metrics", "https-metrics"]
    ops = extender_ops(render("-f", *sm, "--set", "scheduler.config.extender.metricsPort=null"))
    assert ops["config"].metrics_port is None
    assert ops["ports"] == []
    for name, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        command = ops["probes"][name]["exec"]["command"]
        assert f"http://127.0.0.1:{ops['config'].port}{path}" in command[-1]
    assert ops["service"] == ["https-metrics"]
    assert ops["monitor"] == ["https-metrics"]


def test_agent_config_validates_with_koordpys_model(scenario: str) -> None:
    try:
        from koordpy.config.agent import AgentConfiguration
    except ImportError as exc:
        pytest.fail(
            f"koordpy.config.agent.AgentConfiguration is missing ({exc}); the agent ConfigMap cannot be checked"
        )
    objects = render_scenario(scenario)
    if any(o["metadata"]["name"] == "koordpy-agent" for o in of_kind(objects, "ConfigMap")):
        cfg = validate(AgentConfiguration, config_of(objects, "-agent"), f"{scenario}: agent config")
        assert cfg.kind == "AgentConfiguration"


def test_config_changes_restart_pods() -> None:
    base = {o["metadata"]["name"]: o for o in render() if o["kind"] in POD_KINDS}
    changed = {
        o["metadata"]["name"]: o
        for o in render("--set", "manager.config.nodeMetric.reportIntervalSeconds=30")
        if o["kind"] in POD_KINDS
    }

    def checksum(objs: dict[str, Any], name: str) -> str:
        return str(objs[name]["spec"]["template"]["metadata"]["annotations"]["checksum/config"])

    assert checksum(base, "koordpy-manager") != checksum(changed, "koordpy-manager")
    assert checksum(base, "koordpy-scheduler") == checksum(changed, "koordpy-scheduler")


def test_the_manager_elects_its_leader_on_a_lease_of_its_own_and_rolls_with_a_standby() -> None:
    """Every replica count: the Lease <release>-manager in the release namespace, a Role for it alone
    (create cannot be limited by name), no kopf peering written; the Deployment surges one standby and
    never drops below its replicas (the old leader hands over on SIGTERM)."""
    for objs in (render(), render_scenario("ha-values.yaml")):
        assert of_kind(objs, "ClusterKopfPeering") == []
        config = yaml.safe_load(named(objs, "ConfigMap", "-manager")["data"]["config.yaml"])
        assert "peering" not in config
        election = config["leaderElection"]
        assert (election["resourceName"], election["resourceNamespace"]) == ("koordpy-manager", "koordpy-system")
        deployment = named(objs, "Deployment", "-manager")
        assert deployment["spec"]["strategy"] == {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
        }
        assert deployment["metadata"]["annotations"]["koordpy.io/leader-election"] == "lease"
        (role,) = [r for r in of_kind(objs, "Role") if r["metadata"]["name"] == "koordpy-manager-leader-election"]
        assert role["rules"] == [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
            {
                "apiGroups": ["coordination.k8s.io"],
                "resources": ["leases"],
                "resourceNames": ["koordpy-manager"],
                "verbs": ["get", "update"],
            },
        ]


def test_without_leader_election_the_manager_is_recreated_and_alone() -> None:
    """leaderElect false: the old pod goes before the new one starts (Recreate), no Lease Role, no
    annotation (so a later upgrade that turns election on is a Recreate too); two replicas refused."""
    objs = render("--set", "manager.config.leaderElection.leaderElect=false")
    deployment = named(objs, "Deployment", "-manager")
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert "koordpy.io/leader-election" not in (deployment["metadata"].get("annotations") or {})
    assert [r for r in of_kind(objs, "Role") if r["metadata"]["name"] == "koordpy-manager-leader-election"] == []
    refused = run_helm(
        "template",
        "koordpy",
        str(CHART),
        "--set",
        "manager.config.leaderElection.leaderElect=false",
        "--set",
        "manager.replicaCount=2",
    )
    assert refused.returncode != 0 and "needs manager.config.leaderElection.leaderElect" in refused.stderr


def test_the_scheduler_rolls_with_a_standby_only_with_kube_schedulers_leader_election() -> None:
    rolling = named(render(), "Deployment", "-scheduler")["spec"]["strategy"]
    assert rolling == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    alone = named(render("--set", "scheduler.leaderElection.enabled=false"), "Deployment", "-scheduler")
    assert alone["spec"]["strategy"] == {"type": "Recreate"}


def test_disruption_budgets_only_with_replicas() -> None:
    assert of_kind(render(), "PodDisruptionBudget") == []
    ha = of_kind(render_scenario("ha-values.yaml"), "PodDisruptionBudget")
    assert {p["metadata"]["name"] for p in ha} == {"koordpy-scheduler", "koordpy-manager"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            (
                "--set",
                "scheduler.config.extender.bindTimeoutSeconds=30",
                "--set",
                "scheduler.config.gang.binderHttpTimeoutSeconds=30",
            ),
            "bindTimeoutSeconds (30) must be below scheduler.config.gang.binderHttpTimeoutSeconds (30)",
        ),
        (
            ("--set", "scheduler.replicaCount=2", "--set", "scheduler.leaderElection.enabled=false"),
            "needs scheduler.leaderElection.enabled",
        ),
        (("--set", "scheduler.config.extender.host=0.0.0.0"), "must stay 127.0.0.1"),
        (
            ("--set", "scheduler.config.extender.metricsPort=10262"),
            "metricsPort (10262) must differ from extender.port and scheduler.kubeScheduler.securePort",
        ),
        (("--set", "scheduler.config.extender.metricsPort=10259"), "metricsPort (10259) must differ"),
        (("--set", "scheduler.config.extender.metricsHost=127.0.0.1"), "metricsHost must not be loopback"),
        (("--set", "scheduler.bogus=1"), "additional properties 'bogus' not allowed"),
        (("--set", "crds.exclude={nodemetrics}"), "/crds/exclude/0"),
        (("--set", "scheduler.kubeScheduler.percentageOfNodesToScore=101"), "percentageOfNodesToScore"),
        (
            ("--set", "admissionPolicies.validationActions={Deny,Warn}"),
            "Deny and Warn together are not allowed",
        ),
        (("--set", "admissionPolicies.validationActions={Refuse}"), "validationActions/0"),
        (("--set", "agent.hostPaths.proc=proc"), "/agent/hostPaths/proc"),
    ],
)
def test_contradictions_fail_at_template_time(args: tuple[str, ...], message: str) -> None:
    proc = run_helm("template", "koordpy", str(CHART), *args)
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr


FREE_FORM = {"config", "resources", "nodeSelector", "tolerations", "affinity", "podAnnotations", "commonLabels"}
FREE_FORM |= {"labels", "managedResources", "imagePullSecrets", "exclude", "metricsFrom", "seLinuxOptions"}


def test_every_values_key_is_documented_in_values_yaml_and_schema() -> None:
    lines = (CHART / "values.yaml").read_text(encoding="utf-8").splitlines()
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    stack: list[tuple[int, str]] = []
    undocumented = []
    for n, line in enumerate(lines):
        match = re.match(r"^(\s*)([A-Za-z]\w*):", line)
        if not match:
            continue
        indent = len(match.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if any(key in FREE_FORM for _, key in stack):
            continue
        stack.append((indent, match.group(2)))
        previous = next((p for p in reversed(lines[:n]) if p.strip()), "")
        if not previous.strip().startswith("#"):
            undocumented.append(f"values.yaml:{n + 1}: {line.strip()}")
        node = schema
        for _, key in stack:
            node = node["properties"][key]
        if not node.get("description"):
            undocumented.append(f"values.schema.json: {'.'.join(k for _, k in stack)} has no description")
    assert undocumented == []


def merged(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """Helm's values merge: maps merge recursively, anything else replaces."""
    out = dict(base)
    for key, value in overlay.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def test_values_yaml_and_scenarios_satisfy_the_schema() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft7Validator.check_schema(schema)
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    jsonschema.validate(values, schema)
    for path in (CHART / "ci").glob("*-values.yaml"):
        jsonschema.validate(merged(values, yaml.safe_load(path.read_text(encoding="utf-8"))), schema)


def _install_notes(*values: str) -> str:
    proc = subprocess.run(
        [str(helm_binary()), "install", "koordpy", str(CHART), "--dry-run=client", "-n", NAMESPACE, *values],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "KUBECONFIG": "/nonexistent"},
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split("NOTES:", 1)[1]


def test_notes_render_for_an_install() -> None:
    notes = _install_notes()
    assert "schedulerName: koordpy-scheduler" in notes
    assert "127.0.0.1:10262" in notes
    assert "on the pod IP only, port 10263 (Service port http-metrics" in notes  # the default ops listener
    assert "sh -c 'wget -qO- http://$(hostname -i):10263/metrics'" in notes
    assert "manager.config.reservation.enabled (now: false)" in notes
    # the migration mode the manager applies: koordpy's default, the one the values choose
    default = validate(ManagerConfiguration, {}).migration_controller.default_job_mode
    assert f"(a job without spec.mode:\n{default})" in notes
    chosen = _install_notes("--set", "manager.config.migrationController.defaultJobMode=EvictDirectly")
    assert "(a job without spec.mode:\nEvictDirectly)" in chosen


def test_deploy_manifests_are_rendered_from_the_chart(tmp_path: Path) -> None:
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "render-deploy.sh"), str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "HELM": str(helm_binary())},
    )
    assert proc.returncode == 0, proc.stderr
    fresh = sorted(p.name for p in tmp_path.glob("*.yaml"))
    assert fresh == sorted(p.name for p in (ROOT / "deploy").glob("*.yaml")), "run scripts/render-deploy.sh"
    for name in fresh:
        committed = (ROOT / "deploy" / name).read_text(encoding="utf-8")
        assert committed == (tmp_path / name).read_text(encoding="utf-8"), f"deploy/{name} is stale"


def test_missing_helm_fails_loudly_instead_of_skipping(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import helm_render

    monkeypatch.setattr(helm_render, "HELM", tmp_path / "bin" / "helm")
    with pytest.raises(pytest.fail.Exception, match=r"helm not found at .*: run `bash scripts/install-helm.sh"):
        helm_render.helm_binary()


def test_renders_and_validates_for_the_oldest_supported_kubernetes() -> None:
    """Chart.yaml's kubeVersion floor (1.29): every built-in object validates against 1.29's schemas."""
    objects = render("--kube-version", "1.29.0", "-f", str(CHART / "ci" / "ha-values.yaml"))
    for obj in objects:
        if obj["apiVersion"] in CUSTOM:
            continue
        kubernetes_validate.validate(obj, "1.29", strict=True)
    proc = run_helm("template", "koordpy", str(CHART), "--kube-version", "1.28.9")
    assert proc.returncode != 0
    assert "incompatible with Kubernetes" in proc.stderr, proc.stderr
