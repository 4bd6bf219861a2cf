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
        self._slot_hash: npt.NDArray[np.int64] | None = None
        self._slot_index: npt.NDArray[np.int64] = np.zeros(0, np.int64)
        self._max_probe = 0

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
        self._slot_hash = None
        return index

    def remove(self, name: str) -> int | None:
        index = self._by_name.pop(name, None)
        if index is not None:
            self._names[index] = None
            self._name_array[index] = None
            self._free.append(index)
            self._slot_hash = None
        return index

    def lookup(self, names: list[str]) -> npt.NDArray[np.int64]:
        """Indices for ``names``; -1 where a name is unknown.

        Long lists go through a numpy open-addressing table of the names' hashes (vectorised probes
        instead of thousands of dict probes, which are cache-miss bound on a large heap); every hit is
        then verified exactly (one string comparison) and any doubt falls back to the dict.
        """
        count = len(names)
        if count >= _VECTOR_LOOKUP_MIN:
            found = self._lookup_hashed(names, count)
            if found is not None:
                return found
        return np.fromiter(map(self._by_name.get, names, repeat(-1, count)), dtype=np.int64, count=count)

    def _lookup_hashed(self, names: list[str], count: int) -> npt.NDArray[np.int64] | None:
        if self._slot_hash is None:
            self._build_hash_table()
        slot_hash, slot_index = self._slot_hash, self._slot_index
        assert slot_hash is not None
        if slot_hash.size == 0:
            return None
        wanted = np.fromiter(map(hash, names), dtype=np.int64, count=count)  # TypeError if unhashable, like dict
        # Open addressing with linear probing, all queries at once: most resolve in the first round.
        mask = slot_hash.size - 1
        out = np.full(count, -1, np.int64)
        pending = np.arange(count)
        probe_hash = wanted
        slot = wanted & mask
        for _ in range(self._max_probe + 1):
            found_index = slot_index[slot]
            occupied = found_index >= 0
            match = occupied & (slot_hash[slot] == probe_hash)
            out[pending[match]] = found_index[match]
            more = occupied & ~match
            if not more.any():
                break
            pending, probe_hash, slot = pending[more], probe_hash[more], (slot[more] + 1) & mask
        hit = out >= 0
        if hit.all():
            given, expected = names, self._name_array.take(out).tolist()
        else:
            where = np.flatnonzero(hit).tolist()
            given = [names[i] for i in where]
            expected = self._name_array.take(out[hit]).tolist()
        # Exact: no known name contains NUL (checked when the table is built), so equal NUL-joined
        # strings split into the same elements.
        try:
            same = "\x00".join(given) == "\x00".join(expected)
        except TypeError:  # a non-string that happened to hash like a node name
            return None
        return out if same else None

    def _build_hash_table(self) -> None:
        names = list(self._by_name)
        if any("\x00" in name for name in names):  # the exact check below relies on NUL-free names
            self._slot_hash, self._slot_index = np.zeros(0, np.int64), np.zeros(0, np.int64)
            return
        size = 64
        while size < 4 * len(names):
            size *= 2
        slot_hash = np.zeros(size, np.int64)
        slot_index = np.full(size, -1, np.int64)
        mask, longest = size - 1, 0
        for name, index in self._by_name.items():
            h = hash(name)
            slot, probes = h & mask, 0
            while slot_index[slot] >= 0:
                if slot_hash[slot] == h:  # two node names with one hash: leave it to the dict
                    self._slot_hash, self._slot_index = np.zeros(0, np.int64), np.zeros(0, np.int64)
                    return
                slot, probes = (slot + 1) & mask, probes + 1
            slot_hash[slot], slot_index[slot] = h, index
            longest = max(longest, probes)
        self._slot_hash, self._slot_index, self._max_probe = slot_hash, slot_index, longest

    def names_at(self, indices: npt.NDArray[np.int64]) -> list[str]:
        """The names at known ``indices`` (every index must be in use)."""
        names: list[str] = self._name_array.take(indices).tolist()
        return names

    def names(self) -> list[str]:
        """Known names in index order."""
        return [n for n in self._names if n is not None]
