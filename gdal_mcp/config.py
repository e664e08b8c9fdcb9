"""Server settings, shared by the command line, the server and the workers."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

GiB = 1024**3
MiB = 1024**2
CONFIRM_POLICIES = ("never", "destructive", "writes", "all")  # the same as confirm.Policy


@dataclass(frozen=True)
class Settings:
    workspaces: tuple[Path, ...]
    transport: str = "stdio"
    host: str = "127.0.0.1"
    port: int = 8000
    read_only: bool = False
    timeout: float = 600.0
    max_memory: int | None = 4 * GiB
    workers: int = 2
    max_pixels: int = 2**34  # largest output grid (width x height) a tool may create
    audit_log: Path | None = None
    log_level: str = "WARNING"
    allow_network: bool = False
    allow_origins: tuple[str, ...] = ()
    allow_hosts: tuple[str, ...] = ()
    token: str | None = field(default=None, repr=False)
    gdal_cache: int = 64 * MiB
    recycle_rss: int = 192 * MiB
    max_resource_bytes: int = 16 * MiB
    max_message_bytes: int = 64 * MiB
    confirm: str = "destructive"  # never|destructive|writes|all: which calls need a person's approval (confirm.py)
    console: bool = True  # HTTP: the approval console at /console (console.py); parks confirmations there
    confirm_timeout: float = 600.0  # seconds a parked confirmation waits for the person

    def __post_init__(self) -> None:
        if self.confirm not in CONFIRM_POLICIES:
            raise ValueError(f"confirm must be one of {', '.join(CONFIRM_POLICIES)}, not {self.confirm!r}")


def parse_size(text: str) -> int:
    """Parse '512M', '2G', '2GiB', '1073741824' into bytes."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    units = {"K": 1024, "M": MiB, "G": GiB, "T": 1024 * GiB}
    mult = 1
    if t and t[-1] in units:
        mult = units[t[-1]]
        t = t[:-1]
    try:
        value = float(t)
    except ValueError:
        raise ValueError(f"not a size: {text!r} (examples: 512M, 2G, 4GiB)") from None
    if value <= 0:
        raise ValueError(f"size must be positive: {text!r}")
    return int(value * mult)


def format_size(n: int) -> str:
    """A byte count the way --max-memory takes it: 4G, 512M, 300K (one decimal when not whole)."""
    for unit, size in (("T", 1024 * GiB), ("G", GiB), ("M", MiB), ("K", 1024)):
        if n >= size:
            value = n / size
            return f"{value:.0f}{unit}" if value == int(value) else f"{value:.1f}{unit}"
    return f"{n}B"
