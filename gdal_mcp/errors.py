"""Error codes and the error envelope every failed tool call returns.

One exception type carries a stable kebab-case code; `envelope()` is the one place that turns it
into the MCP result `{"success": false, "error": {"code", "message"}}`.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

ErrorCode = Literal[
    "invalid-argument",
    "not-found",
    "out-of-root",
    "already-exists",
    "conflict",
    "unsupported",
    "gdal-error",
    "timeout",
    "cancelled",
    "resource-limit",
    "read-only",
    "declined",
    "confirmation-required",
    "internal-error",
]
ERROR_CODES: tuple[str, ...] = get_args(ErrorCode)


class GdalMcpError(Exception):
    """A failure with a stable code and a message that tells the caller what to do next."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        if code not in ERROR_CODES:
            raise ValueError(f"unknown error code {code!r}")
        super().__init__(message)
        self.code: ErrorCode = code
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        # Errors cross the worker pipe; keep both fields through pickling.
        return (GdalMcpError, (self.code, self.message))

    def payload(self) -> dict[str, Any]:
        return {"success": False, "error": {"code": self.code, "message": self.message}}
