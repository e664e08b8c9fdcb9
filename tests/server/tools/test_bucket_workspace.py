"""A workspace in a bucket (`--workspace s3://bucket/prefix`, issue 27) through an MCP client, on a local S3 (moto):
relative paths name its objects for every tool, outputs are uploaded (never replacing), list_datasets, the catalog and
file resources and the HTTP download read it, and nothing outside its prefix (or on the local disk) is reachable."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import rasterio
from fastmcp import Client
from rasterio.transform import from_origin

from gdal_mcp.config import Settings
from gdal_mcp.server.build import build_server
from tests.helpers import DATA, call
from tests.remote_servers import environment, local_s3

RGB = DATA / "raster" / "RGB.byte.tif"
SCENES = ("scenes/2024-06/a.tif", "scenes/2024-06/b.tif", "scenes/2024-07/c.tif", "scenes/2024-06/notes/d.tif")


@pytest.fixture(scope="module")
def bucket(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], object, Path]]:
    import boto3

    local = tmp_path_factory.mktemp("bucket-local")
    with local_s3() as (endpoint, env), environment(env):
        s3 = boto3.client("s3", endpoint_url=endpoint)
        s3.create_bucket(Bucket="team")
        s3.upload_file(str(RGB), "team", "ws/raster/RGB.byte.tif")
        s3.upload_file(str(DATA / "vector" / "test_gpx.gpx"), "team", "ws/vector/tracks.gpx")
        s3.upload_file(str(RGB), "team", "private/RGB.byte.tif")
        for part in ("shp", "shx", "dbf", "prj", "cpg"):  # a shapefile: listed once, its parts not as datasets
            s3.upload_file(str(DATA / "vector" / f"box.{part}"), "team", f"ws/vector/box.{part}")
        for i, name in enumerate(SCENES):  # three single-band scenes on one grid, and one that no pattern below matches
            path = local / name.replace("/", "_")
            profile = {"driver": "GTiff", "width": 40, "height": 30, "count": 1, "dtype": "float32", "crs": "EPSG:32633",
                       "transform": from_origin(500000, 4000000, 10, 10)}  # fmt: skip
            with rasterio.open(path, "w", **profile) as ds:
                ds.write(np.random.default_rng(i).random((1, 30, 40), dtype=np.float32) * 100)
            s3.upload_file(str(path), "team", f"ws/{name}")
        yield env, s3, local


@pytest.fixture(scope="module")
def server(bucket) -> Iterator[tuple]:
    mcp, app = build_server(Settings(workspaces=(), bucket="s3://team/ws", workers=1, timeout=60, confirm="never"))
    yield mcp, app
    app.executor.close()


async def test_tools_read_and_write_the_bucket_by_relative_paths(server, bucket) -> None:
    env, s3, local = bucket
    async with Client(server[0]) as client:
        err, listing = await call(client, "list_datasets")
        assert not err, listing
        kinds = {e["path"]: e["kind"] for e in listing["entries"]}
        assert kinds == {
            "raster/RGB.byte.tif": "raster",
            "vector/tracks.gpx": "vector",
            "vector/box.shp": "vector",
            **dict.fromkeys(SCENES, "raster"),
        }
        err, info = await call(client, "raster_info", path="raster/RGB.byte.tif")
        assert not err and info["path"] == "raster/RGB.byte.tif" and info["remote"]["bytes"] > 0
        with rasterio.open(RGB) as ds:
            assert (info["width"], info["height"]) == (ds.width, ds.height)
            bbox = [ds.bounds.left + 3000, ds.bounds.bottom + 3000, ds.bounds.left + 12000, ds.bounds.bottom + 12000]
        err, vinfo = await call(client, "vector_info", path="vector/tracks.gpx")
        assert not err and vinfo["layer_count"] == 5
        err, clip = await call(client, "raster_clip", input="raster/RGB.byte.tif", output="out/clip.tif", bbox=bbox)
        assert not err, clip
        assert clip["output"] == "out/clip.tif" and clip["uri"] == "gdal-mcp://files/out/clip.tif"
        body = s3.get_object(Bucket="team", Key="ws/out/clip.tif")["Body"].read()
        # the same job on the local file gives the same bytes
        mcp_local, app_local = build_server(Settings(workspaces=(local,), workers=1, timeout=60, confirm="never"))
        (local / "RGB.byte.tif").write_bytes(RGB.read_bytes())
        try:
            async with Client(mcp_local) as local_client:
                err, _ = await call(local_client, "raster_clip", input="RGB.byte.tif", output="clip.tif", bbox=bbox)
                assert not err
        finally:
            app_local.executor.close()
        assert body == (local / "clip.tif").read_bytes()
        # the resource and the catalog read the bucket
        contents = await client.read_resource("gdal-mcp://files/out/clip.tif")
        assert contents[0].blob is not None
        import base64

        assert base64.b64decode(contents[0].blob) == body
        catalog = json.loads((await client.read_resource("gdal-mcp://catalog"))[0].text)
        assert {e["path"] for e in catalog["entries"]} == {
            "raster/RGB.byte.tif", "vector/tracks.gpx", "vector/box.shp", "out/clip.tif", *SCENES
        }  # fmt: skip
        # never replaced without overwrite=true
        err, again = await call(client, "raster_clip", input="raster/RGB.byte.tif", output="out/clip.tif", bbox=bbox)
        assert err and again["error"]["code"] == "already-exists"
        assert s3.get_object(Bucket="team", Key="ws/out/clip.tif")["Body"].read() == body


@pytest.mark.parametrize(
    "tool,args,code",
    [
        ("raster_info", {"path": "../private/RGB.byte.tif"}, "invalid-argument"),  # '..' out of the prefix
        ("raster_info", {"path": "s3://team/private/RGB.byte.tif"}, "out-of-root"),
        ("raster_info", {"path": "/etc/passwd"}, "out-of-root"),  # no local workspace
        ("raster_info", {"path": "missing.tif"}, "not-found"),
        ("list_datasets", {"path": "s3://team/private"}, "out-of-root"),
        ("raster_calc", {"input_pattern": "nowhere/*.tif", "expression": "median(S)", "output": "m.tif"}, "not-found"),
        # the prefix itself as the output: its side files and folder would lie beside the prefix, outside it
        ("raster_convert", {"input": "raster/RGB.byte.tif", "output": "./"}, "invalid-argument"),
        ("raster_convert", {"input": "raster/RGB.byte.tif", "output": ".", "format": "PNG"}, "invalid-argument"),
        ("raster_convert", {"input": "raster/RGB.byte.tif", "output": "s3://team/ws"}, "invalid-argument"),
        ("raster_calc", {"input_pattern": "../*.tif", "expression": "median(S)", "output": "m.tif"}, "out-of-root"),
    ],
)
async def test_nothing_outside_the_prefix_and_no_silent_local_fallback(server, bucket, tool, args, code) -> None:
    env, s3, _ = bucket
    async with Client(server[0]) as client:
        err, content = await call(client, tool, **args)
    assert err and content["error"]["code"] == code, content
    assert s3.head_object(Bucket="team", Key="ws/raster/RGB.byte.tif")["ContentLength"] == RGB.stat().st_size
    for secret in (env["AWS_SECRET_ACCESS_KEY"], env["AWS_ACCESS_KEY_ID"]):
        assert secret not in json.dumps(content)


async def test_the_http_download_streams_an_object(server, bucket) -> None:
    from starlette.requests import Request

    from gdal_mcp.server.web.downloads import file_response

    _, s3, _ = bucket
    app = server[1]
    scope = {"type": "http", "method": "GET", "path": "/files/raster/RGB.byte.tif", "headers": [], "query_string": b""}
    scope["path_params"] = {"path": "raster/RGB.byte.tif"}
    response = await file_response(app, Request(scope))
    assert response.status_code == 200 and response.headers["content-length"] == str(RGB.stat().st_size)
    body = b"".join([chunk async for chunk in response.body_iterator])  # type: ignore[attr-defined]
    assert body == RGB.read_bytes()
    assert np.frombuffer(body[:4], dtype=np.uint8).tolist() == list(RGB.read_bytes()[:4])


OGR_VRT = (
    "<OGRVRTDataSource><OGRVRTLayer name='x'><SrcDataSource>/vsis3/team/private/secret.csv</SrcDataSource>"
    "<SrcLayer>secret</SrcLayer></OGRVRTLayer></OGRVRTDataSource>"
)


async def test_a_remote_dataset_that_names_other_files_is_refused(server, bucket) -> None:
    """Reading past the prefix through a dataset that names other files (a red-team run read another bucket's object
    through an OGR VRT uploaded as 'evil.csv'): VRT-like formats are refused when remote, whatever their name."""
    env, s3, _ = bucket
    s3.put_object(Bucket="team", Key="private/secret.csv", Body=b"name,value\nsecret,TOPSECRET\n")
    s3.put_object(Bucket="team", Key="ws/stage/evil.vrt", Body=OGR_VRT.encode())
    s3.put_object(Bucket="team", Key="ws/stage/evil.csv", Body=OGR_VRT.encode())  # content, not name, decides
    raster_vrt = (
        '<VRTDataset rasterXSize="1" rasterYSize="1"><VRTRasterBand dataType="Byte" band="1"><SimpleSource>'
        '<SourceFilename relativeToVRT="0">gdal_mcp/__init__.py</SourceFilename></SimpleSource></VRTRasterBand></VRTDataset>'
    )
    s3.put_object(Bucket="team", Key="ws/stage/local.vrt", Body=raster_vrt.encode())
    async with Client(server[0]) as client:
        for tool, args in (
            ("vector_query", {"input": "stage/evil.vrt"}),
            ("vector_query", {"input": "stage/evil.csv"}),
            ("vector_info", {"path": "stage/evil.csv"}),
            ("raster_stats", {"input": "stage/local.vrt"}),
        ):
            err, content = await call(client, tool, **args)
            assert err and content["error"]["code"] == "out-of-root", (tool, args, content)
            assert "TOPSECRET" not in json.dumps(content)
        err, listing = await call(client, "list_datasets", path="stage")
        assert not err and all(e["kind"] == "other" for e in listing["entries"]), listing
    for key in ("ws/stage/evil.vrt", "ws/stage/evil.csv", "ws/stage/local.vrt", "private/secret.csv"):
        s3.delete_object(Bucket="team", Key=key)


async def test_beside_a_bucket_a_local_output_keeps_its_full_path(bucket, tmp_path: Path) -> None:
    """With a bucket workspace, relative names are its objects: a local output shown as 'mixed.tif' would name the
    object of that name (a red-team run read the object back through the local output's uri)."""
    env, s3, _ = bucket
    local = tmp_path / "local"
    local.mkdir()
    (local / "RGB.byte.tif").write_bytes(RGB.read_bytes())
    mcp, app = build_server(Settings(workspaces=(local,), bucket="s3://team/ws", workers=1, timeout=60, confirm="never"))
    try:
        async with Client(mcp) as client:
            err, out = await call(client, "raster_convert", input=str(local / "RGB.byte.tif"), output=str(local / "mixed.tif"))
            assert not err, out
            assert out["output"] == str(local / "mixed.tif") and out["uri"].endswith(str(local / "mixed.tif"))
            contents = await client.read_resource(out["uri"])
            import base64

            assert base64.b64decode(contents[0].blob) == (local / "mixed.tif").read_bytes()
    finally:
        app.executor.close()


async def test_input_pattern_matches_object_names(server, bucket) -> None:
    """raster_calc input_pattern="scenes/2024-06/*.tif" in a bucket workspace: the objects the glob matches (one level:
    not notes/d.tif, not 2024-07), reduced per pixel; equal to numpy's mean of the same pixels."""
    env, s3, local = bucket
    async with Client(server[0]) as client:
        err, result = await call(
            client, "raster_calc", input_pattern="scenes/2024-06/*.tif", expression="mean(S)", output="out/june_mean.tif"
        )
        assert not err, result
        # bands named by a ':band' suffix: the object itself is identified, not a key 'RGB.byte.tif:1' that is not there
        err, bands = await call(
            client,
            "raster_calc",
            inputs={"R": "raster/RGB.byte.tif:1", "G": "raster/RGB.byte.tif:2"},
            expression="R + G",
            output="out/bands.tif",
        )
        assert not err and bands["remote"]["files"] == 1, bands
        # a mosaic of remote inputs opens each without probing ~40 side-file names (a few requests per input, not ~100)
        err, mosaic = await call(client, "raster_mosaic", input_pattern="scenes/2024-06/*.tif", output="out/june_mosaic.tif")
        assert not err and mosaic["remote"]["requests"] <= 12 * 2, mosaic
    path = local / "june_mean.tif"
    path.write_bytes(s3.get_object(Bucket="team", Key="ws/out/june_mean.tif")["Body"].read())
    stack = []
    for name in SCENES[:2]:
        with rasterio.open(local / name.replace("/", "_")) as ds:
            stack.append(ds.read(1).astype(np.float64))
    with rasterio.open(path) as ds:
        np.testing.assert_allclose(ds.read(1), np.mean(stack, axis=0), rtol=1e-6)


@pytest.mark.parametrize(
    "tool,args,hint",
    [
        ("raster_overviews", {"input": "raster/RGB.byte.tif", "external": True}, "external=false"),
        ("workspace_copy", {"input": "raster/RGB.byte.tif", "output": "/tmp/RGB.byte.tif"}, "raster_convert"),
    ],
)
async def test_what_a_bucket_workspace_does_not_do_says_what_to_do_instead(server, tool, args, hint) -> None:
    async with Client(server[0]) as client:
        err, content = await call(client, tool, **args)
    assert err and content["error"]["code"] == "unsupported" and hint in content["error"]["message"], content


async def test_a_side_file_in_the_bucket_is_read_with_its_dataset(server, bucket) -> None:
    """A PNG output keeps its CRS in its .aux.xml: both are uploaded, and reading the PNG back finds the side file
    (GDAL lists the folder once instead of probing side-file names), so its CRS and transform are the source's."""
    async with Client(server[0]) as client:
        err, out = await call(client, "raster_convert", input="raster/RGB.byte.tif", output="png/rgb.png", format="PNG")
        assert not err, out
        err, info = await call(client, "raster_info", path="png/rgb.png")
    assert not err, info
    with rasterio.open(RGB) as ref:
        assert info["crs"]["epsg"] == ref.crs.to_epsg() and info["transform"] == list(ref.transform.to_gdal())
    assert info["remote"]["requests"] <= 4, info["remote"]  # the listing, not ~40 probes
