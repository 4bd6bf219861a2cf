"""A QEMU guest (TCG) with a real cgroup v2 hierarchy, running the host's own Python and ``.venv``.

The guest boots the Debian kernel that ``scripts/install-guest.sh`` unpacked into the cache
(``KOORDPY_GUEST_DIR``, else the newest complete ``~/.cache/koordpy/guest-*``) with an initramfs built
here from the host's static busybox and the kernel's own modules. Its root is the host's ``/`` shared
read-only over virtio-9p with a tmpfs overlay for writes, so every path (the interpreter, the work tree,
the venv) is the same inside. A second, writable 9p share is the job folder: the guest's PID 1 mounts
it at the same path as on the host, mounts ``cgroup2`` at ``/sys/fs/cgroup`` with ``+cpu +memory +pids
+io +cpuset`` enabled for children, and starts :mod:`koordpy_testkit.guest.runner`, which executes
calls (``module:function`` with JSON arguments) that the host drops into the job folder and writes
their results beside them. Functions run inside one long-lived interpreter, so each call costs no
interpreter start-up (1.6 s in the guest).

Network (optional): QEMU user networking with ``restrict=on``; each ``forwards`` entry makes
``10.0.2.100:<guest port>`` reach ``127.0.0.1:<host port>`` through one ``socat`` per connection.

Bounds: the boot waits for the runner under :data:`~koordpy_testkit.bounds.HANG_BACKSTOP`; qemu runs
under coreutils ``timeout`` (``max_seconds``) so even a leaked guest ends; :meth:`Guest.stop` powers it
off and then ends qemu by its PID. Missing prerequisites raise :class:`GuestUnavailableError` (tests fail,
never skip).

Not guaranteed: speed. One ``-smp 1`` TCG guest keeps one host core busy while it runs (``cpus`` gives it
more vCPUs, each a host thread); the guest's clock follows the host's, so CPU shares measured inside are
shares of the guest's own time.
"""

from __future__ import annotations

import contextlib
import gzip
import inspect
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from koordpy_testkit.bounds import HANG_BACKSTOP

__all__ = ["CONTROLLERS", "GUEST_HOST", "Guest", "GuestError", "GuestUnavailableError", "guest_dir"]

CONTROLLERS = ("cpu", "memory", "pids", "io", "cpuset")
GUEST_HOST = "10.0.2.100"
"""The address inside the guest at which the ``forwards`` reach the host's loopback."""

# Load order matters: each module's dependencies first (modules.dep of the Debian 6.1 kernel).
MODULES = (
    "drivers/virtio/virtio_ring",
    "drivers/virtio/virtio",
    "drivers/virtio/virtio_pci_modern_dev",
    "drivers/virtio/virtio_pci_legacy_dev",
    "drivers/virtio/virtio_pci",
    "net/core/failover",
    "drivers/net/net_failover",
    "drivers/net/virtio_net",
    "net/9p/9pnet",
    "net/9p/9pnet_virtio",
    "fs/netfs/netfs",
    "fs/fscache/fscache",
    "fs/9p/9p",
    "fs/overlayfs/overlay",
    "drivers/net/veth",  # pod networks (CNI ptp) of the kubelet tests
)
BUSYBOX = Path("/bin/busybox")
SETUP = "scripts/install-guest.sh"

