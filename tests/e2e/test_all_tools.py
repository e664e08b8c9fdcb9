"""Every tool, the resources and the prompts through the official MCP SDK over stdio, on the shipped test data."""

from __future__ import annotations

import base64
import os
import sys
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from pyproj import Transformer

from tests.helpers import make_workspace
from tests.stac_helpers import write_static_catalog

# (tool, arguments, a check on the structured result) — facts from tests/data/MANIFEST.md.
CALLS = [
    ("crs_search", {"query": "Lambert-93"}, lambda r: r["matches"][0]["crs"] == "EPSG:2154"),
    ("crs_info", {"crs": "EPSG:32629"}, lambda r: r["utm_zone"] == "29N"),
    (
        "transform_coordinates",
        {"points": [[-9.1393, 38.7223]], "src_crs": "EPSG:4326", "dst_crs": "EPSG:32629"},
        lambda r: (
            max(
                abs(a - b)
                for a, b in zip(
                    r["points"][0], Transformer.from_crs(4326, 32629, always_xy=True).transform(-9.1393, 38.7223), strict=True
                )
            )
            < 1e-3
        ),
    ),
    ("list_datasets", {"path": "raster", "pattern": "rgb*.tif"}, lambda r: len(r["entries"]) == 4),
    (
        "raster_info",
        {"path": "raster/RGB.byte.tif", "stats": True},
        lambda r: round(r["bands"][0]["statistics"]["mean"], 4) == 44.4345,
    ),
    ("vector_info", {"path": "vector/test_gpx.gpx"}, lambda r: r["layer_count"] == 5),
    (
        "vector_features",
        {"input": "vector/test_gpx.gpx", "layer": "track_points", "limit": 3},
        lambda r: len(r["features"]) == 3 and r["remaining"] == 16,
    ),
    (
        "raster_convert",
        {"input": "raster/RGB.byte.tif", "output": "out/rgb_cog.tif", "format": "COG"},
        lambda r: r["summary"]["width"] == 791,
    ),
    (
        "raster_reproject",
        {"input": "raster/goes.tif", "output": "out/goes_4326.tif", "dst_crs": "EPSG:4326"},
        lambda r: (r["summary"]["width"], r["summary"]["height"]) == (602, 475),
    ),
    (
        "raster_clip",
        {"input": "raster/RGB.byte.tif", "output": "out/clip.tif", "mask": "vector/box.shp"},
        lambda r: r["summary"]["crs"] == "EPSG:32618",
    ),
    (
        "raster_mosaic",
        {"inputs": [f"raster/rgb{i}.tif" for i in (1, 2, 3, 4)], "output": "out/mosaic.tif"},
        lambda r: (r["summary"]["width"], r["summary"]["height"]) == (791, 718),
    ),
    ("raster_overviews", {"input": "out/mosaic.tif", "action": "add"}, lambda r: r["levels"] == [2, 4]),
    (
        "raster_edit",
        {"input": "out/mosaic.tif", "nodata": 0, "metadata": {"SOURCE": "rgb1-4"}},
        lambda r: r["summary"]["nodata"] == 0 and r["output"] == "out/mosaic.tif",
    ),
    (
        "raster_reclassify",
        {
            "input": "raster/slope.tif",
            "output": "out/slope3.tif",
            "classes": [{"max": 10, "value": 1}, {"min": 10, "max": 30, "value": 2}, {"min": 30, "value": 3}],
        },
        lambda r: r["summary"]["dtype"] == "uint8",
    ),
    ("raster_stats", {"input": "raster/slope.tif"}, lambda r: round(r["bands"][0]["mean"], 3) == 56.813),
    (
        "raster_sample",
        {"input": "raster/RGB.byte.tif", "points": [[-78.0, 24.5]], "points_crs": "EPSG:4326"},
        lambda r: r["points"][0]["inside"],
    ),
    ("raster_to_xyz", {"input": "raster/float_nan.tif", "output": "out/f.csv"}, lambda r: r["rows"] == 5),
    (
        "vector_convert",
        {"input": "vector/naturalearth_lowres.shp", "output": "out/ne.gpkg"},
        lambda r: r["summary"]["feature_count"] == 177,
    ),
    (
        "vector_reproject",
        {"input": "vector/polygons.shp", "output": "out/poly_4326.geojson", "dst_crs": "EPSG:4326"},
        lambda r: r["summary"]["feature_count"] == 2,
    ),
    (
        "vector_clip",
        {"input": "vector/naturalearth_lowres.shp", "output": "out/nclip.gpkg", "bbox": [-20, -40, 55, 40]},
        lambda r: r["summary"]["feature_count"] == 75,
    ),
    (
        "vector_buffer",
        {"input": "vector/points.shp", "output": "out/buf.gpkg", "distance": 10, "units": "m"},
        lambda r: r["summary"]["feature_count"] == 3,
    ),
    (
        "vector_simplify",
        {"input": "vector/naturalearth_lowres.shp", "output": "out/simp.gpkg", "tolerance": 5, "units": "km"},
        lambda r: r["summary"]["feature_count"] == 177,
    ),
    (
        "vector_dissolve",
        {"input": "vector/naturalearth_lowres.shp", "output": "out/cont.gpkg", "by": "continent"},
        lambda r: r["summary"]["feature_count"] == 8,
    ),
    ("vector_validate", {"input": "vector/trio.geojson"}, lambda r: r["feature_count"] == 3),
    (
        "vector_join",
        {
            "input": "vector/naturalearth_lowres.shp",
            "join": "vector/naturalearth_lowres.shp",
            "output": "out/touching.gpkg",
            "aggregate": {"*": ["count"]},
        },
        lambda r: r["summary"]["feature_count"] == 177 and "count" in r["summary"]["fields"],
    ),
    (
        "vector_overlay",
        {
            "input": "vector/naturalearth_lowres.shp",
            "overlay": "vector/naturalearth_lowres.shp",
            "output": "out/selfoverlay.gpkg",
            "keep_fields": "none",
        },
        lambda r: r["summary"]["feature_count"] >= 177 and r["summary"]["geometry_type"] == "MultiPolygon",
    ),
    (
        "vector_measure",
        {"input": "vector/naturalearth_lowres.shp", "measures": ["area"], "limit": 1},
        lambda r: r["row_count"] == 177 and r["method"] == "geodesic" and r["rows"][0]["area_m2"] > 0,
    ),
    (
        "vector_query",
        {"input": "vector/naturalearth_lowres.shp", "group_by": "continent", "order_by": "count DESC", "limit": 1},
        lambda r: r["total"] == 8 and r["rows"] == [{"continent": "Africa", "count": 51}] and r["remaining"] == 7,
    ),
    (
        "vector_geometry",
        {"input": "vector/naturalearth_lowres.shp", "output": "out/cent.gpkg", "operation": "centroid"},
        lambda r: r["summary"]["feature_count"] == 177 and r["summary"]["geometry_type"] == "Point",
    ),
    (
        "vector_merge",
        {"inputs": ["vector/polygons.shp", "vector/points.shp"], "output": "out/merged.gpkg"},
        lambda r: r["feature_count"] == 5,
    ),
    (
        "vector_from_table",
        {"input": "out/f.csv", "output": "out/xyz_pts.gpkg", "crs": "EPSG:3857"},
        lambda r: (r["x"], r["y"], r["rows"], r["summary"]["feature_count"]) == ("x", "y", 5, 5),
    ),
    (
        "raster_terrain",
        {"input": "raster/slope.tif", "output": "out/hs.tif", "product": "hillshade"},
        lambda r: r["summary"]["dtype"] == "uint8",
    ),
    (
        "raster_calc",
        {"inputs": {"A": "raster/slope.tif"}, "expression": "A * 2", "output": "out/double.tif"},
        lambda r: r["summary"]["dtype"] == "float32",
    ),
    (
        "raster_polygonize",
        {"input": "raster/shade.tif", "output": "out/shade.gpkg"},
        lambda r: r["summary"]["feature_count"] == 232,
    ),
    (
        "vector_rasterize",
        {"input": "vector/polygons.shp", "output": "out/zones.tif", "attribute": "id", "like": "raster/slope.tif"},
        lambda r: r["summary"]["width"] == 84,
    ),
    (
        "zonal_stats",
        {"input": "raster/slope.tif", "zones": "vector/polygons.shp", "id_field": "id"},
        lambda r: [row["count"] for row in r["rows"]] == [75, 50],
    ),
    # Jacksboro DEM: 403x344, elevations 236..1076 -> 100 m bands 200..1100 are 9 polygons
    (
        "raster_contour",
        {"input": "raster/jacksboro_dem.tif", "output": "out/bands.gpkg", "interval": 100, "polygons": True},
        lambda r: r["summary"]["feature_count"] == 9,
    ),
    (
        "raster_fill_nodata",
        {"input": "raster/jacksboro_dem.tif", "output": "out/filled.tif"},
        lambda r: (r["summary"]["width"], r["summary"]["height"]) == (403, 344),
    ),
    # hydrology on the Jacksboro DEM (Int16, no nodata): a fill only raises; after it no cell is a pit
    (
        "dem_condition",
        {"input": "raster/jacksboro_dem.tif", "output": "out/jack_filled.tif"},
        lambda r: r["summary"]["dtype"] == "int16" and r["summary"]["cells_raised"] > 0 and r["summary"]["cells_lowered"] == 0,
    ),
    (
        "flow_direction",
        {"input": "raster/jacksboro_dem.tif", "output": "out/jack_d8.tif"},
        lambda r: r["summary"]["dtype"] == "uint8" and r["summary"]["nodata"] == 247 and r["summary"]["pits"] == 0,
    ),
    (
        "flow_accumulation",
        {"input": "out/jack_d8.tif", "input_type": "flow_direction", "output": "out/jack_acc.tif", "measure": "km2"},
        lambda r: r["summary"]["dtype"] == "float64" and 0 < r["summary"]["max_accumulation"] < 800,
    ),
    (
        "watershed",
        {"input": "raster/jacksboro_dem.tif", "output": "out/jack_ws.gpkg", "points": [[-84.25, 36.6]], "snap_distance": 300},
        lambda r: r["summary"]["feature_count"] == 1 and r["basins"][0]["area_km2"] > 0 and r["basins"][0]["moved_m"] <= 300,
    ),
    (
        "stream_network",
        {"input": "raster/jacksboro_dem.tif", "output": "out/jack_streams.gpkg", "threshold_km2": 5},
        lambda r: r["segments"] == r["summary"]["feature_count"] > 0 and r["max_order"] >= 2,
    ),
    (
        "raster_sieve",
        {"input": "raster/shade.tif", "output": "out/sieved.tif", "threshold": 4},
        lambda r: r["summary"]["nodata"] == 255 and r["summary"]["width"] == 1024,
    ),
    (
        "raster_proximity",
        {"input": "raster/RGB.byte.tif", "output": "out/prox.tif", "distance_units": "pixel"},
        lambda r: r["summary"]["dtype"] == "float32" and r["summary"]["crs"] == "EPSG:32618",
    ),
    # GDAL 3.12's algorithms (issue 26)
    (
        "vector_pipeline",
        {
            "input": "vector/naturalearth_lowres.shp",
            "output": "out/africa_3857.gpkg",
            "steps": [{"step": "filter", "where": "continent = 'Africa'"}, {"step": "reproject", "dst_crs": "EPSG:3857"}],
        },
        lambda r: r["summary"]["feature_count"] == 51 and r["summary"]["crs"] == "EPSG:3857",
    ),
    (
        "raster_pipeline",
        {
            "input": "raster/jacksboro_dem.tif",
            "output": "out/pipeline_hillshade.tif",
            "steps": [{"step": "reproject", "dst_crs": "EPSG:32616", "resolution": 100}, {"step": "hillshade"}],
        },
        lambda r: r["summary"]["crs"] == "EPSG:32616" and r["summary"]["dtype"] == "uint8" and len(r["plan"]) == 3,
    ),
    (
        "raster_focal",
        {"input": "raster/slope.tif", "output": "out/focal_max.tif", "statistic": "max", "size": 3},
        lambda r: (r["summary"]["width"], r["summary"]["height"]) == (84, 78) and r["window"]["size"] == 3,
    ),
    (
        "raster_viewshed",
        {"input": "raster/slope.tif", "output": "out/seen.tif", "observers": [[245372, 999874]], "observer_height": 30},
        lambda r: r["visible_pixels"] > 0 and r["summary"]["width"] == 84,
    ),
    (
        "vector_interpolate",
        {"input": "vector/points.shp", "output": "out/idw.tif", "z_field": "id", "size": [40, 30]},
        lambda r: (r["summary"]["width"], r["summary"]["height"]) == (40, 30),
    ),
    (
        "raster_footprint",
        {"input": "raster/RGB.byte.tif", "output": "out/rgb_footprint.gpkg"},
        lambda r: r["summary"]["feature_count"] == 1 and r["area_m2"] > 3e10,
    ),
    (
        "dataset_index",
        {"input_pattern": "raster/rgb?.tif", "output": "out/tiles_index.gpkg"},
        lambda r: r["indexed"] == 4,
    ),
    (
        "raster_tiles",
        {"input": "raster/RGB.byte.tif", "output": "out/tiles", "min_zoom": 7, "max_zoom": 8},
        lambda r: r["output"] == "out/tiles",
    ),
    (
        "raster_compare",
        {"input": "out/rgb_cog.tif", "reference": "raster/RGB.byte.tif"},
        lambda r: r["pixels_identical"] is True,
    ),
    (
        "stac_search",
        {"catalog": "stac/catalog.json", "query": {"eo:cloud_cover": {"lt": 10}}, "sortby": "eo:cloud_cover"},
        # the catalog tests/stac_helpers.py writes: cloud cover 0 (scene-5), 1 (other-0), 5 (scene-1), the others >= 12.5
        lambda r: (
            [i["id"] for i in r["items"]] == ["scene-5", "other-0", "scene-1"]
            and r["items"][0]["assets"][0]["input"] == "stac/rgb/scene-5/scene-5.tif"
        ),
    ),
    (
        "cube_info",
        {"input": "raster/tas_rectilinear_grid_2D.nc"},
        lambda r: r["variable"] == "tas" and r["time_steps"] == 12 and r["dimensions"][0]["calendar"] == "proleptic_gregorian",
    ),
    (
        "cube_aggregate",
        {"input": "raster/tas_rectilinear_grid_2D.nc", "variable": "tas", "output": "out/tas_seasons.tif", "period": "season"},
        lambda r: [p["label"] for p in r["summary"]["periods"]][:2] == ["2004-12/2005-02", "2005-03/2005-05"],
    ),
    (
        "cube_series",
        {"input": "raster/tas_rectilinear_grid_2D.nc", "variable": "tas", "points": [[10.0, 50.0]], "start": "2005-07"},
        lambda r: r["total_rows"] == 6 and r["rows"][0]["time"] == "2005-07-16T12:00:00" and r["rows"][0]["values"][0] > 273,
    ),
    (
        "cube_subset",
        {
            "input": "raster/tas_rectilinear_grid_2D.nc",
            "variable": "tas",
            "output": "out/tas_summer.nc",
            "start": "2005-06",
            "end": "2005-08",
        },
        lambda r: r["summary"]["steps"] == 3 and r["summary"]["raster"]["driver"] == "netCDF",
    ),
    (
        "workspace_copy",
        {"input": "vector/polygons.shp", "output": "out/scratch/zones.shp"},
        lambda r: r["output"] == "out/scratch/zones.shp" and "out/scratch/zones.dbf" in r["files"],
    ),
    (
        "workspace_move",
        {"input": "out/scratch/zones.shp", "output": "out/scratch/areas.shp"},
        lambda r: "out/scratch/areas.dbf" in r["files"] and "out/scratch/zones.shp" not in r["files"],
    ),
    (
        "workspace_delete",
        {"input": "out/scratch/areas.shp"},
        lambda r: r["action"] == "delete" and "out/scratch/areas.shx" in r["files"],
    ),
    (
        "dataset_lineage",
        {"input": "out/rgb_cog.tif"},
        lambda r: (
            [(s["operation"], s["path"]) for s in r["steps"]]
            == [(None, "raster/RGB.byte.tif"), ("raster_convert", "out/rgb_cog.tif")]
        ),
    ),
    (
        "replay",
        {"input": "out/rgb_cog.tif", "substitute": {"raster/RGB.byte.tif": "raster/RGB.byte.tif"}, "suffix": "_again"},
        lambda r: (
            r["executed"] is False
            and [c["arguments"] for c in r["plan"]]
            == [{"input": "raster/RGB.byte.tif", "output": "out/rgb_cog_again.tif", "format": "COG"}]
        ),
    ),
]


