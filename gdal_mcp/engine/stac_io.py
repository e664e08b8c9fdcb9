"""Reading STAC documents for stac_search, and nothing else: a workspace catalog's files below its own folder, or
http(s) URLs through pystac-client's StacApiIO with every URL checked.

- `LocalReader`: JSON files of a workspace catalog. A link is followed only when it is a local path (relative, or
  absolute) whose real path lies in the folder of the catalog file searched; a URL or a path leaving that folder is
  out-of-root. The worker's sandbox (guard) and its kernel confinement stand behind this.
- `RemoteIO`: http(s) only (never a local file, whatever a remote document links to); each URL, and each redirect,
  checked by the worker's sandbox (guard: the server's allow-list of remote locations) before it is fetched;
  responses capped in size; HTTP failures turned into GdalMcpError with codes the model can act on. Messages name
  URLs without their query string (it may carry a token) and never quote headers.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from typing import Any
from urllib.parse import urljoin, urlsplit

from pystac_client.stac_api_io import StacApiIO
from requests import Request, Response
from requests.exceptions import ConnectionError as RequestsConnectionError
from requests.exceptions import ProxyError, RequestException, Timeout
from urllib3 import Retry

from gdal_mcp.engine import guard, remote_io
from gdal_mcp.errors import GdalMcpError

#: the largest STAC document read (a catalog, an item, a page of search results, an item collection)
MAX_DOCUMENT_BYTES = 32 * 1024 * 1024
#: seconds to connect, and to wait for each read of an answer
TIMEOUT = (10.0, 60.0)
MAX_REDIRECTS = 5
HTTP_SCHEMES = ("http", "https")

logging.getLogger("urllib3").setLevel(logging.ERROR)  # its retries are reported by the failure, not on stderr


def shown(url: str, limit: int = 160) -> str:
    """A URL as messages show it: host and path, without the query string (it may carry a token or signature) and
    without the scheme (the worker reads '//host' in a message as a file refused by its confinement), shortened."""
    head = url.split("?", 1)[0].split("#", 1)[0]
    parts = urlsplit(head)
    if parts.scheme.lower() in HTTP_SCHEMES and parts.netloc:
        head = head.split("://", 1)[1]
    return head if len(head) <= limit else head[: limit - 1] + "…"


def is_http(href: str) -> bool:
    parts = urlsplit(href)
    return parts.scheme.lower() in HTTP_SCHEMES and bool(parts.netloc)


def check_remote(url: str, what: str) -> None:
    """An http(s) URL the worker's sandbox allows (the server's remote locations); out-of-root otherwise."""
    if not is_http(url):
        raise GdalMcpError(
            "out-of-root",
            f"{what} '{shown(url)}' is not an http(s) URL; a remote catalog's documents are read over http(s) only",
        )
    try:
        guard.check_files([url])
    except GdalMcpError as e:
        raise GdalMcpError(
            "out-of-root" if e.code in ("out-of-root", "unsupported") else e.code,
            f"{what} '{shown(url)}' is outside the remote locations this server may read; only documents there are "
            "searched (ask the operator to allow it, or search a catalog there)",
        ) from None


def parse_json(text: str | bytes, where: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except (ValueError, UnicodeDecodeError) as e:
        raise GdalMcpError(
            "invalid-argument", f"{where} is not JSON ({e}); give a STAC catalog, collection or item JSON"
        ) from None
    if not isinstance(doc, dict):
        raise GdalMcpError("invalid-argument", f"{where} is not a JSON object; give a STAC catalog, collection or item JSON")
    return doc


class LocalReader:
    """The JSON documents of a workspace catalog, confined to the folder of the catalog file searched."""

    def __init__(self, catalog: str) -> None:
        self.root_file = os.path.realpath(catalog)
        self.tree = os.path.dirname(self.root_file)

    def shown(self, path: str) -> str:
        """A path as messages show it (the server makes it workspace-relative)."""
        return path

    def locate(self, base: str, href: str, what: str = "link") -> str:
        """The real path a link of the document at `base` names; out-of-root when it leaves the catalog's folder."""
        if href.lower().startswith("file://"):
            href = urlsplit(href).path
        elif "://" in href or href.lower().startswith("/vsi"):
            raise GdalMcpError(
                "out-of-root",
                f"{what} '{shown(href)}' in {base} is a remote location; a workspace catalog's links must be relative "
                "paths to files below its own folder",
            )
        real = os.path.realpath(os.path.join(os.path.dirname(base), href))
        if not self.inside(real):
            raise GdalMcpError(
                "out-of-root",
                f"{what} '{href}' in {base} leaves the folder of the catalog searched ({self.tree}); a workspace "
                "catalog's links must stay below it (search a catalog file higher up to include it)",
            )
        return real

    def inside(self, real: str) -> bool:
        return real == self.tree or real.startswith(self.tree.rstrip(os.sep) + os.sep)

    def read_json(self, path: str) -> dict[str, Any]:
        guard.check_files([path])
        try:
            info = os.stat(path)
            if not stat.S_ISREG(info.st_mode):  # a FIFO or device would block or never end
                raise GdalMcpError("invalid-argument", f"{path} is not a regular file; a STAC document is a JSON file")
            size = info.st_size
            if size > MAX_DOCUMENT_BYTES:
                raise GdalMcpError(
                    "resource-limit", f"{path} is {size} bytes; STAC documents over {MAX_DOCUMENT_BYTES} bytes are not read"
                )
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise GdalMcpError("not-found", f"{path} does not exist (named by the catalog)") from None
        except PermissionError:
            raise GdalMcpError("out-of-root", f"{path} cannot be read here (outside what this server may read)") from None
        return parse_json(data, path)


