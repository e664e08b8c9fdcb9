"""Class 4 — approval that is not a person's: the MCP client (or any local HTTP client) approving its own parked
confirmation in the console and rerunning the call with the confirmation_id. Deciding needs the person's
credential (GDAL_MCP_CONSOLE_TOKEN, or the one-time login link printed on the server's stderr); the MCP token,
and loopback without any token, can only read."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from fastmcp import Client

from tests.e2e.test_http import StderrLog, free_port, wait_listening
from tests.security.helpers import workspace

TOKEN = "mcp-client-token-3d1e"
CONSOLE_TOKEN = "the-person-4b7a"


class Http:
    def __init__(self, ws: Path, env: dict[str, str]) -> None:
        self.ws = ws
        self.port = free_port()
        base = {k: v for k, v in os.environ.items() if not k.startswith("GDAL_MCP_")}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gdal_mcp",
                "--transport",
                "http",
                "--port",
                str(self.port),
                "--workspace",
                str(ws),
                "--confirm",
                "destructive",
                "--workers",
                "1",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**base, **env},
        )
        self.log = StderrLog(self.proc)
        wait_listening(self.port, self.proc)
        self.base = f"http://127.0.0.1:{self.port}"

    def links(self) -> list[str]:
        return self.log.login_links()

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)


@pytest.fixture
def with_tokens(tmp_path: Path) -> Iterator[Http]:
    s = Http(workspace(tmp_path), {"GDAL_MCP_TOKEN": TOKEN, "GDAL_MCP_CONSOLE_TOKEN": CONSOLE_TOKEN})
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def loopback(tmp_path: Path) -> Iterator[Http]:
    s = Http(workspace(tmp_path), {})
    try:
        yield s
    finally:
        s.close()


async def park(c: Client) -> tuple[str, dict[str, Any]]:
    """An overwrite the policy parks in the console; returns (confirmation id, the call's arguments)."""
    r = await c.call_tool("raster_convert", {"input": "good.tif", "output": "copy.tif"}, raise_on_error=False)
    assert not r.is_error, r.structured_content
    args = {"input": "good.tif", "output": "copy.tif", "overwrite": True, "output_type": "Float32"}
    r = await c.call_tool("raster_convert", args, raise_on_error=False)
    assert r.is_error and r.structured_content["error"]["code"] == "confirmation-required", r.structured_content
    return r.structured_content["error"]["confirmation_id"], args


def digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


async def test_the_mcp_token_cannot_approve(with_tokens: Http) -> None:
    """The agent holds the MCP token: with it (as a bearer, or logged in with it) it reads but cannot approve, so
    rerunning with the confirmation_id still asks for a person."""
    s = with_tokens
    async with Client(f"{s.base}/mcp", auth=TOKEN) as c:
        cid, args = await park(c)
        before = digest(s.ws / "copy.tif")
        mcp = {"Authorization": f"Bearer {TOKEN}", "Origin": s.base}
        assert httpx2.get(f"{s.base}/console/state", headers=mcp).status_code == 200
        for action in ("approve", "deny"):
            r = httpx2.post(f"{s.base}/console/confirmations/{cid}/{action}", headers=mcp)
            assert r.status_code == 403, r.text
        # logged in with the MCP token: a viewer session, whose posts (CSRF and Origin right) are refused too
        login = httpx2.post(f"{s.base}/console/login", data={"token": TOKEN}, follow_redirects=False)
        assert login.status_code == 303
        jar = {"gdal_mcp_console": login.cookies["gdal_mcp_console"]}
        page = httpx2.get(f"{s.base}/console/app", cookies=jar).text
        csrf = re.search(r'name="csrf-token" content="([^"]+)"', page).group(1)  # type: ignore[union-attr]
        r = httpx2.post(
            f"{s.base}/console/confirmations/{cid}/approve", cookies=jar, headers={"X-CSRF-Token": csrf, "Origin": s.base}
        )
        assert r.status_code == 403 and "only read" in r.json()["error"]["message"]
        assert httpx2.get(f"{s.base}/console/state", cookies=jar).json()["role"] == "viewer"
        r = await c.call_tool("raster_convert", {**args, "confirmation_id": cid}, raise_on_error=False)
        assert r.is_error and r.structured_content["error"]["code"] == "confirmation-required"
        assert digest(s.ws / "copy.tif") == before
        # the person's credential decides; then the call runs
        r = httpx2.post(
            f"{s.base}/console/confirmations/{cid}/approve",
            headers={"Authorization": f"Bearer {CONSOLE_TOKEN}", "Origin": s.base},
        )
        assert r.status_code == 200, r.text
        r = await c.call_tool("raster_convert", {**args, "confirmation_id": cid}, raise_on_error=False)
        assert not r.is_error, r.structured_content
    assert digest(s.ws / "copy.tif") != before


async def test_loopback_without_tokens_reads_but_needs_the_login_link(loopback: Http) -> None:
    """Without any token (loopback only) every local client may read the console, as /mcp is open to it; deciding
    needs the one-time login link printed on the server's stderr, which works once."""
    s = loopback
    async with Client(f"{s.base}/mcp") as c:
        cid, args = await park(c)
        open_session = httpx2.get(f"{s.base}/console", follow_redirects=False)
        jar = {"gdal_mcp_console": open_session.cookies["gdal_mcp_console"]}
        page = httpx2.get(f"{s.base}/console/app", cookies=jar).text
        csrf = re.search(r'name="csrf-token" content="([^"]+)"', page).group(1)  # type: ignore[union-attr]
        r = httpx2.post(
            f"{s.base}/console/confirmations/{cid}/approve", cookies=jar, headers={"X-CSRF-Token": csrf, "Origin": s.base}
        )
        assert r.status_code == 403
        assert httpx2.post(f"{s.base}/console/confirmations/{cid}/approve", headers={"Origin": s.base}).status_code == 403
        # asking for a new link prints it where the server runs, never in the answer
        before = len(s.links())
        r = httpx2.post(f"{s.base}/console/login-link", headers={"Origin": s.base})
        assert r.status_code in (200, 429) and "key=" not in r.text
        links = s.links()
        assert len(links) >= 1 and (len(links) == before + 1 or r.status_code == 429), s.log.lines
        person = httpx2.get(links[-1], follow_redirects=False)
        assert person.status_code == 303
        assert httpx2.get(links[-1], follow_redirects=False).status_code == 401  # once
        pjar = {"gdal_mcp_console": person.cookies["gdal_mcp_console"]}
        page = httpx2.get(f"{s.base}/console/app", cookies=pjar).text
        pcsrf = re.search(r'name="csrf-token" content="([^"]+)"', page).group(1)  # type: ignore[union-attr]
        r = httpx2.post(
            f"{s.base}/console/confirmations/{cid}/approve", cookies=pjar, headers={"X-CSRF-Token": pcsrf, "Origin": s.base}
        )
        assert r.status_code == 200, r.text
        r = await c.call_tool("raster_convert", {**args, "confirmation_id": cid}, raise_on_error=False)
        assert not r.is_error, r.structured_content


def test_the_console_token_must_differ_from_the_mcp_token(tmp_path: Path) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith("GDAL_MCP_")}
    r = subprocess.run(
        [sys.executable, "-m", "gdal_mcp", "--transport", "http", "--workspace", str(tmp_path)],
        env={**base, "GDAL_MCP_TOKEN": "same", "GDAL_MCP_CONSOLE_TOKEN": "same"},
        capture_output=True,
        timeout=60,
    )
    assert r.returncode != 0 and b"must differ" in r.stderr