INIT = r"""#!/bin/busybox sh
# PID 1 of the koordpy test guest: modules, the 9p root with a tmpfs overlay, the job share, cgroup2,
# loopback and user networking, then the runner; power off when it returns.
/bin/busybox mkdir -p /bin /sbin /usr/bin /usr/sbin /proc /sys /dev /lower /upper /root
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in $(cat /modules); do insmod "/lib/modules/$m.ko" || echo "koordpy-guest: insmod $m failed"; done
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=loose,ro hostroot /lower || poweroff -f
mount -t tmpfs -o mode=0755 upper /upper
mkdir -p /upper/data /upper/work
mount -t overlay overlay -o lowerdir=/lower,upperdir=/upper/data,workdir=/upper/work /root || poweroff -f
mount -t proc proc /root/proc
mount -t sysfs sysfs /root/sys
mount -t cgroup2 -o nsdelegate cgroup2 /root/sys/fs/cgroup
echo "+cpu +memory +pids +io +cpuset" > /root/sys/fs/cgroup/cgroup.subtree_control
mount -t devtmpfs devtmpfs /root/dev
mkdir -p /root/dev/pts /root/dev/shm
mount -t devpts devpts /root/dev/pts
mount -t tmpfs -o mode=1777 shm /root/dev/shm
mount -t tmpfs -o mode=0755 run /root/run
job=$(cat /jobpath)
mkdir -p "/root$job"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 job "/root$job" || poweroff -f
ip link set lo up
if [ -d /sys/class/net/eth0 ]; then
  ip link set eth0 up
  ip addr add 10.0.2.15/24 dev eth0
  ip route add default via 10.0.2.2
fi
echo "koordpy-guest: up after $(cut -d' ' -f1 /proc/uptime) s"
chroot /root /bin/sh "$job/boot.sh" > /dev/console 2>&1
echo "koordpy-guest: runner ended ($?)"
poweroff -f
"""


class GuestUnavailableError(RuntimeError):
    """A prerequisite of the guest tier is missing; the message says which and how to install it."""


class GuestError(RuntimeError):
    """A call inside the guest raised; the message carries its traceback."""


def guest_dir() -> Path:
    """The unpacked kernel package: ``KOORDPY_GUEST_DIR``, else the newest complete one in the cache."""
    configured = os.environ.get("KOORDPY_GUEST_DIR")
    if configured:
        path = Path(configured)
        if not (path / ".complete").is_file():
            raise GuestUnavailableError(f"KOORDPY_GUEST_DIR={configured} is not a complete guest directory ({SETUP})")
        return path
    cache = Path(os.environ.get("KOORDPY_CACHE", Path.home() / ".cache" / "koordpy"))
    found = sorted((p for p in cache.glob("guest-*") if (p / ".complete").is_file()), key=_version_key)
    if not found:
        raise GuestUnavailableError(
            f"no guest kernel in {cache} (no complete guest-<version> directory): run `bash {SETUP}` "
            "(make test does) to download the Debian kernel package"
        )
    return found[-1]


def _version_key(path: Path) -> list[int]:
    """``guest-6.1.0-57`` sorts after ``guest-6.1.0-9`` (as ``sort -V`` in the set-up script)."""
    return [int(part) for part in re.findall(r"\d+", path.name)]


def _require(command: str, package: str) -> str:
    path = shutil.which(command)
    if path is None:
        raise GuestUnavailableError(f"{command} not found: install the Debian package {package} (bash {SETUP})")
    return path


def build_initramfs(kernel: Path, into: Path, job: Path) -> Path:
    """A gzip'd newc cpio: busybox, the 9p/virtio/overlay modules, ``/init`` and ``/jobpath`` (where
    the job share is mounted in the guest: its path on the host)."""
    if not BUSYBOX.is_file():
        raise GuestUnavailableError(f"{BUSYBOX} not found: install the Debian package busybox-static (bash {SETUP})")
    cpio = _require("cpio", "cpio")
    release = (kernel / "RELEASE").read_text().strip()
    modules = kernel / "root" / "lib" / "modules" / release / "kernel"
    tree = into / "initramfs"
    shutil.rmtree(tree, ignore_errors=True)
    (tree / "bin").mkdir(parents=True)
    shutil.copy2(BUSYBOX, tree / "bin" / "busybox")
    (tree / "init").write_text(INIT)
    (tree / "init").chmod(0o755)
    for module in MODULES:
        source = modules / f"{module}.ko"
        if not source.is_file():
            raise GuestUnavailableError(f"{source} missing from the guest kernel package ({kernel})")
        target = tree / "lib" / "modules" / f"{module}.ko"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    (tree / "modules").write_text("\n".join(MODULES) + "\n")
    (tree / "jobpath").write_text(str(job))
    names = sorted(str(p.relative_to(tree)) for p in tree.rglob("*"))
    image = into / "initramfs.cpio"
    with image.open("wb") as out:
        subprocess.run(
            [cpio, "--quiet", "-o", "-H", "newc"],
            input="\n".join(names).encode(),
            stdout=out,
            cwd=tree,
            check=True,
        )
    packed = into / "initramfs.cpio.gz"
    with image.open("rb") as raw, gzip.open(packed, "wb", compresslevel=1) as gz:
        shutil.copyfileobj(raw, gz)
    image.unlink()
    shutil.rmtree(tree)
    return packed


