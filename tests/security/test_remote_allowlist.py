"""The remote allow-list (--allow-remote): a location outside it is refused in every spelling GDAL accepts.

Attack classes: SSRF through another spelling of a URL (GDAL's /vsi prefixes, streaming variants, archive chains,
connection strings, VRT sources), prefix confusion (a sibling bucket or path sharing the allowed prefix's text),
traversal out of the allowed prefix (raw, percent-encoded and encoded-slash '..'), host confusion (userinfo before
'@', default ports, case), credentials smuggled in tool arguments, and the kernel's network switch.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.execution import confine
from gdal_mcp.execution.common import network_allowed
from gdal_mcp.sandbox import Sandbox
from gdal_mcp.sandbox.remote import parse, parse_allowed

ALLOWED = ("https://tiles.example.org/cogs", "s3://bucket/data", "http://127.0.0.1:8765", "gs://g-bucket", "az://box/p")


@pytest.fixture
def sb(tmp_path: Path) -> Sandbox:
    (tmp_path / "ws").mkdir()
    return Sandbox([tmp_path / "ws"], allow_remote=ALLOWED)


def code(sb: Sandbox, path: str) -> str:
    with pytest.raises(GdalMcpError) as info:
        sb.resolve_input(path)
    return info.value.code


@pytest.mark.parametrize(
    "path,gdal_path",
    [
        ("https://tiles.example.org/cogs/a.tif", "/vsicurl/https://tiles.example.org/cogs/a.tif"),
        ("/vsicurl/https://tiles.example.org/cogs/a.tif", "/vsicurl/https://tiles.example.org/cogs/a.tif"),
        ("/vsicurl_streaming/https://TILES.example.org:443/cogs/x/y.tif", "/vsicurl/https://tiles.example.org/cogs/x/y.tif"),
        ("https://tiles.example.org/cogs/a.tif?v=1", "/vsicurl/https://tiles.example.org/cogs/a.tif?v=1"),
        ("s3://bucket/data/a.tif", "/vsis3/bucket/data/a.tif"),
        ("/vsis3/bucket/data/sub/a.tif", "/vsis3/bucket/data/sub/a.tif"),
        ("/vsis3_streaming/bucket/data/a.tif", "/vsis3/bucket/data/a.tif"),
        ("gs://g-bucket/any/where.tif", "/vsigs/g-bucket/any/where.tif"),
        ("/vsiadls/box/p/a.tif", "/vsiaz/box/p/a.tif"),
        ("http://127.0.0.1:8765/a.tif", "/vsicurl/http://127.0.0.1:8765/a.tif"),
        ("/vsizip//vsis3/bucket/data/a.zip/b.tif", "/vsizip//vsis3/bucket/data/a.zip/b.tif"),
        ('NETCDF:"s3://bucket/data/x.nc":var', 'NETCDF:"/vsis3/bucket/data/x.nc":var'),
    ],
)
def test_every_spelling_of_an_allowed_location_opens_in_one_form(sb: Sandbox, path: str, gdal_path: str) -> None:
    r = sb.resolve_input(path)
    assert r.network and r.gdal_path == gdal_path


@pytest.mark.parametrize(
    "path",
    [
        # another host, scheme or bucket, in each spelling
        "https://evil.example.org/cogs/a.tif",
        "/vsicurl/https://evil.example.org/a.tif",
        "/vsicurl_streaming/http://tiles.example.org/cogs/a.tif",  # http is not https
        "https://tiles.example.org:8443/cogs/a.tif",  # another port
        "http://127.0.0.1:8766/a.tif",
        "http://localhost:8765/a.tif",  # the same machine by another name is another location
        "s3://bucket2/data/a.tif",
        "/vsis3/other/data/a.tif",
        "/vsigs/bucket/data/a.tif",  # gs, not s3
        "/vsiaz/box/q/a.tif",
        # a sibling sharing the allowed prefix's text
        "https://tiles.example.org/cogs-private/a.tif",
        "https://tiles.example.org/cogsa.tif",
        "s3://bucket/database/a.tif",
        "/vsis3/bucket/dat/a.tif",
        # chains and connection strings around a refused location
        "/vsizip//vsicurl/https://evil.example.org/a.zip/x.tif",
        "/vsigzip//vsis3/other/a.gz",
        'NETCDF:"/vsicurl/https://evil.example.org/x.nc":var',
    ],
)
def test_a_location_outside_the_list_is_out_of_root(sb: Sandbox, path: str) -> None:
    assert code(sb, path) == "out-of-root"


@pytest.mark.parametrize(
    "path",
    [
        "https://tiles.example.org/cogs/../private/a.tif",
        "https://tiles.example.org/cogs/%2e%2e/private/a.tif",
        "https://tiles.example.org/cogs/%2E%2e/private/a.tif",
        "https://tiles.example.org/cogs/..%2fprivate/a.tif",
        "https://tiles.example.org/cogs/.%2e/private/a.tif",
        "https://tiles.example.org/cogs\\..\\private/a.tif",
        "s3://bucket/data/../secret/a.tif",
        "/vsis3/bucket/data/./../secret/a.tif",
        "https://tiles.example.org@evil.example.org/cogs/a.tif",  # userinfo: the host is evil.example.org
        "https://user:secret@tiles.example.org/cogs/a.tif",  # credentials in an argument
        "https://tiles.example.org/cogs/a.tif#frag",
    ],
)
def test_traversal_host_confusion_and_credentials_are_refused(sb: Sandbox, path: str) -> None:
    assert code(sb, path) in ("invalid-argument", "out-of-root")


@pytest.mark.parametrize(
    "path",
    [
        "/vsicurl?url=https://tiles.example.org/cogs/a.tif",  # GDAL's option syntax (could set headers)
        "/vsicurl/file:///etc/passwd",
        "/vsicurl/ftp://tiles.example.org/cogs/a.tif",
        "ftp://tiles.example.org/cogs/a.tif",
        "/vsioss/bucket/data/a.tif",
        "/vsiswift/bucket/data/a.tif",
        "/vsiwebhdfs/http://tiles.example.org/cogs/a.tif",
        "WMS:https://tiles.example.org/cogs/wms",  # connection strings are not checked URL by URL
        'STACIT:"https://tiles.example.org/cogs/search"',
    ],
)
def test_other_schemes_and_syntaxes_are_unsupported(sb: Sandbox, path: str) -> None:
    assert code(sb, path) == "unsupported"


def test_without_a_list_remote_data_is_unsupported_and_the_workers_get_no_network(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    none = Sandbox([tmp_path / "ws"])
    assert code(none, "https://tiles.example.org/cogs/a.tif") == "unsupported" and not none.allow_network
    assert not network_allowed({"roots": [str(tmp_path)], "allow_remote": []})
    assert network_allowed({"roots": [str(tmp_path)], "allow_remote": ["s3://b"]})
    # the kernel's policy follows: TCP for the workers only when a list is given
    assert not confine.worker_policy([str(tmp_path)], None, read_only=False, network=False).network


def test_a_worker_sandbox_checks_the_same_list(tmp_path: Path) -> None:
    """What a dataset names inside itself (a VRT's remote source, seen by the worker after opening) is checked
    against the same list as the tool's argument."""
    (tmp_path / "ws").mkdir()
    worker = Sandbox.for_worker({"roots": [str(tmp_path / "ws")], "allow_remote": list(ALLOWED)})
    worker.check_referenced(["/vsicurl/https://tiles.example.org/cogs/a.tif", "/vsis3/bucket/data/b.tif"])
    for name in ("/vsicurl/https://evil.example.org/a.tif", "/vsis3/bucket2/x.tif"):
        with pytest.raises(GdalMcpError) as info:
            worker.check_referenced([name])
        assert info.value.code == "out-of-root"


@pytest.mark.parametrize("entry", ["ftp://x.org", "https://user:pw@x.org", "s3://", "https://x.org/a/../b", "https://x.org/?q=1"])
def test_malformed_allow_list_entries_are_refused_at_start(entry: str) -> None:
    with pytest.raises(ValueError):
        parse_allowed(entry)


def test_messages_never_carry_a_query_string(sb: Sandbox) -> None:
    """A signed URL's query (X-Amz-Signature …) is a credential: refusals quote the location without it."""
    with pytest.raises(GdalMcpError) as info:
        sb.resolve_input("https://evil.example.org/a.tif?X-Amz-Signature=deadbeef")
    assert "deadbeef" not in info.value.message and "evil.example.org/a.tif" in info.value.message
    assert parse("https://h.org/a.tif?X=1").url == "https://h.org/a.tif?X=1"


@pytest.mark.parametrize(
    "query",
    [
        "X-Amz-Signature=abc&X-Amz-Credential=AKIA",
        "sig=abc",
        "token=abc",
        "X-Goog-Signature=1",
        "AWSAccessKeyId=AKIA&Signature=x",
    ],
)
def test_credentials_in_a_url_argument_are_refused(sb: Sandbox, query: str) -> None:
    """Credentials come from the operator, never from a tool argument: a presigned URL is refused, and the message
    does not repeat the signature."""
    with pytest.raises(GdalMcpError) as info:
        sb.resolve_input(f"https://tiles.example.org/cogs/a.tif?{query}")
    assert info.value.code == "invalid-argument" and "abc" not in info.value.message


def test_environment_credentials_are_redacted_from_messages_and_audit_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    from gdal_mcp.credentials import redact, redact_obj
    from gdal_mcp.execution.common import classify

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t-value-xyz")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEKEY")
    monkeypatch.setenv("AZURE_STORAGE_ACCESS_KEY", "azure-key-value")
    gdal_text = "HTTP error 403: <Error><AWSAccessKeyId>AKIAEXAMPLEKEY</AWSAccessKeyId></Error> s3cr3t-value-xyz"
    assert "AKIAEXAMPLEKEY" not in redact(gdal_text) and "s3cr3t" not in redact(gdal_text)
    code, message = classify(RuntimeError(gdal_text))  # a worker's failure reply
    assert "AKIAEXAMPLEKEY" not in message and "s3cr3t-value-xyz" not in message
    args = {"input": "https://h.org/a.tif?X-Amz-Signature=deadbeef&x=1", "note": ["azure-key-value"]}
    assert redact_obj(args) == {"input": "https://h.org/a.tif?X-Amz-Signature=***&x=1", "note": ["***"]}


