"""The approval console: a web page on the HTTP transport where a person approves or denies parked
confirmations, watches and cancels running jobs, and sees the audit log and new outputs.

Over HTTP with --console (the default), a call that needs approval from a client that cannot elicit is
parked here (`Console.park`, from confirm.console_channel): the agent gets `confirmation-required` with the
confirmation id and the console URL, and calls again with `confirmation_id=<id>` once the person approved
(or asks `confirmation_status`). An approval binds to the tool, its exact arguments and the state of the
files the question describes (confirm.Question.state): if they changed, it is void.

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
from collections import deque
from collections.abc import Awaitable
from contextvars import ContextVar
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Annotated, Any, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

from gdal_mcp.errors import GdalMcpError

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from gdal_mcp.server.app import App
    from gdal_mcp.server.approval.policy import Question

T = TypeVar("T")
COOKIE = "gdal_mcp_console"
SESSION_LIFETIME = 12 * 3600.0
KEEP_DECIDED = 50  # decided confirmations kept for confirmation_status and the page
KEEP_JOBS = 20  # finished jobs kept on the page
KEEP_OUTPUTS = 20
THUMBNAIL_SIZE = 160
#: the tool a call runs (set by the middleware: the job registry names jobs by it)
CURRENT_TOOL: ContextVar[str | None] = ContextVar("gdal_mcp_current_tool", default=None)


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


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
            "created": _iso(self.created),
            "expires": _iso(self.expires),
            "decided": _iso(self.decided) if self.decided else None,
        }


@dataclass
class JobEntry:
    """A job running in a worker, as the console shows it; `task` is its cancel handle."""

    id: str
    tool: str
    started: float
    task: asyncio.Task[Any] | None = None
    message: str = ""
    fraction: float | None = None
    status: str = "running"  # running | finished | failed | cancelled
    ended: float | None = None
    cancelled_by: str | None = None

    def view(self) -> dict[str, Any]:
        end = self.ended or time.time()
        return {
            "id": self.id,
            "tool": self.tool,
            "started": _iso(self.started),
            "status": self.status,
            "message": self.message,
            "progress": None if self.fraction is None else round(100 * self.fraction, 1),
            "seconds": round(end - self.started, 1),
        }


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


class Tracker:
    """One job in the registry: App.execute runs the runner's coroutine through `run()`."""

    def __init__(self, console: Console, entry: JobEntry) -> None:
        self.console = console
        self.entry = entry

    def progress(self, fraction: float, message: str) -> None:
        self.entry.fraction = fraction
        self.entry.message = message

    async def run(self, work: Awaitable[T]) -> T:
        """Run `work` as its own task (the Cancel button's handle). Cancelled from the console, the caller
        gets `cancelled` (the runner kills the worker; App.execute discards the partial output)."""
        entry = self.entry
        inner: asyncio.Task[T] = asyncio.ensure_future(work)
        entry.task = inner
        try:
            result = await inner
        except asyncio.CancelledError:
            entry.status, entry.ended = "cancelled", time.time()
            current = asyncio.current_task()
            if entry.cancelled_by is not None and inner.cancelled() and (current is None or not current.cancelling()):
                raise GdalMcpError(
                    "cancelled",
                    f"{entry.tool} was stopped from the approval console; nothing was "
                    "written. Do not retry unless the user asks for it",
                ) from None
            raise
        except BaseException:
            entry.status, entry.ended = "failed", time.time()
            raise
        finally:
            entry.task = None
            self.console.retire(entry)
        entry.status, entry.ended = "finished", time.time()
        return result


