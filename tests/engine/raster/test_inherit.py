"""What every raster writer keeps of its input (engine/raster/inherit.py through output.py): the codec and its
predictor, unless creation options name one; the band metadata of writers whose bands are the input's. The output is
read back with Debian's gdalinfo (an independent GDAL), the input with rasterio."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
from rasterio.enums import ColorInterp
from rasterio.transform import from_origin

from gdal_mcp.engine.raster.calc import calc
from gdal_mcp.engine.raster.clip import clip
from gdal_mcp.engine.raster.convert import convert
from gdal_mcp.engine.raster.fill import fill_nodata
from gdal_mcp.engine.raster.inherit import inherit_options
from gdal_mcp.engine.raster.mosaic import mosaic
from gdal_mcp.engine.raster.proximity import proximity
from gdal_mcp.engine.raster.reclassify import reclassify
from gdal_mcp.engine.raster.sieve import sieve
from gdal_mcp.engine.raster.terrain import terrain
from gdal_mcp.engine.raster.warp import reproject
from tests.cli_reference import gdalinfo_json

ORIGIN = (500000.0, 5500000.0)  # EPSG:32632, in the zone's area of use


def make_source(path: Path, *, compress: str | None, predictor: int | None = None, dtype: str = "int16") -> Path:
    """A 2-band 120 x 100 raster: an 'elevation' band in metres, scaled, with nodata, and a second band, compressed as
    asked (tiled, so GDAL reports its codec as any GTiff's)."""
    rng = np.random.default_rng(7)
    data = rng.integers(100, 900, (2, 100, 120)).astype(dtype)
    data[:, :5, :5] = -9999
    profile: dict[str, Any] = {
        "driver": "GTiff",
        "width": 120,
        "height": 100,
        "count": 2,
        "dtype": dtype,
        "crs": "EPSG:32632",
        "transform": from_origin(*ORIGIN, 30, 30),
        "nodata": -9999,
        "tiled": True,
        "blockxsize": 64,
        "blockysize": 64,
    }
    if compress:
        profile["compress"] = compress
    if predictor:
        profile["predictor"] = predictor
    with rasterio.open(path, "w", **profile) as out:
        out.write(data)
        out.set_band_description(1, "elevation")
        out.set_band_description(2, "quality")
        out.set_band_unit(1, "m")
        out.scales = [0.5, 1.0]
        out.offsets = [10.0, 0.0]
        out.colorinterp = [ColorInterp.gray, ColorInterp.undefined]
    return path


def structure(path: Path) -> dict[str, str]:
    return gdalinfo_json(str(path))["metadata"].get("IMAGE_STRUCTURE", {})


BOX = (ORIGIN[0] + 300, ORIGIN[1] - 2400, ORIGIN[0] + 3000, ORIGIN[1] - 300)


def _summary(result: tuple[Any, list[str]]) -> tuple[Any, list[str]]:
    """(summary, warnings) of a writer whose result holds the summary (clip: RasterClipResult)."""
    return result[0].summary, result[1]


# Every writer of the shared output code, on the input `src` (a path), writing `dst` with creation `options`.
WRITERS = {
    "reproject": lambda src, dst, options: reproject(src, dst, dst_crs="EPSG:3857", options=options),
    "convert": lambda src, dst, options: convert(src, dst, options=options, projwin=BOX),
    "clip": lambda src, dst, options: _summary(clip(src, dst, bbox=BOX, creation_options=options)),
    "mosaic": lambda src, dst, options: mosaic([src], dst, options=options),
    "calc": lambda src, dst, options: calc({"a": src}, "a * 2", dst, output_type="Int16", creation_options=options),
    "fill": lambda src, dst, options: fill_nodata(src, dst, creation_options=options),
    "sieve": lambda src, dst, options: sieve(src, dst, threshold=2, creation_options=options),
    "reclassify": lambda src, dst, options: reclassify(
        src, dst, classes=[{"min": 0, "max": 500, "value": 1}], default=2, creation_options=options
    ),
    "terrain": lambda src, dst, options: terrain(src, dst, product="slope", creation_options=options),
    "proximity": lambda src, dst, options: proximity(src, dst, target_values=[500], creation_options=options),
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize(("codec", "predictor"), [("DEFLATE", 2), ("LZW", 2), ("ZSTD", None)])
def test_every_writer_keeps_the_input_codec_and_predictor(tmp_path, writer, codec, predictor) -> None:
    src = make_source(tmp_path / "src.tif", compress=codec, predictor=predictor)
    with rasterio.open(src) as ds:  # the input as rasterio reads it: the reference of what is kept
        assert ds.compression.name.upper() == codec
    dst = tmp_path / "out.tif"
    summary, _ = WRITERS[writer](str(src), str(dst), None)
    got = structure(dst)
    assert got.get("COMPRESSION") == codec, got
    assert got.get("PREDICTOR", "1") == str(predictor or 1), got
    assert summary.creation_options["COMPRESS"] == codec
    assert summary.creation_options.get("PREDICTOR") == (str(predictor) if predictor else None)


@pytest.mark.parametrize("writer", ["reproject", "convert", "clip", "mosaic", "calc", "terrain"])
def test_creation_options_given_still_win(tmp_path, writer) -> None:
    src = make_source(tmp_path / "src.tif", compress="DEFLATE", predictor=2)
    dst = tmp_path / "out.tif"
    summary, _ = WRITERS[writer](str(src), str(dst), {"COMPRESS": "ZSTD", "ZSTD_LEVEL": 5})
    got = structure(dst)
    assert got.get("COMPRESSION") == "ZSTD" and "PREDICTOR" not in got, got  # nothing of the input's codec
    assert summary.creation_options["COMPRESS"] == "ZSTD" and summary.creation_options["ZSTD_LEVEL"] == "5"
    assert "PREDICTOR" not in summary.creation_options
    # NONE is a choice too: an uncompressed output
    summary, _ = WRITERS[writer](str(src), str(tmp_path / "plain.tif"), {"COMPRESS": "NONE"})
    assert "COMPRESSION" not in structure(tmp_path / "plain.tif")
    assert summary.compression is None


def test_an_uncompressed_input_stays_uncompressed(tmp_path) -> None:
    src = make_source(tmp_path / "src.tif", compress=None)
    summary, _ = reproject(str(src), str(tmp_path / "out.tif"), dst_crs="EPSG:3857")
    assert "COMPRESSION" not in structure(tmp_path / "out.tif")
    assert "COMPRESS" not in summary.creation_options


@pytest.mark.parametrize("writer", ["reproject", "convert", "clip", "mosaic"])
def test_band_metadata_survive(tmp_path, writer) -> None:
    src = make_source(tmp_path / "src.tif", compress="DEFLATE", predictor=2)
    dst = tmp_path / "out.tif"
    WRITERS[writer](str(src), str(dst), None)
    with rasterio.open(src) as ds:
        expected = [
            (ds.descriptions[b], ds.units[b] or None, ds.colorinterp[b].name, ds.scales[b], ds.offsets[b], ds.nodatavals[b])
            for b in range(ds.count)
        ]
    bands = gdalinfo_json(str(dst))["bands"]
    got = [
        (
            b.get("description"),
            b.get("unit"),
            b["colorInterpretation"].lower(),
            b.get("scale", 1.0),
            b.get("offset", 0.0),
            b.get("noDataValue"),
        )
        for b in bands
    ]
    assert got == expected


def test_convert_output_type_keeps_scale_and_offset_as_gdal_translate(tmp_path) -> None:
    from tests.cli_reference import gdal_cli

    src = make_source(tmp_path / "src.tif", compress="DEFLATE", predictor=2)
    convert(str(src), str(tmp_path / "ours.tif"), output_type="Float32")
    gdal_cli("gdal_translate", "-ot", "Float32", str(src), str(tmp_path / "cli.tif"))
    keys = ("description", "unit", "scale", "offset", "noDataValue", "colorInterpretation")
    ours = [{k: b.get(k) for k in keys} for b in gdalinfo_json(str(tmp_path / "ours.tif"))["bands"]]
    cli = [{k: b.get(k) for k in keys} for b in gdalinfo_json(str(tmp_path / "cli.tif"))["bands"]]
    assert ours == cli and ours[0]["scale"] == 0.5
    # the Float32 output keeps DEFLATE; its integer predictor stays valid (2)
    got = structure(tmp_path / "ours.tif")
    assert (got["COMPRESSION"], got["PREDICTOR"]) == ("DEFLATE", "2")


def test_cog_outputs_keep_the_codec_too(tmp_path) -> None:
    src = make_source(tmp_path / "src.tif", compress="DEFLATE", predictor=2)
    for name, run in (
        ("convert", lambda dst: convert(str(src), dst, format="COG")),  # one CreateCopy, as gdal_translate
        ("reproject", lambda dst: reproject(str(src), dst, dst_crs="EPSG:3857", format="COG")),  # staged
    ):
        dst = tmp_path / f"{name}.tif"
        summary, _ = run(str(dst))
        got = structure(dst)
        assert (got.get("LAYOUT"), got.get("COMPRESSION"), got.get("PREDICTOR")) == ("COG", "DEFLATE", "2"), (name, got)
        assert summary.creation_options["COMPRESS"] == "DEFLATE"


def test_floating_point_predictor_where_valid(tmp_path) -> None:
    src = make_source(tmp_path / "src.tif", compress="ZSTD", predictor=3, dtype="float32")
    reproject(str(src), str(tmp_path / "f.tif"), dst_crs="EPSG:3857")
    assert structure(tmp_path / "f.tif")["PREDICTOR"] == "3"
    # PREDICTOR=3 is for Float32/Float64 only (GDAL refuses it for integers): an Int16 output gets 2
    summary, _ = reproject(str(src), str(tmp_path / "i.tif"), dst_crs="EPSG:3857", output_type="Int16")
    got = structure(tmp_path / "i.tif")
    assert (got["COMPRESSION"], got["PREDICTOR"]) == ("ZSTD", "2") and summary.creation_options["PREDICTOR"] == "2"


def test_a_codec_the_output_cannot_hold_becomes_deflate(tmp_path) -> None:
    rgb = tmp_path / "jpeg.tif"
    with rasterio.open(
        rgb,
        "w",
        driver="GTiff",
        width=64,
        height=64,
        count=3,
        dtype="uint8",
        crs="EPSG:32632",
        transform=from_origin(*ORIGIN, 30, 30),
        compress="JPEG",
        jpeg_quality=90,
    ) as out:
        out.write(np.full((3, 64, 64), 120, dtype="uint8"))
    convert(str(rgb), str(tmp_path / "same.tif"))
    got = structure(tmp_path / "same.tif")
    assert (got["COMPRESSION"], got.get("JPEG_QUALITY")) == ("JPEG", "90")
    summary, _ = convert(str(rgb), str(tmp_path / "f.tif"), output_type="Float32")
    assert structure(tmp_path / "f.tif")["COMPRESSION"] == "DEFLATE" and summary.creation_options["COMPRESS"] == "DEFLATE"


def test_inherit_options_only_for_gtiff_and_cog() -> None:
    class Source:
        compression = None

        def tags(self, ns: str | None = None) -> dict[str, str]:
            return {"COMPRESSION": "LZW", "PREDICTOR": "2"}

    assert inherit_options("PNG", {}, Source(), dtype="uint8", count=1) == {}
    assert inherit_options("GTiff", {"TILED": "YES"}, Source(), dtype="uint8", count=1) == {
        "TILED": "YES",
        "COMPRESS": "LZW",
        "PREDICTOR": "2",
    }
    assert inherit_options("GTiff", {"PREDICTOR": "1"}, Source(), dtype="uint8", count=1) == {"PREDICTOR": "1", "COMPRESS": "LZW"}
    assert inherit_options("GTiff", {}, None, dtype="uint8", count=1) == {}
