"""A small in-process cache of metadata answers (raster_info, vector_info and their resources).

An answer is keyed on the job (frozen, hashable) and on the identity of every file the input
resolves to: path, device, inode, size, mtime_ns and ctime_ns of each file, of the sidecars GDAL
reads beside it (.ovr, .aux.xml, .msk, world files, a shapefile's .dbf/.shx/.prj/.cpg …) and of its
directory (whose mtime changes when a sidecar appears, disappears or a file is replaced by rename).
A rewritten file therefore misses, whoever rewrote it. The server's own writes also evict the
entries of the paths they replace.

Timestamps have a coarse granularity (a clock tick), so a file changed within a tick of its last
change could keep the same identity. Answers about a file whose newest timestamp is less than
`settle` seconds old are therefore not stored; a later change to an older file always moves its
timestamps. Bounded by entry count and by (pickled) bytes; least recently used first out.
"""

from __future__ import annotations

import os
import pickle
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

#: sidecars GDAL may read beside a dataset: suffixes appended to the full name, and replacing its extension
_APPENDED = (".ovr", ".aux.xml", ".msk", ".xml", ".ovr.aux.xml", "-wal")
_REPLACED = (
    ".aux.xml",
    ".ovr",
    ".dbf",
    ".shx",
    ".prj",
    ".cpg",
    ".qix",
    ".sbn",
    ".sbx",
    ".qpj",
    ".wld",
    ".tfw",
    ".tifw",
    ".jgw",
    ".pgw",
    ".tab",
    ".hdr",
    ".rpb",
    ".imd",
)

Identity = tuple[Any, ...]


def _stat_identity(path: str) -> tuple[Any, ...] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def file_identity(files: Iterable[os.PathLike[str] | str]) -> tuple[Identity, int] | None:
    """The identity of `files` (with their sidecars and directories) and their newest timestamp in ns.

    None when there is nothing to key on (no local file, a file vanished, or a directory).
    """
    parts: list[Any] = []
    newest = 0
    seen_dirs: set[str] = set()
    names = [os.fspath(f) for f in files]
    if not names:
        return None
    for name in names:
        ident = _stat_identity(name)
        if ident is None or os.path.isdir(name):
            return None  # gone, or a directory dataset whose files can change without the directory changing
        parts.append((name, ident))
        newest = max(newest, ident[3], ident[4])
        base, _ = os.path.splitext(name)
        for side in [name + s for s in _APPENDED] + [base + s for s in _REPLACED]:
            side_ident = _stat_identity(side)
            if side_ident is not None:
                parts.append((side, side_ident))
                newest = max(newest, side_ident[3], side_ident[4])
        directory = os.path.dirname(name)
        if directory not in seen_dirs:
            seen_dirs.add(directory)
            dir_ident = _stat_identity(directory)
            if dir_ident is None:
                return None
            parts.append((directory, dir_ident))
            newest = max(newest, dir_ident[3], dir_ident[4])
    return tuple(parts), newest


class MetadataCache:
    """LRU of job results keyed on (job, file identity); thread-safe, bounded by entries and bytes."""

    def __init__(self, *, max_entries: int = 1024, max_bytes: int = 64 * 1024**2, settle: float = 1.0) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.settle_ns = int(settle * 1e9)
        self._entries: OrderedDict[Any, tuple[bytes, frozenset[str]]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def key(self, job: Any, files: Iterable[os.PathLike[str] | str]) -> tuple[Any, int] | None:
        """(cache key, newest timestamp) for `job` on `files`, or None if this job cannot be cached."""
        try:
            hash(job)
        except TypeError:
            return None
        ident = file_identity(files)
        if ident is None:
            return None
        return (job, ident[0]), ident[1]

    def get(self, key: Any) -> Any:
        """The cached result (a fresh copy: callers may modify it), or None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
        return pickle.loads(entry[0])

    def put(self, key: Any, newest_ns: int, result: Any, *, now_ns: int | None = None) -> bool:
        """Store `result` unless the files changed too recently (before `now_ns`, when they were identified)
        to be told apart from a later change."""
        now_ns = time.time_ns() if now_ns is None else now_ns
        if now_ns - newest_ns < self.settle_ns:
            return False
        try:
            data = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - an unpicklable result is simply not cached
            return False
        if len(data) > self.max_bytes // 8:
            return False
        paths = frozenset(str(p) for p, _ in key[1])
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= len(old[0])
            self._entries[key] = (data, paths)
            self._bytes += len(data)
            while self._entries and (len(self._entries) > self.max_entries or self._bytes > self.max_bytes):
                _, (dropped, _) = self._entries.popitem(last=False)
                self._bytes -= len(dropped)
        return True

    def evict(self, paths: Iterable[os.PathLike[str] | str]) -> int:
        """Drop every entry that depends on one of `paths` or on a file beside one of them."""
        targets = {os.fspath(p) for p in paths}
        if not targets:
            return 0
        # An entry depends on its files' directories too, so a file placed beside a dataset evicts it.
        targets |= {os.path.dirname(t) for t in targets}
        with self._lock:
            stale = [k for k, (_, deps) in self._entries.items() if deps & targets]
            for k in stale:
                self._bytes -= len(self._entries.pop(k)[0])
        return len(stale)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size_bytes(self) -> int:
        return self._bytes
