"""The approval console: a web page on the HTTP transport where a person approves or denies parked
confirmations, watches and cancels running jobs, and sees the audit log and new outputs.

A thin view: the state and its rules live in the parked confirmations (server/approval/parked.py: a call that
needs approval from a client that cannot elicit is parked there, and the agent calls again with
`confirmation_id=<id>` once the person approved here, or asks `confirmation_status`, server/tools/approval.py) and
in the job board (server/jobboard.py: running jobs, the audit ring, new outputs). This module has the sessions,
the login links, the console's address, the routes, the static files and the page state built from those two.

Auth: deciding (approve, deny, cancel) needs a *person's* credential, one the MCP client does not have: the
console token (GDAL_MCP_CONSOLE_TOKEN), or a one-time login link the server prints on its stderr (at start-up,
and again when someone asks for a new one on the login page). The MCP bearer token (GDAL_MCP_TOKEN) only reads
the console: an agent holding it cannot approve its own confirmation. A browser logs in at /console and gets a
random session cookie (HttpOnly, SameSite=Strict) with its role, approver or viewer; every POST made with the
cookie also needs the session's CSRF token in the X-CSRF-Token header and a same-origin Origin header. Scripts
may send 'Authorization: Bearer <console token>' (decides) or the MCP token (reads). Without GDAL_MCP_TOKEN
(loopback only) anyone local may read the console; deciding still needs the console credential. The page itself
is static HTML/CSS/JS (gdal_mcp/server/web/console_static), polling /console/state every second; no build step, no
external network.
"""

from __future__ import annotations

import asyncio
import hmac
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.server.approval.parked import ParkedConfirmations
from gdal_mcp.server.audit import iso
from gdal_mcp.server.jobboard import JobBoard

if TYPE_CHECKING:
    from fastmcp import FastMCP
    from starlette.requests import Request
    from starlette.responses import Response

    from gdal_mcp.server.app import App

COOKIE = "gdal_mcp_console"
SESSION_LIFETIME = 12 * 3600.0
THUMBNAIL_SIZE = 160


#: how long a login link printed on stderr stays valid (it works once)
LOGIN_LINK_LIFETIME = 900.0
#: at most one new login link per this many seconds (the button that asks for one needs no credential)
LOGIN_LINK_INTERVAL = 10.0


@dataclass
class Session:
    csrf: str
    token: str | None  # fingerprint of the credential it was opened with
    role: str = "viewer"  # approver: may decide (opened with the console credential); viewer: may read
    created: float = field(default_factory=time.time)


