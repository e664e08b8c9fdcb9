"""The approval console in a real headless browser (Debian's chromium + chromedriver, driven by selenium).

The real server runs over HTTP with a token and --confirm destructive; an MCP client without elicitation
(FastMCP's Client without a handler) gets confirmation-required with an id; the browser logs in, approves
one overwrite (the client repeats with confirmation_id and the job runs, the page shows it finished without
a reload), denies another (the retry is declined, the file untouched), and cancels a long job (its worker
process is gone). Rasters are checked with rasterio in the test process; the audit log holds each decision
with the fingerprint of the token, computed here independently.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
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
import rasterio
from fastmcp import Client

from tests.e2e.test_http import StderrLog, free_port, wait_listening
from tests.helpers import DATA, huge_vrt

TOKEN = "console-test-token-7f3a"
#: the person's credential (GDAL_MCP_CONSOLE_TOKEN): the MCP client never has it
CONSOLE_TOKEN = "console-person-token-91c2"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver) to drive a real "
    "browser; .ci/run installs them when it can",
)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def children(pid: int) -> set[int]:
    """The server's child processes (its GDAL workers), read from /proc."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry))
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Server:
    def __init__(self, root: Path) -> None:
        self.ws = root / "ws"
        (self.ws / "out").mkdir(parents=True)
        for name in ("slope.tif", "rgb1.tif"):
            shutil.copy(DATA / "raster" / name, self.ws / name)
        huge_vrt(self.ws / "huge.vrt")
        self.audit = root / "audit.jsonl"
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("GDAL_MCP_")}
        env["GDAL_MCP_TOKEN"] = TOKEN
        env["GDAL_MCP_CONSOLE_TOKEN"] = CONSOLE_TOKEN
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
                str(self.ws),
                "--workers",
                "2",
                "--timeout",
                "300",
                "--confirm",
                "destructive",
                "--audit-log",
                str(self.audit),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
        )
        self.log = StderrLog(self.proc)
        wait_listening(self.port, self.proc)
        self.base = f"http://127.0.0.1:{self.port}"

    def decisions(self) -> list[dict[str, Any]]:
        return [r for r in map(json.loads, self.audit.read_text().splitlines()) if r.get("event") == "confirmation"]

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("console"))
    try:
        yield s
    finally:
        s.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM  # type: ignore[assignment]
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,1600",
        "--no-proxy-server",
    ):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    try:
        yield driver
    finally:
        driver.quit()


async def call(c: Client, tool: str, **args: Any) -> tuple[bool, dict[str, Any]]:
    r = await c.call_tool(tool, args, raise_on_error=False)
    return r.is_error, r.structured_content


