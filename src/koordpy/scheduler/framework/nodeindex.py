"""A stable name <-> integer index for nodes, so per-node state can live in numpy arrays.

Indices of deleted nodes are reused. Not thread-safe: one writer (the event loop) at a time.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["NodeIndex"]


class NodeIndex:
    def __init__(self) -> None:
        self._by_name: dict[str, int] = {}
        self._names: list[str | None] = []
        self._free: list[int] = []

    def __len__(self) -> int:
        return len(self._by_name)

    @property
    def capacity(self) -> int:
        """One past the highest index ever handed out (array length needed)."""
        return len(self._names)

    def get(self, name: str) -> int | None:
        return self._by_name.get(name)

    def name(self, index: int) -> str:
        name = self._names[index]
        if name is None:
            raise KeyError(index)
        return name

    def add(self, name: str) -> int:
        existing = self._by_name.get(name)
        if existing is not None:
            return existing
        if self._free:
            index = self._free.pop()
            self._names[index] = name
        else:
            index = len(self._names)
            self._names.append(name)
        self._by_name[name] = index
        return index

    def remove(self, name: str) -> int | None:
        index = self._by_name.pop(name, None)
        if index is not None:
            self._names[index] = None
            self._free.append(index)
        return index

    def lookup(self, names: list[str]) -> npt.NDArray[np.int64]:
        """Indices for ``names``; -1 where a name is unknown."""
        get = self._by_name.get
        return np.fromiter((get(n, -1) for n in names), dtype=np.int64, count=len(names))

    def names(self) -> list[str]:
        """Known names in index order."""
        return [n for n in self._names if n is not None]
