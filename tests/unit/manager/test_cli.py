"""``koordpy manager`` argument and config-file handling (the operator itself is not started here)."""

from __future__ import annotations

from pathlib import Path

import typer
from typer.testing import CliRunner

from koordpy.cli.manager import load_manager_config, register


def app() -> typer.Typer:
    root = typer.Typer()
    register(root)

    @root.command("other")
    def other() -> None:  # a second command keeps "manager" a sub-command, as in cli/main.py
        """Placeholder."""

    return root


def test_invalid_config_exits_2_naming_file_and_field(tmp_path: Path) -> None:
    cfg = tmp_path / "manager.yaml"
    cfg.write_text("kind: ManagerConfiguration\nnodeMetric:\n  reportIntervalSeconds: -1\n")
    result = CliRunner().invoke(app(), ["manager", "--config", str(cfg)])
    assert result.exit_code == 2
    assert f"{cfg}: nodeMetric.reportIntervalSeconds" in result.output


def test_missing_kubeconfig_exits_2(tmp_path: Path) -> None:
    cfg = tmp_path / "manager.yaml"
    cfg.write_text("kind: ManagerConfiguration\n")
    result = CliRunner().invoke(app(), ["manager", "--config", str(cfg), "--kubeconfig", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert "--kubeconfig" in result.output


def test_load_reads_yaml(tmp_path: Path) -> None:
    cfg = tmp_path / "manager.yaml"
    cfg.write_text("apiVersion: koordpy.io/v1alpha1\nkind: ManagerConfiguration\npeering: {enabled: true}\n")
    assert load_manager_config(cfg).peering.enabled is True
