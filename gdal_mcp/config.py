"""Server settings, shared by the command line, the server and the workers."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

GiB = 1024**3
MiB = 1024**2
CONFIRM_POLICIES = ("never", "destructive", "writes", "all")  # the same as confirm.Policy
EXECUTORS = ("local", "dask")


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
    max_tiles: int = 100_000  # most web map tiles one raster_tiles call may write (engine/raster/web_tiles.MAX_TILES)
    audit_log: Path | None = None
    log_level: str = "WARNING"
    allow_network: bool = False  # every remote location (kept for compatibility; prefer allow_remote)
    # Remote locations the workers may read (--allow-remote): 'https://host/prefix', 's3://bucket/prefix', gs://, az://
    allow_remote: tuple[str, ...] = ()
    # A workspace in object storage (--workspace s3://bucket/prefix): relative paths name its objects
    bucket: str | None = None
    # The AWS profile whose keys a bucket (or a prefix of one) is read and written with (--remote-profile LOCATION=NAME):
    # ((s3 location, profile name), …); read by each worker from its machine's AWS files (credentials.load_profiles)
    remote_profiles: tuple[tuple[str, str], ...] = ()
    # Most bytes one job may download from remote locations (--max-remote-bytes); None: no limit
    max_remote_bytes: int | None = GiB
    # Run GDAL unconfined where the kernel cannot confine the workers (no Landlock): refused unless the operator says so
    allow_unconfined: bool = False
    allow_origins: tuple[str, ...] = ()
    allow_hosts: tuple[str, ...] = ()
    token: str | None = field(default=None, repr=False)
    # The person's credential for deciding in the approval console (GDAL_MCP_CONSOLE_TOKEN); without it, one-time
    # login links printed on stderr. Never the MCP token: the MCP client holds that one.
    console_token: str | None = field(default=None, repr=False)
    gdal_cache: int = 64 * MiB
    # An idle worker holding more resident memory is replaced. One that has loaded both bundled GDALs (rasterio's,
    # and pyogrio's on its first vector job) and run every kind of job holds ~230-250 MB: it stays; one holding
    # another ~80 MB that a job left behind (after malloc_trim) is replaced.
    recycle_rss: int = 320 * MiB
    max_resource_bytes: int = 16 * MiB
    max_message_bytes: int = 64 * MiB
    confirm: str = "destructive"  # never|destructive|writes|all: which calls need a person's approval (server/approval/policy.py)
    console: bool = True  # HTTP: the approval console at /console (server/web/console.py); parks confirmations there
    confirm_timeout: float = 600.0  # seconds a parked confirmation waits for the person
    executor: str = "local"  # local (execution/local.py: a worker pool) or dask (execution/dask_executor.py)
    dask_scheduler: str | None = None  # tcp://host:8786, or local:N (a LocalCluster of N worker processes)

    def __post_init__(self) -> None:
        if self.console_token is not None and self.console_token == self.token:
            raise ValueError(
                "GDAL_MCP_CONSOLE_TOKEN must differ from GDAL_MCP_TOKEN: the MCP client holds the MCP "
                "token, and approving is a person's decision"
            )
        from gdal_mcp.sandbox.remote import parse_allowed

        for entry in (*self.allow_remote, *([self.bucket] if self.bucket else [])):
            parse_allowed(entry)  # ValueError naming what is wrong with it
        self._check_profiles()
        if self.bucket and not self.bucket.lower().startswith("s3://"):
            raise ValueError(f"--workspace {self.bucket}: only s3:// buckets can be workspaces")
        if self.confirm not in CONFIRM_POLICIES:
            raise ValueError(f"confirm must be one of {', '.join(CONFIRM_POLICIES)}, not {self.confirm!r}")
        if self.executor not in EXECUTORS:
            raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}, not {self.executor!r}")
        if self.executor == "dask":
            if not self.dask_scheduler:
                raise ValueError(
                    "--executor dask needs --dask-scheduler ADDRESS: the scheduler's address "
                    "(tcp://host:8786), or local:N to start N local worker processes"
                )
            local_workers(self.dask_scheduler)  # a malformed local:N fails here

    def _check_profiles(self) -> None:
        from gdal_mcp.credentials import PROFILE_NAME
        from gdal_mcp.sandbox.remote import AllowList, parse_allowed

        allowed = AllowList((*self.allow_remote, *([self.bucket] if self.bucket else [])))
        if self.remote_profiles and self.allow_network:
            raise ValueError(
                "--remote-profile and --allow-network do not go together: GDAL matches a bucket's options by prefix, so "
                "a profiled bucket's keys would sign the requests to any bucket whose name begins with it; name the "
                "allowed locations with --allow-remote instead"
            )
        for location, name in self.remote_profiles:
            where = parse_allowed(location)
            if where.scheme != "s3":
                raise ValueError(f"--remote-profile {location}={name}: profiles are AWS's: give an s3:// location")
            if not PROFILE_NAME.match(name):
                raise ValueError(f"--remote-profile {location}={name}: not a profile name")
            if not any(e.scheme == "s3" and e.host == where.host for e in allowed.entries):
                raise ValueError(
                    f"--remote-profile {location}={name}: the bucket {where.host} is not among the allowed remote "
                    "locations (--allow-remote, or the bucket workspace)"
                )
            # GDAL applies a path's options to every path that begins with it (the longest such path's first): hence
            # whole buckets only (s3://b/data's keys would sign s3://b/database's requests), and an allowed bucket whose
            # name begins with this one's (alphabet, beside alpha) must have a profile of its own
            if where.path.strip("/"):
                raise ValueError(f"--remote-profile {location}={name}: profiles are per bucket: give s3://{where.host}=NAME")
            profiled = {parse_allowed(loc).host for loc, _ in self.remote_profiles}
            for entry in allowed.entries:
                if entry.scheme == "s3" and entry.host.startswith(where.host) and entry.host not in profiled:
                    raise ValueError(
                        f"--remote-profile {location}={name}: the allowed bucket {entry.host} begins with {where.host}, "
                        f"and GDAL would sign its requests with this profile's keys too; give {entry.host} a profile "
                        "of its own, or rename one of the buckets"
                    )


def local_workers(scheduler: str) -> int | None:
    """N of a `local:N` scheduler address (a LocalCluster of N workers); None for a real address."""
    if not scheduler.startswith("local:"):
        if "://" not in scheduler and ":" not in scheduler:
            raise ValueError(f"--dask-scheduler {scheduler!r}: give the scheduler's address (tcp://host:8786) or local:N")
        return None
    count = scheduler.removeprefix("local:")
    if not count.isdigit() or int(count) < 1:
        raise ValueError(f"--dask-scheduler {scheduler!r}: local:N needs a number of workers N >= 1, e.g. local:2")
    return int(count)


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
