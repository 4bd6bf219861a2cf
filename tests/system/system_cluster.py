"""One emulated cluster per test: the API emulator process, kubeconfigs per component, component processes.

Users (from each kubeconfig's bearer token): ``admin`` (the test itself, creating objects),
``driver`` (the kube-scheduler stand-in), ``extender``, ``manager``, ``agent``. The emulator records
every request with its user; :meth:`Cluster.recorded_requests` reads the record.

Component configuration comes from the rendered chart (the ConfigMaps ``helm template`` writes), with
only ports, file paths and the scenario's load-aware arguments overridden.
"""

from __future__ import annotations

import copy
import functools
import json
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml
from system_harness import BIN, KOORDPY, LOOPBACK, ROOT, Proc, free_port, wait_http

from koordpy.kube.connection import write_kubeconfig
from koordpy_testkit.bounds import HANG_BACKSTOP

HELM = BIN / "helm"
CHART = ROOT / "charts" / "koordpy"
RELEASE_NAMESPACE = "koordpy-system"
COMPONENT_USERS = ("extender", "manager", "agent")
USERS = ("admin", "driver", *COMPONENT_USERS)

__all__ = ["COMPONENT_USERS", "Cluster", "RenderedChart", "default_chart", "render_chart"]


@dataclass
class RenderedChart:
    text: str
    docs: list[dict[str, Any]]

    def configmap(self, suffix: str) -> dict[str, str]:
        for doc in self.docs:
            if doc.get("kind") == "ConfigMap" and doc["metadata"]["name"].endswith(suffix):
                return dict(doc.get("data") or {})
        raise AssertionError(f"no ConfigMap named *{suffix} in the rendered chart")

    def kube_scheduler_config(self) -> dict[str, Any]:
        data = self.configmap("-scheduler")
        config: dict[str, Any] = yaml.safe_load(data["kube-scheduler.yaml"])
        return config

    def component_config(self, suffix: str, key: str = "config.yaml") -> dict[str, Any]:
        config: dict[str, Any] = yaml.safe_load(self.configmap(suffix)[key])
        return config


@functools.cache
def default_chart() -> RenderedChart:
    """The chart's defaults, rendered once per session."""
    return render_chart()


def render_chart(*extra: str) -> RenderedChart:
    """``helm template`` with the real helm binary (fails loudly when it is missing)."""
    assert HELM.is_file(), f"{HELM} missing: run scripts/install-helm.sh {HELM.parent.parent}"
    out = subprocess.run(
        [str(HELM), "template", "koordpy", str(CHART), "--namespace", RELEASE_NAMESPACE, *extra],
        check=True,
        capture_output=True,
        text=True,
        timeout=HANG_BACKSTOP,
    )
    docs = [d for d in yaml.safe_load_all(out.stdout) if isinstance(d, dict)]
    return RenderedChart(out.stdout, docs)


def _deep_merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


@dataclass
class Cluster:
    """The emulator plus the components a test starts. Call :meth:`close` (the fixture does)."""

    workdir: Path
    record_file: Path
    procs: list[Proc] = field(default_factory=list)
    url: str = ""
    emulator: Proc | None = None

    @property
    def chart(self) -> RenderedChart:
        return default_chart()

    # ---- emulator ----------------------------------------------------------------------

    def start_emulator(self, timeout: float = HANG_BACKSTOP) -> None:
        port = free_port()
        self.emulator = self._proc(
            "apiserver",
            [
                str(BIN / "python"),
                "-m",
                "koordpy_testkit.apiserver",
                "--host",
                LOOPBACK,
                "--port",
                str(port),
                "--record",
                str(self.record_file),
            ],
        )
        line = self.emulator.wait_for_log("http://", timeout)
        match = re.search(r"http://[0-9.]+:\d+", line)
        assert match, f"emulator printed no URL: {line!r}"
        self.url = match.group(0)

    def kubeconfig(self, user: str) -> Path:
        path = self.workdir / f"kubeconfig-{user}.yaml"
        if not path.exists():
            write_kubeconfig(path, self.url, token=user_token(user), user=user)
        return path

    def admin(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.url, headers={"Authorization": f"Bearer {user_token('admin')}"}, timeout=HANG_BACKSTOP
        )

    # ---- components --------------------------------------------------------------------

    def _proc(self, name: str, args: list[str]) -> Proc:
        proc = Proc(name, args, self.workdir / f"{name}.log").start()
        self.procs.append(proc)
        return proc

    def start_manager(
        self,
        overrides: Mapping[str, Any] | None = None,
        timeout: float = HANG_BACKSTOP,
        extra_args: Sequence[str] = (),
    ) -> tuple[Proc, str]:
        config = self.chart.component_config("-manager")
        port = free_port()
        config = _deep_merge(config, {"health": {"host": LOOPBACK, "port": port}, **(overrides or {})})
        path = self.workdir / "manager-config.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        proc = self._proc(
            "manager",
            [
                str(KOORDPY),
                "manager",
                "--config",
                str(path),
                "--kubeconfig",
                str(self.kubeconfig("manager")),
                *extra_args,
            ],
        )
        base = f"http://{LOOPBACK}:{port}"
        wait_http(base + "/healthz", timeout, proc)  # the manager's liveness endpoint
        return proc, base

    # ---- record ------------------------------------------------------------------------

    def recorded_requests(self) -> list[dict[str, Any]]:
        """The emulator's request record (one JSON object per line)."""
        if not self.record_file.exists():
            return []
        text = self.record_file.read_text()
        whole = text[: text.rfind("\n") + 1]  # a last line still being written is left for the next read
        return [json.loads(line) for line in whole.splitlines() if line.strip()]

    def close(self) -> None:
        """Stop every process group; fail if any process of them survived."""
        for proc in reversed(self.procs):
            proc.stop()
        leaked = [proc.name for proc in self.procs if proc.group_alive()]
        assert not leaked, f"processes left running after teardown: {leaked}"


def user_token(user: str) -> str:
    """The bearer token of ``user`` (the emulator maps it back to the user name)."""
    return user