def wait(driver: Any, css: str, timeout: float = 30, check: Any = None) -> Any:
    """The element `css` names once it exists (and `check(element)` holds), polled by WebDriverWait."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def found(d: Any) -> Any:
        els = d.find_elements(By.CSS_SELECTOR, css)
        for e in els:
            try:
                if check is None or check(e):
                    return e
            except Exception:  # noqa: BLE001 - redrawn under us: look again
                return False
        return False

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.2).until(found)
    except Exception:
        driver.save_screenshot("/tmp/gdal-mcp-console-timeout.png")
        raise AssertionError(f"no {css} in the page within {timeout} s: see /tmp/gdal-mcp-console-timeout.png") from None


@pytest.mark.slow
async def test_console_approve_deny_cancel(server: Server, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    s, d = server, browser
    async with Client(f"{s.base}/mcp", auth=TOKEN) as c:
        tools = {t.name for t in await c.list_tools()}
        assert "confirmation_status" in tools
        # ---- a pending overwrite -------------------------------------------------------------
        assert not (await call(c, "raster_convert", input="slope.tif", output="out/a.tif"))[0]
        before_a = sha256(s.ws / "out/a.tif")
        args = {"input": "slope.tif", "output": "out/a.tif", "dst_crs": "EPSG:4326", "overwrite": True}
        err, res = await call(c, "raster_reproject", **args)
        assert err and res["error"]["code"] == "confirmation-required", res
        cid, url = res["error"]["confirmation_id"], res["error"]["console_url"]
        assert url == f"{s.base}/console" and cid in res["error"]["message"]
        assert sha256(s.ws / "out/a.tif") == before_a
        err, status = await call(c, "confirmation_status", confirmation_id=cid)
        assert not err and status["status"] == "pending" and status["question"].startswith("Replace out/a.tif ("), status

        # ---- the console refuses without login, and posts without the CSRF token -----------------
        assert httpx2.get(f"{s.base}/console/state").status_code == 401
        assert httpx2.post(f"{s.base}/console/confirmations/{cid}/approve").status_code == 403

        # ---- the MCP token reads the console but cannot decide (the agent must not approve itself) ----
        mcp_auth = {"Authorization": f"Bearer {TOKEN}"}
        assert httpx2.get(f"{s.base}/console/state", headers=mcp_auth).status_code == 200
        r = httpx2.post(f"{s.base}/console/confirmations/{cid}/approve", headers={**mcp_auth, "Origin": s.base})
        assert r.status_code == 403 and "only read" in r.json()["error"]["message"], r.text
        await asyncio.to_thread(d.get, url)
        assert "log in" in d.title
        d.find_element(By.ID, "token").send_keys("wrong")
        d.find_element(By.ID, "login").click()
        await asyncio.to_thread(wait, d, "#error", 10, lambda e: "Wrong token" in e.text)
        d.find_element(By.ID, "token").send_keys(TOKEN)
        d.find_element(By.ID, "login").click()
        card = await asyncio.to_thread(wait, d, f'li.pending[data-id="{cid}"]')
        await asyncio.to_thread(wait, d, "#viewer-note", 10, lambda e: e.is_displayed())
        assert not card.find_elements(By.CSS_SELECTOR, "button.approve"), "a viewer session got an Approve button"
        viewer = {"gdal_mcp_console": d.get_cookie("gdal_mcp_console")["value"]}
        csrf = d.find_element(By.CSS_SELECTOR, 'meta[name="csrf-token"]').get_attribute("content")
        r = httpx2.post(
            f"{s.base}/console/confirmations/{cid}/approve", cookies=viewer, headers={"X-CSRF-Token": csrf, "Origin": s.base}
        )
        assert r.status_code == 403, r.text
        assert (await call(c, "confirmation_status", confirmation_id=cid))[1]["status"] == "pending"

        # ---- log in as the person: the one-time link the server printed on its stderr ---------------
        links = s.log.login_links()
        assert len(links) == 1 and links[0].startswith(s.base + "/console/login?key="), s.log.lines
        await asyncio.to_thread(d.get, links[0])
        card = await asyncio.to_thread(wait, d, f'li.pending[data-id="{cid}"] button.approve')
        card = d.find_element(By.CSS_SELECTOR, f'li.pending[data-id="{cid}"]')
        assert "Replace out/a.tif" in card.text
        assert not d.find_element(By.ID, "viewer-note").is_displayed()
        # the link works once
        assert httpx2.get(links[0], follow_redirects=False).status_code == 401
        cookie = d.get_cookie("gdal_mcp_console")
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/"
        # the session cookie alone does not make a post: the CSRF header and a same-origin Origin are needed
        jar = {"gdal_mcp_console": cookie["value"]}
        assert httpx2.get(f"{s.base}/console/state", cookies=jar).status_code == 200
        assert httpx2.post(f"{s.base}/console/confirmations/{cid}/deny", cookies=jar).status_code == 403
        assert (
            httpx2.post(
                f"{s.base}/console/confirmations/{cid}/deny", cookies=jar, headers={"X-CSRF-Token": "forged", "Origin": s.base}
            ).status_code
            == 403
        )
        assert not re.search(r'(src|href)="(https?:)?//', d.page_source)  # everything from this server: no CDN

        # ---- approve; the repeated call runs; the page shows the job finished --------------------
        card.find_element(By.CSS_SELECTOR, "button.approve").click()
        await asyncio.to_thread(wait, d, f'#decided li[data-id="{cid}"]')
        err, status = await call(c, "confirmation_status", confirmation_id=cid)
        assert status["status"] == "approved"
        err, res = await call(c, "raster_reproject", **args, confirmation_id=cid)
        assert not err, res
        with rasterio.open(s.ws / "out/a.tif") as ds:
            assert ds.crs.to_epsg() == 4326
        row = await asyncio.to_thread(
            wait, d, "tr.job.finished", 30, lambda e: e.find_element(By.CSS_SELECTOR, "td.tool").text == "raster_reproject"
        )
        assert "finished" in row.text
        # an approval runs one call
        err, res = await call(c, "raster_reproject", **args, confirmation_id=cid)
        assert err and res["error"]["code"] == "confirmation-required" and res["error"]["confirmation_id"] != cid
        stale = res["error"]["confirmation_id"]
        # the new output shows with a quicklook drawn by the preview engine
        img = await asyncio.to_thread(
            wait,
            d,
            'li.output[data-path="out/a.tif"] img',
            30,
            lambda e: d.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", e),
        )
        assert img.get_attribute("alt") == "quicklook of out/a.tif"
        # its provenance: the record (tool, the approval through the console) and the lineage with its graph
        item = d.find_element(By.CSS_SELECTOR, 'li.output[data-path="out/a.tif"]')
        item.find_element(By.CSS_SELECTOR, "details.provenance summary").click()
        graph = await asyncio.to_thread(
            wait,
            d,
            'li.output[data-path="out/a.tif"] img.lineage-graph',
            30,
            lambda e: d.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", e),
        )
        assert graph.get_attribute("alt") == "lineage of out/a.tif"
        body = d.find_element(By.CSS_SELECTOR, 'li.output[data-path="out/a.tif"] .provenance-body').text
        assert "raster_reproject" in body and "approved: the holder of console token" in body, body
        assert "lineage: original(slope.tif) → raster_reproject(out/a.tif)" in body, body

        # ---- an approval binds to the files: changed since, it is void ---------------------------
        r = httpx2.post(f"{s.base}/console/confirmations/{stale}/approve", headers={"Authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 403, r.text
        r = httpx2.post(f"{s.base}/console/confirmations/{stale}/approve", headers={"Authorization": f"Bearer {CONSOLE_TOKEN}"})
        assert r.status_code == 200, r.text
        with open(s.ws / "out/a.tif", "ab") as fh:
            fh.write(b"\0" * 10)
        err, res = await call(c, "raster_reproject", **args, confirmation_id=stale)
        assert err and res["error"]["code"] == "confirmation-required" and "void" in res["error"]["message"]
        err, status = await call(c, "confirmation_status", confirmation_id=stale)
        assert status["status"] == "void"

        # ---- deny another ------------------------------------------------------------------------
        assert not (await call(c, "raster_convert", input="slope.tif", output="out/b.tif"))[0]
        before_b = sha256(s.ws / "out/b.tif")
        args_b = {"input": "rgb1.tif", "output": "out/b.tif", "overwrite": True}
        err, res = await call(c, "raster_convert", **args_b)
        assert err and res["error"]["code"] == "confirmation-required", res
        cid_b = res["error"]["confirmation_id"]
        card = await asyncio.to_thread(wait, d, f'li.pending[data-id="{cid_b}"]')
        card.find_element(By.CSS_SELECTOR, "button.deny").click()
        await asyncio.to_thread(wait, d, f'#decided li.denied[data-id="{cid_b}"]')
        err, res = await call(c, "raster_convert", **args_b, confirmation_id=cid_b)
        assert err and res["error"]["code"] == "declined", res
        assert sha256(s.ws / "out/b.tif") == before_b

        # ---- cancel a long job: the worker is killed ---------------------------------------------
        # Wait until no worker is busy (a replacement still importing GDAL would look like the job's worker).
        for _ in range(40):
            workers_before = children(s.proc.pid)
            cpu_before = {p: _cpu(p) for p in workers_before}
            await asyncio.sleep(0.25)
            if all(_cpu(p) - cpu_before[p] < 3 for p in workers_before if alive(p)):
                break
        cpu_before = {p: _cpu(p) for p in workers_before}
        long_call = asyncio.create_task(call(c, "raster_stats", input="huge.vrt"))
        row = await asyncio.to_thread(
            wait, d, "tr.job.running", 60, lambda e: e.find_element(By.CSS_SELECTOR, "td.tool").text == "raster_stats"
        )
        jid = row.get_attribute("data-id")
        await asyncio.sleep(1.0)
        busy = [p for p in workers_before if alive(p) and _cpu(p) > cpu_before[p] + 20]  # >0.2 s CPU in 1 s
        d.save_screenshot("/tmp/gdal-mcp-console.png")
        wait(d, f'tr.job[data-id="{jid}"] button.cancel').click()  # found afresh: a progress message redraws the row
        err, res = await asyncio.wait_for(long_call, 30)
        assert err and res["error"]["code"] == "cancelled", res
        await asyncio.to_thread(wait, d, f'tr.job.cancelled[data-id="{jid}"]')
        assert len(busy) == 1 and not alive(busy[0]), (workers_before, busy)  # the worker that ran it is gone
        # the server still serves, with a fresh worker in the killed one's place
        err, res = await call(c, "raster_info", path="slope.tif")
        assert not err, res

    # ---- the audit log holds each decision, with the token's fingerprint ------------------------------
    key = links[0].rsplit("key=", 1)[1]
    link_fp = "link:sha256:" + hashlib.sha256(key.encode()).hexdigest()[:12]
    console_fp = "sha256:" + hashlib.sha256(CONSOLE_TOKEN.encode()).hexdigest()[:12]
    console = [
        (r["tool"], r["answer"], r.get("token"))
        for r in s.decisions()
        if r["channel"] == "console" and r["answer"] in ("approved", "declined")
    ]
    assert console == [
        ("raster_reproject", "approved", link_fp),
        ("raster_reproject", "approved", console_fp),
        ("raster_convert", "declined", link_fp),
    ]
    assert [r["answer"] for r in s.decisions() if r["channel"] == "console" and r["answer"] == "void"] == ["void"]
    cancels = [r for r in map(json.loads, s.audit.read_text().splitlines()) if r.get("tool") == "raster_stats"]
    assert [r["outcome"] for r in cancels] == ["cancel-requested", "cancelled"]
    d.save_screenshot("/tmp/gdal-mcp-console-end.png")


def _cpu(pid: int) -> int:
    """utime + stime of a process in clock ticks (a busy worker has some)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])
