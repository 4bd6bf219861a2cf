"""The one cgroup writer: caps a pod's CPU through its CFS quota and puts the original back exactly.

v1 writes ``cpu.cfs_quota_us`` (period from ``cpu.cfs_period_us``); v2 writes ``cpu.max``
(``"<quota> <period>"`` or ``"max <period>"``). The cap goes on the *pod* cgroup, which bounds all
its containers. On v1 the kernel refuses a parent quota below a child's (EINVAL), so container
quotas above the new cap are lowered first, and raised again only after the parent on the way up.

Every original (pod and lowered containers) is written to the state file *before* the first write
to the cgroup, so a restart can restore it: :meth:`CgroupWriter.reconcile` keeps the entries the
caller re-adopts and restores every other one. Entries whose cgroup is gone are dropped.

Someone else's write wins. The kubelet writes a pod's ``cpu.max`` when it resizes the pod in place (and
any operator may). The writer remembers the quota it wrote last; when the file holds another value:

- a restore does not write (the other value stays; the entry is dropped and counted in ``superseded``);
- a further step takes that value as the new original (a later restore writes it back) and never
  writes a cap above it.

The same holds for each container a v1 step lowered. Entries saved before the last-written quota was
recorded are restored unconditionally.

Not guaranteed: a write by someone else of exactly the value the writer wrote looks like the writer's own.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["ActuatorError", "CgroupWriter", "Original"]

log = logging.getLogger("koordpy.agent")

MIN_QUOTA_US = 1000
UNLIMITED = -1


class ActuatorError(RuntimeError):
    """A cgroup file could not be read or written; the message names the file."""


@dataclass(frozen=True, slots=True)
class Original:
    rel: str
    quota: int  # microseconds, -1 = unlimited
    period: int
    children: dict[str, int] = field(default_factory=dict)  # rel -> original quota of lowered children
    written: int | None = None  # the quota last written to ``rel``; None: not recorded (older state file)

    def child_written(self, child: str) -> int | None:
        """What the last step wrote to a lowered child: the cap, or the child's own lower original."""
        if self.written is None:
            return None
        quota = self.children[child]
        return self.written if quota == UNLIMITED else min(quota, self.written)


