"""docs/security.md: every helm command it shows renders, the two-release split renders what it says, and
its values example passes the chart's schema. What the commands do on a real API server is
tests/cluster/test_cluster_security.py."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

import jsonschema
import yaml
from helm_render import CHART, ROOT, grants, run_helm

DOC = ROOT / "docs" / "security.md"


def helm_commands() -> list[list[str]]:
    """Each ``helm install`` of the page's shell blocks, continuation lines joined, split like a shell."""
    text = DOC.read_text(encoding="utf-8").replace("\\\n", " ")
    blocks = re.findall(r"```sh\n(.*?)```", text, flags=re.S)
    return [shlex.split(line) for block in blocks for line in block.splitlines() if line.startswith("helm install")]


def rendered(command: list[str]) -> list[dict[str, Any]]:
    assert command[:2] == ["helm", "install"] and command[3] == "charts/koordpy", command
    args = ["template", command[2], str(CHART), *command[4:]]
    proc = run_helm(*args)
    assert proc.returncode == 0, f"{shlex.join(command)}:\n{proc.stderr}"
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


def test_every_helm_install_of_the_page_renders() -> None:
    commands = helm_commands()
    assert len(commands) == 3
    for command in commands:
        assert rendered(command)


def test_the_split_puts_the_agent_alone_in_its_namespace() -> None:
    _, core, agent = helm_commands()
    workloads = {
        name: {
            (o["kind"], o["metadata"]["namespace"]) for o in rendered(cmd) if o["kind"] in ("Deployment", "DaemonSet")
        }
        for name, cmd in (("core", core), ("agent", agent))
    }
    assert workloads == {
        "core": {("Deployment", "koordpy-system")},
        "agent": {("DaemonSet", "koordpy-agent")},
    }
    core_pods = [o for o in rendered(core) if o["kind"] == "Deployment"]
    assert len(core_pods) == 2
    for deployment in core_pods:  # what restricted asks of every container
        spec = deployment["spec"]["template"]["spec"]
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert not [v for v in spec["volumes"] if set(v) - {"name", "configMap", "emptyDir"}]
        for container in spec["containers"]:
            ctx = container["securityContext"]
            assert (ctx["allowPrivilegeEscalation"], ctx["capabilities"]) == (False, {"drop": ["ALL"]})
    kinds = {o["kind"] for o in rendered(agent)}
    assert "CustomResourceDefinition" not in kinds  # the first release owns them


def test_the_networkpolicy_example_passes_the_schema() -> None:
    text = DOC.read_text(encoding="utf-8")
    (example,) = re.findall(r"```yaml\n(networkPolicy:.*?)```", text, flags=re.S)
    values = yaml.safe_load(example)
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(values, schema)
    proc = run_helm(
        "template", "koordpy", str(CHART), "--set-json", f"networkPolicy={json.dumps(values['networkPolicy'])}"
    )
    assert proc.returncode == 0, proc.stderr
    policies = [d for d in yaml.safe_load_all(proc.stdout) if d and d["kind"] == "NetworkPolicy"]
    assert all(p["spec"]["ingress"][0]["from"] == values["networkPolicy"]["metricsFrom"] for p in policies)


WRITES = {"create", "update", "patch", "delete", "deletecollection"}


def documented_writes() -> set[tuple[str, str, str]]:
    """(ServiceAccount suffix, verb, resource) of each row of "Every write, by ServiceAccount" for a role the
    chart renders (rows of Kubernetes' built-in roles name the role in parentheses and are left out)."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("### Every write, by ServiceAccount", 1)[1].split("\n### ", 1)[0]
    out: set[tuple[str, str, str]] = set()
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or not cells[0].startswith("`<release>-") or "(" in cells[0]:
            continue
        account = cells[0].strip("`").removeprefix("<release>-")
        for verbs, resource in re.findall(r"`([a-z, ]+) ([A-Za-z/<>.-]+)`", cells[1]):
            name, _, tail = resource.partition("/")
            if tail.startswith("<"):  # a resourceName (the release's own object), not a subresource
                resource = name
            for verb in verbs.split(", "):
                out.add((account, verb, resource))
    return out


def test_every_write_the_chart_grants_is_in_the_table_and_no_other() -> None:
    granted: set[tuple[str, str, str]] = set()
    for account, grants_of in grants(rendered(["helm", "install", "koordpy", "charts/koordpy"])).items():
        for rule in grants_of.rules:
            for verb in WRITES & set(rule.verbs):
                for resource in rule.resources:
                    granted.add((account.split("/", 1)[1].removeprefix("koordpy-"), verb, resource))
    assert granted == documented_writes()
