"""Named AWS profiles per bucket (`--remote-profile s3://bucket=NAME`, issue 27), and object stores that ignore conditional
writes, through an MCP client. Profiles: each bucket is
read and written with its own profile's keys, taken from the AWS shared credentials file by the workers before they
confine themselves; no key appears in a result or an error; a profile that cannot be read, or a location that is not
allowed, stops the server at start-up.

Attack classes: credential confusion (a bucket reached with another bucket's keys) and credential disclosure (a key in
a result, an error or the audit log). The local S3 (moto) does not check signatures, so a relay in front of it records
the access key id of every request's Authorization header.
"""

from __future__ import annotations

import http.client
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from fastmcp import Client

from gdal_mcp.config import Settings
from gdal_mcp.credentials import load_profiles, read_profile, redact
from gdal_mcp.server.build import build_server
from tests.helpers import DATA, call
from tests.remote_servers import environment, local_s3

RGB = DATA / "raster" / "RGB.byte.tif"
KEYS = {
    "alpha-team": ("AKIAALPHAPROFILE0001", "alpha-secret-never-printed-0123456789"),
    "beta-team": ("AKIABETAPROFILE00002", "beta-secret-never-printed-9876543210"),
}


class Relay:
    """Forwards every request to `upstream` (host:port) and records (method, path, access key id)."""

    def __init__(self, upstream: str) -> None:
        self.seen: list[tuple[str, str, str]] = []
        #: condition headers dropped from the requests (a store that ignores them): "if-none-match", "if-match"
        self.ignored: tuple[str, ...] = ()
        #: hold PUTs of keys ending so for this many seconds (a slow upload)
        self.slow_puts: dict[str, float] = {}
        relay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                key = re.search(r"Credential=([A-Z0-9]+)/", self.headers.get("Authorization", ""))
                relay.seen.append((self.command, self.path, key.group(1) if key else ""))
                for suffix, seconds in list(relay.slow_puts.items()):  # the test thread changes it
                    if self.command == "PUT" and self.path.split("?")[0].endswith(suffix):
                        time.sleep(seconds)
                conn = http.client.HTTPConnection(upstream, timeout=30)
                dropped = ("connection", "proxy-connection", *relay.ignored)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in dropped}
                conn.request(self.command, self.path, body=body or None, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
                self.send_response(answer.status)
                for k, v in answer.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward  # noqa: N815

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def keys(self, bucket: str) -> set[str]:
        return {k for _, path, k in self.seen if path.startswith(f"/{bucket}/") or path.startswith(f"/{bucket}?")}

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _credentials_file(path: Path) -> Path:
    path.write_text(
        "".join(
            f"[{name}]\naws_access_key_id = {kid}\naws_secret_access_key = {secret}\n\n" for name, (kid, secret) in KEYS.items()
        )
        + "[sso-only]\nsso_start_url = https://example.org/start\n"
    )
    return path


@pytest.fixture(scope="module")
def buckets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Relay, object]]:
    import boto3

    home = tmp_path_factory.mktemp("profiles")
    with local_s3() as (endpoint, env):
        s3 = boto3.client(
            "s3", endpoint_url=endpoint, aws_access_key_id="setup", aws_secret_access_key="setup", region_name="us-east-1"
        )
        for bucket in ("alpha", "beta"):
            s3.create_bucket(Bucket=bucket)
            s3.upload_file(str(RGB), bucket, "RGB.byte.tif")
        relay = Relay(endpoint.removeprefix("http://"))
        # No key in the environment: only the profiles give any
        profile_env = {
            "AWS_SHARED_CREDENTIALS_FILE": str(_credentials_file(home / "credentials")),
            "AWS_CONFIG_FILE": str(home / "no-config"),
            "AWS_S3_ENDPOINT": f"127.0.0.1:{relay.port}",
            "AWS_HTTPS": "NO",
            "AWS_VIRTUAL_HOSTING": "FALSE",
            "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "",
            "AWS_SECRET_ACCESS_KEY": "",
        }
        try:
            with environment(profile_env):
                yield relay, s3
        finally:
            relay.close()
    del env


