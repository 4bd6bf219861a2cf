"""Run a process with the identity a container's ``securityContext`` gives it, on this machine's kernel.

``Confinement.from_security_context`` reads the fields that decide what a process may do to host files
(``runAsUser``, ``runAsGroup``, ``capabilities``, ``allowPrivilegeEscalation``, ``privileged``), and
:meth:`Confinement.command` wraps a command line so that it runs

* in a cgroup of its own (``join``: the ``cgroup.procs`` files to enter first, as the runtime puts each
  container in its own cgroup), then in new mount, PID and cgroup namespaces (the container's own view:
  its cgroup namespace is rooted at that cgroup, its ``/proc`` is a new procfs),
* with host directories bind-mounted (recursively, like a ``hostPath`` volume) at paths of the caller's
  choosing,
* as that uid and gid, with no supplementary groups, with exactly the capabilities the context keeps
  (``drop: [ALL]`` plus ``add``) in every set, and ``no_new_privs`` when privilege escalation is off.

A checkout below a directory other uids cannot enter (``mktemp -d``, a home directory) is out of a
non-root identity's reach, code and virtualenv alike: given ``checkout_at``, :meth:`Confinement.command`
bind-mounts the checkout there for such an identity and runs ``argv`` from that copy of the same files.

It needs ``unshare``, ``mount`` and ``setpriv`` (util-linux) and root. Not emulated: seccomp, AppArmor or
SELinux profiles, user namespaces, the runtime's read-only ``/sys`` and masked paths (none of which applies
to a ``hostPath`` mount below a non-``/sys`` path, where the chart mounts cgroupfs).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = ["Confinement", "agent_container_identity"]

CHECKOUT = Path(__file__).resolve().parents[3]
CHART = CHECKOUT / "charts" / "koordpy"


def reachable_by_every_uid(path: Path) -> bool:
    """Whether any uid may enter ``path`` and every directory above it (the others' execute bit)."""
    return all(os.stat(p).st_mode & 0o001 for p in (path, *path.parents))


def agent_container_identity(helm: Path, values: Sequence[str] = ()) -> tuple[dict[str, Any], str, str]:
    """The agent container's ``securityContext``, its cgroup ``hostPath`` and where the container mounts it,
    from the chart rendered by the real ``helm`` (``values``: ``--set`` arguments)."""
    if not helm.is_file():
        raise FileNotFoundError(f"helm not found at {helm}: run `bash scripts/install-helm.sh {helm.parent.parent}`")
    sets = [arg for value in values for arg in ("--set", value)]
    proc = subprocess.run(
        [str(helm), "template", "koordpy", str(CHART), *sets], capture_output=True, text=True, check=True
    )
    (agent,) = [d for d in yaml.safe_load_all(proc.stdout) if d and d["kind"] == "DaemonSet"]
    spec = agent["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    volume = next(v for v in spec["volumes"] if v["name"] == "host-cgroup")
    mount = next(m for m in container["volumeMounts"] if m["name"] == "host-cgroup")
    return container["securityContext"], volume["hostPath"]["path"], mount["mountPath"]


@dataclass(frozen=True)
class Confinement:
    uid: int
    gid: int
    capabilities: tuple[str, ...]
    """Kept capabilities, lower-case without the ``CAP_`` prefix (``sys_admin``); empty: none at all."""
    no_new_privs: bool
    privileged: bool = False

    @classmethod
    def from_security_context(cls, ctx: Mapping[str, Any]) -> Confinement:
        """A container's ``securityContext``. A context that keeps the runtime's default capability set
        (no ``drop: [ALL]``) is refused: that set differs between runtimes."""
        if ctx.get("privileged"):
            return cls(int(ctx.get("runAsUser", 0)), int(ctx.get("runAsGroup", 0)), (), False, privileged=True)
        caps = ctx.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            raise ValueError(f"securityContext keeps the runtime's default capabilities: {ctx}")
        added = tuple(str(c).lower().removeprefix("cap_") for c in caps.get("add") or [])
        uid = int(ctx.get("runAsUser", 0))
        if added and uid != 0:
            # a non-root process keeps added capabilities only through file capabilities: not emulated
            raise ValueError(f"added capabilities for a non-root user are not emulated: {ctx}")
        return cls(
            uid=uid,
            gid=int(ctx.get("runAsGroup", ctx.get("runAsUser", 0))),
            capabilities=added,
            no_new_privs=ctx.get("allowPrivilegeEscalation", True) is False,
        )

    def command(
        self,
        argv: Sequence[str],
        *,
        binds: Mapping[str, str] | None = None,
        join: Sequence[str] = (),
        checkout_at: str | None = None,
    ) -> list[str]:
        """``argv`` confined: enter the ``join`` cgroups, new namespaces, ``binds`` (host path -> mount point,
        created if missing), then the identity. ``checkout_at``: where a non-root identity finds the checkout
        when it cannot reach it where it is (``argv``'s paths in it, the virtualenv's Python included, are
        rewritten there and its ``src`` goes first on ``PYTHONPATH``, as the editable install's path is out of
        reach); unused for uid 0 or a checkout every uid may enter."""
        binds = dict(binds or {})
        exports: list[str] = []
        if checkout_at is not None and self.uid != 0 and not reachable_by_every_uid(CHECKOUT):
            binds[str(CHECKOUT)] = checkout_at
            prefix = str(CHECKOUT) + "/"
            argv = [checkout_at + "/" + a.removeprefix(prefix) if a.startswith(prefix) else a for a in argv]
            # exported before setpriv, which executes argv itself: a program between (env) would be
            # executed without the capabilities setpriv keeps until that exec
            exports.append(f"export PYTHONPATH={shlex.quote(checkout_at + '/src')}")
        for tool in ("unshare", "setpriv", "mount"):
            if shutil.which(tool) is None:
                raise RuntimeError(f"{tool} (util-linux) is needed to confine a process like a container")
        identity: list[str] = []
        if not self.privileged:
            caps = ",".join(["-all", *(f"+{c}" for c in self.capabilities)])
            identity = [
                "setpriv",
                f"--reuid={self.uid}",
                f"--regid={self.gid}",
                "--clear-groups",
                f"--inh-caps={caps}",
                f"--bounding-set={caps}",
                "--no-new-privs" if self.no_new_privs else "",
                "--",
            ]
        inner = "; ".join(
            [
                "set -e",
                *(f"mkdir -p {shlex.quote(target)}" for target in binds.values()),
                *(f"mount --rbind {shlex.quote(src)} {shlex.quote(dst)}" for src, dst in binds.items()),
                *exports,
                "exec " + shlex.join([a for a in (*identity, *argv) if a]),
            ]
        )
        namespaces = [
            "unshare",
            "--mount",
            "--pid",
            "--fork",
            "--kill-child",
            "--cgroup",
            "--mount-proc",
            "--propagation",
            "private",
        ]
        outer = "; ".join(
            [
                "set -e",
                *(f"echo $$ > {shlex.quote(procs)}" for procs in join),
                "exec " + shlex.join([*namespaces, "sh", "-c", inner]),
            ]
        )
        return ["sh", "-c", outer]