@dataclass
class CgroupWriter:
    root: str = "/sys/fs/cgroup"
    version: int = 1
    state_file: str | None = None
    originals: dict[str, Original] = field(default_factory=dict)
    superseded: int = 0
    """Restores not written because someone else had changed the quota since the writer's last write."""

    def __post_init__(self) -> None:
        if self.state_file and os.path.exists(self.state_file):
            try:
                with open(self.state_file, encoding="utf-8") as fh:
                    raw = json.load(fh)
                self.originals = {
                    k: Original(
                        v["rel"],
                        int(v["quota"]),
                        int(v["period"]),
                        {c: int(q) for c, q in v["children"].items()},
                        None if v.get("written") is None else int(v["written"]),
                    )
                    for k, v in raw.items()
                }
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                raise ActuatorError(f"{self.state_file}: unreadable throttle state: {exc}") from None

    # -- files -------------------------------------------------------------------------------
    def _dir(self, rel: str) -> str:
        return os.path.join(self.root, rel) if self.version == 2 else os.path.join(self.root, "cpu", rel)

    def read_quota(self, rel: str) -> tuple[int, int]:
        """``(quota_us, period_us)``; quota -1 = unlimited."""
        base = self._dir(rel)
        try:
            if self.version == 2:
                with open(os.path.join(base, "cpu.max"), encoding="ascii") as fh:
                    quota_s, period_s = fh.read().split()
                return (UNLIMITED if quota_s == "max" else int(quota_s)), int(period_s)
            with open(os.path.join(base, "cpu.cfs_quota_us"), encoding="ascii") as fh:
                quota = int(fh.read())
            with open(os.path.join(base, "cpu.cfs_period_us"), encoding="ascii") as fh:
                period = int(fh.read())
        except (OSError, ValueError) as exc:
            raise ActuatorError(f"{base}: cannot read CPU quota: {exc}") from None
        return (UNLIMITED if quota < 0 else quota), period

    def _write_quota(self, rel: str, quota: int, period: int) -> None:
        base = self._dir(rel)
        if self.version == 2:
            path, text = os.path.join(base, "cpu.max"), f"{'max' if quota < 0 else quota} {period}"
        else:
            path, text = os.path.join(base, "cpu.cfs_quota_us"), str(quota)
        try:
            with open(path, "w", encoding="ascii") as fh:
                fh.write(text)
        except OSError as exc:
            raise ActuatorError(f"{path}: cannot write {text!r}: {exc.strerror or exc}") from None

    def _children(self, rel: str) -> list[str]:
        base = self._dir(rel)
        try:
            return sorted(os.path.join(rel, e.name) for e in os.scandir(base) if e.is_dir())
        except OSError:
            return []

    def _save(self) -> None:
        if not self.state_file:
            return
        raw = {
            k: {"rel": v.rel, "quota": v.quota, "period": v.period, "children": v.children, "written": v.written}
            for k, v in self.originals.items()
        }
        tmp = f"{self.state_file}.tmp"
        try:
            os.makedirs(os.path.dirname(self.state_file) or ".", exist_ok=True)
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(raw, fh, sort_keys=True)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.state_file)
        except OSError as exc:
            raise ActuatorError(f"{self.state_file}: cannot save throttle state: {exc}") from None

    # -- operations --------------------------------------------------------------------------
    def set_cap(self, key: str, rel: str, cores: float) -> int:
        """Cap the cgroup at ``cores`` (remembering the original first); returns the quota written.

        The cap never exceeds the original quota; a quota someone else wrote since the last step becomes
        the original."""
        original = self.originals.get(key)
        if original is None or original.rel != rel:
            quota, period = self.read_quota(rel)
            original = Original(rel, quota, period)
        elif original.written is not None:
            quota, period = self.read_quota(rel)
            if quota != original.written:
                log.warning(
                    "%s: cpu quota changed by someone else (%s, the agent wrote %s): it is the new original",
                    self._dir(rel),
                    quota,
                    original.written,
                )
                original = Original(rel, quota, period, original.children)
        period = original.period
        new = max(MIN_QUOTA_US, round(cores * period))
        if original.quota != UNLIMITED:
            new = min(new, original.quota)
        children = dict(original.children)
        lower: list[tuple[str, int]] = []
        if self.version == 1:
            for child in self._children(rel):
                quota, _ = self.read_quota(child)
                if quota != UNLIMITED and quota > new:
                    children.setdefault(child, quota)
                    lower.append((child, new))
        self.originals[key] = Original(rel, original.quota, period, children, new)
        self._save()
        # Children first when they would exceed the new cap, then the pod, then children going up.
        for child, quota in lower:
            self._write_quota(child, quota, period)
        self._write_quota(rel, new, period)
        if self.version == 1:
            # Containers lowered by an earlier step may go up again, never above their originals.
            for child, child_original in children.items():
                if (child, new) not in lower and os.path.isdir(self._dir(child)):
                    target = new if child_original == UNLIMITED else min(child_original, new)
                    self._write_quota(child, target, period)
        return new

    def _ours(self, rel: str, written: int | None) -> bool:
        """Whether ``rel`` still holds what the writer wrote (unrecorded: assume so)."""
        return written is None or self.read_quota(rel)[0] == written

    def restore(self, key: str) -> bool:
        """Write back the exact original quota (pod first, then containers); False if none is known.

        A cgroup whose quota someone else changed since the writer's last write keeps that value."""
        original = self.originals.get(key)
        if original is None:
            return False
        if os.path.isdir(self._dir(original.rel)):
            if self._ours(original.rel, original.written):
                self._write_quota(original.rel, original.quota, original.period)
            else:
                self.superseded += 1
                log.warning(
                    "%s: cpu quota changed by someone else since the agent wrote %s: not restored to %s",
                    self._dir(original.rel),
                    original.written,
                    original.quota,
                )
            for child, quota in original.children.items():
                if os.path.isdir(self._dir(child)) and self._ours(child, original.child_written(child)):
                    self._write_quota(child, quota, original.period)
        del self.originals[key]
        self._save()
        return True

    def reconcile(self, adopt: Iterable[str]) -> list[str]:
        """After a restart: keep ``adopt`` keys whose cgroup exists, restore every other; returns restored keys."""
        keep = set(adopt)
        restored: list[str] = []
        for key in sorted(self.originals):
            original = self.originals[key]
            if not os.path.isdir(self._dir(original.rel)):
                del self.originals[key]
                continue
            if key not in keep:
                self.restore(key)
                restored.append(key)
        self._save()
        return restored

    def restore_all(self) -> list[str]:
        """Restore every remembered original (agent shutdown with ``restoreOnExit``)."""
        return self.reconcile(())
