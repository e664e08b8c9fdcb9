"""Driving the real gdal-mcp server with fuzz cases over stdio, through the official MCP SDK.

One server serves a whole run (`FuzzServer`); it is restarted only if it dies, and every death is
counted. `run_case` writes a case's files into a fresh directory of the workspace, calls every reading
tool that applies to the file kind, and classifies each answer (`Outcome`). The fixed sample in
tests/fuzz/test_fuzz_sample.py and the full run in bench/fuzz.py both use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.fuzz.mutate import Case, bases

RASTER_TOOLS = (
    "raster_info",
    "raster_info+stats",
    "raster_stats",
    "raster_sample",
    "raster_preview",
    "list_datasets",
    "resource:info/raster",
)
VECTOR_TOOLS = ("vector_info", "vector_features", "vector_preview", "list_datasets", "resource:info/vector")
PROBLEMS = ("server-death", "hang", "internal-error", "unnamed", "protocol-error")


@dataclass(frozen=True)
class Outcome:
    """One call on one case. `code` is 'ok', an error code, 'hang', 'server-death' or 'protocol-error'."""

    index: int
    kind: str
    base: str
    dataset: str
    tool: str
    code: str
    seconds: float
    names_file: bool | None  # None when the call succeeded
    message: str
    mutations: tuple[str, ...]

    @property
    def problems(self) -> list[str]:
        out = [self.code] if self.code in PROBLEMS else []
        if self.names_file is False:
            out.append("unnamed")
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "kind": self.kind,
            "base": self.base,
            "dataset": self.dataset,
            "tool": self.tool,
            "code": self.code,
            "seconds": round(self.seconds, 3),
            "names_file": self.names_file,
            "message": self.message[:500],
            "mutations": list(self.mutations),
            "problems": self.problems,
        }


def _server_pids(workspace: Path) -> list[int]:
    """gdal_mcp server processes (ours) serving `workspace`."""
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if int(fields[1]) == me and fields[0] != "Z" and b"gdal_mcp" in cmd and str(workspace).encode() in cmd:
            found.append(int(entry.name))
    return found


class FuzzServer:
    """`gdal-mcp --workspace W --timeout T` over stdio, with a client-side limit that detects hangs."""

    def __init__(
        self,
        workspace: Path,
        *,
        timeout: float = 20.0,
        margin: float = 20.0,
        workers: int = 2,
        errlog: TextIO | None = None,
        source: Path | None = None,
    ) -> None:
        self.workspace = workspace
        self.source = source  # a directory holding a copy of gdal_mcp to run instead of the checkout
        self.timeout = timeout
        self.limit = timeout + margin
        self.workers = workers
        self.errlog = errlog or sys.stderr
        self.deaths = 0
        self.restarts = 0
        self.workers_seen: set[int] = set()  # worker processes seen between calls (replaced ones included)
        self.pid: int | None = None
        self.session: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop_event = asyncio.Event()

    def params(self) -> StdioServerParameters:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GDAL_MCP_")}
        if self.source is not None:
            env["PYTHONPATH"] = os.pathsep.join(p for p in (str(self.source), env.get("PYTHONPATH")) if p)
        return StdioServerParameters(
            command=sys.executable,
            args=[
                "-m",
                "gdal_mcp",
                "--workspace",
                str(self.workspace),
                "--timeout",
                f"{self.timeout:g}",
                "--workers",
                str(self.workers),
            ],
            env=env,
            cwd=str(self.source) if self.source is not None else None,
        )

    async def start(self) -> None:
        # The SDK's contexts live in a task of their own: when the server dies, their task groups cancel that
        # task, not the caller's.
        ready, self._stop_event = asyncio.Event(), asyncio.Event()
        failure: list[BaseException] = []

        async def serve() -> None:
            try:
                async with (
                    stdio_client(self.params(), errlog=self.errlog) as (read, write),
                    ClientSession(read, write) as session,
                ):
                    await session.initialize()
                    self.session = session
                    pids = _server_pids(self.workspace)
                    self.pid = pids[0] if pids else None
                    ready.set()
                    await self._stop_event.wait()
            except BaseException as e:  # noqa: BLE001 - the transport closing under a dead server lands here
                if not ready.is_set():
                    failure.append(e)
            finally:
                ready.set()

        self._task = asyncio.create_task(serve())
        await ready.wait()
        if failure:
            raise RuntimeError(f"the server did not start: {failure[0]!r}")

    async def stop(self) -> None:
        task, self._task, self.session = self._task, None, None
        if task is not None:
            self._stop_event.set()
            try:
                await asyncio.wait_for(task, 15)
            except (Exception, asyncio.CancelledError):  # noqa: BLE001 - it is going away either way
                pass

    async def __aenter__(self) -> FuzzServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def alive(self) -> bool:
        if self.pid is None:
            return False
        try:
            state = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return False
        return state[state.rfind(")") + 2] != "Z"

    def note_workers(self) -> None:
        """Record the server's current worker processes (after each call: a replacement exists by then)."""
        if self.pid is None:
            return
        for children in Path(f"/proc/{self.pid}/task").glob("*/children"):
            with contextlib.suppress(OSError, ValueError):
                self.workers_seen.update(int(p) for p in children.read_text().split())

    async def restart(self) -> None:
        self.restarts += 1
        await self.stop()
        await self.start()

    async def responsive(self) -> bool:
        assert self.session is not None
        try:
            with anyio_timeout(10):
                await self.session.send_ping()
            return True
        except Exception:  # noqa: BLE001 - any failure means it does not answer
            return False

    async def call(self, tool: str, name: str, args: dict[str, Any] | None) -> tuple[str, str]:
        """(code, message) of one tool call or resource read; 'ok' and '' on success."""
        assert self.session is not None
        try:
            with anyio_timeout(self.limit):
                if tool.startswith("resource:"):
                    await self.session.read_resource(name)
                    return "ok", ""
                r = await self.session.call_tool(name, args or {})
        except TimeoutError:
            if not self.alive() or not await self.responsive():
                self.deaths += not self.alive()
                await self.restart()
            return "hang", f"no answer within {self.limit:g} s"
        except Exception as e:  # noqa: BLE001 - classify: a resource error, or the server went away
            await asyncio.sleep(0.05)
            if not self.alive():
                self.deaths += 1
                await self.restart()
                return "server-death", f"{type(e).__name__}: {e}"
            text = str(getattr(getattr(e, "error", None), "message", None) or e)
            if tool.startswith("resource:"):
                code, sep, _ = text.partition(": ")
                if sep and code.replace("-", "").isalpha() and code == code.lower():
                    return code, text
            return "protocol-error", f"{type(e).__name__}: {text}"
        if not r.is_error:
            return "ok", ""
        err = (r.structured_content or {}).get("error") or {}
        return str(err.get("code") or "protocol-error"), str(err.get("message") or r.content)


