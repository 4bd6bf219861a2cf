"""``helm test`` on the real control plane: the real helm creates the chart's test hook pods from the installed
release and judges the release by their outcome; each hook pod's own command runs here against the running
components, and its exit code becomes the pod's phase.

What is real: helm's test-hook semantics (which pods it creates, that it waits for each to finish, that it
deletes the passed ones and keeps a failed one, its exit status and report), the API server and the
controllers around them, the hook's command as the chart renders it (files/health-check.py) run by the
koordpy virtualenv's python, and the components it asks (extender, kube-scheduler, manager, agent) as the
real tier runs them. What stands in: kwok runs no containers, so this test plays the kubelet for the hook
pods (it runs the container's command as a process and writes the pod's status); and there is no cluster
DNS or Service routing, so each URL's ``<service>.<namespace>.svc:<port>`` is replaced by the loopback
address of the process behind that Service port.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import pytest
from cluster_kit import RELEASE, RELEASE_NAMESPACE, Components, Kube, Space, helm, wait_until

from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.cgroupfs import BusyProc, FakeCgroupTree
from koordpy_testkit.controlplane import ControlPlane
from koordpy_testkit.processes import LOOPBACK

pytestmark = pytest.mark.cluster

TEST_SELECTOR = "app.kubernetes.io/component=test"


@dataclass
class HookRun:
    pod: str
    argv: list[str]
    exit_code: int
    output: str


@dataclass
class Kubelet:
    """Plays the kubelet for the release's test hook pods: each one seen Running is run once, its phase written."""

    kube: Kube
    routes: dict[str, str]
    """``<service>.<namespace>.svc:<port>`` -> the loopback ``host:port`` behind it."""
    runs: list[HookRun] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    seen: set[str] = field(default_factory=set)

    def route(self, arg: str) -> str:
        """The hook argument with its Service address replaced by the process behind it."""
        each = arg.startswith("each:")
        parts = urlsplit(arg.removeprefix("each:"))
        target = self.routes.get(parts.netloc)
        assert target is not None, f"no process behind {parts.netloc} (hook argument {arg})"
        return ("each:" if each else "") + parts._replace(netloc=target).geturl()

    def run_pod(self, pod: dict[str, Any]) -> None:
        (container,) = pod["spec"]["containers"]
        command = container["command"]
        assert command[:2] == ["python", "-c"], command
        argv = [sys.executable, "-c", command[2], *(self.route(a) for a in command[3:])]
        env = {e["name"]: e["value"] for e in container.get("env", [])}
        started = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        done = subprocess.run(argv, capture_output=True, text=True, timeout=HANG_BACKSTOP, env=env, check=False)
        finished = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        self.runs.append(HookRun(pod["metadata"]["name"], argv, done.returncode, done.stdout + done.stderr))
        terminated = {
            "exitCode": done.returncode,
            "reason": "Completed" if done.returncode == 0 else "Error",
            "startedAt": started,
            "finishedAt": finished,
        }
        status = {
            "phase": "Succeeded" if done.returncode == 0 else "Failed",
            "containerStatuses": [
                {
                    "name": container["name"],
                    "image": container["image"],
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "started": False,
                    "state": {"terminated": terminated},
                }
            ],
        }
        self.kube.patch("Pod", pod["metadata"]["name"], {"status": status}, RELEASE_NAMESPACE, subresource="status")

    def loop(self) -> None:
        while not self.stop.wait(0.2):
            for pod in self.kube.list("Pod", RELEASE_NAMESPACE, labelSelector=TEST_SELECTOR):
                key = pod["metadata"]["uid"]
                if key in self.seen or pod.get("status", {}).get("phase") != "Running":
                    continue
                self.seen.add(key)
                self.run_pod(pod)