async def test_another_syntax_of_the_same_path_still_asks(tmp_path: Path) -> None:
    """file://good.tif names the same file as good.tif: the confirmation must see through it (it resolves paths as
    the tool does), so an in-place change is still asked for and nothing changes unasked."""
    from tests.security.helpers import session

    ws = workspace(tmp_path)
    shutil.copy(ws / "good.tif", ws / "g2.tif")
    (ws / "g2.tif.ovr").write_text("the user's own file")
    before = {p.name: digest(p) for p in ws.iterdir() if p.is_file()}
    async with session(ws, "--confirm", "destructive") as s:
        for tool, args in (
            ("raster_edit", {"input": "file://good.tif", "metadata": {"PWNED": "1"}}),
            ("raster_overviews", {"input": "file://good.tif", "action": "add"}),
            ("raster_overviews", {"input": "file://g2.tif", "action": "add", "external": True}),
            ("raster_overviews", {"input": "file://good.tif", "action": "delete"}),
        ):
            r = await s.call_tool(tool, args)
            assert r.is_error and r.structured_content["error"]["code"] == "confirmation-required", (tool, r)
        r = await s.call_tool("raster_overviews", {"input": "file://g2.tif", "action": "add", "external": True})
        assert "replacing g2.tif.ovr" in r.structured_content["error"]["message"]
    assert {p.name: digest(p) for p in ws.iterdir() if p.is_file()} == before


def test_a_login_link_never_takes_the_requests_host(loopback: Http) -> None:
    """A local client asks for a new login link with a Host of its own (a loopback alias on its port): the link
    printed for the person still names this server, so following it never hands the key to that client."""
    s = loopback
    r = httpx2.post(f"{s.base}/console/login-link", headers={"Host": f"evil.localhost:{s.port + 1}"})
    import time

    time.sleep(0.5)
    links = s.links()
    assert links and all(link.startswith(f"http://127.0.0.1:{s.port}/console/login?key=") for link in links), links
    assert "evil" not in r.text