@pytest.fixture(scope="module")
def all_ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_workspace(tmp_path_factory.mktemp("all"))
    write_static_catalog(root / "stac")
    return root


@pytest.mark.slow
async def test_every_tool_resource_and_prompt_through_the_official_sdk(all_ws: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GDAL_MCP_")}
    # --confirm never: the SDK's ClientSession cannot answer elicitation (test_confirm.py covers confirmation)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "gdal_mcp", "--workspace", str(all_ws), "--confirm", "never"], env=env
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        names = {t.name for t in (await session.list_tools()).tools}
        assert names == {c[0] for c in CALLS} | {"raster_preview", "vector_preview"}
        for tool, args, check in CALLS:
            r = await session.call_tool(tool, args)
            assert not r.is_error, (tool, r.structured_content)
            assert check(r.structured_content), (tool, r.structured_content)

        # A tool's output read back as a resource, and looked at as an image.
        blob = (await session.read_resource("gdal-mcp://files/out/rgb_cog.tif")).contents[0]
        assert base64.b64decode(blob.blob) == (all_ws / "out" / "rgb_cog.tif").read_bytes()
        for tool, args in (
            ("raster_preview", {"input": "out/rgb_cog.tif"}),
            ("vector_preview", {"input": "out/cont.gpkg", "color_by": "continent"}),
        ):
            r = await session.call_tool(tool, args)
            assert not r.is_error and r.content[0].type == "image" and r.content[0].mime_type == "image/png"
            assert base64.b64decode(r.content[0].data)[:8] == b"\x89PNG\r\n\x1a\n"

        info = (await session.read_resource("gdal-mcp://info/vector/out/cont.gpkg")).contents[0]
        assert '"feature_count":8' in info.text
        prompts = {p.name for p in (await session.list_prompts()).prompts}
        assert prompts == {"choose_crs", "choose_resampling", "make_web_ready", "zonal_workflow"}
        text = (await session.get_prompt("make_web_ready", {"path": "out/rgb_cog.tif"})).messages[0].content.text
        assert "already a valid COG" in text

        # After every tool, resource and prompt, the server process itself has still not loaded GDAL (nor the
        # Python packages that bundle it): results cross the pipe as GDAL-free models.
        loaded = gdal_libraries_of(server_pid(all_ws))
        assert not loaded, f"the server process loaded {loaded}"


def server_pid(workspace: Path) -> int:
    """The pid of the `python -m gdal_mcp --workspace <workspace>` process this test started."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"gdal_mcp" in argv and str(workspace).encode() in argv and b"gdal_mcp.execution.local_worker" not in argv:
            return int(entry.name)
    raise AssertionError("server process not found")


def gdal_libraries_of(pid: int) -> list[str]:
    """Shared objects of GDAL, PROJ, GEOS, Arrow or the wheels bundling them mapped into a process."""
    marks = (
        "libgdal",
        "libproj",
        "libgeos",
        "libarrow",
        "/rasterio/",
        "/pyogrio/",
        "/shapely/",
        "/pyproj/",
        "/pyarrow/",
        "/numpy/",
    )
    found = set()
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        path = line.split()[-1] if len(line.split()) >= 6 else ""
        if path.endswith(".so") or ".so." in path:
            if any(m in path for m in marks):
                found.add(path.rsplit("/", 1)[-1])
    return sorted(found)
