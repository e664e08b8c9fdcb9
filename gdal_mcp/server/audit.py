"""The audit log: one JSON line per tool call and per confirmation answer, and the listeners that see every record
(the job board keeps the last ones for the approval console). Imports nothing else of the server: the approval
state, the job board and App all use it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import Any

from gdal_mcp.credentials import redact_obj
from gdal_mcp.sandbox import Sandbox

#: the approval of the call being run, once a person (or the operator's policy) approved it: who, through which
#: channel, when (the call's provenance records carry it; the middleware starts every call without one)
APPROVAL: ContextVar[dict[str, Any] | None] = ContextVar("gdal_mcp_approval", default=None)


def iso(t: float) -> str:
    """A time as the approval console and its confirmation results show it: UTC, whole seconds."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def iso_ms(t: float) -> str:
    """A time as audit and provenance records give it: UTC, milliseconds."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"


class AuditLog:
    """One JSON line per tool call: time, tool, arguments (workspace-relative), outcome, duration, outputs."""

    def __init__(self, path: Any, sandbox: Sandbox) -> None:
        self.path = path
        self.sandbox = sandbox
        self._lock = threading.Lock()
        #: called with every record, written to a file or not (the approval console keeps the last 100)
        self.listeners: list[Callable[[dict[str, Any]], None]] = []

    def write(
        self,
        *,
        tool: str,
        arguments: dict[str, Any],
        outcome: str,
        duration_ms: float,
        outputs: Iterable[str] = (),
        task: str | None = None,
    ) -> None:
        """`task`: the MCP task id of a call run as a task (its creation and its run are two records)."""
        if self.path is None and not self.listeners:
            return
        record: dict[str, Any] = {
            "time": iso_ms(time.time()),
            "tool": tool,
            "arguments": redact_obj(self.sandbox.scrub_obj(arguments)),
            "outcome": outcome,
            "duration_ms": round(duration_ms, 1),
            "outputs": list(outputs),
        }
        if task is not None:
            record["task"] = task
        self._append(record)

    def note_approval(
        self,
        channel: str,
        when: float,
        kind: str,
        question: str,
        *,
        detail: str | None = None,
        token_fingerprint: str | None = None,
    ) -> None:
        """The call being run was approved (APPROVAL: its outputs' provenance records say who, how and when)."""
        who = {
            "elicitation": "the person at the MCP client (asked through elicitation)",
            "console": f"the holder of console token {token_fingerprint}" if token_fingerprint else "the console (loopback)",
            "policy": f"the operator's policy ({detail})" if detail else "the operator's policy",
        }.get(channel, channel)
        APPROVAL.set(
            {"who": who, "channel": channel, "when": iso_ms(when), "kind": kind, "question": self.sandbox.scrub(question)}
        )

    def confirmation(
        self,
        *,
        tool: str,
        arguments: dict[str, Any],
        question: str,
        kind: str,
        answer: str,
        channel: str,
        detail: str | None = None,
        token_fingerprint: str | None = None,
    ) -> None:
        """A confirmation record: what the person was shown, the answer (approved, declined, cancelled, refused),
        the channel (elicitation, console with the fingerprint of the token used, or policy), when."""
        if answer == "approved":
            self.note_approval(channel, time.time(), kind, question, detail=detail, token_fingerprint=token_fingerprint)
        if self.path is None and not self.listeners:
            return
        record: dict[str, Any] = {
            "time": iso_ms(time.time()),
            "event": "confirmation",
            "tool": tool,
            "arguments": redact_obj(self.sandbox.scrub_obj(arguments)),
            "kind": kind,
            "shown": self.sandbox.scrub(question),
            "answer": answer,
            "channel": channel,
        }
        if detail is not None:
            record["detail"] = detail
        if token_fingerprint is not None:
            record["token"] = token_fingerprint
        self._append(record)

    def _append(self, record: dict[str, Any]) -> None:
        for listener in self.listeners:
            listener(record)
        if self.path is None:
            return
        line = json.dumps(record, default=str)
        with self._lock, open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