# ----- the egress proxy (execution/egress.py), driven with raw sockets ----------------------------------------------
def _exchange(port: int, request: bytes, *, timeout: float = 5.0) -> bytes:
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(request)
        chunks = []
        try:
            while chunk := s.recv(65536):
                chunks.append(chunk)
        except TimeoutError:
            pass
    return b"".join(chunks)


@pytest.fixture
def proxy_and_upstream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from gdal_mcp.execution.egress import EgressProxy
    from gdal_mcp.sandbox.remote import AllowList
    from tests.remote_servers import RangeServer

    (tmp_path / "pub").mkdir()
    (tmp_path / "pub" / "a.txt").write_text("public")
    (tmp_path / "private.txt").write_text("private")
    monkeypatch.setenv("AWS_S3_ENDPOINT", "127.0.0.1:9")  # an endpoint whose other ports must stay closed
    with RangeServer(tmp_path) as upstream:
        proxy = EgressProxy(AllowList((f"{upstream.url}/pub", "s3://bucket/data"))).start()
        try:
            yield proxy, upstream
        finally:
            proxy.close()


def _auth(proxy) -> bytes:
    import base64

    return b"Proxy-Authorization: Basic " + base64.b64encode(f"gdal-mcp:{proxy.token}".encode()) + b"\r\n"