def _target(function: Callable[..., Any]) -> str:
    module = inspect.getmodule(function)
    if module is None or module.__name__ == "__main__":
        raise ValueError(f"{function!r}: only functions of importable modules run in the guest")
    return f"{module.__name__}:{function.__qualname__}"


class Guest:
    """One booted guest. ``start()`` boots and waits for the runner; ``call()`` runs a function inside;
    ``stop()`` powers it off. Files of the run (console log, calls, results) stay in ``workdir``."""

    def __init__(
        self,
        workdir: Path,
        *,
        memory_mib: int = 1024,
        forwards: Mapping[int, int] | None = None,
        env: Mapping[str, str] | None = None,
        max_seconds: int = 3600,
        cpus: int = 1,
    ) -> None:
        self.workdir = workdir
        self.cpus = cpus
        self.job = workdir / "job"
        self.memory_mib = memory_mib
        self.forwards = dict(forwards or {})
        self.env = dict(env or {})
        self.max_seconds = max_seconds
        self.console = workdir / "console.log"
        self.popen: subprocess.Popen[bytes] | None = None
        self.boot_seconds: float | None = None
        self.started: float | None = None
        self.cpu_seconds: float | None = None
        """Host CPU time qemu used, user and system, up to :meth:`stop`: the guest's cost whatever the load."""
        self.wall_seconds: float | None = None
        self._calls = 0
        self._stopped = False

    # ---- lifecycle -----------------------------------------------------------------------

    def command(self, kernel: Path, initrd: Path) -> list[str]:
        qemu = _require("qemu-system-x86_64", "qemu-system-x86")
        release = (kernel / "RELEASE").read_text().strip()
        args = [
            _require("timeout", "coreutils"),
            "--kill-after=10",
            str(self.max_seconds),
            qemu,
            "-machine", "q35,accel=tcg",
            "-cpu", "max",
            "-m", str(self.memory_mib),
            "-smp", str(self.cpus),
            "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
            "-serial", f"file:{self.console}",
            "-kernel", str(kernel / "root" / "boot" / f"vmlinuz-{release}"),
            "-initrd", str(initrd),
            # no_timer_check: a host so loaded that the emulated timer misses the kernel's boot-time check
            # would otherwise panic the guest ("IO-APIC + timer doesn't work!").
            "-append", "console=ttyS0 panic=-1 quiet psi=1 no_timer_check",
            "-fsdev", "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap",
            "-device", "virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot",
            "-fsdev", f"local,id=job,path={self.job},security_model=none,multidevs=remap",
            "-device", "virtio-9p-pci,fsdev=job,mount_tag=job",
        ]  # fmt: skip
        if self.forwards:
            socat = _require("socat", "socat")
            netdev = "user,id=n0,restrict=on"
            for guest_port, host_port in sorted(self.forwards.items()):
                netdev += f",guestfwd=tcp:{GUEST_HOST}:{guest_port}-cmd:{socat} - TCP:127.0.0.1:{host_port}"
            args += ["-netdev", netdev, "-device", "virtio-net-pci,netdev=n0,romfile="]
        return args

    def _boot_script(self) -> str:
        python = sys.executable
        env = {
            "PATH": f"{Path(python).parent}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": "/root",
            "PYTHONUNBUFFERED": "1",
            **self.env,
        }
        exports = "".join(f"export {k}={_shell_quote(v)}\n" for k, v in env.items())
        return (
            "#!/bin/sh\n"
            f"{exports}"
            f"cd {_shell_quote(str(self.job))}\n"
            f"exec {_shell_quote(python)} -m koordpy_testkit.guest.runner {_shell_quote(str(self.job))}"
            " >> runner.log 2>&1\n"
        )

    def start(self) -> Guest:
        kernel = guest_dir()
        shutil.rmtree(self.job, ignore_errors=True)
        for sub in ("calls", "results"):
            (self.job / sub).mkdir(parents=True)
        initrd = build_initramfs(kernel, self.workdir, self.job)
        (self.job / "boot.sh").write_text(self._boot_script())
        started = self.started = time.monotonic()
        with (self.workdir / "qemu.log").open("wb") as log:
            self.popen = subprocess.Popen(
                self.command(kernel, initrd),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            self._wait_for(self.job / "ready", "the guest's runner to start")
        except BaseException:
            self.stop()
            raise
        self.boot_seconds = time.monotonic() - started
        return self

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def diagnostics(self) -> str:
        parts = []
        for name in ("console.log", "qemu.log", "job/runner.log"):
            path = self.workdir / name
            text = path.read_text(errors="replace") if path.exists() else "<none>"
            parts.append(f"--- {name} (last lines)\n" + "\n".join(text.splitlines()[-30:]))
        return "\n".join(parts)

    def _wait_for(self, path: Path, what: str, backstop: float = HANG_BACKSTOP) -> None:
        end = time.monotonic() + backstop
        while not path.exists():
            if not self.alive():
                code = self.popen.returncode if self.popen is not None else None
                raise GuestError(f"the guest ended (qemu exit {code}) while waiting for {what}\n{self.diagnostics()}")
            if time.monotonic() >= end:
                raise GuestError(f"{what}: not done after {backstop:.0f} s (hang backstop)\n{self.diagnostics()}")
            time.sleep(0.02)

    def stop(self, grace: float = 30.0) -> None:
        """Ask the runner to return (PID 1 then powers off), then end qemu by its PID if it is still up.
        A second call does nothing."""
        if self.popen is None or self._stopped:
            return
        self._stopped = True
        self.cpu_seconds = self._qemu_cpu_seconds()
        if self.started is not None:
            self.wall_seconds = time.monotonic() - self.started
        if self.popen.poll() is None and (self.job / "calls").is_dir():
            with contextlib.suppress(OSError):
                self._drop("stop", {"stop": True})
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=grace)
        if self.popen.poll() is None:
            # timeout(1) leads its own session: end it and qemu, its only child, by the group's id.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait(timeout=HANG_BACKSTOP)

    def _qemu_cpu_seconds(self) -> float | None:
        """User and system CPU time of qemu so far (all its threads), from /proc; None once it has ended."""
        assert self.popen is not None
        try:
            children = Path(f"/proc/{self.popen.pid}/task/{self.popen.pid}/children").read_text().split()
            fields = Path(f"/proc/{children[0]}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def __enter__(self) -> Guest:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- calls ----------------------------------------------------------------------------

    def _drop(self, name: str, body: dict[str, Any]) -> None:
        tmp = self.job / "calls" / f".{name}.tmp"
        tmp.write_text(json.dumps(body))
        tmp.rename(self.job / "calls" / f"{name}.json")

    def call(self, function: Callable[..., Any], /, *, backstop: float = HANG_BACKSTOP, **kwargs: Any) -> Any:
        """Run ``function(**kwargs)`` inside the guest and return its (JSON) result; re-raise its error."""
        self._calls += 1
        name = f"{self._calls:05d}"
        self._drop(name, {"target": _target(function), "kwargs": kwargs})
        result_path = self.job / "results" / f"{name}.json"
        self._wait_for(result_path, f"guest call {function.__qualname__}", backstop)
        result = json.loads(result_path.read_text())
        if not result["ok"]:
            raise GuestError(f"{function.__qualname__} failed in the guest:\n{result['error']}")
        return result["value"]


def _shell_quote(value: str) -> str:
    return "'" + value.replace("'", "'\"'\"'") + "'"
