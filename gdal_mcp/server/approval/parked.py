"""Confirmations parked for a person to decide in the approval console (HTTP with --console).

A call that needs approval from a client that cannot elicit is parked here (`park`, from policy.console_channel):
the agent gets `confirmation-required` (`required`) with the confirmation id, the console URL and the expiry, and
calls again with `confirmation_id=<id>` (`redeem`) once the person approved (`decide`, from the console's route),
or asks confirmation_status (`get`). An approval binds to the tool, its exact arguments and the state of the files
the question describes (Question.state): if they changed, it is void. Every step is written to the audit log.

The console's address is given as data by the caller (the web view knows it); nothing here imports the web or
tools rooms.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.server.approval.question import Question
from gdal_mcp.server.audit import AuditLog, iso

if TYPE_CHECKING:
    from fastmcp.tools import ToolResult

KEEP_DECIDED = 50  # decided confirmations kept for confirmation_status and the page


@dataclass
class Pending:
    """A parked confirmation: what the person is asked, bound to question.state (tool, arguments, files)."""

    id: str
    question: Question
    created: float
    expires: float
    status: str = "pending"  # pending | approved | denied | expired | void | used
    decided: float | None = None
    token: str | None = None  # fingerprint of the token the decision was made with

    def view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tool": self.question.tool,
            "kind": self.question.kind,
            "question": self.question.message,
            "status": self.status,
            "created": iso(self.created),
            "expires": iso(self.expires),
            "decided": iso(self.decided) if self.decided else None,
        }


class ParkedConfirmations:
    """The confirmations waiting for (or decided by) a person; `timeout`: how long one waits (--confirm-timeout)."""

    def __init__(self, audit: AuditLog, *, timeout: float) -> None:
        self.audit = audit
        self.timeout = timeout
        self.pending: dict[str, Pending] = {}

    def _expire(self) -> None:
        now = time.time()
        for p in self.pending.values():
            if p.status in ("pending", "approved") and now > p.expires:
                p.status = "expired"
                p.question.record(
                    self.audit,
                    "expired",
                    "console",
                    f"confirmation {p.id} expired unanswered" if p.decided is None else f"confirmation {p.id} expired unused",
                )
        decided = [p for p in self.pending.values() if p.status != "pending"]
        for p in sorted(decided, key=lambda p: p.created)[: -KEEP_DECIDED or None]:
            del self.pending[p.id]

    def get(self, cid: str) -> Pending | None:
        self._expire()
        return self.pending.get(cid)

    def views(self) -> list[dict[str, Any]]:
        """Every confirmation kept, newest first, as the console's page shows it."""
        self._expire()
        return [p.view() for p in sorted(self.pending.values(), key=lambda p: p.created, reverse=True)]

    def park(self, question: Question) -> Pending:
        """The pending confirmation for `question` (an existing one for the same call and files, else new)."""
        self._expire()
        for p in self.pending.values():
            if p.status == "pending" and p.question.state == question.state:
                return p
        now = time.time()
        p = Pending(id=secrets.token_urlsafe(9), question=question, created=now, expires=now + self.timeout)
        self.pending[p.id] = p
        question.record(
            self.audit,
            "pending",
            "console",
            f"parked as confirmation {p.id}",
        )
        return p

    def decide(self, cid: str, approve: bool, token: str | None) -> Pending:
        """The person's answer (`token`: the fingerprint of the credential it was given with)."""
        p = self.get(cid)
        if p is None:
            raise GdalMcpError("not-found", f"no confirmation {cid}")
        if p.status != "pending":
            raise GdalMcpError("invalid-argument", f"confirmation {cid} is {p.status} already")
        p.status, p.decided, p.token = ("approved" if approve else "denied"), time.time(), token
        q = p.question
        q.record(
            self.audit,
            "approved" if approve else "declined",
            "console",
            f"confirmation {cid}" + ("" if token else " (no token: loopback)"),
            token_fingerprint=token,
        )
        return p

    def required(self, p: Pending, why: str, *, console_url: str) -> ToolResult:
        """The confirmation-required result that tells the agent where the approval waits (`console_url`)."""
        import json

        import mcp.types as mt
        from fastmcp.tools import ToolResult

        message = (
            f"{p.question.tool} needs a person's approval first: {p.question.message} {why} It waits as "
            f"confirmation {p.id} in the approval console ({console_url}) until {iso(p.expires)}. Ask the user to "
            f"approve or deny it there (never approve it yourself); then call {p.question.tool} again with "
            f'the same arguments plus confirmation_id="{p.id}" (confirmation_status tells whether it was '
            "decided). Nothing was changed."
        )
        payload = {
            "success": False,
            "error": {
                "code": "confirmation-required",
                "message": message,
                "confirmation_id": p.id,
                "console_url": console_url,
                "expires": iso(p.expires),
            },
        }
        return ToolResult(
            content=[mt.TextContent(type="text", text=json.dumps(payload))], structured_content=payload, is_error=True
        )

    def redeem(self, cid: str, question: Question, *, console_url: str) -> ToolResult | None:
        """A call repeated with confirmation_id: None to go ahead (the approval is used up), or the result to
        hand back; raises `declined` when the person denied it."""
        p = self.get(cid)
        if p is None:
            return self.required(
                self.park(question), f"Confirmation {cid} is unknown or expired; a new one was parked.", console_url=console_url
            )
        if p.question.state != question.state:
            if p.status in ("pending", "approved"):
                p.status = "void"
                question.record(
                    self.audit,
                    "void",
                    "console",
                    f"confirmation {cid} was for other arguments or the files changed since",
                )
            return self.required(
                self.park(question),
                f"Confirmation {cid} was given for other arguments or for "
                "the files as they were before they changed, so it is void; "
                "a new one was parked.",
                console_url=console_url,
            )
        if p.status == "pending":
            return self.required(p, "The person has not decided yet.", console_url=console_url)
        if p.status == "denied":
            raise GdalMcpError(
                "declined",
                f"the user denied {question.tool} in the approval console: "
                f"{question.message} Nothing was changed; do not retry unless the user asks for it",
            )
        if p.status == "approved":
            p.status = "used"
            q = p.question  # the call runs now: its outputs' provenance records name this approval
            self.audit.note_approval("console", p.decided or time.time(), q.kind, q.message, token_fingerprint=p.token)
            return None
        return self.required(
            self.park(question), f"Confirmation {cid} is {p.status}; a new one was parked.", console_url=console_url
        )
