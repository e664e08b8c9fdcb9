"""The application core shared by all tools: settings, sandbox, executor, audit, and job execution."""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import logging
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pydantic import BaseModel

from gdal_mcp.config import Settings
from gdal_mcp.credentials import redact
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.execution import REMOTE_READS, Executor, WithRemote
from gdal_mcp.execution.egress import EgressProxy
from gdal_mcp.execution.local import LocalExecutor
from gdal_mcp.jobs import Job
from gdal_mcp.models import ReadsRemote, RemoteReads
from gdal_mcp.sandbox import OutputTarget, ResolvedInput, Sandbox
from gdal_mcp.sandbox.outputs import RECORD_SUFFIX
from gdal_mcp.sandbox.remote import is_remote, parse_allowed
from gdal_mcp.sandbox.temporaries import upload_journal
from gdal_mcp.server import provenance
from gdal_mcp.server.approval.parked import ParkedConfirmations
from gdal_mcp.server.audit import AuditLog
from gdal_mcp.server.cache import MetadataCache
from gdal_mcp.server.jobboard import CURRENT_TOOL, JobBoard

if TYPE_CHECKING:
    from fastmcp import Context
    from starlette.requests import Request

    from gdal_mcp.execution.dask_executor import DaskExecutor

log = logging.getLogger("gdal_mcp")
M = TypeVar("M", bound=BaseModel)


def _dask_executor(settings: Settings, worker_config: dict[str, Any]) -> DaskExecutor:
    """--executor dask: imported only then (distributed is an optional dependency, and slow to import)."""
    try:
        from gdal_mcp.execution.dask_executor import DaskExecutor
    except ImportError as e:
        raise ValueError(f"--executor dask needs the Dask extra ({e}): install gdal-mcp[dask]") from None
    assert settings.dask_scheduler is not None  # Settings checks it
    return DaskExecutor(
        scheduler=settings.dask_scheduler, timeout=settings.timeout, max_memory=settings.max_memory, worker_config=worker_config
    )


def _check_profiles(worker_config: dict[str, Any]) -> None:
    """The AWS profiles the local workers will read exist with keys (ValueError naming the profile and the files, at
    start-up rather than in a worker). Nothing read is kept. (Dask workers check their own machine's at set-up.)"""
    from gdal_mcp.credentials import default_profile, read_profile

    names = [str(name) for _, name in worker_config.get("remote_profiles") or ()]
    for name in dict.fromkeys([*names, *filter(None, [default_profile(worker_config)])]):
        read_profile(name)


def confinement(settings: Settings) -> bool:
    """Whether the workers will be confined by the kernel (gdal_mcp.execution.confine). Where the kernel cannot, the server
    refuses to start (ValueError) unless the operator accepted running unconfined (--allow-unconfined); then it
    says so on stderr."""
    from gdal_mcp.execution import confine

    if confine.abi() >= confine.MIN_ABI:
        return True
    status = confine.status()
    if not settings.allow_unconfined:
        raise ValueError(
            f"this kernel cannot confine the processes that run GDAL ({status}): a dataset could make "
            "them read any file this user can, or reach the network. Refusing to start; run on Linux "
            ">= 5.19 with Landlock enabled, or pass --allow-unconfined to accept this (see SECURITY.md)"
        )
    log.warning(
        "RUNNING UNCONFINED (%s): the processes that run GDAL can read any file this user can and reach the "
        "network; only the server's own path checks stand between a dataset and them (--allow-unconfined)",
        status,
    )
    return False


class ConsoleView(Protocol):
    """The approval console's web view (server/web/console.Console) as the rest of the server uses it: where it is,
    its browser sessions (downloads accept one) and the login link printed for the person at start-up."""

    def url(self) -> str: ...

    def session(self, request: Request) -> object | None: ...

    def login_link(self, *, why: str = "") -> bool: ...


#: how long a person's yes about an object's version holds for a call run later (a task)
APPROVAL_TTL = 600.0


