"""A projected-volume directory written the way kubelet's atomic writer does it (``pkg/volume/util/
atomic_writer.go``): the files live in a timestamped directory ``..YYYY_MM_DD_HH_MM_SS.N``, ``..data`` is a
symlink to it, and each visible file (``token``) is a symlink to ``..data/<file>``. An update writes a new
timestamped directory, points a new symlink ``..data_tmp`` at it and renames that over ``..data`` (one
atomic rename), then removes the old directory: a reader opening ``token`` sees the old content or the
new, never a missing or half-written file.
"""

from __future__ import annotations

import itertools
import os
import shutil
import time
from pathlib import Path

__all__ = ["ProjectedVolume"]

_SERIAL = itertools.count()


class ProjectedVolume:
    """One projected volume directory holding ``files`` (by default just ``token``)."""

    def __init__(self, directory: Path, files: tuple[str, ...] = ("token",)) -> None:
        self.directory = directory
        self.files = files
        directory.mkdir(parents=True, exist_ok=True)

    def path(self, name: str = "token") -> Path:
        return self.directory / name

    def write(self, **contents: str) -> Path:
        """Publish new contents (every file of ``files``) atomically; returns the new timestamped directory."""
        missing = set(self.files) - set(contents)
        assert not missing, f"every file is written at once: {sorted(missing)} missing"
        stamp = time.strftime("%Y_%m_%d_%H_%M_%S", time.gmtime())
        fresh = self.directory / f"..{stamp}.{os.getpid()}{next(_SERIAL)}"
        fresh.mkdir(mode=0o755)
        for name, text in contents.items():
            (fresh / name).write_text(text)
            (fresh / name).chmod(0o644)
        data = self.directory / "..data"
        old = Path(os.readlink(data)) if data.is_symlink() else None
        tmp = self.directory / "..data_tmp"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(fresh.name)
        tmp.rename(data)  # the atomic step
        for name in self.files:
            link = self.directory / name
            if not link.is_symlink():
                link.symlink_to(f"..data/{name}")
        if old is not None:
            shutil.rmtree(self.directory / old)
        return fresh
