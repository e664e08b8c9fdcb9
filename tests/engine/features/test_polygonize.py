"""Polygonize: MANIFEST facts for shade.tif, gdal_polygonize.py as reference, masks, types and errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyogrio
import pyogrio.raw
import pytest
import rasterio
import rasterio.features
import shapely
import shapely.geometry

import gdal_mcp.engine.features.polygonize as polygonize_module
from gdal_mcp.engine.features.polygonize import polygonize
from gdal_mcp.errors import GdalMcpError
from tests.cli_reference import gdal_cli
from tests.helpers import DATA

SHADE = str(DATA / "raster" / "shade.tif")
SLOPE = str(DATA / "raster" / "slope.tif")
# shade.tif: 1024 x 1024 Byte, nodata 255, 9.5546285343 m pixels; its valid pixels (all 0) are 11.86 %.
PIXEL_AREA = 9.5546285343**2


def read(path: Path, layer: str | None = None) -> tuple[dict, np.ndarray, dict]:
    meta, _, wkb, values = pyogrio.raw.read(str(path), layer=layer)
    return meta, shapely.from_wkb(wkb), dict(zip(meta["fields"], values, strict=True))


def normalized(geoms) -> list[str]:
    return sorted(shapely.to_wkt(shapely.normalize(np.asarray(geoms)), rounding_precision=6).tolist())


@pytest.mark.parametrize(("connectivity", "expected"), [(4, 232), (8, 214)])
def test_shade_gives_the_manifest_feature_counts(tmp_path: Path, connectivity: int, expected: int) -> None:
    out = tmp_path / f"shade{connectivity}.gpkg"
    summary, warnings = polygonize(SHADE, str(out), connectivity=connectivity)
    assert warnings == []
    assert (summary.driver, summary.layer, summary.feature_count, summary.geometry_type, summary.crs, summary.fields) == (
        "GPKG",
        f"shade{connectivity}",
        expected,
        "Polygon",
        "EPSG:3857",
        ["value"],
    )
    meta, geoms, fields = read(out)
    assert fields["value"].dtype == np.int64 and set(fields["value"].tolist()) == {0}
    with rasterio.open(SHADE) as ds:
        valid = int((ds.read_masks(1) != 0).sum())
    assert valid / (1024 * 1024) == pytest.approx(0.1186, abs=1e-4)
    # Polygons tile exactly the valid pixels.
    assert shapely.area(geoms).sum() == pytest.approx(valid * PIXEL_AREA, rel=1e-9)


@pytest.mark.parametrize("connectivity", [4, 8])
def test_same_polygons_as_gdal_polygonize(tmp_path: Path, connectivity: int) -> None:
    tool = (
        "gdal_polygonize.py" if shutil.which("gdal_polygonize.py") or not shutil.which("gdal_polygonize") else "gdal_polygonize"
    )
    cli = tmp_path / "cli.gpkg"
    gdal_cli(tool, *(["-8"] if connectivity == 8 else []), SHADE, "-f", "GPKG", str(cli))
    ours = tmp_path / "ours.gpkg"
    polygonize(SHADE, str(ours), connectivity=connectivity)
    _, cli_geoms, cli_fields = read(cli)
    _, geoms, fields = read(ours)
    assert normalized(geoms) == normalized(cli_geoms)
    assert sorted(fields["value"].tolist()) == sorted(cli_fields["DN"].tolist())


def test_nodata_excluded_false_polygonizes_nodata_too(tmp_path: Path) -> None:
    summary, _ = polygonize(SHADE, str(tmp_path / "all.gpkg"), nodata_excluded=False)
    _, geoms, fields = read(tmp_path / "all.gpkg")
    assert summary.feature_count == len(geoms) == 288
    assert set(fields["value"].tolist()) == {0, 255}
    assert shapely.area(geoms).sum() == pytest.approx(1024 * 1024 * PIXEL_AREA, rel=1e-9)
    # Same as GDAL's polygonizer on the whole band with no mask.
    with rasterio.open(SHADE) as ds:
        expected = list(rasterio.features.shapes(ds.read(1), transform=ds.transform))
    assert normalized(geoms) == normalized([shapely.geometry.shape(g) for g, _ in expected])


def _mask_raster(path: Path, keep) -> Path:
    with rasterio.open(SHADE) as ds:
        profile = {**ds.profile, "nodata": None}
        data = np.zeros((ds.height, ds.width), dtype="uint8")
    data[keep] = 7
    with rasterio.open(path, "w", **profile) as out:
        out.write(data, 1)
    return path


def test_mask_raster_restricts_where_polygons_are_made(tmp_path: Path) -> None:
    mask = _mask_raster(tmp_path / "m.tif", (slice(None), slice(0, 512)))
    summary, _ = polygonize(SHADE, str(tmp_path / "left.gpkg"), mask=str(mask))
    _, geoms, _ = read(tmp_path / "left.gpkg")
    with rasterio.open(SHADE) as ds:
        data, valid = ds.read(1), ds.read_masks(1) != 0
        keep = valid.copy()
        keep[:, 512:] = False
        expected = [shapely.geometry.shape(g) for g, _ in rasterio.features.shapes(data, mask=keep, transform=ds.transform)]
        middle_x = (ds.transform @ (512, 0))[0]
    assert 0 < summary.feature_count == len(expected) < 232
    assert normalized(geoms) == normalized(expected)
    assert shapely.bounds(geoms)[:, 2].max() <= middle_x + 1e-6
    # Without the band's own mask, the nodata (255) regions of the left half are polygonized too.
    polygonize(SHADE, str(tmp_path / "left_all.gpkg"), mask=str(mask), nodata_excluded=False)
    _, _, fields = read(tmp_path / "left_all.gpkg")
    assert set(fields["value"].tolist()) == {0, 255}
    # The temporary mask file is gone.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["left.gpkg", "left_all.gpkg", "m.tif"]


def test_mask_must_have_the_same_size(tmp_path: Path) -> None:
    with pytest.raises(GdalMcpError) as e:
        polygonize(SHADE, str(tmp_path / "x.gpkg"), mask=SLOPE)
    assert e.value.code == "invalid-argument" and "84 x 78" in e.value.message and "1024 x 1024" in e.value.message
    assert list(tmp_path.iterdir()) == []


def test_float_band_keeps_float_values(tmp_path: Path) -> None:
    summary, _ = polygonize(SLOPE, str(tmp_path / "slope.fgb"), field="slope")
    meta, geoms, fields = read(tmp_path / "slope.fgb")
    assert summary.fields == ["slope"] and fields["slope"].dtype == np.float64
    with rasterio.open(SLOPE) as ds:
        arr = ds.read(1, masked=True)
        expected = list(rasterio.features.shapes(arr, transform=ds.transform))
        valid = int(arr.count())
        assert summary.crs == "custom Albers Equal Area" and "Albers" in meta["crs"]
    assert summary.feature_count == len(expected) > 5000
    assert sorted(fields["slope"].tolist()) == sorted(float(v) for _, v in expected)
    assert shapely.area(geoms).sum() == pytest.approx(valid * 25.52514657450613**2, rel=1e-6)


def test_shapefile_and_geojson_outputs_and_layer_name(tmp_path: Path) -> None:
    shp, _ = polygonize(SHADE, str(tmp_path / "s.shp"))
    assert (shp.driver, shp.layer, shp.feature_count) == ("ESRI Shapefile", "s", 232)
    gj, _ = polygonize(SHADE, str(tmp_path / "s.json"), connectivity=8)
    assert (gj.driver, gj.feature_count) == ("GeoJSON", 214)
    gpkg, _ = polygonize(SHADE, str(tmp_path / "s.gpkg"), output_layer="regions", field="dn")
    assert (gpkg.layer, gpkg.fields) == ("regions", ["dn"])
    assert pyogrio.list_layers(str(tmp_path / "s.gpkg"))[0][0] == "regions"


def test_batches_are_streamed_and_progress_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(polygonize_module, "BATCH_SIZE", 50)
    reports: list[tuple[float, str]] = []
    summary, _ = polygonize(SHADE, str(tmp_path / "b.gpkg"), progress=lambda f, m="": reports.append((f, m)))
    assert summary.feature_count == 232
    writes = [m for _, m in reports if m.startswith("wrote ")]
    assert writes[:5] == [
        "wrote 50 polygons",
        "wrote 100 polygons",
        "wrote 150 polygons",
        "wrote 200 polygons",
        "wrote 232 polygons",
    ]
    assert reports[-1] == (1.0, "wrote 232 polygons")
    assert [f for f, _ in reports] == sorted(f for f, _ in reports)


def test_no_features_still_writes_an_empty_layer(tmp_path: Path) -> None:
    mask = _mask_raster(tmp_path / "none.tif", (slice(0, 0), slice(0, 0)))
    summary, _ = polygonize(SHADE, str(tmp_path / "empty.gpkg"), mask=str(mask))
    assert (summary.feature_count, summary.fields) == (0, ["value"])


def test_unsupported_type_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "u32.tif"
    with rasterio.open(path, "w", driver="GTiff", width=4, height=4, count=1, dtype="uint32") as out:
        out.write(np.arange(16, dtype="uint32").reshape(4, 4), 1)
    with pytest.raises(GdalMcpError) as e:
        polygonize(str(path), str(tmp_path / "u.gpkg"))
    assert e.value.code == "unsupported" and "uint32" in e.value.message


@pytest.mark.parametrize(
    ("kwargs", "code", "needle"),
    [
        ({"band": 2}, "invalid-argument", "band(s) [2] do not exist; the raster has 1 band(s)"),
        ({"band": 0}, "invalid-argument", "do not exist"),
        ({"connectivity": 6}, "invalid-argument", "connectivity must be 4"),
        ({"field": ""}, "invalid-argument", "field must be a non-empty name"),
        ({"format": "NoSuchFormat"}, "invalid-argument", "unknown or read-only vector format"),
    ],
)
def test_bad_arguments(tmp_path: Path, kwargs: dict, code: str, needle: str) -> None:
    with pytest.raises(GdalMcpError) as e:
        polygonize(SHADE, str(tmp_path / "x.gpkg"), **kwargs)
    assert e.value.code == code and needle in e.value.message


def test_output_format_from_extension_or_error(tmp_path: Path) -> None:
    with pytest.raises(GdalMcpError) as e:
        polygonize(SHADE, str(tmp_path / "x.unknown"))
    assert e.value.code == "invalid-argument" and "cannot tell the vector format" in e.value.message
    summary, _ = polygonize(SHADE, str(tmp_path / "x.unknown"), format="gpkg")
    assert summary.driver == "GPKG"