class Console:
    """The console's web view: sessions and login links, and the page built from the parked confirmations
    (`approvals`) and the job board (`jobs`), which hold the state and the rules."""

    def __init__(self, app: App, approvals: ParkedConfirmations, jobs: JobBoard) -> None:
        self.app = app
        self.approvals = approvals
        self.jobs = jobs
        self.sessions: dict[str, Session] = {}
        self._thumbs: dict[tuple[str, int, int], bytes] = {}
        #: one-time login links: key -> expiry
        self.login_keys: dict[str, float] = {}
        self._last_link = 0.0

    # ----- the person's credential ----------------------------------------------------------------
    def login_link(self, *, why: str = "") -> bool:
        """Print a new one-time login link on the server's stderr (where the person who runs the server sees it,
        and the MCP client does not). False when one was printed less than LOGIN_LINK_INTERVAL ago."""
        import sys

        now = time.time()
        if now - self._last_link < LOGIN_LINK_INTERVAL:
            return False
        self._last_link = now
        for key in [k for k, t in self.login_keys.items() if t < now]:
            del self.login_keys[key]
        key = secrets.token_urlsafe(24)
        self.login_keys[key] = now + LOGIN_LINK_LIFETIME
        sys.stderr.write(
            f"gdal-mcp: approval console login link{why} (works once, for {LOGIN_LINK_LIFETIME / 60:g} "
            f"minutes; never give it to the agent): {self.base_url()}/console/login?key={key} (behind a "
            "proxy, open that path on the proxy's address)\n"
        )
        sys.stderr.flush()
        return True

    def redeem_key(self, key: str) -> bool:
        """Use up a login link's key: True when it was valid."""
        expiry = self.login_keys.pop(key, None) if key else None
        return expiry is not None and expiry >= time.time()

    def console_token_ok(self, given: str) -> bool:
        token = self.app.settings.console_token
        return token is not None and bool(given) and hmac.compare_digest(given.encode(), token.encode())

    # ----- where the console is ----------------------------------------------------------------
    def base_url(self) -> str:
        """This server's own address, from its settings (the bind address, loopback for a wildcard)."""
        s = self.app.settings
        bind = s.host if s.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
        return f"http://[{bind}]:{s.port}" if ":" in bind else f"http://{bind}:{s.port}"

    def trusted_host(self, host: str | None) -> bool:
        """Whether a Host header names this server as its operator configured it: its bind address and port, a
        plain loopback name on its port, or an --allow-host entry. (The Host guard also lets through any loopback
        alias, e.g. x.localhost on any port: fine for serving a request, not for a link a person will follow.)"""
        from gdal_mcp.server.web.guards import split_host

        parsed = split_host(host) if host else None
        if parsed is None:
            return False
        name, port = parsed
        s = self.app.settings
        if port == s.port and name in ("localhost", "127.0.0.1", "::1", s.host.lower()):
            return True
        for entry in s.allow_hosts:
            allowed = split_host(entry) if entry != "*" else None
            if allowed is not None and allowed[0] == name and allowed[1] in (None, port):
                return True
        return False

    def url(self) -> str:
        """Where the console is: as the client reached this server when that is a name the operator configured
        (its Host header), else this server's own address."""
        from fastmcp.server.dependencies import get_http_headers

        host = (get_http_headers(include_all=True) or {}).get("host")
        return f"http://{host}/console" if self.trusted_host(host) else self.base_url() + "/console"

    # ----- page state ---------------------------------------------------------------------------
    def state(self, role: str = "viewer") -> dict[str, Any]:
        return {
            "now": iso(time.time()),
            "role": role,
            "pending": self.approvals.views(),
            "jobs": self.jobs.views(),
            "audit": self.jobs.recent_audit(),
            "outputs": self.jobs.recent_outputs(),
        }

    # ----- sessions and auth --------------------------------------------------------------------
    def new_session(self, token: str | None, role: str = "viewer") -> tuple[str, Session]:
        """A browser session; `token` is the fingerprint of the credential it was opened with."""
        now = time.time()
        for sid in [k for k, s in self.sessions.items() if now - s.created > SESSION_LIFETIME]:
            del self.sessions[sid]
        sid = secrets.token_urlsafe(32)
        session = Session(csrf=secrets.token_urlsafe(24), token=token, role=role)
        self.sessions[sid] = session
        return sid, session

    def session(self, request: Request) -> Session | None:
        sid = request.cookies.get(COOKIE)
        s = self.sessions.get(sid) if sid else None
        if s is None or time.time() - s.created > SESSION_LIFETIME:
            return None
        return s

    def token_ok(self, given: str) -> bool:
        token = self.app.settings.token
        return token is not None and hmac.compare_digest(given.encode(), token.encode())

    def _bearer(self, request: Request) -> str | None:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        return given.strip() if scheme.lower() == "bearer" else None

    def reader(self, request: Request) -> bool:
        """May this request read the console (GET)? The MCP token, the console credential, any session, or anyone
        local when the server has no MCP token (then /mcp itself is open to them)."""
        given = self._bearer(request)
        if given is not None and (self.token_ok(given) or self.console_token_ok(given)):
            return True
        return self.session(request) is not None or self.app.settings.token is None

    def writer(self, request: Request) -> tuple[bool, str | None, str]:
        """May this request decide (approve, deny, cancel)? (allowed, credential fingerprint, why not). Only with
        the person's credential: an approver session (console token or login link), or the console token."""
        from gdal_mcp.server.approval.policy import token_fingerprint

        given = self._bearer(request)
        if given is not None:
            if self.console_token_ok(given):
                return True, token_fingerprint(given), ""
            return (
                False,
                None,
                (
                    "the MCP token can only read the console; approving needs the person's console "
                    "credential (GDAL_MCP_CONSOLE_TOKEN, or the login link on the server's stderr)"
                ),
            )
        s = self.session(request)
        if s is None:
            return False, None, "log in at /console first"
        if s.role != "approver":
            return (
                False,
                None,
                (
                    "this session can only read; log in with the console credential (the login link "
                    "printed on the server's stderr, or GDAL_MCP_CONSOLE_TOKEN) to decide"
                ),
            )
        if not hmac.compare_digest(request.headers.get("x-csrf-token", "").encode(), s.csrf.encode()):
            return False, None, "missing or wrong X-CSRF-Token"
        origin = request.headers.get("origin")
        host = request.headers.get("host", "")
        if origin is None or urlsplit(origin).netloc.lower() != host.lower():
            return False, None, "cross-origin request refused"
        return True, s.token, ""

    def logout_allowed(self, request: Request) -> tuple[bool, str]:
        """Any session may log itself out (CSRF token and same origin required)."""
        s = self.session(request)
        if s is None:
            return False, "not logged in"
        origin = request.headers.get("origin")
        if not hmac.compare_digest(request.headers.get("x-csrf-token", "").encode(), s.csrf.encode()) or (
            origin is None or urlsplit(origin).netloc.lower() != request.headers.get("host", "").lower()
        ):
            return False, "missing or wrong X-CSRF-Token, or cross-origin"
        return True, ""

    # ----- thumbnails ---------------------------------------------------------------------------
    async def thumbnail(self, path: str) -> bytes:
        """A small PNG quicklook of a workspace file (the preview engine in a worker), cached per file state."""
        from gdal_mcp import jobs

        real = self.app.sandbox.resolve_file(path, what="file")
        st = real.stat()
        key = (str(real), st.st_mtime_ns, st.st_size)
        if key not in self._thumbs:
            src = self.app.sandbox.resolve_input(path)
            try:
                result: Any = await self.app.execute(
                    jobs.RasterPreviewJob(path=src.gdal_path, max_size=THUMBNAIL_SIZE), quick=True
                )
            except GdalMcpError:
                result = await self.app.execute(jobs.VectorPreviewJob(path=src.gdal_path, max_size=THUMBNAIL_SIZE), quick=True)
            if len(self._thumbs) > 200:
                self._thumbs.clear()
            self._thumbs[key] = result.png
        return self._thumbs[key]

    # ----- provenance ---------------------------------------------------------------------------
    async def provenance(self, path: str) -> dict[str, Any]:
        """A workspace file's provenance record and its lineage with the graph, for the console's output list: read
        by a worker (confined to the workspace), the record only when this server signed it, credentials masked."""
        import base64

        from gdal_mcp import jobs
        from gdal_mcp.credentials import redact_obj

        real = self.app.sandbox.resolve_file(path, what="file")
        result = await self.app.execute(
            jobs.LineageJob(path=str(real), roots=[str(r) for r in self.app.sandbox.roots], key=self.app.provenance_key),
            quick=True,
        )
        lineage = result.model_dump()
        lineage["dataset"] = self.app.sandbox.display(real)
        for step in lineage["steps"]:
            step["record"] = self.app.sandbox.display(step["record"]) if step["record"] else None
        return {
            "path": self.app.sandbox.display(real),
            "record": redact_obj(self.app.sandbox.scrub_obj(result.record)),
            "lineage": redact_obj(self.app.sandbox.scrub_obj(lineage)),
            "graph": "data:image/png;base64," + base64.b64encode(result.graph_png).decode("ascii"),
        }