def test_the_proxy_serves_only_the_workers_and_only_what_the_list_covers(proxy_and_upstream) -> None:
    """Open relay and SSRF through the proxy: without the workers' token every request is 407; with it a covered GET
    goes, with the Host of the decided URL (not the client's); a location outside the list, a write method to an
    HTTP location, and a tunnel to the S3 endpoint's host on another port are refused (451)."""
    proxy, upstream = proxy_and_upstream
    url = f"{upstream.url}/pub/a.txt".encode()
    assert _exchange(proxy.port, b"GET " + url + b" HTTP/1.1\r\nHost: x\r\n\r\n").startswith(b"HTTP/1.1 407")
    ok = _exchange(proxy.port, b"GET " + url + b" HTTP/1.1\r\nHost: internal-admin.local\r\n" + _auth(proxy) + b"\r\n")
    assert ok.startswith(b"HTTP/1.0 200") or ok.startswith(b"HTTP/1.1 200"), ok[:100]
    assert ok.endswith(b"public")
    for request in (
        b"GET " + upstream.url.encode() + b"/private.txt HTTP/1.1\r\n",
        b"DELETE " + url + b" HTTP/1.1\r\n",
        b"CONNECT 127.0.0.1:" + str(upstream.port).encode() + b" HTTP/1.1\r\n",  # the endpoint host, not its port
        b"CONNECT s3.amazonaws.com:443 HTTP/1.1\r\n",  # a shared host, not asked for (AWS_VIRTUAL_HOSTING unset)
    ):
        answer = _exchange(proxy.port, request + b"Host: x\r\n" + _auth(proxy) + b"\r\n")
        assert answer.startswith(b"HTTP/1.1 451"), (request, answer[:120])
    assert upstream.log.sent("/private.txt") == (0, 0)


