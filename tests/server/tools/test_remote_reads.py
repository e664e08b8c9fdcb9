"""Remote COGs through an MCP client (issue 27): read by windows over HTTP range requests from a server on 127.0.0.1,
each result reporting the requests and bytes GDAL fetched (checked against that server's own log), the same
answers as on the local copy, the allow-list, and the per-job byte budget."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import rasterio
from fastmcp import Client
from rasterio.windows import from_bounds

from gdal_mcp.config import Settings
from gdal_mcp.server.build import build_server
from tests.helpers import call
from tests.remote_servers import RangeServer, environment, local_s3

SIZE = 4096


def write_cog(path: Path) -> None:
    """A 4096² uint16 COG (64 MB of pixels, 512-px tiles, overviews) whose pixels compress little, so a read by
    windows is far from reading the file."""
    rng = np.random.default_rng(27)
    transform = rasterio.transform.from_origin(500000, 4000000 + SIZE * 10, 10, 10)
    src = path.with_suffix(".src.tif")
    with rasterio.open(
        src,
        "w",
        driver="GTiff",
        width=SIZE,
        height=SIZE,
        count=1,
        dtype="uint16",
        crs="EPSG:32633",
        transform=transform,
        tiled=True,
        blockxsize=512,
        blockysize=512,
    ) as ds:
        for row in range(0, SIZE, 512):
            ds.write(rng.integers(0, 4000, size=(1, 512, SIZE), dtype=np.uint16), window=((row, row + 512), (0, SIZE)))
    from rasterio.shutil import copy

    copy(src, path, driver="COG", compress="deflate", blocksize=512)
    src.unlink()


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RangeServer, Path, Path]]:
    served = tmp_path_factory.mktemp("served")
    write_cog(served / "big.tif")
    ws = tmp_path_factory.mktemp("ws-remote")
    with RangeServer(served) as server:
        yield server, served / "big.tif", ws


@pytest.fixture(scope="module")
def server(remote: tuple[RangeServer, Path, Path]) -> Iterator[tuple]:
    http, _, ws = remote
    mcp, app = build_server(
        Settings(
            workspaces=(ws,),
            workers=1,
            timeout=60,
            confirm="never",
            allow_remote=(f"{http.url}/cogs-allowed", f"{http.url}/big.tif"),
        )
    )
    yield mcp, app
    app.executor.close()


async def test_info_stats_and_clip_of_a_remote_cog_fetch_a_few_percent_reported_exactly(server, remote) -> None:
    http, local, ws = remote
    url = f"{http.url}/big.tif"
    size = local.stat().st_size
    async with Client(server[0]) as client:
        http.log.clear()
        err, info = await call(client, "raster_info", path=url)
        assert not err, info
        assert (info["width"], info["height"], info["driver"]) == (SIZE, SIZE, "GTiff")
        requests, sent = http.log.sent()
        assert info["remote"]["bytes"] == sent and 0 < sent <= 0.05 * size
        # GDAL also counts the sidecar probes (big.tif.aux.xml …) the egress proxy refused: they never reach the server
        assert 1 <= requests <= info["remote"]["requests"]

        with rasterio.open(local) as ds:
            left, top = ds.bounds.left, ds.bounds.top
            bbox = [left + 5000, top - 9000, left + 9000, top - 5000]  # 400 x 400 pixels
            window = from_bounds(*bbox, ds.transform).round_offsets().round_lengths()
            pixels = ds.read(1, window=window).astype(np.float64)
        http.log.clear()
        err, stats = await call(client, "raster_stats", input=url, bbox=bbox)
        assert not err, stats
        band = stats["bands"][0]
        assert band["min"] == pixels.min() and band["max"] == pixels.max()
        assert band["mean"] == pytest.approx(pixels.mean(), rel=1e-12)
        _, sent = http.log.sent()
        assert stats["remote"]["bytes"] == sent and 0 < sent <= 0.05 * size

        http.log.clear()
        err, clip = await call(client, "raster_clip", input=url, output="clip.tif", bbox=bbox)
        assert not err, clip
        _, sent = http.log.sent()
        assert clip["remote"]["bytes"] == sent and 0 < sent <= 0.05 * size
        # the same job on the local copy gives the same pixels and grid
        (ws / "local.tif").write_bytes(local.read_bytes())
        err, local_clip = await call(client, "raster_clip", input="local.tif", output="clip-local.tif", bbox=bbox)
        assert not err and local_clip.get("remote") is None
        with rasterio.open(ws / "clip.tif") as a, rasterio.open(ws / "clip-local.tif") as b:
            assert a.transform == b.transform and a.crs == b.crs and np.array_equal(a.read(), b.read())
        (ws / "local.tif").unlink()


@pytest.mark.parametrize(
    "path",
    [
        "{url}/other.tif",  # same host, a path outside the allowed ones
        "{url}/cogs-allowed-not/x.tif",  # a sibling sharing the allowed prefix's text
        "/vsicurl/{url}/other.tif",
        "/vsicurl_streaming/{url}/other.tif",
        "http://localhost:{port}/big.tif",  # the same server by another name
        "http://127.0.0.1:1/big.tif",
        "/vsizip//vsicurl/{url}/other.zip/a.tif",
    ],
)
async def test_a_remote_path_outside_the_list_is_refused_in_every_syntax(server, remote, path: str) -> None:
    http, _, _ = remote
    async with Client(server[0]) as client:
        http.log.clear()
        err, content = await call(client, "raster_info", path=path.format(url=http.url, port=http.port))
        assert err and content["error"]["code"] == "out-of-root", content
        assert http.log.sent() == (0, 0)  # refused before any request


def write_catalog(folder: Path, padding: int) -> None:
    """A static catalog of one item whose properties carry `padding` bytes."""
    folder.mkdir(exist_ok=True)
    link = {"rel": "item", "href": "./item.json", "type": "application/json"}
    catalog = {"type": "Catalog", "stac_version": "1.0.0", "id": "c", "description": "d", "links": [link]}
    item = {
        "type": "Feature", "stac_version": "1.0.0", "id": "i", "bbox": [0, 0, 1, 1],
        "geometry": {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 1], [0, 0]]]},
        "properties": {"datetime": "2024-06-01T00:00:00Z", "pad": "x" * padding}, "links": [], "assets": {},
    }  # fmt: skip
    (folder / "catalog.json").write_text(json.dumps(catalog))
    (folder / "item.json").write_text(json.dumps(item))


async def test_a_job_over_the_byte_budget_stops_with_resource_limit(remote) -> None:
    http, local, ws = remote
    write_catalog(local.parent / "stac", 1_000_000)
    write_catalog(local.parent / "stac-small", 1000)
    mcp, app = build_server(
        Settings(workspaces=(ws,), workers=1, timeout=60, confirm="never", allow_remote=(http.url,), max_remote_bytes=300_000)
    )
    try:
        async with Client(mcp) as client:
            err, content = await call(client, "raster_stats", input=f"{http.url}/big.tif")  # every pixel: ~30 MB
            assert err and content["error"]["code"] == "resource-limit", content
            assert "limit" in content["error"]["message"] and "bbox" in content["error"]["message"]
            # a small read still fits, on a fresh worker
            err, info = await call(client, "raster_info", path=f"{http.url}/big.tif")
            assert not err and 0 < info["remote"]["bytes"] <= 300_000
            # STAC documents count too (Python's HTTP client, not GDAL): a catalog whose item is 1 MB
            err, content = await call(client, "stac_search", catalog=f"{http.url}/stac/catalog.json")
            assert err and content["error"]["code"] == "resource-limit", content
            err, small = await call(client, "stac_search", catalog=f"{http.url}/stac-small/catalog.json")
            assert not err and small["returned"] == 1 and 0 < small["remote"]["bytes"] < 300_000, small
    finally:
        app.executor.close()


@pytest.fixture(scope="module")
def s3(remote: tuple[RangeServer, Path, Path]) -> Iterator[tuple[dict[str, str], Path]]:
    """A local S3 holding the COG at s3://bucket/data/big.tif (and one object outside the allowed prefix)."""
    import boto3

    _, local, _ = remote
    with local_s3() as (endpoint, env), environment(env):
        client = boto3.client("s3", endpoint_url=endpoint)
        client.create_bucket(Bucket="bucket")
        client.upload_file(str(local), "bucket", "data/big.tif")
        client.upload_file(str(local), "bucket", "private/big.tif")
        yield env, local