@pytest.fixture(scope="module")
def kubelet(
    module_koordpy: Components, module_space: Space, kube: Kube, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Kubelet]:
    """The four components running, and the kubelet stand-in watching for hook pods (shared by the module's
    tests, in file order: the last one stops the manager)."""
    koordpy, space, tmp_path = module_koordpy, module_space, tmp_path_factory.mktemp("hooks")
    node = space.node("n0", cpu="16", memory="64Gi")
    space.wait_nodes_ready()
    koordpy.start_scheduling()
    koordpy.start_manager()
    busy = BusyProc(tmp_path / "proc", cpus=16, mem_total_kib=64 << 20, mem_avail_kib=48 << 20)
    tree = FakeCgroupTree(tmp_path / "cgroup", version=2, driver="systemd")
    stop_ticks = threading.Event()

    def tick() -> None:
        while not stop_ticks.wait(0.1):
            busy.tick()

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    _, readyz = koordpy.start_ready_agent(node, tree.root, busy.root, tmp_path / "agent-state")
    assert koordpy.scheduler_proc is not None
    svc = f"{RELEASE_NAMESPACE}.svc"
    secure = koordpy.plane.secure_ports[koordpy.scheduler_proc.name]
    routes = {
        f"{RELEASE}-scheduler.{svc}:10263": urlsplit(koordpy.extender_ops).netloc,
        f"{RELEASE}-scheduler.{svc}:10259": f"{LOOPBACK}:{secure}",
        f"{RELEASE}-manager.{svc}:8080": urlsplit(koordpy.manager_base).netloc,
        f"{RELEASE}-agent.{svc}:9316": urlsplit(readyz).netloc,
    }
    stand_in = Kubelet(kube, routes)
    thread = threading.Thread(target=stand_in.loop, daemon=True)
    thread.start()
    try:
        yield stand_in
    finally:
        stand_in.stop.set()
        stop_ticks.set()
        thread.join(timeout=10)
        ticker.join(timeout=5)
        for pod in kube.list("Pod", RELEASE_NAMESPACE, labelSelector=TEST_SELECTOR):
            kube.delete("Pod", pod["metadata"]["name"], RELEASE_NAMESPACE, grace=0)


def hook_pods(kube: Kube) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in kube.list("Pod", RELEASE_NAMESPACE, labelSelector=TEST_SELECTOR)}


def run_helm_test(plane: ControlPlane) -> subprocess.CompletedProcess[str]:
    return helm(plane, "test", RELEASE, "-n", RELEASE_NAMESPACE, "--timeout", f"{int(HANG_BACKSTOP)}s", check=False)


def test_helm_test_passes_when_every_component_answers_its_health_endpoint(
    control_plane: ControlPlane, kubelet: Kubelet, kube: Kube
) -> None:
    done = run_helm_test(control_plane)
    assert done.returncode == 0, done.stdout + done.stderr
    names = sorted(r.pod for r in kubelet.runs)
    assert names == [f"{RELEASE}-test-agent", f"{RELEASE}-test-manager", f"{RELEASE}-test-scheduler"]
    for run in kubelet.runs:
        assert run.exit_code == 0, run.output
        assert "FAIL" not in run.output and run.output.count("ok ") == len(run.argv) - 3, run.output
    # helm's own report names each hook and its phase
    assert all(name in done.stdout for name in names), done.stdout
    assert done.stdout.count("Succeeded") >= 3, done.stdout
    # hook-succeeded: helm deletes the passed pods
    wait_until("the passed hook pods deleted", lambda: not hook_pods(kube))


def test_helm_test_fails_and_keeps_the_hook_of_a_component_that_does_not_answer(
    control_plane: ControlPlane, kubelet: Kubelet, module_koordpy: Components, kube: Kube
) -> None:
    kubelet.runs.clear()
    manager = next(p for p in module_koordpy.procs if p.name == "manager")
    manager.stop()
    done = run_helm_test(control_plane)
    assert done.returncode != 0
    failed = [r for r in kubelet.runs if r.exit_code != 0]
    assert [r.pod for r in failed] == [f"{RELEASE}-test-manager"], [(r.pod, r.output) for r in kubelet.runs]
    assert "FAIL http://" in failed[0].output and "/healthz" in failed[0].output
    assert f"{RELEASE}-test-manager" in done.stdout + done.stderr
    # the failed pod stays for its logs; the next `helm test` replaces it (before-hook-creation)
    kept: Callable[[], Any] = lambda: hook_pods(kube).get(f"{RELEASE}-test-manager")  # noqa: E731
    assert wait_until("the failed hook pod kept", kept)["status"]["phase"] == "Failed"