def test_the_proxy_relays_exactly_the_declared_body_and_no_pipelined_request(proxy_and_upstream) -> None:
    """Request smuggling: a second request written after the first one's body never reaches the upstream."""
    proxy, upstream = proxy_and_upstream
    url = f"{upstream.url}/pub/a.txt".encode()
    upstream.log.clear()
    smuggled = b"GET " + upstream.url.encode() + b"/private.txt HTTP/1.1\r\nHost: x\r\n\r\n"
    _exchange(proxy.port, b"GET " + url + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n" + _auth(proxy) + b"\r\n" + smuggled)
    chunked = b"POST " + url + b" HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n" + _auth(proxy) + b"\r\n0\r\n\r\n"
    assert _exchange(proxy.port, chunked).startswith(b"HTTP/1.1 400")
    for lengths in (b"Content-Length: 0\r\nContent-Length: 40\r\n", b"Content-Length: +3\r\n", b"Content-Length: 1_0\r\n"):
        # two lengths, or one that a parser may read otherwise: the upstream could take the body for a second request
        answer = _exchange(proxy.port, b"GET " + url + b" HTTP/1.1\r\nHost: x\r\n" + lengths + _auth(proxy) + b"\r\n" + smuggled)
        assert answer.startswith(b"HTTP/1.1 400"), (lengths, answer[:80])
    assert upstream.log.sent("/private.txt") == (0, 0)


def test_the_proxy_drops_slow_and_surplus_connections(proxy_and_upstream, monkeypatch: pytest.MonkeyPatch) -> None:
    """Exhausting the server's file descriptors through the proxy: a header that never ends is dropped after
    HEADER_TIMEOUT, and connections past MAX_CONNECTIONS are closed at once."""
    import socket
    import time

    from gdal_mcp.execution import egress

    proxy, _ = proxy_and_upstream
    monkeypatch.setattr(egress, "HEADER_TIMEOUT", 0.5)
    monkeypatch.setattr(egress, "MAX_CONNECTIONS", 3)
    held = [socket.create_connection(("127.0.0.1", proxy.port)) for _ in range(3)]
    for s in held:
        s.sendall(b"GET http://x/ HTTP/1.1\r\n")  # and never the end of the header
    time.sleep(0.2)
    extra = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
    assert extra.recv(10) == b""  # closed at once: the cap
    extra.close()
    time.sleep(1.0)
    for s in held:
        s.settimeout(5)
        assert s.recv(10) == b""  # the slow headers timed out
        s.close()
    assert proxy.connections == 0


@pytest.mark.parametrize(
    "path",
    [
        "https://tiles.example.org/cogs/..;/private/a.tif",
        "https://tiles.example.org/cogs/%2e%2e;/private/a.tif",
        "https://tiles.example.org/cogs/a.tif?X%2DAmz%2DSignature=abc",
        "https://tiles.example.org/cogs/a.tif?%73ig=abc",
        "https://tiles.example.org/cogs/a.tif?a=1;sig=abc",
        "https://tiles.example.org/cogs/a.tif?client_secret=abc",
    ],
)
def test_encoded_traversal_and_encoded_credential_keys_are_refused(sb: Sandbox, path: str) -> None:
    assert code(sb, path) == "invalid-argument"


def test_an_ipv6_host_keeps_its_port_apart(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    sb = Sandbox([tmp_path / "ws"], allow_remote=("http://[::1]:8080/pub",))
    assert sb.resolve_input("http://[::1]:8080/pub/x.tif").gdal_path == "/vsicurl/http://[::1]:8080/pub/x.tif"
    assert code(sb, "http://[::1:8080]/pub/x.tif") == "out-of-root"  # another address, on port 80


def test_an_upload_through_the_proxy_gets_100_continue_and_the_upstream_no_expect(monkeypatch: pytest.MonkeyPatch) -> None:
    """curl sends an upload's body after "100 Continue", or after waiting a second for it (every upload through the
    proxy took a second more per object). The proxy answers 100 Continue once it has allowed the request, relays
    exactly the declared body, and sends no Expect upstream (whose interim answer it would relay as the final one)."""
    import socket
    import threading

    from gdal_mcp.execution.egress import EgressProxy
    from gdal_mcp.sandbox.remote import AllowList

    listener = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []

    def upstream() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data or not data.endswith(b"hello"):
                data += conn.recv(65536)
            received.append(data)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")

    thread = threading.Thread(target=upstream, daemon=True)
    thread.start()
    monkeypatch.setenv("AWS_S3_ENDPOINT", f"127.0.0.1:{listener.getsockname()[1]}")
    monkeypatch.setenv("AWS_HTTPS", "NO")
    proxy = EgressProxy(AllowList(("s3://bucket/data",))).start()
    try:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as s:
            url = f"http://127.0.0.1:{listener.getsockname()[1]}/bucket/data/x.txt".encode()
            head = b"PUT " + url + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n"
            s.sendall(head + _auth(proxy) + b"\r\n")
            s.settimeout(0.5)  # curl waits 1 s: the answer comes before that, and before any body was sent
            assert s.recv(100).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
            s.settimeout(5)
            s.sendall(b"hello")
            assert s.recv(100).startswith(b"HTTP/1.1 200")
    finally:
        proxy.close()
        listener.close()
    thread.join(5)
    head, _, body = received[0].partition(b"\r\n\r\n")
    assert body == b"hello" and b"expect" not in head.lower() and head.startswith(b"PUT /bucket/data/x.txt ")


@pytest.mark.parametrize(
    "output,overwrite,expected",
    [
        ("s3://bucket/data/.gdal-mcp-owner", False, "invalid-argument"),  # the temporary directory's own marker
        ("s3://bucket/data/.gdal-mcp-tmp-x.tif", False, "invalid-argument"),
        ("s3://bucket/data/", False, "invalid-argument"),  # a prefix, not an object
        ("s3://bucket/other/x.tif", False, "out-of-root"),
        ("gs://g-bucket/x.tif", False, "unsupported"),
    ],
)
def test_remote_outputs_name_an_object_in_the_list(sb: Sandbox, output: str, overwrite: bool, expected: str) -> None:
    with pytest.raises(GdalMcpError) as info:
        sb.resolve_output(output, overwrite=overwrite)
    assert info.value.code == expected
    assert not list(sb.roots[0].glob(".gdal-mcp-tmp-*"))  # nothing prepared for a refused output


def test_a_bucket_listing_must_stay_below_the_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    """'prefix=ws' without the slash also lists 'ws-private/…': only listings below 'ws/' go through."""
    from gdal_mcp.execution.egress import Decider
    from gdal_mcp.sandbox.remote import AllowList

    monkeypatch.setenv("AWS_S3_ENDPOINT", "127.0.0.1:9000")
    monkeypatch.setenv("AWS_HTTPS", "NO")
    d = Decider(AllowList(("s3://team/ws",)))
    assert d.url("GET", "http://127.0.0.1:9000/team?list-type=2&prefix=ws/&delimiter=/") is None
    assert d.url("GET", "http://127.0.0.1:9000/team?list-type=2&prefix=ws/sub/") is None
    for query in ("list-type=2&prefix=ws", "list-type=2&prefix=w", "list-type=2", "delete", "list-type=2&prefix=ws-private/"):
        assert d.url("GET", f"http://127.0.0.1:9000/team?{query}") is not None, query
    assert d.url("DELETE", "http://127.0.0.1:9000/team/ws/a.tif") is None  # an upload's cleanup, inside the prefix
    assert d.url("DELETE", "http://127.0.0.1:9000/team/other/a.tif") is not None


def test_azure_requests_go_only_to_allowed_blobs_and_listings_below_the_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    """Attack class: egress to a blob or container outside the list through a custom Azure endpoint (Azurite's
    http://host:port/account/container/key): any method on an allowed blob (the uploads' Put Blob, Put Block and
    Put Block List, deletes), a container listing only below the prefix, nothing else at the container or account."""
    from gdal_mcp.execution.egress import Decider, object_hosts
    from gdal_mcp.sandbox.remote import AllowList, parse_allowed

    monkeypatch.setenv(
        "AZURE_STORAGE_CONNECTION_STRING",
        "DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=a2V5;BlobEndpoint=http://127.0.0.1:10000/acct;",
    )
    d = Decider(AllowList(("az://cont/ws",)))
    base = "http://127.0.0.1:10000/acct"
    for method, target in (
        ("PUT", "cont/ws/a.tif"),
        ("PUT", "cont/ws/a.tif?comp=block&blockid=QUFB"),
        ("PUT", "cont/ws/a.tif?comp=blocklist"),
        ("DELETE", "cont/ws/sub/a.tif"),
        ("GET", "cont?restype=container&comp=list&prefix=ws/&delimiter=/"),
        ("GET", "cont?restype=container&comp=list&prefix=ws/sub/&marker=x&include=metadata"),
    ):
        assert d.url(method, f"{base}/{target}") is None, (method, target)
    for method, target in (
        ("PUT", "cont/other/a.tif"),
        ("PUT", "other/ws/a.tif"),
        ("DELETE", "cont?restype=container"),  # the container itself
        ("PUT", "newcont?restype=container"),
        ("GET", "cont?restype=container&comp=list&prefix=ws"),  # also 'ws-private/'
        ("GET", "cont?restype=container&comp=list"),
        ("GET", "?comp=list"),  # the account's containers
        ("GET", "cont?restype=container&comp=acl"),
        ("PUT", "../acct2/cont/ws/a.tif"),
    ):
        assert d.url(method, f"{base}/{target}") is not None, (method, target)
    assert d.url("GET", "http://127.0.0.1:10000/other-account/cont/ws/a.tif") is not None
    assert ("127.0.0.1", 10000) not in object_hosts(parse_allowed("az://cont/ws"), None)  # plain HTTP: no tunnel
    assert ("acct.blob.core.windows.net", 443) in object_hosts(parse_allowed("az://cont/ws"), None)


def test_an_azure_connection_string_is_redacted_part_by_part(monkeypatch: pytest.MonkeyPatch) -> None:
    """Attack class: credential disclosure. The account key and SAS inside AZURE_STORAGE_CONNECTION_STRING never show,
    even where a message quotes them alone (an SDK or GDAL error text)."""
    from gdal_mcp.credentials import redact

    key = "c2VjcmV0LWF6dXJlLWFjY291bnQta2V5LTAxMjM0NTY3ODk="
    sas = "sv=2024-01-01&ss=b&sig=c2lnbmF0dXJlLXZhbHVl"
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", f"AccountName=acct;AccountKey={key};SharedAccessSignature={sas};")
    text = redact(f"403 for key {key} and sas {sas}")
    assert key not in text and "c2lnbmF0dXJlLXZhbHVl" not in text, text


def test_a_plain_http_endpoint_is_never_tunnelled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Attack class: egress past the path rules. A CONNECT tunnel hides the path; to a custom object-store endpoint
    reached over plain HTTP (Azurite, moto, MinIO without TLS) every request is decided by its path instead, so a
    tunnel there would reach every container and bucket of the account. Over TLS the endpoint keeps its tunnel."""
    from gdal_mcp.execution.egress import Decider
    from gdal_mcp.sandbox.remote import AllowList

    monkeypatch.setenv(
        "AZURE_STORAGE_CONNECTION_STRING", "AccountName=acct;AccountKey=a2V5;BlobEndpoint=http://127.0.0.1:10000/acct;"
    )
    monkeypatch.setenv("AWS_S3_ENDPOINT", "127.0.0.1:9000")
    monkeypatch.setenv("AWS_HTTPS", "NO")
    d = Decider(AllowList(("az://cont/ws", "s3://bucket/data")))
    assert d.tunnel("127.0.0.1", 10000) is not None and d.tunnel("127.0.0.1", 9000) is not None
    monkeypatch.setenv(
        "AZURE_STORAGE_CONNECTION_STRING", "AccountName=acct;AccountKey=a2V5;BlobEndpoint=https://blob.example.org/acct;"
    )
    monkeypatch.setenv("AWS_S3_ENDPOINT", "https://minio.example.org:9443")
    d = Decider(AllowList(("az://cont/ws", "s3://bucket/data")))
    assert d.tunnel("blob.example.org", 443) is None and d.tunnel("minio.example.org", 9443) is None


def test_a_repeated_query_parameter_or_a_server_side_copy_is_refused(proxy_and_upstream) -> None:
    """Attack class: reading outside the prefix through an allowed URL. 'prefix=data/&prefix=' lists the whole bucket
    on a server that takes the last value; a PUT to an allowed key with x-amz-copy-source (x-ms-copy-source on Azure)
    makes the store copy any object of the account into it. Both are refused (451) before anything is sent."""
    proxy, upstream = proxy_and_upstream
    endpoint = b"http://127.0.0.1:9"
    for request in (
        b"GET " + endpoint + b"/bucket?list-type=2&prefix=data/&prefix= HTTP/1.1\r\n",
        b"PUT " + endpoint + b"/bucket/data/stolen.tif HTTP/1.1\r\nx-amz-copy-source: /bucket/private/key.tif\r\n",
        b"PUT " + endpoint + b"/bucket/data/stolen.tif HTTP/1.1\r\nX-Ms-Copy-Source: http://127.0.0.1:9/acct/other/x\r\n",
    ):
        answer = _exchange(proxy.port, request + b"Host: x\r\nContent-Length: 0\r\n" + _auth(proxy) + b"\r\n")
        assert answer.startswith(b"HTTP/1.1 451"), (request, answer[:160])


def test_azure_sas_requests_are_decided_by_their_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a SAS (AZURE_STORAGE_SAS_TOKEN, or SharedAccessSignature in the connection string) GDAL appends the
    signature to every request's query: the proxy lets an allowed blob's requests and listings through with it, and
    still refuses everything outside the prefix."""
    from gdal_mcp.execution.egress import Decider
    from gdal_mcp.sandbox.remote import AllowList

    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", "AccountName=acct;BlobEndpoint=http://127.0.0.1:10000/acct;")
    d = Decider(AllowList(("az://cont/ws",)))
    sas = "sv=2024-11-04&ss=b&srt=sco&sp=rwdlac&se=2030-01-01T00:00:00Z&spr=http&sig=c2lnbmF0dXJl"
    base = "http://127.0.0.1:10000/acct"
    assert d.url("PUT", f"{base}/cont/ws/a.tif?{sas}") is None
    assert d.url("GET", f"{base}/cont?restype=container&comp=list&prefix=ws/&delimiter=/&{sas}") is None
    assert d.url("GET", f"{base}/cont/private/a.tif?{sas}") is not None
    assert d.url("GET", f"{base}/cont?restype=container&comp=list&prefix=private/&{sas}") is not None


def test_what_a_worker_prints_reaches_the_log_without_credentials(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Attack class: credential disclosure through GDAL's own messages. A worker's stdout and stderr go through the
    server, which masks credential values and signed query values (a GDAL warning quoting an Azure SAS URL)."""
    import os
    import time

    from gdal_mcp.execution.local import worker_output

    key = "c2VjcmV0LWtleS1wcmludGVkLWJ5LWdkYWw="
    monkeypatch.setenv("AZURE_STORAGE_ACCESS_KEY", key)
    os.write(worker_output(), f"Warning 1: HTTP response code on http://h/c/x.tif?sv=1&sig=c2ln%3D: 451 {key}\n".encode())
    deadline = time.monotonic() + 5
    err = ""
    while time.monotonic() < deadline and "Warning 1" not in err:
        time.sleep(0.05)
        err += capfd.readouterr().err
    assert "Warning 1: HTTP response code" in err and key not in err and "c2ln" not in err, err
