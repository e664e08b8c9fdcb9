"""The server's part of an output's provenance record (the worker writes the record: engine/provenance.py): the tool,
its arguments as the caller gave them (credentials masked), the paths as the caller sees them, the job's id and the
approval of the call. Never opens a dataset."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import threading
import time
import uuid
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gdal_mcp.credentials import redact_obj
from gdal_mcp.sandbox.outputs import RECORD_SUFFIX, temporary_dir
from gdal_mcp.sandbox.remote import is_remote
from gdal_mcp.server.audit import APPROVAL
from gdal_mcp.server.jobboard import CURRENT_TOOL

if TYPE_CHECKING:
    from gdal_mcp.jobs import Job
    from gdal_mcp.sandbox.outputs import OutputTarget
    from gdal_mcp.server.app import App

log = logging.getLogger("gdal_mcp.provenance")

#: the arguments of the tool call being run, as the client sent them (set by the middleware; for a call run as a
#: task, by the task's run: tools/registry.audited_as_task)
CALL_ARGUMENTS: ContextVar[dict[str, Any] | None] = ContextVar("gdal_mcp_call_arguments", default=None)
#: the recorded step a replay is running again ({"record", "sha256"}: the record it follows), for its new record
REPLAY_OF: ContextVar[dict[str, Any] | None] = ContextVar("gdal_mcp_replay_of", default=None)
#: how long an approval waits for the task it was given for
TASK_WAIT = 600.0


def signing_key(roots: list[str]) -> str:
    """The key provenance records are signed with (hex): GDAL_MCP_PROVENANCE_KEY, else a key kept in
    $XDG_STATE_HOME/gdal-mcp/provenance.key (~/.local/state/…; made on first use, readable by the owner only), so a
    later run believes this one's records. Never one inside a workspace (a tool could read it there): then a key
    for this run only."""
    import os
    import secrets

    given = os.environ.get("GDAL_MCP_PROVENANCE_KEY", "").strip()
    if given:
        return hashlib.sha256(given.encode()).hexdigest()
    from gdal_mcp.sandbox.paths import key_dir

    path = str(key_dir() / "provenance.key")  # a directory no tool may name (sandbox/paths.contained)
    real = os.path.realpath(path)
    if any(real == r or real.startswith(r.rstrip("/") + "/") for r in (os.path.realpath(x) for x in roots)):
        log.warning("the provenance key file %s would lie in a workspace: records are signed for this run only", path)
        return secrets.token_hex(32)
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(secrets.token_hex(32))
        except FileExistsError:
            pass
        with open(path, encoding="utf-8") as fh:
            key = fh.read().strip()
        bytes.fromhex(key)
        if len(key) >= 32:
            return key
    except (OSError, ValueError):
        pass
    log.warning("no provenance key could be kept in %s: records are signed for this run only", path)
    return secrets.token_hex(32)


def jsonable(value: Any) -> Any:
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(value, fallback=str)


class CallApprovals:
    """The approvals of calls that become MCP tasks. A task runs outside the middleware that asked the person (and
    outside its context): the middleware leaves the approval here, the task's run takes it, matched by tool and by the
    arguments the client gave (each equal in the run's arguments, where every default is filled in)."""

    def __init__(self) -> None:
        self._items: list[tuple[str, dict[str, Any], dict[str, Any], float]] = []
        self._lock = threading.Lock()

    def remember(self, tool: str, arguments: dict[str, Any], approval: dict[str, Any]) -> None:
        with self._lock:
            now = time.monotonic()
            self._items = [i for i in self._items if now - i[3] < TASK_WAIT]
            self._items.append((tool, jsonable(arguments), approval, now))

    def take(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
        given = jsonable({k: v for k, v in arguments.items() if k != "ctx"})
        with self._lock:
            now = time.monotonic()
            for item in self._items:
                name, asked, approval, when = item
                if name == tool and now - when < TASK_WAIT and all(given.get(k) == v for k, v in asked.items()):
                    self._items.remove(item)
                    return approval
        return None

    def forget(self, approval: dict[str, Any]) -> None:
        with self._lock:
            self._items = [i for i in self._items if i[2] is not approval]


def attach[J: Job[Any]](app: App, job: J, output: OutputTarget | None) -> tuple[J, Path | None]:
    """`job` with the server's part of its provenance record: for its output, or, for a file it changes in place, with
    a temporary directory (returned) in the file's folder where the worker writes the file's new record."""
    changed = job.modifies()
    if output is not None and output.final.name and job.output_path() is not None:
        return dataclasses.replace(job, provenance=context(app, job, output.display)), None
    if len(changed) == 1 and not is_remote(changed[0]) and job.RECORDED:
        shown = app.sandbox.display(changed[0])
        found = context(app, job, shown)
        if found is not None:
            record_dir = temporary_dir(Path(changed[0]).parent, shown, [])
            return dataclasses.replace(job, provenance={**found, "record_dir": str(record_dir)}), record_dir
    return job, None


def place_changed(app: App, job: Job[Any], record_dir: Path) -> None:
    """After a job changed a file in place: its new record (which keeps the earlier one inside) replaces the record
    beside the file."""
    import os

    changed = job.modifies()[0]
    record = record_dir / (Path(changed).name + RECORD_SUFFIX)
    if record.is_file():
        app.digests.learn(job, str(record), changed)
        os.replace(record, changed + RECORD_SUFFIX)


def context(app: App, job: Job[Any], output: str) -> dict[str, Any] | None:
    """What the worker needs from the server to write the record of `job`'s output (`output`: as the caller sees it);
    None when it gets none (a job that copies a dataset keeps that dataset's record)."""
    if not job.RECORDED:
        return None
    arguments = app.sandbox.scrub_obj(dict(CALL_ARGUMENTS.get() or {}))
    masked = redact_obj(arguments)
    inputs = job.input_paths()
    return {
        "key": app.provenance_key,
        "digests": app.digests.known(inputs),
        "arguments": masked,
        "redacted": masked != arguments,
        "tool": CURRENT_TOOL.get() or job.FUNC.rpartition(":")[2],
        "inputs": {p: app.sandbox.display(p) for p in inputs},
        "output": output,
        "job_id": uuid.uuid4().hex,
        "approval": APPROVAL.get(),
        "replay_of": REPLAY_OF.get(),
    }


class Digests:
    """The SHA-256 digests the workers computed for provenance records, by real path with the state (files' sizes and
    modification times) the dataset had: a next job reading an unchanged file is given its digest instead of reading it again (the
    workers of a pool each keep only their own). Learnt from each record before its output is placed; bounded."""

    LIMIT = 10_000

    def __init__(self) -> None:
        self._known: dict[str, list[Any]] = {}
        self._lock = threading.Lock()

    def known(self, paths: list[str]) -> dict[str, list[Any]]:
        import os

        with self._lock:
            return {os.path.realpath(p): self._known[os.path.realpath(p)] for p in paths if os.path.realpath(p) in self._known}

    def learn(self, job: Job[Any], record_path: str, final: str) -> None:
        """The digests of the record at `record_path` (the job's, before its output moved to `final`)."""
        import json
        import os

        context = job.provenance or {}
        by_display = {shown: real for real, shown in (context.get("inputs") or {}).items()}
        try:
            with open(record_path, encoding="utf-8") as fh:
                record = json.load(fh)
        except (OSError, ValueError):
            return
        found: dict[str, list[Any]] = {}
        for entry in record.get("inputs") or []:
            real = by_display.get(entry.get("path"))
            if real is not None and os.path.isfile(real):
                found[os.path.realpath(real)] = [entry.get("x-gdal-mcp:state"), entry.get("sha256")]
        output = record.get("output") or {}
        found[os.path.realpath(final)] = [output.get("x-gdal-mcp:state"), output.get("sha256")]
        with self._lock:
            self._known.update(found)
            while len(self._known) > self.LIMIT:
                self._known.pop(next(iter(self._known)))