def _server(tmp_path: Path, **settings: object) -> tuple[object, object]:
    """A server with both buckets allowed, each with its profile (a workspace of its own in tmp_path)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    base: dict[str, object] = {
        "workspaces": (ws,), "workers": 1, "timeout": 60, "confirm": "never", "allow_remote": ("s3://alpha", "s3://beta"),
        "remote_profiles": (("s3://alpha", "alpha-team"), ("s3://beta", "beta-team")),
    }  # fmt: skip
    return build_server(Settings(**(base | settings)))  # type: ignore[arg-type]


@pytest.mark.parametrize("executor", ["local", "dask"])
async def test_each_bucket_is_reached_with_its_own_profiles_keys(buckets, tmp_path: Path, executor: str) -> None:
    """On the local pool and on Dask workers (which read the profiles in their set-up)."""
    if executor == "dask":
        pytest.importorskip("distributed")
    relay, s3 = buckets
    mcp, app = _server(tmp_path, executor=executor, dask_scheduler="local:1" if executor == "dask" else None)
    try:
        async with Client(mcp) as client:
            relay.seen.clear()
            err, a = await call(client, "raster_info", path="s3://alpha/RGB.byte.tif")
            assert not err and a["width"] == 791, a
            err, b = await call(client, "raster_info", path="s3://beta/RGB.byte.tif")
            assert not err and b["width"] == 791, b
            bbox = [150000, 2_700_000, 160000, 2_710_000]
            err, clip = await call(
                client, "raster_clip", input="s3://alpha/RGB.byte.tif", output="s3://beta/out/clip.tif", bbox=bbox
            )
            assert not err, clip
            err, listing = await call(client, "list_datasets", path="s3://beta")  # the bucket itself, listed
            assert not err and "s3://beta/RGB.byte.tif" in {e["path"] for e in listing["entries"]}, listing
            err, missing = await call(client, "raster_info", path="s3://alpha/missing.tif")
            assert err and missing["error"]["code"] == "not-found", missing
            everything = repr([a, b, clip, missing, listing])
    finally:
        app.executor.close()
    assert relay.keys("alpha") == {KEYS["alpha-team"][0]}, relay.seen
    assert relay.keys("beta") == {KEYS["beta-team"][0]}, relay.seen
    assert any(m == "PUT" and p.startswith("/beta/out/clip.tif") for m, p, _ in relay.seen)
    assert s3.head_object(Bucket="beta", Key="out/clip.tif")["ContentLength"] > 0  # type: ignore[attr-defined]
    for key in ("out/clip.tif", "out/clip.tif.provenance.json"):  # the output and its provenance record
        s3.delete_object(Bucket="beta", Key=key)  # type: ignore[attr-defined]
    for kid, secret in KEYS.values():
        assert kid not in everything and secret not in everything


def test_a_profile_that_cannot_be_read_or_a_location_not_allowed_stops_the_start(buckets, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with pytest.raises(ValueError, match="not among the allowed remote locations"):
        Settings(workspaces=(ws,), allow_remote=("s3://alpha",), remote_profiles=(("s3://beta", "beta-team"),))
    # GDAL applies a path's options to every path beginning with it: alpha's keys would sign alphabet's requests
    with pytest.raises(ValueError, match="bucket alphabet begins with alpha"):
        Settings(workspaces=(ws,), allow_remote=("s3://alpha", "s3://alphabet"), remote_profiles=(("s3://alpha", "a"),))
    Settings(
        workspaces=(ws,), allow_remote=("s3://alpha", "s3://alphabet"),
        remote_profiles=(("s3://alpha", "a"), ("s3://alphabet", "b")),
    )  # fmt: skip
    with pytest.raises(ValueError, match="do not go together"):  # any bucket, 'alpha-attacker' too, would be allowed
        Settings(workspaces=(ws,), allow_network=True, allow_remote=("s3://alpha",), remote_profiles=(("s3://alpha", "a"),))
    with pytest.raises(ValueError, match="profiles are per bucket"):  # s3://b/data's keys would sign s3://b/database's
        Settings(workspaces=(ws,), allow_remote=("s3://b/data",), remote_profiles=(("s3://b/data", "a"),))
    Settings(workspaces=(ws,), allow_remote=("s3://b/data",), remote_profiles=(("s3://b", "a"),))
    with pytest.raises(ValueError, match="give an s3:// location"):
        Settings(workspaces=(ws,), allow_remote=("https://example.org",), remote_profiles=(("https://example.org", "x"),))
    for name, reason in (("nobody", "no aws_access_key_id"), ("sso-only", "SSO")):
        with pytest.raises(ValueError, match=reason):
            build_server(
                Settings(
                    workspaces=(ws,), workers=1, allow_remote=("s3://alpha",), remote_profiles=(("s3://alpha", name),)
                )
            )  # fmt: skip


def test_profiles_are_read_into_path_options_and_redacted(buckets, tmp_path: Path) -> None:
    """What a worker does before it confines itself: the options of each bucket's path, and every secret redacted."""
    options = load_profiles({"remote_profiles": [["/vsis3/alpha", "alpha-team"]], "allow_remote": ["s3://alpha/data"]})
    kid, secret = KEYS["alpha-team"]
    assert ("/vsis3/alpha", "AWS_ACCESS_KEY_ID", kid) in options
    assert ("/vsis3/alpha", "AWS_SECRET_ACCESS_KEY", secret) in options
    assert ("/vsis3/alpha", "AWS_SESSION_TOKEN", "") in options  # none in the profile: not another path's either
    assert redact(f"GDAL said: {secret} / {kid}") == "GDAL said: *** / ***"
    # keys from the credentials file, the region from the config file's [profile NAME]
    config = tmp_path / "config"
    config.write_text("[profile beta-team]\nregion = eu-west-3\n")
    credentials = _credentials_file(tmp_path / "credentials")
    values = read_profile("beta-team", {"AWS_SHARED_CREDENTIALS_FILE": str(credentials), "AWS_CONFIG_FILE": str(config)})
    assert values == {
        "AWS_ACCESS_KEY_ID": KEYS["beta-team"][0],
        "AWS_SECRET_ACCESS_KEY": KEYS["beta-team"][1],
        "AWS_REGION": "eu-west-3",
    }


