"""Helpers for the fault tests: processes, a raster GDAL cannot read in bounded memory, small file systems."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import struct
import subprocess
import zlib
from pathlib import Path
from typing import Any

from gdal_mcp import jobs

MiB = 1024**2


@dataclasses.dataclass(frozen=True, kw_only=True)
class DiesOnArrival(jobs.WorkerStatusJob):
    """worker_status, but the first worker to receive it is killed (SIGKILL) while unpickling it, i.e.
    after the hand-out and before it took the job. `flag` records that it happened, and where."""

    flag: str

    def __setstate__(self, state: dict[str, Any]) -> None:  # runs in the worker, before the job is taken
        for k, v in state.items():
            object.__setattr__(self, k, v)
        if not os.path.exists(self.flag):
            Path(self.flag).write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)

    def kwargs(self) -> dict[str, Any]:
        return {}


@dataclasses.dataclass(frozen=True, kw_only=True)
class DiesAfterStart(jobs.WorkerStatusJob):
    """A job with an effect: each run appends its worker's pid to `log`, then the worker is killed."""

    log: str

    def kwargs(self) -> dict[str, Any]:  # runs in the worker once it has taken the job
        with open(self.log, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        os.kill(os.getpid(), signal.SIGKILL)
        return {}


def pid_alive(pid: int) -> bool:
    """Whether a process runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            text = fh.read()
    except FileNotFoundError:
        return False
    return text[text.rfind(")") + 2 :].split()[0] not in ("Z", "X")


def children(pid: int) -> list[int]:
    """The live child processes of `pid` (a server's workers)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                text = fh.read()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2 :].split()
        if int(fields[1]) == pid and fields[0] not in ("Z", "X"):
            found.append(int(entry))
    return sorted(found)


def address_space(pid: int) -> int:
    """VmSize of a process in bytes (what RLIMIT_AS limits)."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmSize for {pid}")


def one_tile_tiff(path: Path, size: int = 32768) -> Path:
    """A byte GeoTIFF of size x size pixels stored as ONE deflate-compressed tile of zeros.

    A few MB on disk, but GDAL must allocate the whole tile (size² bytes, 1 GiB by default) to read any
    pixel of it: a real read that fails under any smaller memory limit. Written by hand, streaming, so
    making it costs no memory.
    """
    comp = zlib.compressobj(1)
    chunk = bytes(16 * MiB)
    total = size * size
    with open(path, "wb") as fh:
        fh.write(b"II*\x00" + struct.pack("<I", 0))
        n = done = 0
        while done < total:
            k = min(len(chunk), total - done)
            data = comp.compress(chunk if k == len(chunk) else chunk[:k])
            fh.write(data)
            n += len(data)
            done += k
        data = comp.flush()
        fh.write(data)
        n += len(data)
        if n % 2:
            fh.write(b"\x00")
        ifd = 8 + n + n % 2
        # (tag, type, value): 3 = SHORT, 4 = LONG. Width, height, 8 bits, deflate (8), min-is-black,
        # one sample, tile width, tile length, tile offset, tile byte count.
        entries = [
            (256, 4, size),
            (257, 4, size),
            (258, 3, 8),
            (259, 3, 8),
            (262, 3, 1),
            (277, 3, 1),
            (322, 4, size),
            (323, 4, size),
            (324, 4, 8),
            (325, 4, n),
        ]
        fh.write(struct.pack("<H", len(entries)))
        for tag, kind, value in entries:
            packed = struct.pack("<HH", value, 0) if kind == 3 else struct.pack("<I", value)
            fh.write(struct.pack("<HHI", tag, kind, 1) + packed)
        fh.write(struct.pack("<I", 0))
        fh.seek(4)
        fh.write(struct.pack("<I", ifd))
    return path


def mount_small_tmpfs(where: Path, size: str = "2m") -> str | None:
    """Mount a tmpfs of `size` at `where`; the reason it cannot be done here, or None when mounted."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "a small file system needs a tmpfs mount, which only root can make (tests run as a user)"
    if shutil.which("mount") is None:
        return "no mount command on this machine"
    where.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True, text=True)
    if r.returncode != 0:
        return f"cannot mount a tmpfs here ({r.stderr.strip() or r.returncode}); e.g. a container without CAP_SYS_ADMIN"
    return None


def unmount(where: Path) -> None:
    subprocess.run(["umount", "-l", str(where)], capture_output=True)
