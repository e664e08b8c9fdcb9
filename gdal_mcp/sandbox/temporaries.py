"""Temporary output directories that outlive their server: who made one (the owner marker), and the start-up
sweep that removes those whose owner process is certainly gone.

Outputs are written to a hidden temporary directory beside their final place (outputs.py). A server killed
mid-write (SIGKILL, power loss) cannot clean up after itself; the next one removes what it left, and nothing else.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import socket
import time
from pathlib import Path

from gdal_mcp.sandbox.paths import FORBIDDEN_TREES, TMP_DIR_RE, Roots

log = logging.getLogger("gdal_mcp.sandbox")

# Inside each temporary directory: which server process made it (never moved into place by commit).
OWNER_FILE = ".gdal-mcp-owner"
#: beside a remote output's temporary directory (its name + this): the objects its upload has created so far, a line
#: each (engine/upload.py), for the server to delete after a worker killed in the middle of the upload (App.execute).
#: Beside it, not in it: the job's own thread (GDAL on the input's data) may write only inside it, so it cannot forge
#: the list the server deletes from; the worker's main thread, which uploads, may write here
UPLOAD_JOURNAL_SUFFIX = ".uploaded"


def upload_journal(tmp_dir: str) -> str:
    return os.path.normpath(tmp_dir) + UPLOAD_JOURNAL_SUFFIX


# Start-up sweep of stale temporary directories: a bounded walk, so a huge workspace cannot stall start-up.
SWEEP_MAX_DIRS = 20000
SWEEP_MAX_SECONDS = 3.0


def _read_small(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read(4096).strip()
    except OSError:
        return None


def _process_start(pid: int) -> str | None:
    """When a running process started (field 22 of /proc/<pid>/stat); None if it does not run (a zombie
    does not run)."""
    text = _read_small(f"/proc/{pid}/stat")
    if text is None:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    if not fields or fields[0] in ("Z", "X", "x"):
        return None
    return fields[19] if len(fields) > 19 else ""


def _owner_identity() -> dict[str, object]:
    """Who makes a temporary directory: this process, told apart from a later one reusing its pid, on this
    machine (boot) and in this pid namespace (containers sharing a volume)."""
    return dict(_identity(os.getpid()))


@functools.lru_cache(maxsize=4)
def _identity(pid: int) -> dict[str, object]:
    ns = ""
    try:
        ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        pass
    return {
        "pid": pid,
        "start": _process_start(pid) or "",
        "boot": _read_small("/proc/sys/kernel/random/boot_id") or "",
        "ns": ns,
        "host": socket.gethostname(),
    }


def _owner_gone(owner: dict[str, object]) -> bool:
    """True only when the process that made a temporary directory certainly no longer runs."""
    me = _owner_identity()
    pid = owner.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or owner.get("host") != me["host"]:
        return False  # unreadable, or made on another machine sharing this file system: cannot tell
    if owner.get("boot") and me["boot"] and owner["boot"] != me["boot"]:
        return True  # this machine restarted since: every process of that boot is gone
    if owner.get("ns") != me["ns"]:
        return False  # another pid namespace (container): its pids mean nothing here
    if os.path.exists("/proc/self/stat"):
        start = _process_start(pid)
        # Gone, or its pid now belongs to a process that started later.
        return start is None or bool(owner.get("start") and start and start != owner["start"])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def _stale_temporary(tmp: str) -> bool:
    """Whether `tmp` is a temporary output directory whose owner process is gone."""
    try:
        fd = os.open(os.path.join(tmp, OWNER_FILE), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd) as fh:
            owner = json.loads(fh.read(4096))
    except (OSError, ValueError):
        return False  # no readable marker (an older server, or one being made right now): keep it
    return isinstance(owner, dict) and _owner_gone(owner)


def sweep_stale_temporaries(
    roots: Roots, *, max_dirs: int = SWEEP_MAX_DIRS, max_seconds: float = SWEEP_MAX_SECONDS
) -> list[Path]:
    """Remove the temporary output directories left in the workspaces by gdal-mcp servers that are gone.

    A server killed mid-write (SIGKILL, power loss) cannot clean up after itself. Only a directory named
    like a temporary one, holding an owner marker whose process no longer runs, is removed; nothing else
    is touched (final outputs are only ever renamed into place by a live server). The walk is breadth
    first, does not follow symlinks, and stops after `max_dirs` directories or `max_seconds`.
    """
    from collections import deque

    removed: list[Path] = []
    deadline = time.monotonic() + max_seconds
    pending: deque[str] = deque(str(r) for r in roots)
    visited = 0
    while pending:
        if visited >= max_dirs or time.monotonic() > deadline:
            log.info("stale temporary sweep stopped after %d directories (%d left unvisited)", visited, len(pending))
            break
        d = pending.popleft()
        visited += 1
        try:
            with os.scandir(d) as it:
                entries = list(it)
        except OSError:
            continue
        for entry in entries:
            try:
                if not entry.is_dir(follow_symlinks=False):
                    continue
            except OSError:
                continue
            if TMP_DIR_RE.fullmatch(entry.name):
                if _stale_temporary(entry.path):
                    shutil.rmtree(entry.path, ignore_errors=True)
                    log.warning("removed %s, the temporary output of a gdal-mcp server that is gone", entry.path)
                    removed.append(Path(entry.path))
            elif not any(Path(entry.path) == t for t in FORBIDDEN_TREES):
                pending.append(entry.path)
    return removed
