"""Credentials that renew, on the real control plane. Each component reads its ServiceAccount token from a
file laid out as kubelet writes a projected volume (``..data`` swapped atomically), named by its kubeconfig's
``tokenFile``. The tokens come from the TokenRequest API, bound to an object the test owns (a Secret; for the
agent a Pod on its node, since the agent's token must name its node): deleting that object makes the API
server refuse the token at once.

* A fresh token is written and the old one's object deleted mid-run: binds (extender), NodeMetric reports
  (agent), a PodMigrationJob (manager) and a Reservation (manager places it, the extender binds its owner
  through it) go on, with no process restarted.
* The token is revoked and nothing newer is written: every component's ``/readyz`` fails once
  ``credentials.refusedNotReadySeconds`` has passed, with ``koordpy_kube_credentials_refused`` 1 and a
  ``kube.credentials.not_ready`` log line, and kube-scheduler's ``FailedScheduling`` on a pending pod of the
  profile names the refused credentials; once a fresh token is written, each is ready again and posts a
  ``CredentialsRefused`` Warning Event on its own Pod (``POD_NAME``/``POD_NAMESPACE``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from cluster_kit import RELEASE_NAMESPACE, Components, Kube, Release, Space, fake_node_files, wait_until
from promtext import total
from tokens import RotatingToken, revoke_all

from koordpy.model.durations import parse_rfc3339
from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.controlplane import ControlPlane
from koordpy_testkit.processes import Proc
from koordpy_testkit.projected import ProjectedVolume

pytestmark = pytest.mark.cluster

MANAGER = {
    "migrationController": {"defaultJobMode": "EvictDirectly", "arbitrationArgs": {"interval": "200ms"}},
    "reservation": {"intervalSeconds": 1},
    "nodeMetric": {"reportIntervalSeconds": 1, "aggregateDurationSeconds": 1},  # the agent's reports, each second
}
ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"


def tokens(plane: ControlPlane, kube: Kube, release: Release, directory: Path, node: str) -> dict[str, RotatingToken]:
    out = {
        component: RotatingToken(
            plane,
            kube,
            release.service_account(component),
            ProjectedVolume(directory / component),
            node if component == "agent" else None,
        )
        for component in ("scheduler", "manager", "agent")
    }
    for token in out.values():
        token.write_fresh()
    return out


@dataclass
class Running:
    """The three components of a test, each on its own token file."""

    extender: Proc
    manager: Proc
    agent: Proc
    agent_base: str
    """The agent's listener (``/readyz``, ``/metrics``)."""


@contextlib.contextmanager
def components_on_token_files(
    koordpy: Components,
    token: dict[str, RotatingToken],
    node: str,
    tmp_path: Path,
    overrides: dict[str, Any] | None = None,
    env: dict[str, dict[str, str]] | None = None,
) -> Iterator[Running]:
    """The extender (behind the koordpy-scheduler), the manager (``MANAGER`` settings) and the agent of
    ``node``, each reading its token from its ``tokenFile``; ``overrides`` go to all three configurations,
    ``env`` (per component) to their environments."""
    extra, envs = overrides or {}, env or {}
    koordpy.start_scheduling(
        extra, kubeconfig=koordpy.token_file_kubeconfig("extender", token["scheduler"].path), env=envs.get("extender")
    )
    manager = koordpy.start_manager(
        {**MANAGER, **extra},
        kubeconfig=koordpy.token_file_kubeconfig("manager", token["manager"].path),
        env=envs.get("manager"),
    )
    with fake_node_files(tmp_path) as (cgroup_root, proc_root):
        agent, readyz = koordpy.start_ready_agent(
            node,
            cgroup_root,
            proc_root,
            tmp_path / "agent-state",
            extra,
            kubeconfig=koordpy.token_file_kubeconfig("agent", token["agent"].path),
            env=envs.get("agent"),
        )
        extender = next(p for p in koordpy.procs if p.name == "extender")
        yield Running(extender, manager, agent, readyz.removesuffix("/readyz"))


def chart_pod(kube: Kube, prefix: str, node: str | None = None) -> dict[str, str]:
    """``POD_NAME``/``POD_NAMESPACE`` of the chart's own pod (one its Deployment or DaemonSet made) whose
    name starts with ``prefix``."""
    selector = {"fieldSelector": f"spec.nodeName={node}"} if node else {}
    pod = wait_until(
        f"the chart's pod {prefix}*",
        lambda: next(
            (
                p
                for p in kube.list("Pod", RELEASE_NAMESPACE, **selector)
                if p["metadata"]["name"].startswith(prefix) and p["metadata"].get("ownerReferences")
            ),
            None,
        ),
    )
    return {"POD_NAME": pod["metadata"]["name"], "POD_NAMESPACE": RELEASE_NAMESPACE}


