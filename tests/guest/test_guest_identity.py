"""The chart's agent identity on real cgroup v2: uid 0 with every capability dropped and no privilege
escalation (the chart's ``securityContext``, rendered by the real helm) writes a pod's ``cpu.max`` and
``memory.high`` through the hostPath mount and reads usage and pressure, from a container cgroup with its
own cgroup namespace; the same as a non-root uid is refused every write. Its own container cgroup, the
root of its cgroup namespace, is not writable from inside (cgroup2 ``nsdelegate``), whatever the uid.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koordpy_testkit.confined import agent_container_identity
from koordpy_testkit.guest import Guest, node

pytestmark = pytest.mark.guest

HELM = Path(sys.executable).parent / "helm"


@pytest.fixture(scope="module")
def identity() -> tuple[dict[str, Any], str, str]:
    try:
        return agent_container_identity(HELM)
    except FileNotFoundError as exc:
        pytest.fail(str(exc))


@pytest.fixture
def target(guest: Guest) -> Iterator[str]:
    made = guest.call(
        node.make_pod, driver="systemd", uid=str(uuid.uuid4()), containers=["f" * 64], cpu_max="max 100000"
    )
    yield str(made["pod"])
    guest.call(node.remove_pod, rel=made["pod"])


def test_the_charts_identity_writes_what_the_agent_must_on_v2(
    guest: Guest, identity: tuple[dict[str, Any], str, str], target: str
) -> None:
    context, host_path, mount_path = identity
    out = guest.call(node.confined_probe, context=context, host_path=host_path, mount_path=mount_path, target=target)
    assert (out["uid"], out["cap_eff"], out["no_new_privs"]) == (0, "0000000000000000", "1")
    assert out["cgroup_ns_path"] == "0::/"  # its own cgroup namespace, rooted at its container cgroup
    assert (out.get("quota_written"), out.get("quota_read_back"), out.get("restored")) == (25000, 25000, True), out
    assert out["target_cpu_max"] == "max 100000"  # restored exactly
    assert out.get("memory_written") == str(256 << 20), out
    assert out.get("own_error") == "Operation not permitted", out
    assert out["usage_readable"] is True and out["pressure_readable"] is True
    assert out["proc"][0] == 1.0 and out["proc"][2] is True


def test_a_non_root_uid_is_refused(guest: Guest, identity: tuple[dict[str, Any], str, str], target: str) -> None:
    context, host_path, mount_path = identity
    out = guest.call(
        node.confined_probe,
        context={**context, "runAsUser": 65532},
        host_path=host_path,
        mount_path=mount_path,
        target=target,
    )
    assert (out["uid"], out["cap_eff"]) == (65532, "0000000000000000")
    assert out["writer_error"].endswith("cpu.max: cannot write '25000 100000': Permission denied"), out
    assert out.get("memory_error") == "Permission denied", out
    assert out["target_cpu_max"] == "max 100000"
    assert out["usage_readable"] is True  # reading needs nothing