def _static(name: str) -> str:
    return resources.files("gdal_mcp.server.web").joinpath("console_static", name).read_text(encoding="utf-8")


STATIC_TYPES = {"console.js": "text/javascript; charset=utf-8", "console.css": "text/css; charset=utf-8"}
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",  # no-referrer would make the browser send Origin: null on posts
    "Cache-Control": "no-store",
}


def register(mcp: FastMCP, app: App, approvals: ParkedConfirmations, jobs: JobBoard) -> Console:
    """The console routes beside /mcp, over the parked confirmations and the job board (custom routes are not
    behind FastMCP's auth: every route checks here). The confirmation_status tool is server/tools/approval.py."""
    import html

    from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

    console = Console(app, approvals, jobs)

    def cookie(resp: Response, sid: str) -> Response:
        resp.set_cookie(COOKIE, sid, httponly=True, samesite="strict", path="/", max_age=int(SESSION_LIFETIME), secure=False)
        return resp

    def login_page(error: str = "", status: int = 200) -> Response:
        page = _static("login.html").replace("{{error}}", html.escape(error))
        return HTMLResponse(page, status_code=status, headers=SECURITY_HEADERS)

    def refused(status: int, message: str) -> Response:
        return JSONResponse(
            {"success": False, "error": {"code": "unauthorized" if status == 401 else "forbidden", "message": message}},
            status_code=status,
            headers=SECURITY_HEADERS,
        )

    @mcp.custom_route("/console", methods=["GET"], name="console")
    async def console_root(request: Request) -> Response:
        if console.session(request) is not None:
            return RedirectResponse("/console/app", status_code=303)
        if app.settings.token is None:  # loopback without an MCP token: anyone local may read, as /mcp is open
            sid, _ = console.new_session(None, "viewer")
            return cookie(RedirectResponse("/console/app", status_code=303), sid)
        return login_page()

    @mcp.custom_route("/console/login-form", methods=["GET"], name="console-login-form")
    async def console_login_form(request: Request) -> Response:
        return login_page()

    @mcp.custom_route("/console/login", methods=["GET"], name="console-login-link")
    async def console_login_link(request: Request) -> Response:
        """A one-time login link printed on the server's stderr: an approver session."""
        from gdal_mcp.server.approval.policy import token_fingerprint

        key = request.query_params.get("key", "")
        if not console.redeem_key(key):
            await asyncio.sleep(0.5)  # slows guessing
            return login_page("That login link is unknown, used or expired: ask for a new one below.", 401)
        sid, _ = console.new_session("link:" + token_fingerprint(key), "approver")
        return cookie(RedirectResponse("/console/app", status_code=303), sid)

    @mcp.custom_route("/console/login", methods=["POST"], name="console-login")
    async def console_login(request: Request) -> Response:
        from gdal_mcp.server.approval.policy import token_fingerprint

        origin = request.headers.get("origin")
        if origin is not None and urlsplit(origin).netloc.lower() != request.headers.get("host", "").lower():
            return refused(403, "cross-origin login refused")
        form = await request.form()
        given = str(form.get("token") or "")
        if console.console_token_ok(given):
            sid, _ = console.new_session(token_fingerprint(given), "approver")
        elif given and console.token_ok(given):
            sid, _ = console.new_session(token_fingerprint(given), "viewer")  # the MCP token: reading only
        else:
            await asyncio.sleep(0.5)  # slows guessing
            return login_page("Wrong token.", 401)
        return cookie(RedirectResponse("/console/app", status_code=303), sid)

    @mcp.custom_route("/console/login-link", methods=["POST"], name="console-new-link")
    async def console_new_link(request: Request) -> Response:
        """Print a new one-time login link on the server's stderr (nothing is sent back: only the person who runs
        the server sees it)."""
        origin = request.headers.get("origin")
        if origin is not None and urlsplit(origin).netloc.lower() != request.headers.get("host", "").lower():
            return refused(403, "cross-origin request refused")
        # Built from the server's own settings, never from the request's Host: a local client could otherwise
        # have the link printed with its own host and port, and receive the key when the person follows it.
        printed = console.login_link(why=" (asked for on the login page)")
        message = (
            "A new login link was printed where the server runs (its stderr)."
            if printed
            else f"A link was printed less than {LOGIN_LINK_INTERVAL:g} s ago; use that one."
        )
        return login_page(message, 200 if printed else 429)

    @mcp.custom_route("/console/logout", methods=["POST"], name="console-logout")
    async def console_logout(request: Request) -> Response:
        ok, why = console.logout_allowed(request)
        if not ok:
            return refused(403, why)
        console.sessions.pop(request.cookies.get(COOKIE, ""), None)
        resp = RedirectResponse("/console", status_code=303)
        resp.delete_cookie(COOKIE, path="/")
        return resp

    @mcp.custom_route("/console/app", methods=["GET"], name="console-app")
    async def console_app(request: Request) -> Response:
        s = console.session(request)
        if s is None:
            return RedirectResponse("/console", status_code=303)
        page = _static("app.html").replace("{{csrf}}", html.escape(s.csrf)).replace("{{role}}", html.escape(s.role))
        return HTMLResponse(page, headers=SECURITY_HEADERS)

    @mcp.custom_route("/console/static/{name}", methods=["GET"], name="console-static")
    async def console_static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC_TYPES:
            return Response("not found", status_code=404)
        return Response(_static(name), media_type=STATIC_TYPES[name], headers={"Cache-Control": "no-cache"})

    @mcp.custom_route("/console/state", methods=["GET"], name="console-state")
    async def console_state(request: Request) -> Response:
        if not console.reader(request):
            return refused(401, "log in at /console, or send 'Authorization: Bearer <token>'")
        session = console.session(request)
        ok, _, _ = console.writer(request)
        role = "approver" if ok or (session is not None and session.role == "approver") else "viewer"
        return JSONResponse(console.state(role), headers={"Cache-Control": "no-store"})

    @mcp.custom_route("/console/confirmations/{cid}/{action}", methods=["POST"], name="console-decide")
    async def console_decide(request: Request) -> Response:
        ok, token, why = console.writer(request)
        if not ok:
            return refused(403, why)
        action = request.path_params["action"]
        if action not in ("approve", "deny"):
            return refused(404, "approve or deny")
        try:
            p = approvals.decide(request.path_params["cid"], action == "approve", token)
        except GdalMcpError as e:
            return JSONResponse(e.payload(), status_code=404 if e.code == "not-found" else 409)
        return JSONResponse({"success": True, "confirmation": p.view()})

    @mcp.custom_route("/console/jobs/{jid}/cancel", methods=["POST"], name="console-cancel")
    async def console_cancel(request: Request) -> Response:
        ok, token, why = console.writer(request)
        if not ok:
            return refused(403, why)
        try:
            entry = jobs.cancel(request.path_params["jid"], token)
        except GdalMcpError as e:
            return JSONResponse(e.payload(), status_code=404)
        return JSONResponse({"success": True, "job": entry.view()})

    async def about_file(request: Request, answer: Callable[[str], Awaitable[Response]]) -> Response:
        """A reader's GET about one workspace file (?path=): `answer` for it, or the failure as JSON."""
        if not console.reader(request):
            return refused(401, "log in at /console")
        try:
            return await answer(request.query_params.get("path", ""))
        except GdalMcpError as e:
            return JSONResponse(app.scrub_error(e).payload(), status_code=404 if e.code == "not-found" else 400)

    async def thumbnail(path: str) -> Response:
        png = await console.thumbnail(path)
        return Response(png, media_type="image/png", headers={"Cache-Control": "private, max-age=60"})

    async def provenance(path: str) -> Response:
        return JSONResponse(await console.provenance(path), headers={"Cache-Control": "no-store"})

    @mcp.custom_route("/console/thumbnail", methods=["GET"], name="console-thumbnail")
    async def console_thumbnail(request: Request) -> Response:
        return await about_file(request, thumbnail)

    @mcp.custom_route("/console/provenance", methods=["GET"], name="console-provenance")
    async def console_provenance(request: Request) -> Response:
        return await about_file(request, provenance)

    return console