def deployment(space: Space, name: str, replicas: int, node: str) -> dict[str, Any]:
    """A Deployment placed by the stock default scheduler on ``node`` (the pods a migration moves)."""
    labels = {"app": name}
    template = space.pod("unused", scheduler="default-scheduler", node_selector={"kubernetes.io/hostname": node})
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": space.namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": template["spec"]},
        },
    }


def running_pods(space: Space, app: str) -> list[str]:
    return sorted(
        name
        for name, pod in space.pods().items()
        if pod["metadata"].get("labels", {}).get("app") == app
        and pod["spec"].get("nodeName")
        and not pod["metadata"].get("deletionTimestamp")
        and pod.get("status", {}).get("phase") == "Running"
    )


def reported_after(kube: Kube, node: str, moment: float) -> bool:
    nodemetric = kube.get("NodeMetric", node) or {}
    stamp = (nodemetric.get("status") or {}).get("updateTime")
    return bool(stamp) and parse_rfc3339(stamp) > moment


def metrics(base: str) -> str:
    return httpx.get(base + "/metrics", timeout=HANG_BACKSTOP).text


def test_components_go_on_when_the_token_is_rotated_and_the_old_one_revoked(
    control_plane: ControlPlane, koordpy: Components, release: Release, space: Space, kube: Kube, tmp_path: Path
) -> None:
    node = space.node("n0", cpu="16", memory="64Gi")
    space.wait_nodes_ready()
    kube.create(deployment(space, "web", 2, node))
    token = tokens(control_plane, kube, release, tmp_path / "tokens", node)
    with components_on_token_files(koordpy, token, node, tmp_path) as running:
        extender, manager, agent = running.extender, running.manager, running.agent
        started = time.time()
        wait_until("the agent's first report", lambda: reported_after(kube, node, started - 5))
        pods = wait_until(
            "web's two pods running", lambda: len(running_pods(space, "web")) == 2 and running_pods(space, "web")
        )
        pids = {p.name: p.pid for p in (extender, manager, agent)}

        # kubelet's rotation: a fresh token written atomically; then the old one's object deleted
        for rotating in token.values():
            rotating.write_fresh()
        revoke_all(token, keep_newest=True)
        revoked = time.time()

        for i in range(3):
            space.create_pod(f"after-{i}")
        wait_until(
            "three pods bound by the extender after the revocation",
            lambda: sum(1 for n in space.bound() if n.startswith("after-")) == 3,
        )
        wait_until("a NodeMetric report after the revocation", lambda: reported_after(kube, node, revoked))

        job = {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "PodMigrationJob",
            "metadata": {"name": f"{space.namespace}-move"},
            "spec": {"mode": "EvictDirectly", "podRef": {"namespace": space.namespace, "name": pods[0]}},
        }
        kube.create(job)
        done = wait_until(
            "the PodMigrationJob finished",
            lambda: (
                (j := kube.get("PodMigrationJob", job["metadata"]["name"]))
                and j.get("status", {}).get("phase") in ("Succeeded", "Failed")
                and j["status"]
            ),
        )
        assert done["phase"] == "Succeeded", done

        hold = {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "Reservation",
            "metadata": {"name": f"{space.namespace}-hold"},
            "spec": {
                "template": {
                    "spec": {
                        "nodeSelector": space.selector,
                        "containers": [{"name": "main", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
                    }
                },
                "owners": [{"labelSelector": {"matchLabels": {"reserved-for": space.namespace}}}],
                "ttl": "10m",
            },
        }
        kube.create(hold)
        name = hold["metadata"]["name"]
        try:
            placed = wait_until(
                "the Reservation placed by the manager",
                lambda: (r := kube.get("Reservation", name)) and r.get("status", {}).get("phase") == "Available" and r,
            )
            space.create_pod("owner", cpu="1", memory="1Gi", labels={"reserved-for": space.namespace})
            owner = wait_until(
                "the owner bound", lambda: space.pods()["owner"]["spec"].get("nodeName") and space.pods()["owner"]
            )
            assert placed["metadata"]["uid"] in owner["metadata"]["annotations"].get(ALLOCATED, ""), owner["metadata"]
        finally:
            kube.delete("Reservation", name)

        for proc, base in (
            (extender, koordpy.extender_ops),
            (manager, koordpy.manager_base),
            (agent, running.agent_base),
        ):
            assert proc.alive() and proc.pid == pids[proc.name] and proc.starts == 1, proc.name
            # renewed after a 401 (a request with the old token) or by the minute's re-read, whichever came first
            assert '"kube.credentials.renewed"' in proc.log.read_text(errors="replace"), proc.name
            exposition = metrics(base)
            print(f"{proc.name}: {total(exposition, 'koordpy_kube_unauthorized_total'):.0f} answers 401")
            assert total(exposition, "koordpy_kube_credentials_refused") == 0, proc.name


def test_credentials_that_stay_refused_turn_every_component_not_ready_and_say_why(
    control_plane: ControlPlane, koordpy: Components, release: Release, space: Space, kube: Kube, tmp_path: Path
) -> None:
    node = space.node("n0", cpu="16", memory="64Gi")
    space.wait_nodes_ready()
    token = tokens(control_plane, kube, release, tmp_path / "tokens", node)
    quick = {"credentials": {"refusedNotReadySeconds": 1}}
    env = {
        "extender": chart_pod(kube, f"{release.name}-scheduler-"),
        "manager": chart_pod(kube, f"{release.name}-manager-"),
        "agent": chart_pod(kube, f"{release.name}-agent-", node),
    }
    with components_on_token_files(koordpy, token, node, tmp_path, quick, env) as running:
        readyz = {
            "extender": koordpy.extender_ops + "/readyz",
            "manager": koordpy.manager_base + "/readyz",
            "agent": running.agent_base + "/readyz",
        }
        for name, url in readyz.items():
            wait_until(f"{name} ready", lambda u=url: httpx.get(u, timeout=HANG_BACKSTOP).status_code == 200)

        revoke_all(token, keep_newest=False)  # and nothing newer in the files
        # work that needs the API: a bind (extender), a NodeMetric for a new node (manager); the agent reports
        space.create_pod("blocked")
        space.node("n1")

        for name, url in readyz.items():
            answer = wait_until(
                f"{name} not ready", lambda u=url: (r := httpx.get(u, timeout=HANG_BACKSTOP)).status_code == 503 and r
            )
            assert "refused the credentials" in answer.text and "token" in answer.text, (name, answer.text)
        procs = {"extender": running.extender, "manager": running.manager, "agent": running.agent}
        for name, url in readyz.items():
            exposition = metrics(url.removesuffix("/readyz"))
            assert total(exposition, "koordpy_kube_credentials_refused") == 1, name
            assert total(exposition, "koordpy_kube_unauthorized_total") >= 1, name
            wait_until(  # the watch looks once a second: the line may follow /readyz's answer by that much
                f"{name}'s not_ready log line",
                lambda n=name: '"event": "kube.credentials.not_ready"' in procs[n].log.read_text(errors="replace"),
            )
            line = next(x for x in procs[name].log.read_text().splitlines() if "kube.credentials.not_ready" in x)
            assert '"level": "error"' in line and str(token["scheduler" if name == "extender" else name].path) in line
        # where users look for a pending pod: kube-scheduler's FailedScheduling carries the extender's reason
        failed = wait_until(
            "a FailedScheduling Event on the blocked pod naming the refused credentials",
            lambda: next(
                (
                    e
                    for e in kube.events(space.namespace, "blocked")
                    if e["reason"] == "FailedScheduling" and "refused the credentials" in e.get("message", "")
                ),
                None,
            ),
        )
        assert "koordpy extender not ready" in failed["message"], failed

        for rotating in token.values():
            rotating.write_fresh()
        space.create_pod("fresh")  # a bind now (kube-scheduler retries the blocked pod's later, backing off)
        for name, url in readyz.items():
            wait_until(f"{name} ready again", lambda u=url: httpx.get(u, timeout=HANG_BACKSTOP).status_code == 200)
        wait_until("both pods bound", lambda: {"blocked", "fresh"} <= set(space.bound()))
        for name, pod in env.items():
            event = wait_until(
                f"{name}'s CredentialsRefused Event on {pod['POD_NAME']}",
                lambda p=pod: next(
                    (e for e in kube.events(RELEASE_NAMESPACE, p["POD_NAME"]) if e["reason"] == "CredentialsRefused"),
                    None,
                ),
            )
            assert event["type"] == "Warning" and "refusedNotReadySeconds" in event["message"], event
            assert str(token["scheduler" if name == "extender" else name].path) in event["message"], event
        for name, proc in procs.items():
            assert proc.alive() and proc.starts == 1, name
