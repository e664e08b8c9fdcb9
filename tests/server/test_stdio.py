"""The guarded stdio line reader on its own: line splitting at every chunk size, the length limit, EOF."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gdal_mcp.server.stdio import GuardedLines

PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'  # 40 bytes
NOTE = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'


class Out:
    def __init__(self) -> None:
        self.lines: list[str] = []

    async def write(self, text: str) -> int:
        assert text.endswith("\n") and text.count("\n") == 1  # one whole line per write
        self.lines.append(text)
        return len(text)

    async def flush(self) -> None:
        return None

    def errors(self) -> list[tuple[Any, int]]:
        return [(m["id"], m["error"]["code"]) for m in map(json.loads, self.lines)]


async def run(data: bytes, chunk: int, limit: int = 1000) -> tuple[list[str], list[tuple[Any, int]]]:
    pos = 0
    reader: GuardedLines

    def read(n: int) -> bytes:
        nonlocal pos
        assert len(reader._buf) <= limit  # never more than the limit held
        piece = data[pos : pos + min(n, chunk)]
        pos += len(piece)
        return piece

    out = Out()
    reader = GuardedLines(read, out, limit=limit, chunk=chunk)  # type: ignore[arg-type]
    return [line async for line in reader], out.errors()


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 41, 64, 4096])
async def test_lines_across_chunk_boundaries(chunk: int) -> None:
    data = b"\n".join([PING, b"", b"  ", NOTE + b"\r", b"{bad", PING.replace(b"1", b"2"), b'{"id": 3}', b"[]"]) + b"\n"
    lines, errors = await run(data, chunk)
    # The valid messages, exactly as split on b"\n" (a CR before the newline dropped).
    assert lines == [PING.decode(), NOTE.decode(), PING.replace(b"1", b"2").decode()]
    assert errors == [(None, -32700), (3, -32600), (None, -32600)]


@pytest.mark.parametrize("chunk", [1, 5, 39, 40, 41, 1000])
async def test_limit_is_inclusive_and_over_long_lines_are_dropped(chunk: int) -> None:
    assert len(PING) == 40
    lines, errors = await run(PING + b"\n" + PING + b"\n", chunk, limit=40)
    assert lines == [PING.decode()] * 2 and errors == []
    over = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + b"y" * 500 + b'"}}'
    lines, errors = await run(over + b"\n" + PING + b"\n" + over + b"\n", chunk, limit=40)
    assert lines == [PING.decode()] and errors == [(None, -32600)] * 2


@pytest.mark.parametrize("chunk", [1, 3, 4096])
async def test_end_of_input(chunk: int) -> None:
    lines, errors = await run(PING + b"\n" + NOTE, chunk)  # the last line has no newline
    assert lines == [PING.decode(), NOTE.decode()] and errors == []
    lines, errors = await run(PING + b"\n" + b"z" * 100, chunk, limit=40)  # input ends inside an over-long line
    assert lines == [PING.decode()] and errors == [(None, -32600)]
    assert await run(b"", chunk) == ([], [])
