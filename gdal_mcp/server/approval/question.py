"""What a person is asked before a call changes data: the `Question` (tool, kind, message, the files it describes
and the digest of their state) and how those files are shown. Shared by the policy that words questions
(policy.py) and the confirmations parked for the approval console (parked.py); imports no other server module."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from gdal_mcp.server.audit import AuditLog

Kind = Literal["replace", "modify", "create", "call"]


@dataclass(frozen=True)
class Existing:
    """A file (or an object in object storage) that the call would replace or change, as the person is shown it."""

    display: str
    size: int
    mtime: float
    mtime_ns: int
    inode: int
    #: an object in object storage: its /vsis3/ path and the ETag of the version described (a yes binds to it)
    key: str = ""
    etag: str = ""

    def describe(self) -> str:
        return f"{self.display} ({human_size(self.size)}, modified {time.strftime('%Y-%m-%d %H:%M', time.localtime(self.mtime))})"


@dataclass(frozen=True)
class Question:
    """What a call will do, in plain words, and the state of the files it describes."""

    tool: str
    kind: Kind
    message: str
    targets: tuple[Existing, ...]
    arguments: dict[str, Any]
    state: str  # digest of tool, arguments and the targets' identity: an answer binds to exactly this

    def record(
        self, audit: AuditLog, answer: str, channel: str, detail: str | None = None, *, token_fingerprint: str | None = None
    ) -> None:
        """The audit record of what happened to this question: what the person was shown and the answer (approved,
        declined, cancelled, refused, pending, expired, void), through which channel."""
        audit.confirmation(
            tool=self.tool,
            arguments=self.arguments,
            question=self.message,
            kind=self.kind,
            answer=answer,
            channel=channel,
            detail=detail,
            token_fingerprint=token_fingerprint,
        )


def human_size(n: int) -> str:
    """1.2 GB, 340 KB, 12 bytes (decimal units, as file managers show them)."""
    if n < 1000:
        return f"{n} byte" + ("" if n == 1 else "s")
    value = float(n)
    for unit in ("KB", "MB", "GB", "TB", "PB"):
        value /= 1000
        if value < 999.95 or unit == "PB":
            return f"{value:.1f} {unit}" if value < 100 else f"{value:.0f} {unit}"
    raise AssertionError("unreachable")
