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