async def test_s3_input_matches_the_same_job_on_local_files_and_no_credential_leaks(
    s3, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    env, local = s3
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "local.tif").write_bytes(local.read_bytes())
    audit = tmp_path / "audit.jsonl"
    mcp, app = build_server(
        Settings(workspaces=(ws,), workers=1, timeout=60, confirm="never", allow_remote=("s3://bucket/data",), audit_log=audit)
    )
    try:
        async with Client(mcp) as client:
            with rasterio.open(local) as ds:
                left, top = ds.bounds.left, ds.bounds.top
            bbox = [left + 20480, top - 25600, left + 23480, top - 22600]  # 300 x 300 pixels inside one 512-px tile
            results = {}
            for name, path in (
                ("s3", "s3://bucket/data/big.tif"),
                ("vsis3", "/vsis3/bucket/data/big.tif"),
                ("local", "local.tif"),
            ):
                err, results[name] = await call(client, "raster_clip", input=path, output=f"clip-{name}.tif", bbox=bbox)
                assert not err, results[name]
            assert 0 < results["s3"]["remote"]["bytes"] <= 0.05 * local.stat().st_size and results["local"].get("remote") is None
            # byte-identical outputs: the same job on S3 and on the local file
            assert (
                (ws / "clip-s3.tif").read_bytes() == (ws / "clip-local.tif").read_bytes() == (ws / "clip-vsis3.tif").read_bytes()
            )
            err, stats = await call(client, "raster_stats", input="s3://bucket/data/big.tif", bbox=bbox)
            err_local, stats_local = await call(client, "raster_stats", input="local.tif", bbox=bbox)
            assert not err and not err_local and stats["bands"] == stats_local["bands"]
            for outside in (
                "s3://bucket/private/big.tif",
                "/vsis3/bucket/private/big.tif",
                "s3://bucket/data/../private/big.tif",
            ):
                err, content = await call(client, "raster_info", path=outside)
                assert err and content["error"]["code"] in ("out-of-root", "invalid-argument"), content
            # an output in the bucket: written locally, uploaded whole, the same bytes as the local job's
            err, up = await call(client, "raster_clip", input="local.tif", output="s3://bucket/data/out/clip.tif", bbox=bbox)
            assert not err and up["output"] == up["uri"] == "s3://bucket/data/out/clip.tif", up
            import boto3

            s3c = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"])
            body = s3c.get_object(Bucket="bucket", Key="data/out/clip.tif")["Body"].read()
            assert body == (ws / "clip-local.tif").read_bytes()
            # never replaced: a second job to the same key fails and the object stays; no temporary file is left
            err, again = await call(
                client,
                "raster_clip",
                input="local.tif",
                output="s3://bucket/data/out/clip.tif",
                bbox=bbox[:2] + [bbox[2] + 100, bbox[3]],
            )
            assert err and again["error"]["code"] == "already-exists", again
            assert s3c.get_object(Bucket="bucket", Key="data/out/clip.tif")["Body"].read() == body
            wider = bbox[:2] + [bbox[2] + 600, bbox[3]]
            err, over = await call(
                client, "raster_clip", input="local.tif", output="s3://bucket/data/out/clip.tif", bbox=wider, overwrite=True
            )
            assert not err, over  # overwrite=true replaces it (--confirm never: nobody is asked), in the version listed
            err, _ = await call(client, "raster_clip", input="local.tif", output="clip-wider.tif", bbox=wider)
            assert s3c.get_object(Bucket="bucket", Key="data/out/clip.tif")["Body"].read() == (ws / "clip-wider.tif").read_bytes()
            err, outside = await call(client, "raster_clip", input="local.tif", output="s3://bucket/private/clip.tif", bbox=bbox)
            assert err and outside["error"]["code"] == "out-of-root"
            assert not [p for p in ws.iterdir() if p.name.startswith(".gdal-mcp-tmp")]
            keys = sorted(o["Key"] for o in s3c.list_objects_v2(Bucket="bucket")["Contents"])
            assert keys == ["data/big.tif", "data/out/clip.tif", "data/out/clip.tif.provenance.json", "private/big.tif"]
            err, content = await call(client, "raster_info", path="s3://bucket/data/missing.tif")
            assert err and env["AWS_SECRET_ACCESS_KEY"] not in json.dumps(content)
            seen = json.dumps([results, stats, content])
    finally:
        app.executor.close()
    captured = capfd.readouterr()
    for secret in (env["AWS_SECRET_ACCESS_KEY"], env["AWS_ACCESS_KEY_ID"]):
        assert secret not in seen and secret not in audit.read_text()
        assert secret not in captured.out and secret not in captured.err