class App:
    """Everything a tool needs; built once per server."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        # A bucket workspace: outputs are written in a private local directory, then uploaded (sandbox/outputs.py)
        scratch = tempfile.mkdtemp(prefix="gdal-mcp-scratch-") if settings.bucket else None
        if scratch is not None:
            atexit.register(shutil.rmtree, scratch, True)  # a killed server's is left: only unfinished outputs
        self.sandbox = Sandbox(
            settings.workspaces,
            allow_network=settings.allow_network,
            allow_remote=settings.allow_remote,
            bucket=settings.bucket,
            scratch=scratch,
        )
        allowed = [e.url.rstrip("/") for e in self.sandbox.remote.entries]  # with the bucket workspace's prefix
        # Local workers: this kernel confines them. Dask workers confine their task threads themselves (and refuse
        # to run unconfined unless allowed): gdal_mcp.execution.dask_confine.confine_executor.
        self.confined = confinement(settings) if settings.executor == "local" else True
        # With an allow-list, local workers reach the network only through this proxy, which applies the list to every
        # request (redirects, URLs inside datasets): execution/egress.py
        self.egress = (
            EgressProxy(self.sandbox.remote).start()
            if allowed and not settings.allow_network and settings.executor == "local"
            else None
        )
        worker_config = {
            "roots": [str(r) for r in self.sandbox.roots],
            # a local worker writes a bucket workspace's outputs there before it uploads them (a Dask worker in a
            # directory of its own: dask_executor)
            "scratch": str(self.sandbox.scratch) if self.sandbox.scratch else None,
            "bucket": settings.bucket,
            # (the GDAL path each profile's keys apply to, the profile's name): credentials.load_profiles (GDAL matches
            # path options by prefix: Settings refuses a profile whose location begins another allowed one)
            "remote_profiles": [[parse_allowed(loc).gdal_path.rstrip("/"), name] for loc, name in settings.remote_profiles],
            "allow_network": settings.allow_network,
            "allow_remote": allowed,
            "max_remote_bytes": settings.max_remote_bytes,
            "egress_port": self.egress.port if self.egress is not None else None,
            "egress_token": self.egress.token if self.egress is not None else None,
            "gdal_cache": settings.gdal_cache,
            "log_level": settings.log_level.upper(),
            "confine": self.confined,
            "allow_unconfined": settings.allow_unconfined,
            "read_only": settings.read_only,
        }
        if settings.executor == "local":
            _check_profiles(worker_config)
        self.executor: Executor
        if settings.executor == "dask":
            self.executor = _dask_executor(settings, worker_config)
        else:
            self.executor = LocalExecutor(
                workers=settings.workers,
                timeout=settings.timeout,
                max_memory=settings.max_memory,
                recycle_rss=settings.recycle_rss,
                worker_config=worker_config,
            )
        self.audit = AuditLog(settings.audit_log, self.sandbox)
        self.cache = MetadataCache()
        # Over HTTP with --console (server/build.py), else None, all three: the confirmations parked for a person,
        # the jobs running in workers (so the console can show and cancel them), and the console's web view.
        self.approvals: ParkedConfirmations | None = None
        self.jobs: JobBoard | None = None
        self.console: ConsoleView | None = None
        #: (tool, object's /vsis3/ path) -> (the ETag of the version a person approved that tool changing, when):
        #: recorded by the confirmation policy on a yes, checked by the call that changes it (object_versions), dropped
        #: when that call ends (the middleware), or after APPROVAL_TTL for a call run as a task
        self.approved_versions: dict[tuple[str, str], tuple[str, float]] = {}
        #: approvals of calls run as tasks, for their outputs' provenance records (server/provenance.py)
        self.call_approvals = provenance.CallApprovals()
        self.digests = provenance.Digests()
        #: the key the workers sign provenance records with (server/provenance.signing_key)
        self.provenance_key = provenance.signing_key([str(r) for r in self.sandbox.roots])

    def gdal_threads(self) -> int:
        """GDAL threads per job (warp, compression). On Dask a task is one worker thread, one core: parallelism comes
        from running tiles on several workers, and a tile using more threads would oversubscribe the cluster."""
        return 1 if self.settings.executor == "dask" else self.settings.workers

    def require_writable(self, tool: str) -> None:
        if self.settings.read_only:
            raise GdalMcpError("read-only", f"{tool} writes files, and this server runs with --read-only")

    def scrub_model(self, model: M) -> M:
        """Make every path in a result workspace-relative before it leaves the server."""
        return type(model).model_validate(self.sandbox.scrub_obj(model.model_dump()))

    def scrub_error(self, error: GdalMcpError) -> GdalMcpError:
        return GdalMcpError(error.code, redact(self.sandbox.scrub(error.message)))

    async def execute[R](
        self, job: Job[R], *, ctx: Context | None = None, quick: bool = False, output: OutputTarget | None = None
    ) -> R:
        """Run an engine function in a worker, relaying progress; commit or discard its output."""

        remote_changes = [p for p in job.modifies() if is_remote(p)]
        if remote_changes:
            raise GdalMcpError(
                "unsupported",
                f"'{self.sandbox.display(remote_changes[0])}' is remote: it cannot be changed in place; write the result to "
                "a new output instead",
            )
        job, record_dir = provenance.attach(self, job, output)  # what the worker needs to write the provenance record
        if output is not None and output.remote is not None:  # the worker that runs the job uploads its output
            replace = await self._replacing(output.remote) if output.overwrite else None
            job = dataclasses.replace(job, upload=output.remote, replace=replace)
        tracker = self.jobs.track(job.FUNC) if self.jobs is not None and not quick else None

        async def relay(fraction: float, message: str) -> None:
            if tracker is not None:
                tracker.progress(fraction, self.sandbox.scrub(message))
            if ctx is not None:
                try:
                    await ctx.report_progress(progress=round(fraction * 100, 2), total=100, message=self.sandbox.scrub(message))
                except Exception:  # noqa: BLE001 - a client that cannot take progress must not fail the job
                    log.debug("progress notification failed", exc_info=True)

        committed = False
        try:
            work = self.executor.run(job, progress=relay, quick=quick)
            try:
                result = await (tracker.run(work) if tracker is not None else work)  # the console may cancel it
            except GdalMcpError as e:  # every failure names the file it is about
                raise GdalMcpError(e.code, job.naming_input(e.message)) from None
            if isinstance(result, WithRemote):  # the job read remote data: its figures go to the tool's result
                result = remote_figures(result)
            if record_dir is not None:
                provenance.place_changed(self, job, record_dir)
            if output is not None and output.remote is not None:
                committed = True  # an object-storage output: its worker uploaded it (Job.upload), nothing to place here
                Path(upload_journal(str(output.tmp_dir))).unlink(missing_ok=True)
                output.discard()
            elif output is not None:
                if job.provenance:  # the digests its record holds, for the next jobs reading these files
                    self.digests.learn(job, str(output.tmp_path) + RECORD_SUFFIX, str(output.final))
                placed = await asyncio.to_thread(output.commit)
                committed = True
                self.cache.evict(placed)
            return result
        except asyncio.CancelledError:
            log.info("job %s cancelled by the client", job.FUNC)
            raise
        finally:
            if record_dir is not None:
                shutil.rmtree(record_dir, ignore_errors=True)
            if output is not None and not committed:
                if output.remote is not None:
                    await self._remove_partial_upload(output)
                output.discard()

    def approve_versions(self, tool: str, versions: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        """A person's yes about objects: `tool` may change each (key, ETag) in that version (object_versions)."""
        now = time.monotonic()
        recorded = []
        for key, etag in versions:
            self.approved_versions[(tool, key)] = (etag, now)
            recorded.append((tool, key))
        return recorded

    def forget_versions(self, recorded: Iterable[tuple[str, str]]) -> None:
        for entry in recorded:
            self.approved_versions.pop(entry, None)

    def object_versions(self, found: Iterable[Mapping[str, Any]]) -> dict[str, str]:
        """{key: ETag} of the existing objects `found` ({path, etag} as engine/objects.describe lists them) that a call
        is about to replace or delete. Under a policy that asks about such changes (--confirm other than never), each
        must have the person's yes for exactly that version, given for this call: conflict otherwise (it appeared or
        changed after the person was asked, or was never shown), and nothing is changed. Under --confirm never: the
        version listed (the change is still conditional on it)."""
        versions: dict[str, str] = {}
        now = time.monotonic()
        for f in found:
            key, etag = str(f["path"]), str(f["etag"])
            if self.settings.confirm != "never":
                approved = self.approved_versions.get((CURRENT_TOOL.get() or "", key))
                if approved is None or approved[0] != etag or now - approved[1] > APPROVAL_TTL:
                    what = "changed after the person approved it" if approved is not None else "was not shown to the person"
                    raise GdalMcpError(
                        "conflict",
                        f"'{self.sandbox.display(key)}' {what} (it appeared or changed since the call was checked); nothing "
                        "was changed. Call again: the person is asked about it as it is now",
                    )
            versions[key] = etag
        return versions

    async def object_dataset(self, path: str) -> dict[str, Any] | None:
        """The objects of the dataset whose main object is the /vsis3/ `path` ({"files": [{path, size, mtime, etag}, …
        main first], "shared": […]}), listed by a worker; None when there is no such object."""
        from gdal_mcp import jobs

        found: dict[str, Any] | None = (await self.execute(jobs.DescribeObjectsJob(objects=[path]), quick=True)).get(path)
        return found

    async def _replacing(self, remote: str) -> dict[str, str]:
        """The objects an overwrite of the object output `remote` may replace: its dataset's objects, each in the version
        approved (object_versions); the upload creates every other key new (If-None-Match), never replacing it."""
        return self.object_versions(((await self.object_dataset(remote)) or {}).get("files", []))

    async def _remove_partial_upload(self, output: OutputTarget) -> None:
        """After a job whose upload did not finish: the objects its worker's journal says it created (new ones: the
        upload's condition guaranteed it) are deleted, when a worker killed midway (a cancel, a timeout) could not
        delete them itself. Shielded: it runs to its end even while the call is being cancelled."""
        import anyio

        from gdal_mcp import jobs

        journal = Path(upload_journal(str(output.tmp_dir)))
        try:
            created = [line for line in journal.read_text(encoding="utf-8").splitlines() if line]
            journal.unlink()
        except OSError:
            return  # nothing uploaded (or a Dask worker's own directory: it deletes what it created itself)
        folder = output.remote.rsplit("/", 1)[0] + "/" if output.remote else ""
        created = [key for key in created if key.startswith(folder) and "/" not in key[len(folder) :]]
        if not created:
            return
        with anyio.CancelScope(shield=True):
            try:
                await self.executor.run(jobs.DeleteObjectsJob(objects=created), quick=True)
            except GdalMcpError as e:
                log.warning("could not delete the objects of an upload that was stopped (%s): %s", created, e.message)

    async def metadata[R](self, job: Job[R], src: ResolvedInput, *, ctx: Context | None = None) -> R:
        """A quick read-only metadata job, answered from the cache while the input's files are unchanged.

        The files are identified (path, inode, size, mtime, ctime, sidecars) before the job runs, so a
        change made while it runs gives a new identity and the answer is never served for the new file.
        """
        now = time.time_ns()
        keyed = None if src.network else self.cache.key(job, src.files)
        if keyed is not None:
            cached = self.cache.get(keyed[0])
            if cached is not None:
                return cached  # type: ignore[no-any-return]
        result = await self.execute(job, ctx=ctx, quick=True)
        if keyed is not None:
            self.cache.put(keyed[0], keyed[1], result, now_ns=now)
        return result


def remote_figures(reply: WithRemote) -> Any:
    """The job's own result, with the figures of what it read remotely: on the result when it is a model with a
    `remote` field, and for the tool call (REMOTE_READS, summed over its jobs) where the tool shapes another model."""
    figures = dict(reply.remote)
    before = REMOTE_READS.get()
    if before:
        figures = {k: figures.get(k, 0) + before.get(k, 0) for k in ("requests", "bytes", "files")}
    REMOTE_READS.set(figures)
    value = reply.value
    if isinstance(value, ReadsRemote) and value.remote is None:
        value.remote = RemoteReads(**reply.remote)
    return value
