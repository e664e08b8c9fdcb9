"""Wall time and peak resident memory of a process tree, sampled from /proc (Linux only)."""

from __future__ import annotations

import os
import resource
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

MB = 1 << 20


def _children() -> dict[int, list[int]]:
    """Map of pid -> child pids, from the ppid field of every /proc/<pid>/stat."""
    kids: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue  # exited meanwhile
        # "pid (comm) state ppid ...": comm may contain spaces and parentheses, so split after the last ')'.
        ppid = int(data[data.rindex(b")") + 2 :].split()[1])
        kids.setdefault(ppid, []).append(int(entry.name))
    return kids


def process_tree(root: int) -> list[int]:
    """`root` and all its descendants that are alive now."""
    kids = _children()
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(kids.get(pid, ()))
    return tree


def rss_bytes(pid: int) -> int:
    """VmRSS of one process (0 if it is gone or a zombie)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def tree_rss(root: int) -> int:
    """Summed VmRSS of `root` and its descendants."""
    return sum(rss_bytes(pid) for pid in process_tree(root))


def tree_pss(root: int) -> int:
    """Summed PSS (shared pages split between their users) of `root` and its descendants; slower than RSS."""
    total = 0
    for pid in process_tree(root):
        try:
            with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
                total += next((int(line.split()[1]) for line in f if line.startswith(b"Pss:")), 0) * 1024
        except (OSError, ValueError):
            pass
    return total


class PeakRss:
    """Context manager: samples a process tree's RSS in a background thread.

    `.peak` is the largest summed RSS of the tree, `.peak_single` the largest RSS of any one process, and
    `.peak_pss` the largest summed PSS (shared library pages counted once across the tree), all in bytes.
    `.start` is the summed RSS of the first sample (on entering the context).
    """

    def __init__(self, root: int, interval: float = 0.05) -> None:
        self.root = root
        self.interval = interval
        self.peak = self.peak_single = self.peak_pss = 0
        self.start: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def sample(self) -> None:
        sizes = [rss_bytes(pid) for pid in process_tree(self.root)]
        if self.start is None:
            self.start = sum(sizes)
        self.peak = max(self.peak, sum(sizes))
        self.peak_single = max(self.peak_single, *sizes)
        self.peak_pss = max(self.peak_pss, tree_pss(self.root))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> PeakRss:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


@dataclass
class CliRun:
    """One timed run of one or more commands in sequence."""

    seconds: float
    peak_rss: int  # bytes: the sampled summed RSS of the command's process tree, max over the commands
    maxrss: int  # bytes: the kernel's ru_maxrss of each command (wait4), max over the commands; a cross-check
    error: str | None = None
    # bytes: this process's own peak RSS when the commands were spawned. A child starts with its parent's peak
    # (vfork shares the parent's memory, and exec keeps the peak of the memory it replaces), so an ru_maxrss
    # at or below this figure is the harness's, not the command's.
    inherited: int = 0


def run_commands(commands: Sequence[Sequence[str]], *, cwd: Path, env: Mapping[str, str] | None = None) -> CliRun:
    """Run commands one after the other (stopping at the first failure), timing them together."""
    peak = maxrss = 0
    inherited = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    t0 = time.perf_counter()
    for cmd in commands:
        with open(os.devnull, "wb") as devnull, tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(list(cmd), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=devnull, stderr=err)
            with PeakRss(proc.pid) as rss:
                # wait4 reaps this child and gives its own rusage (getrusage(RUSAGE_CHILDREN) only keeps a running max).
                _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            peak, maxrss = max(peak, rss.peak), max(maxrss, usage.ru_maxrss * 1024)
            if proc.returncode != 0:
                err.seek(0)
                tail = err.read().decode(errors="replace").strip()[-2000:]
                return CliRun(
                    time.perf_counter() - t0, peak, maxrss, f"`{' '.join(cmd)}` exited {proc.returncode}: {tail}", inherited
                )
    return CliRun(time.perf_counter() - t0, peak, maxrss, inherited=inherited)