def anyio_timeout(seconds: float) -> Any:
    import anyio

    return anyio.fail_after(seconds)


_POINTS: dict[tuple[str, str], list[float] | None] = {}


def sample_point(case: Case) -> list[float] | None:
    """The centre of the *unmutated* base dataset (raster_sample needs a point; the mutation may move it)."""
    key = (case.base, case.dataset)
    if key not in _POINTS:
        import warnings

        import rasterio

        base = next(b for b in bases(case.kind) if b.name == case.base and b.dataset == case.dataset)
        with tempfile.TemporaryDirectory(prefix="gdal-mcp-fuzz-base-") as tmp:
            for name, raw in base.files:
                (Path(tmp) / name).write_bytes(raw)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    with rasterio.open(base.dataset.replace("{dir}", tmp)) as ds:
                        b = ds.bounds
                        _POINTS[key] = [(b.left + b.right) / 2, (b.bottom + b.top) / 2]
            except Exception:  # noqa: BLE001 - e.g. an HDF5 container without bands
                _POINTS[key] = [0.5, 0.5]
    return _POINTS[key]


def plan(case: Case, directory: str) -> list[tuple[str, str, dict[str, Any] | None]]:
    """(tool label, tool name or resource URI, arguments) for every reading tool that applies to the case."""
    path = case.path(directory)
    # Resource URIs cannot carry a leading '/' (gdal-mcp://info/raster//vsizip/… matches no template), so the
    # info resources are read for every dataset name except the /vsizip/ ones.
    resource = (
        []
        if path.startswith("/")
        else [
            (
                "resource:info/" + ("raster" if case.raster else "vector"),
                f"gdal-mcp://info/{'raster' if case.raster else 'vector'}/" + quote(path, safe="/:"),
                None,
            )
        ]
    )
    if case.raster:
        return [
            ("raster_info", "raster_info", {"path": path}),
            ("raster_info+stats", "raster_info", {"path": path, "stats": True}),
            ("raster_stats", "raster_stats", {"input": path, "percentiles": [5, 50, 95], "histogram_bins": 16}),
            ("raster_sample", "raster_sample", {"input": path, "points": [sample_point(case)]}),
            ("raster_preview", "raster_preview", {"input": path, "max_size": 256}),
            ("list_datasets", "list_datasets", {"path": directory}),
            *resource,
        ]
    return [
        ("vector_info", "vector_info", {"path": path}),
        ("vector_features", "vector_features", {"input": path, "limit": 20}),
        ("vector_preview", "vector_preview", {"input": path, "max_size": 256}),
        ("list_datasets", "list_datasets", {"path": directory}),
        *resource,
    ]


async def run_case(server: FuzzServer, case: Case, *, keep: bool = False) -> list[Outcome]:
    """Write the case into its own directory of the workspace, call every reading tool, classify the answers."""
    directory = f"c{case.seed}-{case.index:05d}"
    where = server.workspace / directory
    where.mkdir(parents=True, exist_ok=True)
    for name, raw in case.files.items():
        (where / name).write_bytes(raw)
    names = case.names(directory)
    out = []
    try:
        for tool, name, args in plan(case, directory):
            t0 = time.monotonic()
            code, message = await server.call(tool, name, args)
            seconds = time.monotonic() - t0
            server.note_workers()
            named = (
                None if code == "ok" else any(n in message for n in (*names, *((directory,) if tool == "list_datasets" else ())))
            )
            if code in ("hang", "server-death"):
                named = None
            out.append(
                Outcome(
                    case.index, case.kind, case.base, case.path(directory), tool, code, seconds, named, message, case.mutations
                )
            )
    finally:
        if not keep:
            shutil.rmtree(where, ignore_errors=True)
    return out