class RemoteIO(StacApiIO):
    """pystac-client's I/O restricted to checked http(s) URLs, with redirects followed by hand and answers capped."""

    def __init__(self) -> None:
        retry = Retry(
            total=2, connect=1, read=1, status=2, backoff_factor=0.5, status_forcelist=(429, 502, 503, 504), raise_on_status=False
        )
        super().__init__(timeout=TIMEOUT, max_retries=retry)
        self.requests = 0

    def shown(self, url: str) -> str:
        return shown(url)

    def locate(self, base: str, href: str, what: str = "link") -> str:
        """The absolute URL a link of the document at `base` names; never a local file."""
        url = urljoin(base, href)
        if not is_http(url):
            raise GdalMcpError(
                "out-of-root",
                f"{what} '{shown(href)}' in {shown(base)} is not an http(s) URL; a remote catalog's links are read over "
                "http(s) only",
            )
        return url.split("#", 1)[0]

    def read_json(self, source: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        text = self.read_text(source, *args, **kwargs)
        return parse_json(text, shown(str(getattr(source, "href", source))))

    def read_text(self, source: Any, *args: Any, **kwargs: Any) -> str:
        href = str(getattr(source, "href", source))
        if not is_http(href):  # StacApiIO would open a local file: a remote catalog never names one
            raise GdalMcpError("out-of-root", f"'{shown(href)}' is not an http(s) URL; only http(s) documents are read here")
        return super().read_text(source, *args, **kwargs)  # a Link's method and body, then self.request

    def request(
        self,
        href: str,
        method: str | None = None,
        headers: dict[str, str] | None = None,
        parameters: dict[str, Any] | None = None,
    ) -> str:
        """GET or POST `href` (checked), following at most MAX_REDIRECTS redirects, each checked; the answer's text."""
        method = (method or "GET").upper()
        url, body = href, parameters
        for _ in range(MAX_REDIRECTS + 1):
            check_remote(url, "STAC URL")
            if method in ("POST", "PUT", "PATCH"):
                request = Request(method=method, url=url, headers=headers, json=body)
            else:
                request = Request(method=method, url=url, headers=headers, params=dict(body or {}))
            prepared = self.session.prepare_request(request)
            settings = self.session.merge_environment_settings(
                prepared.url or url, proxies={}, stream=True, verify=True, cert=None
            )
            self.requests += 1
            try:
                response = self.session.send(prepared, timeout=self.timeout, allow_redirects=False, **settings)
            except Timeout:
                raise GdalMcpError(
                    "timeout", f"the STAC server at {shown(url)} did not answer in time; try again, or narrow the search"
                ) from None
            except ProxyError as e:
                if " 451" in str(e):  # the server's egress proxy: not an allowed remote location
                    raise _refused(url) from None
                raise GdalMcpError(
                    "gdal-error", f"could not reach the STAC server at {shown(url)} through the proxy; try later"
                ) from None
            except RequestsConnectionError as e:
                raise GdalMcpError(
                    "gdal-error", f"could not reach the STAC server at {shown(url)} ({_reason(e)}); check the URL or try later"
                ) from None
            except RequestException as e:
                raise GdalMcpError("gdal-error", f"request to {shown(url)} failed ({type(e).__name__})") from None
            if response.is_redirect:
                location = response.headers.get("location", "")
                response.close()
                url = urljoin(prepared.url or url, location)
                if response.status_code in (301, 302, 303) and method != "GET":
                    method, body = "GET", None
                elif method == "GET":
                    body = None  # the new location carries its own query string
                continue
            return _text(response, url)
        raise GdalMcpError("gdal-error", f"{shown(href)} redirects more than {MAX_REDIRECTS} times")


def _reason(error: Exception) -> str:
    text = str(error)
    for known in ("Connection refused", "Name or service not known", "Temporary failure in name resolution", "Permission denied"):
        if known in text:
            return known.lower() if known != "Permission denied" else "the network is not allowed to this process"
    return "connection failed"


def _text(response: Response, url: str) -> str:
    """The answer's body (at most MAX_DOCUMENT_BYTES), or the HTTP error as a GdalMcpError."""
    try:
        chunks: list[bytes] = []
        size = 0
        remote_io.count_request()
        for chunk in response.iter_content(chunk_size=1 << 16):
            size += len(chunk)
            remote_io.count_bytes(len(chunk))  # the job's remote reads: its result and --max-remote-bytes
            if remote_io.over_budget():
                raise GdalMcpError(
                    "resource-limit", f"reading {shown(url)} passed the server's limit on bytes a job may download"
                )
            if size > MAX_DOCUMENT_BYTES:
                raise GdalMcpError(
                    "resource-limit", f"{shown(url)} answered more than {MAX_DOCUMENT_BYTES} bytes; narrow the search"
                )
            chunks.append(chunk)
    except RequestException as e:
        raise GdalMcpError("gdal-error", f"reading the answer of {shown(url)} failed ({type(e).__name__})") from None
    finally:
        response.close()
    data = b"".join(chunks)
    status = response.status_code
    if 200 <= status < 300:
        return data.decode("utf-8", errors="replace")  # JSON is UTF-8 (RFC 8259)
    detail = _detail(data)
    where = f"{shown(url)} answered HTTP {status}" + (f": {detail}" if detail else "")
    if status == 451:  # the server's egress proxy refused it (or the site, for legal reasons)
        raise _refused(url, detail)
    if status == 404:
        raise GdalMcpError("not-found", f"{where}; check the catalog URL (a STAC API root, or a catalog.json)")
    if status in (401, 403):
        raise GdalMcpError("unsupported", f"{where}; it needs credentials or access this server does not have")
    if status in (400, 405, 422):
        raise GdalMcpError("invalid-argument", f"{where}; the STAC API refused the search: change the argument it names")
    raise GdalMcpError("gdal-error", f"{where}; the STAC server failed: try again later")


def _refused(url: str, detail: str = "") -> GdalMcpError:
    return GdalMcpError(
        "out-of-root",
        f"{shown(url)} was refused: it is outside the remote locations this server may read"
        + (f" ({detail})" if detail else "")
        + "; search a catalog there, or ask the operator to allow it",
    )


def _detail(data: bytes, limit: int = 300) -> str:
    """The gist of an error answer: its JSON description or code, else the start of its text."""
    text = data.decode("utf-8", errors="replace").strip()
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if isinstance(doc, dict):
        text = str(doc.get("description") or doc.get("detail") or doc.get("message") or doc.get("code") or text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
