"""Prometheus' own binaries for the monitoring tests: the ``prometheus`` server, ``promtool`` and
``monitoringcheck``, built from the pinned Go module in ``tools/prometheus`` by ``tools/build-prometheus.sh``
(once per machine, cached).

``KOORDPY_PROMETHEUS_BIN`` (``scripts/run-tests.sh`` sets it) points at a built directory; without it the
build script is run here (it returns at once when the binaries are built). A build that fails raises with
its output: never a skip.

:class:`PrometheusServer` runs the real server on loopback with a configuration the caller gives (the
real-cluster tier's: the chart's ServiceMonitors and PrometheusRule as the Prometheus Operator would
translate them, ``koordpy_testkit.prometheus_operator``) and answers through its HTTP API.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import yaml

from koordpy_testkit.bounds import HANG_BACKSTOP
from koordpy_testkit.processes import LOOPBACK, Proc, free_port, wait_http

__all__ = ["PrometheusServer", "prometheus_bin", "promtool"]

ROOT = Path(__file__).resolve().parents[3]
BUILD = ROOT / "tools" / "build-prometheus.sh"
BINARIES = ("prometheus", "promtool", "monitoringcheck")


@functools.cache
def prometheus_bin() -> Path:
    """The directory holding ``prometheus``, ``promtool`` and ``monitoringcheck``."""
    given = os.environ.get("KOORDPY_PROMETHEUS_BIN")
    if given:
        path = Path(given)
    else:
        built = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True, timeout=3600, check=False)
        if built.returncode != 0:
            raise AssertionError(f"{BUILD} failed ({built.returncode}):\n{built.stderr[-3000:]}")
        path = Path(built.stdout.strip())
    for name in BINARIES:
        if not (path / name).is_file():
            raise AssertionError(f"{path / name} missing: run bash {BUILD}")
    return path


def promtool(*args: str, cwd: Path | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run promtool with ``args`` (not checked: the caller asserts on the result)."""
    return subprocess.run(
        [str(prometheus_bin() / "promtool"), *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=cwd,
        input=stdin,
    )


class PrometheusServer:
    """A Prometheus server on a free loopback port, its configuration, rules and TSDB under ``workdir``.

    ``scrape_configs`` and ``rule_groups`` (one rule file each) go into ``prometheus.yml`` with the global
    ``scrape_interval`` and ``evaluation_interval``; ``promtool check config`` must accept the file before the
    server starts. No Alertmanager: alerts are read from the server's own API (``/api/v1/alerts``) and its
    ``ALERTS`` series.
    """

    def __init__(
        self,
        workdir: Path,
        scrape_configs: Sequence[Mapping[str, Any]],
        rule_groups: Sequence[Mapping[str, Any]] = (),
        *,
        scrape_interval: str = "15s",
        evaluation_interval: str = "15s",
    ) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.base = f"http://{LOOPBACK}:{self.port}"
        workdir.mkdir(parents=True, exist_ok=True)
        rule_files = []
        for index, groups in enumerate(rule_groups):
            path = workdir / f"rules-{index}.yaml"
            path.write_text(yaml.safe_dump(dict(groups), sort_keys=False))
            rule_files.append(str(path))
        self.config = {
            "global": {"scrape_interval": scrape_interval, "evaluation_interval": evaluation_interval},
            "rule_files": rule_files,
            "scrape_configs": [dict(c) for c in scrape_configs],
        }
        self.config_file = workdir / "prometheus.yml"
        self.config_file.write_text(yaml.safe_dump(self.config, sort_keys=False))
        self.proc = Proc(
            "prometheus",
            [
                str(prometheus_bin() / "prometheus"),
                f"--config.file={self.config_file}",
                f"--storage.tsdb.path={workdir / 'tsdb'}",
                f"--web.listen-address={LOOPBACK}:{self.port}",
                "--storage.tsdb.retention.time=6h",
            ],
            workdir / "prometheus.log",
            cwd=workdir,
        )

    def check_config(self) -> subprocess.CompletedProcess[str]:
        """``promtool check config`` of the configuration file (and the rule files it names)."""
        return promtool("check", "config", str(self.config_file))

    def start(self, timeout: float = HANG_BACKSTOP) -> PrometheusServer:
        checked = self.check_config()
        if checked.returncode != 0:
            raise AssertionError(f"promtool check config refused {self.config_file}:\n{checked.stdout}{checked.stderr}")
        self.proc.start()
        wait_http(self.base + "/-/ready", timeout, self.proc)
        return self

    def stop(self) -> None:
        self.proc.stop()

    def _get(self, path: str, **params: str) -> Any:
        answer = httpx.get(self.base + path, params=params, timeout=HANG_BACKSTOP)
        body = answer.json()
        if answer.status_code != 200 or body.get("status") != "success":
            raise AssertionError(f"GET {path} {params}: {answer.status_code} {json.dumps(body)[:1000]}")
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """An instant query's result (vector or matrix items)."""
        params = {"query": expr} if at is None else {"query": expr, "time": f"{at:.3f}"}
        data = self._get("/api/v1/query", **params)
        result: list[dict[str, Any]] = data["result"]
        return result

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        data = self._get("/api/v1/query_range", query=expr, start=f"{start:.3f}", end=f"{end:.3f}", step=f"{step:.3f}")
        result: list[dict[str, Any]] = data["result"]
        return result

    def alerts(self) -> list[dict[str, Any]]:
        """The active (pending or firing) alerts, as ``/api/v1/alerts`` lists them."""
        alerts: list[dict[str, Any]] = self._get("/api/v1/alerts")["alerts"]
        return alerts

    def rules(self) -> list[dict[str, Any]]:
        """Every rule of every group, with its health and last error (``/api/v1/rules``)."""
        return [rule for group in self._get("/api/v1/rules")["groups"] for rule in group["rules"]]

    def targets(self) -> list[dict[str, Any]]:
        """The active targets (``/api/v1/targets``): their labels, health and last error."""
        active: list[dict[str, Any]] = self._get("/api/v1/targets", state="active")["activeTargets"]
        return active

    def label_values(self, label: str, match: str) -> list[str]:
        """``/api/v1/label/<label>/values`` of the series ``match`` selects (Grafana's ``label_values``)."""
        answer = httpx.get(
            f"{self.base}/api/v1/label/{label}/values", params={"match[]": match}, timeout=HANG_BACKSTOP
        ).json()
        values: list[str] = answer["data"]
        return values

    def now(self) -> float:
        """The server's clock (the wall clock of this host)."""
        return time.time()