def test_the_command_line_takes_location_equals_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gdal_mcp.cli import build_parser, settings_from_args

    ws = tmp_path / "ws"
    ws.mkdir()
    argv = ["--workspace", str(ws), "--allow-remote", "s3://alpha", "--allow-remote", "s3://beta/geo"]
    s = settings_from_args(
        build_parser().parse_args([*argv, "--remote-profile", "s3://alpha=alpha-team", "--remote-profile", "s3://beta=b"])
    )
    assert s.remote_profiles == (("s3://alpha", "alpha-team"), ("s3://beta", "b"))
    monkeypatch.setenv("GDAL_MCP_REMOTE_PROFILE", "s3://alpha=alpha-team,s3://beta=b")
    assert settings_from_args(build_parser().parse_args(argv)).remote_profiles == s.remote_profiles
    with pytest.raises(SystemExit, match="LOCATION=NAME"):
        settings_from_args(build_parser().parse_args([*argv, "--remote-profile", "s3://alpha"]))


@pytest.mark.parametrize("ignored", ["If-None-Match", "If-Match"])
async def test_a_store_that_ignores_conditional_writes_gets_no_output(buckets, tmp_path: Path, ignored: str) -> None:
    """Attack class: silent replacement. Before its first upload to a bucket, a worker checks that the store refuses
    to create an object twice (If-None-Match: *) and to replace one in another version than named (If-Match); one
    that ignores either condition (here the relay drops the header) gets no output (unsupported), also with
    overwrite=true, an object at the output's key stays as it was, and no probe object is left."""
    relay, s3 = buckets
    s3.put_object(Bucket="beta", Key="kept/clip.tif", Body=b"someone else's")  # type: ignore[attr-defined]
    mcp, app = _server(tmp_path)
    relay.ignored = (ignored.lower(),)
    try:
        async with Client(mcp) as client:
            bbox = [150000, 2_700_000, 160000, 2_710_000]
            for key, overwrite in (("new/clip.tif", False), ("kept/clip.tif", False), ("kept/clip.tif", True)):
                err, result = await call(
                    client,
                    "raster_clip",
                    input="s3://alpha/RGB.byte.tif",
                    output=f"s3://beta/{key}",
                    bbox=bbox,
                    overwrite=overwrite,
                )
                assert err and result["error"]["code"] in ("unsupported", "already-exists"), result
                if key == "new/clip.tif" or overwrite:
                    assert result["error"]["code"] == "unsupported" and f"ignores {ignored}" in result["error"]["message"]
    finally:
        relay.ignored = ()
        app.executor.close()
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="beta").get("Contents", [])]  # type: ignore[attr-defined]
    assert "new/clip.tif" not in keys and not [k for k in keys if ".gdal-mcp-condition-probe-" in k], keys
    assert s3.get_object(Bucket="beta", Key="kept/clip.tif")["Body"].read() == b"someone else's"  # type: ignore[attr-defined]