class Console:
    """The console's state: parked confirmations, running jobs, the audit ring, new outputs, sessions."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.pending: dict[str, Pending] = {}
        self.jobs: dict[str, JobEntry] = {}
        self.audit: deque[dict[str, Any]] = deque(maxlen=100)
        self.outputs: deque[dict[str, Any]] = deque(maxlen=KEEP_OUTPUTS)
        self.sessions: dict[str, Session] = {}
        self._thumbs: dict[tuple[str, int, int], bytes] = {}
        #: one-time login links: key -> expiry
        self.login_keys: dict[str, float] = {}
        self._last_link = 0.0
        app.audit.listeners.append(self._audited)

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

    # ----- audit ring and outputs (AuditLog calls _audited with every record) ---------------------
    def _audited(self, record: dict[str, Any]) -> None:
        self.audit.append(record)
        if record.get("outcome") == "ok":
            for out in record.get("outputs") or ():
                for old in [o for o in self.outputs if o["path"] == out]:
                    self.outputs.remove(old)  # rewritten: shown once, as the newest
                self.outputs.append({"path": out, "tool": record.get("tool"), "time": record.get("time")})

    # ----- confirmations ------------------------------------------------------------------------
    def _expire(self) -> None:
        now = time.time()
        for p in self.pending.values():
            if p.status in ("pending", "approved") and now > p.expires:
                p.status = "expired"
                self.app.audit.confirmation(
                    tool=p.question.tool,
                    arguments=p.question.arguments,
                    question=p.question.message,
                    kind=p.question.kind,
                    answer="expired",
                    channel="console",
                    detail=f"confirmation {p.id} expired unanswered"
                    if p.decided is None
                    else f"confirmation {p.id} expired unused",
                )
        decided = [p for p in self.pending.values() if p.status != "pending"]
        for p in sorted(decided, key=lambda p: p.created)[: -KEEP_DECIDED or None]:
            del self.pending[p.id]

    def get(self, cid: str) -> Pending | None:
        self._expire()
        return self.pending.get(cid)

    def park(self, question: Question) -> Pending:
        """The pending confirmation for `question` (an existing one for the same call and files, else new)."""
        self._expire()
        for p in self.pending.values():
            if p.status == "pending" and p.question.state == question.state:
                return p
        now = time.time()
        p = Pending(id=secrets.token_urlsafe(9), question=question, created=now, expires=now + self.app.settings.confirm_timeout)
        self.pending[p.id] = p
        self.app.audit.confirmation(
            tool=question.tool,
            arguments=question.arguments,
            question=question.message,
            kind=question.kind,
            answer="pending",
            channel="console",
            detail=f"parked as confirmation {p.id}",
        )
        return p

    def decide(self, cid: str, approve: bool, token: str | None) -> Pending:
        p = self.get(cid)
        if p is None:
            raise GdalMcpError("not-found", f"no confirmation {cid}")
        if p.status != "pending":
            raise GdalMcpError("invalid-argument", f"confirmation {cid} is {p.status} already")
        p.status, p.decided, p.token = ("approved" if approve else "denied"), time.time(), token
        q = p.question
        self.app.audit.confirmation(
            tool=q.tool,
            arguments=q.arguments,
            question=q.message,
            kind=q.kind,
            answer="approved" if approve else "declined",
            channel="console",
            detail=f"confirmation {cid}" + ("" if token else " (no token: loopback)"),
            token_fingerprint=token,
        )
        return p

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

    def required(self, p: Pending, why: str) -> Any:
        """The confirmation-required result that tells the agent where the approval waits."""
        import json

        import mcp.types as mt
        from fastmcp.tools import ToolResult

        url = self.url()
        message = (
            f"{p.question.tool} needs a person's approval first: {p.question.message} {why} It waits as "
            f"confirmation {p.id} in the approval console ({url}) until {_iso(p.expires)}. Ask the user to "
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
                "console_url": url,
                "expires": _iso(p.expires),
            },
        }
        return ToolResult(
            content=[mt.TextContent(type="text", text=json.dumps(payload))], structured_content=payload, is_error=True
        )

    def redeem(self, cid: str, question: Question) -> Any:
        """A call repeated with confirmation_id: None to go ahead (the approval is used up), or the result to
        hand back; raises `declined` when the person denied it."""
        p = self.get(cid)
        if p is None:
            return self.required(self.park(question), f"Confirmation {cid} is unknown or expired; a new one was parked.")
        if p.question.state != question.state:
            if p.status in ("pending", "approved"):
                p.status = "void"
                self.app.audit.confirmation(
                    tool=question.tool,
                    arguments=question.arguments,
                    question=question.message,
                    kind=question.kind,
                    answer="void",
                    channel="console",
                    detail=f"confirmation {cid} was for other arguments or the files changed since",
                )
            return self.required(
                self.park(question),
                f"Confirmation {cid} was given for other arguments or for "
                "the files as they were before they changed, so it is void; "
                "a new one was parked.",
            )
        if p.status == "pending":
            return self.required(p, "The person has not decided yet.")
        if p.status == "denied":
            raise GdalMcpError(
                "declined",
                f"the user denied {question.tool} in the approval console: "
                f"{question.message} Nothing was changed; do not retry unless the user asks for it",
            )
        if p.status == "approved":
            p.status = "used"
            return None
        return self.required(self.park(question), f"Confirmation {cid} is {p.status}; a new one was parked.")

    # ----- jobs ---------------------------------------------------------------------------------
    def track(self, func: str) -> Tracker:
        tool = CURRENT_TOOL.get() or func.rpartition(":")[2]
        entry = JobEntry(id=secrets.token_urlsafe(6), tool=tool, started=time.time())
        self.jobs[entry.id] = entry
        return Tracker(self, entry)

    def retire(self, entry: JobEntry) -> None:
        done = [j for j in self.jobs.values() if j.status != "running" and j is not entry]
        for j in sorted(done, key=lambda j: j.ended or 0)[: -KEEP_JOBS or None]:
            del self.jobs[j.id]

    def cancel(self, jid: str, token: str | None) -> JobEntry:
        entry = self.jobs.get(jid)
        if entry is None or entry.status != "running" or entry.task is None:
            raise GdalMcpError("not-found", f"no running job {jid}")
        entry.cancelled_by = token or "console"
        entry.task.cancel()
        self.app.audit.write(
            tool=entry.tool,
            arguments={"job": jid, "by": "console", "token": token},
            outcome="cancel-requested",
            duration_ms=1000 * (time.time() - entry.started),
        )
        return entry

    # ----- page state ---------------------------------------------------------------------------
    def state(self, role: str = "viewer") -> dict[str, Any]:
        self._expire()
        pending = sorted(self.pending.values(), key=lambda p: p.created, reverse=True)
        jobs = sorted(self.jobs.values(), key=lambda j: j.started, reverse=True)
        return {
            "now": _iso(time.time()),
            "role": role,
            "pending": [p.view() for p in pending],
            "jobs": [j.view() for j in jobs],
            "audit": list(reversed(self.audit)),
            "outputs": list(reversed(self.outputs)),
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


def register(mcp: Any, app: App) -> Console:
    """The console routes beside /mcp, and the confirmation_status tool (custom routes are not behind
    FastMCP's auth: every route checks here)."""
    import html

    from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

    console = Console(app)
    app.console = console

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
            p = console.decide(request.path_params["cid"], action == "approve", token)
        except GdalMcpError as e:
            return JSONResponse(e.payload(), status_code=404 if e.code == "not-found" else 409)
        return JSONResponse({"success": True, "confirmation": p.view()})

    @mcp.custom_route("/console/jobs/{jid}/cancel", methods=["POST"], name="console-cancel")
    async def console_cancel(request: Request) -> Response:
        ok, token, why = console.writer(request)
        if not ok:
            return refused(403, why)
        try:
            entry = console.cancel(request.path_params["jid"], token)
        except GdalMcpError as e:
            return JSONResponse(e.payload(), status_code=404)
        return JSONResponse({"success": True, "job": entry.view()})

    @mcp.custom_route("/console/thumbnail", methods=["GET"], name="console-thumbnail")
    async def console_thumbnail(request: Request) -> Response:
        if not console.reader(request):
            return refused(401, "log in at /console")
        try:
            png = await console.thumbnail(request.query_params.get("path", ""))
        except GdalMcpError as e:
            return JSONResponse(app.scrub_error(e).payload(), status_code=404 if e.code == "not-found" else 400)
        return Response(png, media_type="image/png", headers={"Cache-Control": "private, max-age=60"})

    _register_status_tool(mcp, app, console)
    return console


class ConfirmationStatus(BaseModel):
    """What confirmation_status answers."""

    confirmation_id: str
    status: str = Field(
        description="pending (the person has not decided), approved (call the tool again with "
        "confirmation_id), denied, expired, void (the arguments or files changed), "
        "used (an approval runs one call)"
    )
    tool: str
    question: str = Field(description="What the person was asked")
    expires: str
    console_url: str


def _register_status_tool(mcp: Any, app: App, console: Console) -> None:
    from gdal_mcp.server.tools._base import READ, gdal_tool

    @gdal_tool(mcp, app, title="Confirmation status", annotations=READ, tags={"confirm"}, task=False)
    async def confirmation_status(
        confirmation_id: Annotated[str, Field(description="The id a confirmation-required error gave")],
    ) -> ConfirmationStatus:
        """Whether the person decided a parked confirmation in the approval console (HTTP). Once approved,
        call the tool again with the same arguments plus confirmation_id."""
        p = console.get(confirmation_id)
        if p is None:
            raise GdalMcpError(
                "not-found",
                f"no confirmation {confirmation_id} (unknown, or expired long ago); call the tool again to park a new one",
            )
        return ConfirmationStatus(
            confirmation_id=p.id,
            status=p.status,
            tool=p.question.tool,
            question=p.question.message,
            expires=_iso(p.expires),
            console_url=console.url(),
        )
