"""A stable name <-> integer index for nodes, so per-node state can live in numpy arrays.

Indices of deleted nodes are reused. Not thread-safe: one writer (the event loop) at a time.
"""

from __future__ import annotations

from itertools import repeat

import numpy as np
import numpy.typing as npt

__all__ = ["NodeIndex"]

_VECTOR_LOOKUP_MIN = 64
"""Shorter lists use plain dict lookups."""


class NodeIndex:
    def __init__(self) -> None:
        self._by_name: dict[str, int] = {}
        self._names: list[str | None] = []
        self._free: list[int] = []
        self._name_array: npt.NDArray[np.object_] = np.full(64, None, dtype=object)
        self._sorted_hashes: npt.NDArray[np.int64] | None = None
        self._sorted_indices: npt.NDArray[np.int64] | None = None
        self._name_lengths: npt.NDArray[np.int64] = np.zeros(0, np.int64)

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
            if index >= self._name_array.size:
                grown = np.full(2 * self._name_array.size, None, dtype=object)
                grown[: self._name_array.size] = self._name_array
                self._name_array = grown
        self._name_array[index] = name
        self._by_name[name] = index
        self._sorted_hashes = None
        return index

    def remove(self, name: str) -> int | None:
        index = self._by_name.pop(name, None)
        if index is not None:
            self._names[index] = None
            self._name_array[index] = None
            self._free.append(index)
            self._sorted_hashes = None
        return index

    def lookup(self, names: list[str]) -> npt.NDArray[np.int64]:
        """Indices for ``names``; -1 where a name is unknown.

        Long lists go through a sorted array of the names' hashes (one vectorised search instead of
        thousands of dict probes, which are cache-miss bound on a large heap); every hit is then
        verified exactly (same lengths and same characters) and any doubt falls back to the dict.
        """
        count = len(names)
        if count >= _VECTOR_LOOKUP_MIN:
            found = self._lookup_hashed(names, count)
            if found is not None:
                return found
        return np.fromiter(map(self._by_name.get, names, repeat(-1, count)), dtype=np.int64, count=count)

    def _lookup_hashed(self, names: list[str], count: int) -> npt.NDArray[np.int64] | None:
        if self._sorted_hashes is None:
            self._build_hash_table()
        hashes_sorted, indices_sorted = self._sorted_hashes, self._sorted_indices
        assert hashes_sorted is not None and indices_sorted is not None
        if hashes_sorted.size == 0:
            return None
        wanted = np.fromiter(map(hash, names), dtype=np.int64, count=count)  # TypeError if unhashable, like dict
        pos = np.searchsorted(hashes_sorted, wanted)
        pos[pos >= hashes_sorted.size] = 0
        hit = hashes_sorted[pos] == wanted
        out = np.where(hit, indices_sorted[pos], -1)
        if hit.all():
            given, expected = names, self._name_array.take(out).tolist()
        else:
            where = np.flatnonzero(hit).tolist()
            given = [names[i] for i in where]
            expected = self._name_array.take(out[hit]).tolist()
        try:
            same = "\x00".join(given) == "\x00".join(expected)
        except TypeError:  # a non-string that happened to hash like a node name
            return None
        if not same or not np.array_equal(
            np.fromiter(map(len, given), np.int64, len(given)), self._name_lengths.take(out[hit])
        ):
            return None
        return out

    def _build_hash_table(self) -> None:
        names = list(self._by_name)
        hashes = np.fromiter(map(hash, names), dtype=np.int64, count=len(names))
        indices = np.fromiter(self._by_name.values(), dtype=np.int64, count=len(names))
        order = np.argsort(hashes, kind="stable")
        self._sorted_hashes, self._sorted_indices = hashes[order], indices[order]
        if np.any(self._sorted_hashes[1:] == self._sorted_hashes[:-1]):
            self._sorted_hashes = self._sorted_indices = np.zeros(0, np.int64)  # two node names collide: use the dict
        lengths = np.zeros(self._name_array.size, np.int64)
        lengths[indices] = np.fromiter(map(len, names), np.int64, len(names))
        self._name_lengths = lengths

    def names_at(self, indices: npt.NDArray[np.int64]) -> list[str]:
        """The names at known ``indices`` (every index must be in use)."""
        names: list[str] = self._name_array.take(indices).tolist()
        return names

    def names(self) -> list[str]:
        """Known names in index order."""
        return [n for n in self._names if n is not None]
