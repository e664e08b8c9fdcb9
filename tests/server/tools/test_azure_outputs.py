"""Outputs to Azure Blob Storage (issue 27: outputs to object storage in the allow-list, az:// as well as s3://)
through an MCP client, on a local Azure Blob Storage (Azurite) reached only through the workers' egress proxy:
written locally, uploaded whole, byte-identical to the same job's local output; never replacing a blob without
overwrite=true and the approved version; nothing outside the allowed prefix; the account key in no output or log."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyogrio
import pytest
from fastmcp import Client
from mcp.types import ElicitResult

from gdal_mcp.config import Settings
from gdal_mcp.server.build import build_server
from tests.helpers import DATA, call
from tests.remote_servers import AZURITE_KEY, environment, local_azurite

RGB = DATA / "raster" / "RGB.byte.tif"
BBOX = [101985.0, 2611485.0, 110985.0, 2620485.0]  # inside RGB.byte.tif (EPSG:32618)


@pytest.fixture(scope="module")
def azure() -> Iterator[Any]:
    """Azurite with container 'cont': RGB.byte.tif at data/in/RGB.byte.tif and one blob outside the allowed prefix."""
    from azure.storage.blob import BlobServiceClient

    with local_azurite() as (_, env), environment(env):
        service = BlobServiceClient.from_connection_string(env["AZURE_STORAGE_CONNECTION_STRING"])
        container = service.create_container("cont")
        container.upload_blob("data/in/RGB.byte.tif", RGB.read_bytes())
        container.upload_blob("private/RGB.byte.tif", RGB.read_bytes())
        yield container


def _blob(container: Any, key: str) -> bytes:
    return bytes(container.download_blob(key).readall())


class Person:
    """Approves every question; `meanwhile` runs while the person decides (someone else writing)."""

    def __init__(self, meanwhile: Any = None) -> None:
        self.shown: list[str] = []
        self.meanwhile = meanwhile

    async def __call__(self, message: str, response_type: Any, params: Any, context: Any) -> ElicitResult:
        self.shown.append(message)
        if self.meanwhile is not None:
            self.meanwhile()
            self.meanwhile = None
        return ElicitResult(action="accept", content={"confirm": True})


async def test_outputs_to_az_are_uploaded_whole_never_replacing_and_equal_to_local_ones(
    azure: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "RGB.byte.tif").write_bytes(RGB.read_bytes())
    audit = tmp_path / "audit.jsonl"
    mcp, app = build_server(
        Settings(workspaces=(ws,), workers=1, timeout=60, confirm="never", allow_remote=("az://cont/data",), audit_log=audit)
    )
    try:
        async with Client(mcp) as client:
            err, local = await call(client, "raster_clip", input="RGB.byte.tif", output="clip.tif", bbox=BBOX)
            assert not err, local
            # an az:// input, and an az:// output: the same bytes as the local job's
            for source, output in (
                ("RGB.byte.tif", "az://cont/data/out/clip.tif"),
                ("az://cont/data/in/RGB.byte.tif", "/vsiaz/cont/data/out/clip2.tif"),
            ):
                err, up = await call(client, "raster_clip", input=source, output=output, bbox=BBOX)
                assert not err, up
                assert up["uri"] == "az://cont/data/out/" + output.rsplit("/", 1)[1], up
            assert _blob(azure, "data/out/clip.tif") == _blob(azure, "data/out/clip2.tif") == (ws / "clip.tif").read_bytes()
            # read back through GDAL's /vsiaz/: the output is a raster with the local output's pixels
            err, info = await call(client, "raster_info", path="az://cont/data/out/clip.tif")
            err_local, info_local = await call(client, "raster_info", path="clip.tif")
            assert not err and not err_local, info
            assert (info["width"], info["height"], info["bounds"]) == (
                info_local["width"],
                info_local["height"],
                info_local["bounds"],
            )
            # never replaced without overwrite=true: already-exists, the blob as it was
            wider = [BBOX[0], BBOX[1], BBOX[2] + 3000, BBOX[3]]
            err, again = await call(client, "raster_clip", input="RGB.byte.tif", output="az://cont/data/out/clip.tif", bbox=wider)
            assert err and again["error"]["code"] == "already-exists", again
            assert _blob(azure, "data/out/clip.tif") == (ws / "clip.tif").read_bytes()
            # overwrite=true replaces it (--confirm never: in the version listed just before)
            err, over = await call(
                client, "raster_clip", input="RGB.byte.tif", output="az://cont/data/out/clip.tif", bbox=wider, overwrite=True
            )
            assert not err, over
            err, _ = await call(client, "raster_clip", input="RGB.byte.tif", output="wider.tif", bbox=wider)
            assert _blob(azure, "data/out/clip.tif") == (ws / "wider.tif").read_bytes()
            # a dataset of several files (a shapefile): every part uploaded, read back by pyogrio through GDAL
            for part in ("shp", "shx", "dbf", "prj", "cpg"):
                (ws / f"box.{part}").write_bytes((DATA / "vector" / f"box.{part}").read_bytes())
            err, shp = await call(client, "vector_convert", input="box.shp", output="az://cont/data/out/box.shp")
            assert not err, shp
            names = {b.name for b in azure.list_blobs(name_starts_with="data/out/box.")}
            assert names == {f"data/out/box.{p}" for p in ("shp", "shx", "dbf", "prj", "cpg", "shp.provenance.json")}, names
            read = pyogrio.read_dataframe("/vsiaz/cont/data/out/box.shp")
            original = pyogrio.read_dataframe(ws / "box.shp")
            assert read.crs == original.crs and list(read.columns) == list(original.columns)
            assert read.geometry.geom_equals(original.geometry).all() and len(read) == len(original)
            # list_datasets of the prefix: the outputs, with their kinds, as az:// URLs
            err, listed = await call(client, "list_datasets", path="az://cont/data/out")
            assert not err, listed
            kinds = {e["path"]: e["kind"] for e in listed["entries"]}
            assert kinds["az://cont/data/out/clip.tif"] == "raster" and kinds["az://cont/data/out/box.shp"] == "vector", kinds
            err, refused = await call(client, "list_datasets", path="az://cont/private")
            assert err and refused["error"]["code"] == "out-of-root", refused
            # outside the allowed prefix, and a container not allowed: out-of-root in every spelling, nothing written
            for outside in ("az://cont/private/clip.tif", "/vsiaz/cont/private/x.tif", "az://other/data/x.tif"):
                err, refused = await call(client, "raster_clip", input="RGB.byte.tif", output=outside, bbox=BBOX)
                assert err and refused["error"]["code"] == "out-of-root", refused
            assert not list(azure.list_blobs(name_starts_with="private/x")) and not list(
                azure.list_blobs(name_starts_with="private/clip")
            )
            err, refused = await call(client, "raster_info", path="az://cont/private/RGB.byte.tif")
            assert err and refused["error"]["code"] == "out-of-root", refused
            assert not [p for p in ws.iterdir() if p.name.startswith(".gdal-mcp-tmp")]
    finally:
        app.executor.close()
    logged = capfd.readouterr()
    for text in (logged.out, logged.err, audit.read_text()):
        assert AZURITE_KEY not in text and AZURITE_KEY[:20] not in text


async def test_a_replace_binds_to_the_blob_version_the_person_saw(azure: Any, tmp_path: Path) -> None:
    """Attack class: replacing data the person did not see. overwrite=true on a blob asks the person with its size; a
    blob written by someone else while the person decides voids the yes (asked again, about the new version); a
    workspace_delete is asked and deletes it. Below the tools: an upload naming a version that changed since is a
    conflict, and the other writer's bytes stay."""
    from gdal_mcp.engine import objects, upload
    from gdal_mcp.errors import GdalMcpError

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "RGB.byte.tif").write_bytes(RGB.read_bytes())
    azure.upload_blob("data/race/out.tif", b"first", overwrite=True)
    theirs = b"someone else's bytes"
    person = Person(meanwhile=lambda: azure.upload_blob("data/race/out.tif", theirs, overwrite=True))
    settings = Settings(workspaces=(ws,), workers=1, timeout=60, confirm="destructive", allow_remote=("az://cont/data",))
    mcp, app = build_server(settings)
    try:
        async with Client(mcp, elicitation_handler=person) as client:
            err, out = await call(client, "raster_clip", input="RGB.byte.tif", output="az://cont/race.tif", bbox=BBOX)
            assert err and out["error"]["code"] == "out-of-root", out
            err, out = await call(
                client, "raster_clip", input="RGB.byte.tif", output="az://cont/data/race/out.tif", bbox=BBOX, overwrite=True
            )
            assert not err, out
            assert len(person.shown) == 2 and "5 bytes" in person.shown[0] and f"{len(theirs)} bytes" in person.shown[1]
            err, local = await call(client, "raster_clip", input="RGB.byte.tif", output="race.tif", bbox=BBOX)
            assert not err and _blob(azure, "data/race/out.tif") == (ws / "race.tif").read_bytes()
            err, copied = await call(
                client, "workspace_copy", input="az://cont/data/race/out.tif", output="az://cont/data/race/copy.tif"
            )
            assert not err and _blob(azure, "data/race/copy.tif") == (ws / "race.tif").read_bytes(), copied
            for key in ("out.tif", "copy.tif"):
                err, gone = await call(client, "workspace_delete", input=f"az://cont/data/race/{key}")
                assert not err, gone
            assert len(person.shown) == 4 and not list(azure.list_blobs(name_starts_with="data/race/")), person.shown
    finally:
        app.executor.close()
    azure.upload_blob("data/race/v.tif", b"approved version", overwrite=True)
    approved = objects.etag("/vsiaz/cont/data/race/v.tif")
    azure.upload_blob("data/race/v.tif", theirs, overwrite=True)
    with pytest.raises(GdalMcpError) as e:
        upload.upload([str(ws / "race.tif")], ["/vsiaz/cont/data/race/v.tif"], replace={"/vsiaz/cont/data/race/v.tif": approved})
    assert e.value.code == "conflict"
    assert _blob(azure, "data/race/v.tif") == theirs


def test_a_large_blob_is_committed_whole_and_never_replaces_one(azure: Any, tmp_path: Path) -> None:
    """Above the SDK's single-put size the upload is blocks and one Put Block List: with an existing blob at the key
    it is refused (already-exists) and the blob is unchanged; a new key gets the whole file."""
    from gdal_mcp.engine import upload
    from gdal_mcp.errors import GdalMcpError

    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(70 * 1024 * 1024))  # the SDK's max_single_put_size is 64 MiB
    azure.upload_blob("data/big/kept.bin", b"kept", overwrite=True)
    with pytest.raises(GdalMcpError) as e:
        upload.upload([str(big)], ["/vsiaz/cont/data/big/kept.bin"])
    assert e.value.code == "already-exists"
    assert _blob(azure, "data/big/kept.bin") == b"kept"
    assert upload.upload([str(big)], ["/vsiaz/cont/data/big/new.bin"]) == ["/vsiaz/cont/data/big/new.bin"]
    assert _blob(azure, "data/big/new.bin") == big.read_bytes()