async def test_a_redirect_out_of_the_list_is_refused_by_the_egress_proxy(server, remote) -> None:
    """SSRF by redirect: an allowed server answers 302 to another host. The workers reach the network only through
    the server's egress proxy (the kernel lets them connect to its port alone), which applies the list to the
    redirected request too: nothing reaches the other host, and the call is out-of-root."""
    http, local, _ = remote
    with RangeServer(local.parent) as other:
        http.redirects["/cogs-allowed/x.tif"] = f"{other.url}/big.tif"
        async with Client(server[0]) as client:
            err, content = await call(client, "raster_info", path=f"{http.url}/cogs-allowed/x.tif")
        assert err and content["error"]["code"] == "out-of-root", content
        assert other.log.sent() == (0, 0)
    app = server[1]
    assert app.egress is not None and app.egress.refusals >= 1
    policy = app.executor.worker_config  # the workers' kernel policy names the proxy's port as their only way out
    assert policy["egress_port"] == app.egress.port


async def test_dask_workers_read_allowed_locations_through_their_own_egress_proxy(remote) -> None:
    """The Dask executor with an allow-list: each worker runs its own egress proxy and its task threads are confined
    to that port, so a redirect out of the list is refused there as on the local pool. Results say what they fetched
    (the server's request log agrees), and the byte budget holds."""
    pytest.importorskip("distributed")
    http, local, ws = remote
    with RangeServer(local.parent) as other:
        http.redirects["/cogs-allowed/y.tif"] = f"{other.url}/big.tif"
        mcp, app = build_server(
            Settings(
                workspaces=(ws,), executor="dask", dask_scheduler="local:1", timeout=60, confirm="never",
                allow_remote=(f"{http.url}/cogs-allowed", f"{http.url}/big.tif"), max_remote_bytes=300_000,
            )
        )  # fmt: skip
        try:
            async with Client(mcp) as client:
                http.log.clear()
                err, info = await call(client, "raster_info", path=f"{http.url}/big.tif")
                assert not err and info["width"] == SIZE, info
                # every byte the server sent (GDAL's probe of big.tif.vat.dbf, outside the list, is a request the
                # worker's proxy answered itself)
                requests, sent = http.log.sent()
                assert info["remote"]["bytes"] == sent and 0 < sent <= 300_000, http.log.entries
                assert requests <= info["remote"]["requests"] <= requests + 1
                err, content = await call(client, "raster_stats", input=f"{http.url}/big.tif")  # every pixel: ~30 MB
                assert err and content["error"]["code"] == "resource-limit", content
                err, content = await call(client, "raster_info", path=f"{http.url}/cogs-allowed/y.tif")
                assert err and content["error"]["code"] == "out-of-root", content
                err, content = await call(client, "raster_info", path=f"{other.url}/big.tif")
                assert err and content["error"]["code"] == "out-of-root", content
        finally:
            app.executor.close()
        assert other.log.sent() == (0, 0)


