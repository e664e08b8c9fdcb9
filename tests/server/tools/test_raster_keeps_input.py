"""Right by default, through an MCP client: the raster writers keep the input's compression and band metadata and
list the creation options used; raster_reproject declares the margins of an input without nodata as nodata and
warns when the data reach outside the target CRS's area of use. References: Debian's gdalinfo and gdalwarp, rasterio
reading the input, pyproj's CRS.area_of_use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
from fastmcp import Client
from pyproj import CRS
from rasterio.enums import ColorInterp
from rasterio.transform import from_origin

from tests.cli_reference import gdal_cli, gdalinfo_json
from tests.helpers import call

DIR = "keeps_input"


def _source(ws: Path, name: str, *, west: float, north: float, **profile: Any) -> str:
    """A 2-band Int16 lon/lat raster (0.8° x 0.8°) without nodata, band 1 'elevation' in m with scale/offset."""
    (ws / DIR).mkdir(exist_ok=True)
    path = ws / DIR / name
    data = np.random.default_rng(5).integers(-500, 3000, (2, 200, 200)).astype("int16")
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=200,
        height=200,
        count=2,
        dtype="int16",
        crs="EPSG:4326",
        transform=from_origin(west, north, 0.004, 0.004),
        tiled=True,
        **profile,
    ) as out:
        out.write(data)
        out.set_band_description(1, "elevation")
        out.set_band_unit(1, "m")
        out.scales = [0.1, 1.0]
        out.offsets = [5.0, 0.0]
        out.colorinterp = [ColorInterp.gray, ColorInterp.undefined]
    return f"{DIR}/{name}"


def _structure(path: Path) -> dict[str, str]:
    return gdalinfo_json(str(path))["metadata"].get("IMAGE_STRUCTURE", {})


CALLS = {
    "raster_reproject": {"dst_crs": "EPSG:32632"},
    "raster_convert": {"bbox": [6.6, 49.5, 7.0, 50.0]},
    "raster_clip": {"bbox": [6.6, 49.5, 7.0, 50.0]},
}


@pytest.mark.parametrize("tool", sorted(CALLS))
@pytest.mark.parametrize(("codec", "predictor"), [("DEFLATE", 2), ("LZW", 2)])
async def test_writers_keep_the_codec_and_list_the_creation_options(client: Client, ws: Path, tool, codec, predictor) -> None:
    src = _source(ws, f"{tool}_{codec}.tif", west=6.5, north=50.2, compress=codec, predictor=predictor)
    with rasterio.open(ws / src) as ds:
        assert ds.compression.name.upper() == codec
    out = f"out/{DIR}/{tool}_{codec}.tif"
    err, res = await call(client, tool, input=src, output=out, **CALLS[tool])
    assert not err, res
    got = _structure(ws / out)
    assert (got.get("COMPRESSION"), got.get("PREDICTOR")) == (codec, str(predictor)), got
    assert res["summary"]["creation_options"]["COMPRESS"] == codec
    assert res["summary"]["creation_options"]["PREDICTOR"] == str(predictor)
    # band descriptions, units, colour interpretation, scale/offset as the input (read with rasterio)
    with rasterio.open(ws / src) as ds:
        expected = [
            (ds.descriptions[b], ds.units[b] or None, ds.colorinterp[b].name, ds.scales[b], ds.offsets[b]) for b in (0, 1)
        ]
    bands = gdalinfo_json(str(ws / out))["bands"]
    assert [
        (b.get("description"), b.get("unit"), b["colorInterpretation"].lower(), b.get("scale", 1.0), b.get("offset", 0.0))
        for b in bands
    ] == expected


@pytest.mark.parametrize("tool", sorted(CALLS))
async def test_creation_options_given_win(client: Client, ws: Path, tool) -> None:
    src = _source(ws, f"{tool}_win.tif", west=6.5, north=50.2, compress="DEFLATE", predictor=2)
    out = f"out/{DIR}/{tool}_win.tif"
    err, res = await call(client, tool, input=src, output=out, creation_options={"COMPRESS": "LZW"}, **CALLS[tool])
    assert not err, res
    got = _structure(ws / out)
    assert got.get("COMPRESSION") == "LZW" and "PREDICTOR" not in got, got
    assert res["summary"]["creation_options"]["COMPRESS"] == "LZW" and "PREDICTOR" not in res["summary"]["creation_options"]


async def test_nodata_survives_and_is_listed(client: Client, ws: Path) -> None:
    src = _source(ws, "nodata.tif", west=6.5, north=50.2, compress="DEFLATE", nodata=-9999)
    for tool in sorted(CALLS):
        out = f"out/{DIR}/{tool}_nodata.tif"
        err, res = await call(client, tool, input=src, output=out, **CALLS[tool])
        assert not err, res
        assert res["summary"]["nodata"] == -9999.0
        assert [b.get("noDataValue") for b in gdalinfo_json(str(ws / out))["bands"]] == [-9999.0, -9999.0]


async def test_reproject_margins_without_nodata_are_nodata(client: Client, ws: Path) -> None:
    src = _source(ws, "margins.tif", west=6.5, north=50.2)
    with rasterio.open(ws / src) as ds:
        assert ds.nodata is None and -32768 not in np.unique(ds.read())
    out = f"out/{DIR}/margins.tif"
    err, res = await call(client, "raster_reproject", input=src, output=out, dst_crs="EPSG:32632")
    assert not err, res
    assert res["summary"]["nodata"] == -32768.0
    assert any("-32768" in w and "declared nodata" in w for w in res["warnings"]), res["warnings"]
    assert not any("area of use" in w for w in res["warnings"]), res["warnings"]  # lon 6.5 to 7.3: inside zone 32N
    with rasterio.open(ws / out) as ours:
        b = ours.bounds
        data = ours.read()
        shape = (ours.width, ours.height)
    cli = ws / DIR / "margins_cli.tif"
    gdal_cli(
        "gdalwarp",
        "-overwrite",
        "-t_srs",
        "EPSG:32632",
        "-te",
        *map(repr, (b.left, b.bottom, b.right, b.top)),
        "-ts",
        *map(str, shape),
        "-dstnodata",
        "-32768",
        str(ws / src),
        str(cli),
    )
    with rasterio.open(cli) as ref:
        outside = ref.read() == -32768
    assert outside.any() and np.array_equal(data == -32768, outside)


async def test_reproject_warns_outside_the_area_of_use(client: Client, ws: Path) -> None:
    src = _source(ws, "luxembourg.tif", west=5.7, north=50.2)  # lon 5.7 to 6.5; UTM zone 32N starts at 6°E
    err, res = await call(client, "raster_reproject", input=src, output=f"out/{DIR}/lux_32632.tif", dst_crs="EPSG:32632")
    assert not err, res
    area = CRS.from_epsg(32632).area_of_use
    (text,) = [w for w in res["warnings"] if "area of use" in w]
    assert "EPSG:32632" in text and area.name.split(". ")[0] in text
    assert f"lon {area.west:g} to {area.east:g}, lat {area.south:g} to {area.north:g}" in text
    assert f"{area.west - 5.7:.3g}° (about" in text and "west of it" in text and "crs_search" in text
