"""Remote data: the operator's allow-list of locations (`--allow-remote`), and every syntax GDAL accepts for a remote
dataset brought to one canonical URL that the list decides on.

A location is `scheme://host[:port]/path` for HTTP(S) and `s3://bucket/key`, `gs://bucket/key`, `az://container/key`
for object storage. GDAL's own spellings (`/vsicurl/https://…`, `/vsis3/bucket/key`, `/vsigs/…`, `/vsiaz/…`,
`/vsiadls/…` and their `_streaming` variants, bare `https://…` and `s3://…`) are read into that form, checked, and
given back to GDAL in one spelling per scheme (`canonical_gdal`). What cannot be read unambiguously is refused:
userinfo in a URL (credentials come from the operator's environment, never from a tool argument), `..` or `.`
segments raw or percent-encoded, encoded slashes, backslashes, fragments, `/vsicurl?` option syntax, and schemes
other than these four.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from gdal_mcp.credentials import signed_query
from gdal_mcp.errors import GdalMcpError

#: GDAL prefix -> the scheme of the canonical URL ("" for /vsicurl/, whose rest is a URL)
VSI_SCHEMES = {
    "/vsicurl/": "",
    "/vsicurl_streaming/": "",
    "/vsis3/": "s3",
    "/vsis3_streaming/": "s3",
    "/vsigs/": "gs",
    "/vsigs_streaming/": "gs",
    "/vsiaz/": "az",
    "/vsiaz_streaming/": "az",
    "/vsiadls/": "az",
}
URL_SCHEMES = ("http", "https", "s3", "gs", "az")
#: what GDAL opens for each canonical scheme
GDAL_PREFIX = {"http": "/vsicurl/", "https": "/vsicurl/", "s3": "/vsis3/", "gs": "/vsigs/", "az": "/vsiaz/"}
DEFAULT_PORTS = {"http": 80, "https": 443}
_BUCKET = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$")


@dataclass(frozen=True)
class Location:
    """A remote location: scheme, host (with port for HTTP, the bucket or container for object storage), path."""

    scheme: str
    host: str
    path: str  # '/'-separated, without a leading '/' ('' for the whole host or bucket)
    query: str = ""

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}/{self.path}" + (f"?{self.query}" if self.query else "")

    @property
    def gdal_path(self) -> str:
        if self.scheme in ("http", "https"):
            return "/vsicurl/" + self.url
        return f"{GDAL_PREFIX[self.scheme]}{self.host}/{self.path}"

    def covers(self, other: Location) -> bool:
        """Whether `other` lies under this allowed prefix: same scheme and host, and its path equal to this path or
        below it at a '/' (s3://b/data covers s3://b/data/x.tif, not s3://b/database)."""
        if (self.scheme, self.host) != (other.scheme, other.host):
            return False
        prefix = self.path.rstrip("/")
        return not prefix or other.path == prefix or other.path.startswith(prefix + "/")


def is_remote(path: str) -> bool:
    low = path.lower()
    return low.startswith(tuple(VSI_SCHEMES)) or low.startswith(tuple(f"{s}://" for s in URL_SCHEMES))


def shown(path: str) -> str:
    """A remote GDAL path as its URL (/vsis3/b/k -> s3://b/k), for messages; other text as it is."""
    try:
        return parse(path).url if is_remote(path) else path
    except GdalMcpError:
        return path


def parse(text: str, *, what: str = "input") -> Location:
    """The canonical Location of a remote dataset name in any spelling GDAL accepts; invalid-argument or unsupported
    for what cannot be read unambiguously (see the module docstring)."""
    low = text.lower()
    if low.startswith(("/vsicurl?", "/vsicurl_streaming?")):
        raise GdalMcpError("unsupported", f"{what}: the /vsicurl?… option syntax is not accepted; give the URL itself")
    for prefix, scheme in VSI_SCHEMES.items():
        if low.startswith(prefix):
            rest = text[len(prefix) :]
            if not scheme:
                if not rest.lower().startswith(("http://", "https://")):
                    raise GdalMcpError("unsupported", f"{what}: /vsicurl/ takes an http:// or https:// URL only")
                return parse(rest, what=what)
            return _object(scheme, rest, text, what)
    m = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://", text)
    if not m or m.group(1).lower() not in URL_SCHEMES:
        raise GdalMcpError(
            "unsupported",
            f"{what} '{_short(text)}': only http(s)://, s3://, gs:// and az:// locations (or GDAL's /vsicurl/, /vsis3/, "
            "/vsigs/, /vsiaz/ forms of them) are read remotely",
        )
    scheme = m.group(1).lower()
    if scheme in ("s3", "gs", "az"):
        return _object(scheme, text[m.end() :], text, what)
    return _http(text, what)


def _http(text: str, what: str) -> Location:
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as e:
        raise GdalMcpError("invalid-argument", f"{what} '{_short(text)}': not a valid URL ({e})") from None
    if "@" in parts.netloc:
        raise GdalMcpError(
            "invalid-argument",
            f"{what}: a URL with a user name or password is not accepted; credentials come from the server's "
            "configuration, never from a tool argument",
        )
    if parts.fragment or "#" in text:
        raise GdalMcpError("invalid-argument", f"{what} '{_short(text)}': remove the '#…' fragment")
    host = (parts.hostname or "").lower()
    if not host or not re.fullmatch(r"[a-z0-9.\-:]+", host) or (":" in host and not parts.netloc.split("@")[-1].startswith("[")):
        raise GdalMcpError("invalid-argument", f"{what} '{_short(text)}': the URL has no valid host name")
    if ":" in host:
        host = f"[{host}]"  # an IPv6 address keeps its brackets, so its port cannot be read as part of it
    signed = signed_query(parts.query)
    if signed is not None:
        raise GdalMcpError(
            "invalid-argument",
            f"{what} '{_short(text)}': its query carries a credential ({signed}=…); credentials come from the server's "
            "configuration (the operator's environment or profiles), never from a tool argument: give the location "
            "without it",
        )
    scheme = parts.scheme.lower()
    hostport = host if port in (None, DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    path = _clean_path(parts.path.lstrip("/"), text, what)
    return Location(scheme, hostport, path, parts.query)


def _object(scheme: str, rest: str, text: str, what: str) -> Location:
    bucket, _, key = rest.partition("/")
    if not _BUCKET.match(bucket):
        raise GdalMcpError("invalid-argument", f"{what} '{_short(text)}': '{bucket}' is not a valid bucket or container name")
    if "?" in key or "#" in key:
        raise GdalMcpError("invalid-argument", f"{what} '{_short(text)}': object keys with '?' or '#' are not accepted")
    if "" in key.split("/")[:-1] and key:  # 'a//b.tif' is another key than 'a/b.tif', though shown alike
        raise GdalMcpError("invalid-argument", f"{what} '{_short(text)}': empty path segments ('//') are not accepted")
    return Location(scheme, bucket.lower() if scheme != "az" else bucket, _clean_path(key, text, what))


def _clean_path(path: str, text: str, what: str) -> str:
    if "\\" in path or "\x00" in path or re.search(r"%2f|%5c|%00", path, re.I):
        raise GdalMcpError("invalid-argument", f"{what} '{_short(text)}': encoded slashes and backslashes are not accepted")
    for candidate in (path, unquote(path), unquote(unquote(path))):
        # '..;/' is '..' to servers that cut a segment at ';' (Tomcat, Spring, some proxies)
        if any(seg.split(";", 1)[0] in (".", "..") for seg in candidate.split("/")):
            raise GdalMcpError("invalid-argument", f"{what} '{_short(text)}': '.' and '..' segments are not accepted")
    return path


def parse_allowed(text: str) -> Location:
    """An --allow-remote entry ('https://tiles.example.org', 's3://bucket/prefix'); ValueError when malformed."""
    try:
        loc = parse(text.strip(), what="--allow-remote")
    except GdalMcpError as e:
        raise ValueError(e.message) from None
    if loc.query:
        raise ValueError(f"--allow-remote {text!r}: give a location without a query string")
    return loc


def _short(text: str, limit: int = 120) -> str:
    """A location in a message: no query string (it may carry a signature), at most `limit` characters."""
    head = text.split("?", 1)[0]
    return head if len(head) <= limit else head[: limit - 1] + "…"


class AllowList:
    """The remote locations the operator allows. Empty: no remote data at all (the workers get no network)."""

    def __init__(self, entries: tuple[str, ...] | list[str] = (), *, any_location: bool = False) -> None:
        self.entries = tuple(parse_allowed(e) for e in entries)
        self.any_location = any_location  # --allow-network: every location (kept for compatibility)

    def __bool__(self) -> bool:
        return self.any_location or bool(self.entries)

    def check(self, text: str, *, what: str) -> Location:
        """The canonical Location of `text`; unsupported when no remote data is allowed, out-of-root when the list
        does not cover it."""
        if not self:
            raise GdalMcpError(
                "unsupported",
                f"{what} '{_short(text)}' is a network location; this server reads only workspace files "
                "(the operator allows remote locations with --allow-remote URL)",
            )
        loc = parse(text, what=what)
        if self.any_location or any(entry.covers(loc) for entry in self.entries):
            return loc
        allowed = ", ".join(e.url.rstrip("/") for e in self.entries)
        raise GdalMcpError(
            "out-of-root",
            f"{what} '{_short(loc.url)}' is outside the remote locations this server may read ({allowed})",
        )

    def describe(self) -> list[str]:
        return ["*"] if self.any_location else [e.url.rstrip("/") for e in self.entries]