async def test_list_datasets_lists_an_allowed_s3_prefix_and_nothing_beside_it(s3, tmp_path: Path) -> None:
    """list_datasets on s3://bucket/data: the objects there with their kinds, CRS and resolution (read by GDAL through
    the egress proxy, which lets a listing through only below an allowed prefix); other prefixes are out-of-root."""
    env, local = s3
    ws = tmp_path / "ws"
    ws.mkdir()
    mcp, app = build_server(
        Settings(workspaces=(ws,), workers=1, timeout=60, confirm="never", allow_remote=("s3://bucket/data",))
    )
    try:
        async with Client(mcp) as client:
            err, listing = await call(client, "list_datasets", path="s3://bucket/data")
            assert not err, listing
            entries = {e["path"]: e for e in listing["entries"]}
            big = entries["s3://bucket/data/big.tif"]
            with rasterio.open(local) as ds:
                assert big["kind"] == "raster" and big["size"] == local.stat().st_size
                assert big["crs"] == "EPSG:32633" and big["resolution"] == [abs(ds.res[0]), abs(ds.res[1])]
            assert not any(p.startswith("s3://bucket/private") for p in entries)
            err, info = await call(client, "raster_info", path=big["path"])  # each entry opens as listed
            assert not err and info["width"] == SIZE
            for outside in ("s3://bucket", "s3://bucket/private", "s3://other/data"):
                err, content = await call(client, "list_datasets", path=outside)
                assert err and content["error"]["code"] == "out-of-root", content
    finally:
        app.executor.close()


async def test_the_model_is_told_where_remote_data_may_come_from(server, remote) -> None:
    """An agent run found nothing told the model it may read URLs: the instructions name the allowed locations and
    the budget, and the input parameters say URLs are taken. A missing object is not-found; a glob of URLs says
    how to list them instead."""
    http, _, _ = remote
    async with Client(server[0]) as client:
        instructions = server[0].instructions  # what initialize gives the client
        assert f"{http.url}/cogs-allowed" in instructions and "at most 1G per call" in instructions
        tools = {t.name: t for t in await client.list_tools()}
        assert "s3://" in tools["raster_stats"].inputSchema["properties"]["input"]["description"]
        err, content = await call(client, "raster_info", path=f"{http.url}/cogs-allowed/missing.tif")
        assert err and content["error"]["code"] == "not-found", content
        err, content = await call(
            client, "raster_calc", input_pattern=f"{http.url}/cogs-allowed/*.tif", expression="median(S)", output="m.tif"
        )
        assert err and content["error"]["code"] == "unsupported" and "list_datasets" in content["error"]["message"]
