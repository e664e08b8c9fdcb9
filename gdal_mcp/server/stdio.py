"""The stdio transport behind a guarded line reader: newline-delimited JSON-RPC, as the MCP spec says.

The SDK's stdio reader buffers whole lines of any size and drops what it cannot parse without a word.
In front of it, this reader
- reads stdin in bounded chunks and splits on b"\\n"; blank lines are skipped;
- discards a line longer than the limit (64 MiB by default) while reading it, never holding more than the
  limit, and answers it with -32600 (id null); the next line is served as usual;
- answers unparseable JSON with -32700 (id null), and a message that is not a JSON-RPC request,
  notification or response with -32600 (echoing its id when it has a usable one);
- forwards every valid message, unchanged, to the SDK's own reader (`mcp.server.stdio.stdio_server`).
Unknown methods are answered -32601 by the SDK itself. The guard's answers go through the same writer
and lock as the server's, so lines never interleave.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any, BinaryIO, cast

import anyio
import anyio.to_thread
from mcp.server.stdio import stdio_server
from mcp_types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from gdal_mcp.config import MiB

if TYPE_CHECKING:
    from fastmcp import FastMCP

log = logging.getLogger("gdal_mcp.server.stdio")

MAX_LINE_BYTES = 64 * MiB
"""Longest JSON-RPC line accepted (--max-message-size); a longer one is discarded as protocol abuse."""
CHUNK_BYTES = 256 * 1024
"""How much stdin is read at a time: the reader never holds more than the limit plus one chunk."""

_Read = Callable[[int], bytes]


class StdoutWriter:
    """The one writer of protocol lines: each write is encoded, written and flushed whole, under a lock.

    Passed to the SDK as its stdout (it calls `write(line)` then `flush()`), and used by the guard.
    """

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._lock = anyio.Lock()

    async def write(self, text: str) -> int:
        data = text.encode("utf-8")
        async with self._lock:
            await anyio.to_thread.run_sync(self._write_all, data)
        return len(text)

    async def flush(self) -> None:  # every write is already flushed
        return None

    def _write_all(self, data: bytes) -> None:
        self._raw.write(data)
        self._raw.flush()


def _request_id(message: dict[str, Any]) -> int | str | None:
    """The id to echo in an error: a JSON-RPC id (integer or string), else None (null)."""
    value = message.get("id")
    return value if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)) else None


class GuardedLines:
    """Async iterator of the valid protocol lines read from `read`; answers the rest through `out`."""

    def __init__(self, read: _Read, out: StdoutWriter, *, limit: int = MAX_LINE_BYTES, chunk: int = CHUNK_BYTES) -> None:
        self._read = read
        self._out = out
        self.limit = limit
        self._chunk_size = chunk
        self._chunk = b""
        self._pos = 0
        self._buf = bytearray()  # the line being read, never more than `limit` bytes
        self._dropping = False  # inside an over-long line: drop bytes until its newline
        self._eof = False

    def __aiter__(self) -> AsyncIterator[str]:
        return self

    async def __anext__(self) -> str:
        while True:
            line = await self._next_line()
            if line is None:
                log.warning("stdin: discarded a message longer than %d bytes", self.limit)
                await self._answer(
                    None,
                    INVALID_REQUEST,
                    f"Invalid Request: message longer than {self.limit} bytes "
                    "(protocol abuse); it was discarded. Send smaller messages.",
                )
                continue
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line.strip():
                continue  # blank lines between messages are allowed
            text = line.decode("utf-8", errors="replace")  # as the SDK's own reader decodes
            del line
            try:
                message = jsonrpc_message_adapter.validate_json(text, by_name=False)  # the SDK's own check
            except ValidationError as e:
                await self._reject(text, e)
                continue
            if isinstance(message, JSONRPCNotification) and '"id"' in text and await self._bad_id(text):
                continue  # a request whose id is neither a number nor a string: the SDK would take it as a notification
            return text

    async def _next_line(self) -> bytes | bytearray | None:
        """The next line without its newline; None for a line that exceeded the limit (already dropped)."""
        while True:
            if self._pos < len(self._chunk):
                nl = self._chunk.find(b"\n", self._pos)
                start, end = self._pos, (nl if nl != -1 else len(self._chunk))
                self._pos = end + 1 if nl != -1 else end
                if not self._dropping:
                    piece = self._chunk[start:end]
                    if len(self._buf) + len(piece) > self.limit:
                        self._dropping = True
                        self._buf = bytearray()  # release it now, not at the newline
                    elif nl == -1:
                        self._buf += piece
                    elif self._buf:
                        self._buf += piece
                        line, self._buf = self._buf, bytearray()
                        return line
                    else:
                        return piece
                if nl != -1:  # the over-long line ends here
                    self._dropping = False
                    return None
                continue
            if self._eof:
                raise StopAsyncIteration
            self._chunk = await anyio.to_thread.run_sync(self._read, self._chunk_size, abandon_on_cancel=True)
            self._pos = 0
            if not self._chunk:  # end of input: a last line may lack its newline
                self._eof = True
                if self._dropping:
                    self._dropping = False
                    return None
                if self._buf:
                    line, self._buf = self._buf, bytearray()
                    return line

    async def _reject(self, text: str, error: ValidationError) -> None:
        if any(e["type"] == "json_invalid" for e in error.errors()):
            log.warning("stdin: unparseable JSON (%d bytes)", len(text))
            await self._answer(None, PARSE_ERROR, "Parse error: the line is not valid JSON; send one JSON-RPC message per line")
            return
        try:
            message = json.loads(text)
        except ValueError:
            await self._answer(None, PARSE_ERROR, "Parse error: the line is not valid JSON")
            return
        if not isinstance(message, dict):
            if isinstance(message, list):
                what = "a batch (JSON array), which MCP does not support"
            else:
                what = "a JSON " + {bool: "boolean", int: "number", float: "number", str: "string"}.get(type(message), "null")
            log.warning("stdin: %s instead of a JSON-RPC message", what)
            await self._answer(
                None, INVALID_REQUEST, f"Invalid Request: got {what}; send one JSON-RPC 2.0 message object per line"
            )
            return
        if "method" not in message and ("result" in message or "error" in message):
            log.warning("stdin: malformed JSON-RPC response ignored (id %r)", message.get("id"))
            return  # never answer a response, even a malformed one
        log.warning("stdin: invalid JSON-RPC message (id %r)", message.get("id"))
        if "method" not in message:
            detail = "it has no 'method'"
        else:
            first = error.errors()[0]
            detail = f"{'.'.join(str(p) for p in first['loc'][1:]) or 'message'}: {first['msg']}"
        await self._answer(
            _request_id(message), INVALID_REQUEST, f"Invalid Request: not a JSON-RPC 2.0 request or notification ({detail})"
        )

    async def _bad_id(self, text: str) -> bool:
        message = json.loads(text)
        if "id" not in message:
            return False
        log.warning("stdin: request with an invalid id %r", message["id"])
        await self._answer(None, INVALID_REQUEST, "Invalid Request: the id must be a string or an integer")
        return True

    async def _answer(self, request_id: int | str | None, code: int, message: str) -> None:
        reply = JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))
        await self._out.write(reply.model_dump_json(by_alias=True, exclude_unset=True) + "\n")


@contextmanager
def claim_stdio() -> Iterator[tuple[_Read, BinaryIO]]:
    """Take the protocol wire from fd 0/1, as the SDK's stdio_server does for its own streams.

    The wire is served from private duplicates; meanwhile fd 0 reads the null device and fd 1 goes to
    stderr, so a stray print (or a library writing to fd 1) can never corrupt the protocol. Restored on exit.
    """
    try:
        import fcntl

        if sys.stdin.fileno() != 0 or sys.stdout.fileno() != 1:
            raise ValueError("stdin/stdout are not fd 0/1")
    except (ImportError, AttributeError, OSError, ValueError):  # no real descriptors: serve the streams in place
        stdin: Any = sys.stdin.buffer
        yield stdin.read1, sys.stdout.buffer
        return
    sys.stdout.flush()
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    try:
        # Never closed: an abandoned reader thread may still block on wire_in at exit.
        yield partial(os.read, wire_in), os.fdopen(wire_out, "wb", closefd=False)
    finally:
        os.dup2(wire_out, 1)
        os.dup2(wire_in, 0)


async def run_stdio(mcp: FastMCP, *, log_level: str | None = None, max_line_bytes: int = MAX_LINE_BYTES) -> None:
    """Serve `mcp` over stdio through the guarded reader.

    Mirrors FastMCP 4.1.2's `run_stdio_async` (transport context, log level, lifespan, then the low-level
    server on the SDK's stdio streams), with our reader and writer given to `stdio_server`.
    """
    from fastmcp.server.context import reset_transport, set_transport
    from fastmcp.utilities.logging import temporary_log_level

    token = set_transport("stdio")
    try:
        with temporary_log_level(log_level), claim_stdio() as (read, raw_out):
            out = StdoutWriter(raw_out)
            lines = GuardedLines(read, out, limit=max_line_bytes)
            async with (
                mcp._lifespan_manager(),
                stdio_server(stdin=cast(Any, lines), stdout=cast(Any, out)) as (
                    read_stream,
                    write_stream,
                ),
            ):
                log.info("serving MCP over stdio (messages up to %d bytes)", max_line_bytes)
                server = mcp._mcp_server
                await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        reset_transport(token)