def test_a_stop_during_an_upload_leaves_no_object(buckets, tmp_path: Path) -> None:
    """Attack class: partial output. A cancel (or the byte budget) while a file is being uploaded takes effect once the
    file is written whole, then every object of the upload is deleted: closing a half-written file would have
    completed an object with part of its bytes, under a key no upload could replace afterwards."""
    from gdal_mcp.engine import drivers, upload
    from gdal_mcp.errors import GdalMcpError

    relay, s3 = buckets
    drivers.set_path_options(load_profiles({"remote_profiles": [["/vsis3/beta", "beta-team"]], "allow_remote": []}))
    drivers.restrict()
    try:
        side, main = tmp_path / "big.tif.aux.xml", tmp_path / "big.tif"
        side.write_bytes(b"<PAMDataset/>")
        main.write_bytes(bytes(range(256)) * (20 * 4096))  # 20 MiB: written in chunks, with progress between them
        calls = []

        def cancel_midway(fraction: float, message: str = "") -> None:
            calls.append(fraction)
            if 0.2 < fraction < 0.9:
                raise GdalMcpError("cancelled", "the job was cancelled")

        targets = ["/vsis3/beta/stop/big.tif.aux.xml", "/vsis3/beta/stop/big.tif"]
        with pytest.raises(GdalMcpError, match="cancelled"):
            upload.upload([str(side), str(main)], targets, cancel_midway)
        assert len(calls) >= 2
        assert "Contents" not in s3.list_objects_v2(Bucket="beta", Prefix="stop/")  # type: ignore[attr-defined]
    finally:
        drivers.set_path_options([])


async def test_a_worker_killed_midway_through_an_upload_leaves_no_object(buckets, tmp_path: Path) -> None:
    """Attack class: partial output. A PNG's georeferencing goes in a side file uploaded before the PNG; the worker is
    killed (the call's time limit) while the PNG's PUT hangs: the server deletes the side object that upload had
    created, from the journal the worker's uploading thread keeps beside the output's directory."""
    relay, s3 = buckets
    mcp, app = _server(tmp_path, timeout=6)
    relay.slow_puts[".png"] = 30
    try:
        async with Client(mcp) as client:
            err, result = await call(
                client, "raster_convert", input="s3://alpha/RGB.byte.tif", output="s3://beta/killed/rgb.png", format="PNG"
            )
            assert err and result["error"]["code"] == "timeout", result
    finally:
        relay.slow_puts.clear()
        app.executor.close()
    assert any(m == "PUT" and p.startswith("/beta/killed/rgb.png.aux.xml") for m, p, _ in relay.seen), relay.seen
    assert "Contents" not in s3.list_objects_v2(Bucket="beta", Prefix="killed/")  # type: ignore[attr-defined]
    assert not list(tmp_path.rglob("*.uploaded"))
