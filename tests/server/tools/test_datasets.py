"""raster_info, vector_info, list_datasets through an MCP client: facts, envelope, progress, audit, cancel."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest
import rasterio
import rasterio.transform
from fastmcp import Client
from fastmcp.exceptions import McpError

from tests.cli_reference import gdalinfo_json, validate_cog
from tests.engine.raster.multidim_rasters import as_zarr, climate_netcdf, time_stack
from tests.helpers import call

ENVELOPE_KEYS = {"success", "error"}


def assert_envelope(is_error: bool, content: dict, code: str) -> str:
    assert is_error
    assert set(content) == ENVELOPE_KEYS and content["success"] is False
    assert set(content["error"]) == {"code", "message"}
    assert content["error"]["code"] == code, content
    return content["error"]["message"]


async def test_tools_are_listed_with_annotations_and_schemas(client: Client) -> None:
    tools = {t.name: t for t in await client.list_tools()}
    assert {"raster_info", "vector_info", "list_datasets"} <= set(tools)
    for name in ("raster_info", "vector_info", "list_datasets"):
        t = tools[name]
        assert t.annotations.read_only_hint is True and t.annotations.destructive_hint is False
        assert t.title and t.description and t.output_schema
        for prop in t.input_schema["properties"].values():
            assert prop.get("description"), f"{name} has an undocumented parameter"


async def test_raster_info_facts(client: Client, ws: Path) -> None:
    err, info = await call(client, "raster_info", path="raster/RGB.byte.tif", stats=True)
    assert not err
    assert info["path"] == "raster/RGB.byte.tif"
    assert [round(b["statistics"]["mean"], 4) for b in info["bands"]] == [44.4345, 66.0220, 71.3932]
    assert info["crs"]["epsg"] == 32618 and (info["width"], info["height"]) == (791, 718)
    assert str(ws) not in json.dumps(info)


async def test_subdatasets_come_back_as_usable_workspace_paths(client: Client, ws: Path) -> None:
    err, info = await call(client, "raster_info", path="raster/two-subs.h5")
    assert not err and len(info["subdatasets"]) == 2
    assert str(ws) not in json.dumps(info)
    err, sub = await call(client, "raster_info", path=info["subdatasets"][1]["path"])
    assert not err and (sub["width"], sub["height"]) == (3, 3)


async def test_a_container_says_so_with_no_placeholder_grid(client: Client, ws: Path) -> None:
    nc = climate_netcdf(ws / "multidim" / "climate.nc")
    reference = gdalinfo_json(str(nc))
    assert reference["size"] == [512, 512]  # what gdalinfo prints for a container: a placeholder
    err, info = await call(client, "raster_info", path="multidim/climate.nc")
    assert not err and info["kind"] == "container" and info["count"] == 0 and info["bands"] == []
    for key in ("width", "height", "transform", "bounds", "resolution", "bounds_wgs84"):
        assert info[key] is None, key
    listed = reference["metadata"]["SUBDATASETS"]
    assert [s["description"] for s in info["subdatasets"]] == [listed["SUBDATASET_1_DESC"], listed["SUBDATASET_2_DESC"]]
    assert [s["path"] for s in info["subdatasets"]] == ['NETCDF:"multidim/climate.nc":pr', 'NETCDF:"multidim/climate.nc":ta']
    assert str(ws) not in json.dumps(info)
    err, ta = await call(client, "raster_info", path=info["subdatasets"][1]["path"])
    assert not err and ta["kind"] == "raster" and (ta["width"], ta["height"], ta["count"]) == (4, 3, 4)
    assert ta["transform"] == pytest.approx(gdalinfo_json(f'NETCDF:"{nc}":ta')["geoTransform"])


async def test_each_band_of_a_time_stack_reports_its_date_in_info_and_stats(client: Client, ws: Path) -> None:
    # days after 2020-01-01 in the noleap calendar, counted by hand: Feb 1, Mar 1 (no Feb 29), Jul 1 (31+28+31+30+31+30)
    nc = time_stack(ws / "multidim" / "monthly.nc", [31, 59, 181, 90])
    dates = ["2020-02-01T00:00:00", "2020-03-01T00:00:00", "2020-07-01T00:00:00", "2020-04-01T00:00:00"]
    err, info = await call(client, "raster_info", path="multidim/monthly.nc")
    assert not err and [b["dimensions"] for b in info["bands"]] == [{"time": d} for d in dates]
    assert info["dimensions"] == [
        {"name": "time", "units": "days since 2020-01-01", "calendar": "noleap", "values": "iso_datetime"}
    ]
    err, stats = await call(client, "raster_stats", input="multidim/monthly.nc")
    assert not err and [b["dimensions"] for b in stats["bands"]] == [{"time": d} for d in dates]
    assert stats["dimensions"] == info["dimensions"]
    with rasterio.open(nc) as ds:
        means = [float(ds.read(b).mean()) for b in range(1, ds.count + 1)]
    assert [b["mean"] for b in stats["bands"]] == pytest.approx(means)
    warmest = max(stats["bands"], key=lambda b: b["mean"])
    assert warmest["dimensions"]["time"] == "2020-04-01T00:00:00"  # band 4 (the largest value, 40) is day 90


async def test_a_4d_variable_reports_time_and_level(client: Client, ws: Path) -> None:
    nc = climate_netcdf(ws / "multidim" / "levels.nc", times="15 45", units="days since 2001-01-01", calendar="noleap")
    reference = gdalinfo_json(f'NETCDF:"{nc}":ta')
    raw = [(b["metadata"][""]["NETCDF_DIM_time"], b["metadata"][""]["NETCDF_DIM_level"]) for b in reference["bands"]]
    dates = {"15": "2001-01-16T00:00:00", "45": "2001-02-15T00:00:00"}
    err, info = await call(client, "raster_info", path='NETCDF:"multidim/levels.nc":ta')
    assert not err and [b["dimensions"] for b in info["bands"]] == [{"time": dates[t], "level": float(lv)} for t, lv in raw]
    assert info["dimensions"][1] == {"name": "level", "units": "hPa", "calendar": None, "values": "coordinate"}
    # the same as Zarr: the worker reads the calendar from the store's time array (GDAL leaves it off the bands)
    as_zarr(nc, ws / "multidim" / "levels.zarr")
    err, zinfo = await call(client, "raster_info", path='ZARR:"multidim/levels.zarr":/ta')
    assert not err and [b["dimensions"] for b in zinfo["bands"]] == [b["dimensions"] for b in info["bands"]], zinfo
    assert zinfo["dimensions"][0]["calendar"] == "noleap"


async def test_stale_statistics_warning_only_when_no_fresh_ones(client: Client) -> None:
    stale = "STATISTICS_* metadata, which may be stale"
    err, plain = await call(client, "raster_info", path="raster/RGB.byte.tif")
    assert not err and any(stale in w for w in plain["warnings"])
    err, fresh = await call(client, "raster_info", path="raster/RGB.byte.tif", stats=True)
    assert not err and fresh["bands"][0]["statistics"] and not any(stale in w for w in fresh["warnings"])


async def test_a_small_untiled_cog_explains_itself(client: Client, ws: Path) -> None:
    path = ws / "multidim" / "small.tif"
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=300,
        height=200,
        count=1,
        dtype="uint8",
        crs="EPSG:4326",
        transform=rasterio.transform.from_origin(0, 10, 0.01, 0.01),
    ) as d:
        d.write(np.ones((1, 200, 300), "uint8"))
    valid, report = validate_cog(str(path))
    err, info = await call(client, "raster_info", path="multidim/small.tif")
    assert not err and info["is_cog"] is valid is True and info["tiled"] is False, report
    assert "512" in info["cog_note"] and "validate_cloud_optimized_geotiff" in info["cog_note"]
    err, big = await call(client, "raster_info", path="raster/RGB.byte.tif")
    assert not err and big["cog_note"] is None


async def test_vsizip_input(client: Client) -> None:
    err, info = await call(client, "raster_info", path="/vsizip/raster/N10W110.hgt.zip/N10W110.hgt")
    assert not err and info["driver"] == "SRTMHGT" and info["path"] == "/vsizip/raster/N10W110.hgt.zip/N10W110.hgt"


@pytest.mark.parametrize(
    "path,code",
    [
        ("../../etc/passwd", "out-of-root"),
        ("/etc/passwd", "out-of-root"),
        ("missing.tif", "not-found"),
        ("bad/RGB.byte.truncated.tif", "gdal-error"),
        ("vector/trio.geojson", "unsupported"),
        ("/vsicurl/https://example.com/x.tif", "unsupported"),
        ("PG:dbname=gis", "unsupported"),
    ],
)
async def test_raster_info_failures_use_the_envelope(client: Client, ws: Path, path: str, code: str) -> None:
    r = await client.call_tool("raster_info", {"path": path}, raise_on_error=False)
    message = assert_envelope(r.is_error, r.structured_content, code)
    assert json.loads(r.content[0].text) == r.structured_content
    assert str(ws) not in message and "Traceback" not in message


async def test_corrupt_pixels_are_a_gdal_error_with_gdal_message(client: Client) -> None:
    err, content = await call(client, "raster_info", path="bad/corrupt.tif", stats=True)
    assert "TIFFFillTile" in assert_envelope(err, content, "gdal-error")
    err, content = await call(client, "raster_info", path="bad/corrupt.tif")
    assert not err and content["count"] == 3


async def test_schema_violations_are_invalid_argument(client: Client) -> None:
    err, content = await call(client, "raster_info", path="raster/RGB.byte.tif", band=0)
    assert "band" in assert_envelope(err, content, "invalid-argument")
    err, content = await call(client, "raster_info", path="raster/RGB.byte.tif", bogus=1)
    assert_envelope(err, content, "invalid-argument")
    # the processing tools' name for the dataset, given to an inspection tool: the message names the one it takes
    err, content = await call(client, "raster_info", input="raster/RGB.byte.tif")
    assert "takes the value of input as path=" in assert_envelope(err, content, "invalid-argument")
    err, content = await call(client, "list_datasets", limit=100000)
    assert_envelope(err, content, "invalid-argument")
    err, content = await call(client, "no_such_tool")
    assert_envelope(err, content, "not-found")


async def test_vector_info_multi_layer(client: Client) -> None:
    err, info = await call(client, "vector_info", path="vector/test_gpx.gpx")
    assert not err and info["layer_count"] == 5
    err, content = await call(client, "vector_info", path="vector/test_gpx.gpx", layer="points")
    message = assert_envelope(err, content, "not-found")
    assert "track_points" in message and "waypoints" in message
    err, info = await call(client, "vector_info", path="vector/test_gpx.gpx", layer="track_points")
    assert not err and len(info["sample"]["features"]) == 5 and info["layers"][0]["feature_count"] == 19


async def test_list_datasets_is_bounded_and_relative(client: Client, ws: Path) -> None:
    err, listing = await call(client, "list_datasets", path="raster", pattern="*.tif", limit=4)
    assert not err and len(listing["entries"]) == 4 and listing["truncated"] and listing["remaining"] > 0
    assert all(e["path"].startswith("raster/") and e["kind"] == "raster" for e in listing["entries"])
    err, content = await call(client, "list_datasets", path="..")
    assert_envelope(err, content, "out-of-root")
    err, content = await call(client, "list_datasets", path="raster/RGB.byte.tif")
    assert "raster_info" in assert_envelope(err, content, "invalid-argument")


async def test_list_datasets_names_archive_members_and_each_opens(client: Client, ws: Path) -> None:
    """An agent could not find the DEM inside a zip (its path was never named, and list_datasets on the
    /vsizip/ path was refused as out-of-root): the member is listed with the path that opens it, CRS and
    resolution as rasterio reads them."""
    member = "/vsizip/raster/N10W110.hgt.zip/N10W110.hgt"
    err, listing = await call(client, "list_datasets", path="raster")
    assert not err
    paths = [e["path"] for e in listing["entries"]]
    assert paths.index(member) == paths.index("raster/N10W110.hgt.zip") + 1
    for archive in ("raster/N10W110.hgt.zip", "/vsizip/raster/N10W110.hgt.zip", "/vsizip/raster/N10W110.hgt.zip/"):
        err, alone = await call(client, "list_datasets", path=archive)
        assert not err and [e["path"] for e in alone["entries"]] == [member], archive
    entry = alone["entries"][0]
    with rasterio.open(f"/vsizip/{ws}/raster/N10W110.hgt.zip/N10W110.hgt") as ds:
        assert entry["crs"] == "EPSG:4326" and entry["resolution"] == [abs(ds.res[0]), abs(ds.res[1])]
    err, info = await call(client, "raster_info", path=entry["path"])
    assert not err and info["driver"] == "SRTMHGT"
    err, content = await call(client, "list_datasets", path="/vsizip/../outside.zip")
    assert_envelope(err, content, "out-of-root")


async def test_progress_notifications_carry_messages(client: Client) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def handler(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    r = await client.call_tool("raster_info", {"path": "raster/shade.tif", "stats": True}, progress_handler=handler)
    assert not r.is_error
    assert seen and seen[-1][0] == 100 and seen[-1][1] == 100 and "statistics" in seen[-1][2]


async def test_audit_log_records_calls(client: Client, audit_path: Path, ws: Path) -> None:
    # the session's log: only this test's records are checked (tests/security/test_argument_files.py, on the same
    # server, puts an absolute path in a where clause, which the log keeps as given)
    seen = len(audit_path.read_text().splitlines()) if audit_path.exists() else 0
    await call(client, "raster_info", path=str(ws / "raster" / "slope.tif"))
    await call(client, "raster_info", path="nope.tif")
    new = audit_path.read_text().splitlines()[seen:]
    lines = [json.loads(line) for line in new]
    ok = [x for x in lines if x["tool"] == "raster_info" and x["arguments"].get("path") == "raster/slope.tif"]
    assert ok and ok[-1]["outcome"] == "ok" and ok[-1]["duration_ms"] >= 0 and "time" in ok[-1]
    assert any(x["arguments"].get("path") == "nope.tif" and x["outcome"] == "not-found" for x in lines)
    assert str(ws) not in "\n".join(new)


async def test_client_timeout_cancels_the_job_and_server_keeps_serving(client: Client, server) -> None:
    _, app = server
    before = set(app.executor.pids())
    with pytest.raises(McpError, match="timed out"):
        await client.call_tool("raster_info", {"path": "huge.vrt", "stats": True}, timeout=1.5)
    for _ in range(30):
        if set(app.executor.pids()) != before:
            break
        await asyncio.sleep(0.1)
    assert set(app.executor.pids()) != before, "the worker running the cancelled job was not replaced"
    err, info = await call(client, "raster_info", path="raster/float_nan.tif")
    assert not err and info["width"] == 3


async def test_sidecar_georeferencing_survives_the_worker(client: Client) -> None:
    # 0.1 defect: workers opened files with GDAL_DISABLE_READDIR_ON_OPEN=EMPTY_DIR, so GDAL never saw a PNG's
    # .aux.xml or a JPEG's world file: raster_info through the server reported no CRS and a pixel transform.
    err, png = await call(client, "raster_info", path="raster/gadas-export.png")
    assert not err and png["crs"]["name"] == "WGS 84 / Pseudo-Mercator"
    assert png["transform"][0] == pytest.approx(7698736.858, abs=1e-3)
    err, jpg = await call(client, "raster_info", path="raster/demo.jpg")
    assert not err and jpg["crs"]["epsg"] == 4326
    assert jpg["transform"] == pytest.approx([69.1589, 0.021938, 0, 11.8187, 0, -0.021938], abs=1e-4)


async def test_a_misnamed_argument_gets_the_tool_parameters_like_it(client: Client) -> None:
    """crs= to raster_reproject (which takes dst_crs=): the message names the parameters that look like it, so the
    model's next call is right."""
    err, content = await call(client, "raster_reproject", input="raster/RGB.byte.tif", output="x.tif", crs="EPSG:4326")
    message = assert_envelope(err, content, "invalid-argument")
    assert "dst_crs" in message and "src_crs" in message
