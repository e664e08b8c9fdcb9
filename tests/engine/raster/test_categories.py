"""Class areas (raster_stats categorical) and zonal class areas, against references computed here.

Geographic case: naturalearth countries rasterized (rasterio.features.rasterize) onto a 0.5-degree EPSG:4326
grid. The reference pixel area is the exact ellipsoidal area of a latitude/longitude cell,
    A = Δλ · (F(φ2) − F(φ1)),  F(φ) = b²/2 · [sinφ / (1 − e² sin²φ) + atanh(e sinφ) / e],
which is independent of the engine's method (pyproj.Geod on each row's pixel polygon, whose edges are
geodesics rather than parallels: the two differ by < 1e-6 relative on 0.5-degree cells, measured).
Projected case: RGB.byte.tif band 1 put into four classes; every pixel is about 300.04 m x 300.04 m.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyogrio
import pyogrio.raw
import pytest
import rasterio
import shapely
from pyproj import Geod
from rasterio.features import geometry_mask, rasterize
from rasterio.transform import from_origin

from gdal_mcp.engine.features.zonal import zonal_stats
from gdal_mcp.engine.raster.categories import MAX_CLASSES, categories
from gdal_mcp.errors import GdalMcpError
from tests.helpers import DATA

COUNTRIES = str(DATA / "vector" / "naturalearth_lowres.shp")
RGB = str(DATA / "raster" / "RGB.byte.tif")
WGS84_A = 6378137.0
WGS84_F = 1 / 298.257223563


def cell_area_by_row(lat_top: np.ndarray, lat_bottom: np.ndarray, dlon_deg: float) -> np.ndarray:
    """Exact area (m²) of a WGS 84 lat/lon cell between two parallels, `dlon_deg` wide."""
    e2 = WGS84_F * (2 - WGS84_F)
    e = np.sqrt(e2)
    b2 = (WGS84_A * (1 - WGS84_F)) ** 2

    def big_f(lat: np.ndarray) -> np.ndarray:
        s = np.sin(np.radians(lat))
        return b2 / 2 * (s / (1 - e2 * s * s) + np.arctanh(e * s) / e)

    return np.radians(dlon_deg) * np.abs(big_f(lat_top) - big_f(lat_bottom))


def countries_grid(path: Path, res: float = 0.5) -> tuple[str, np.ndarray, list[str]]:
    """Countries burnt as 1..177 (0 = sea, declared nodata) on a global `res`-degree grid; (path, grid, names)."""
    _, _, wkb, fields = pyogrio.raw.read(COUNTRIES)
    names = list(fields[2])
    geoms = shapely.from_wkb(wkb)
    width, height = int(360 / res), int(180 / res)
    transform = from_origin(-180, 90, res, res)
    grid = rasterize(
        ((g, i + 1) for i, g in enumerate(geoms)), out_shape=(height, width), transform=transform, fill=0, dtype="uint16"
    )
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=width,
        height=height,
        count=1,
        dtype="uint16",
        crs="EPSG:4326",
        transform=transform,
        nodata=0,
    ) as ds:
        ds.write(grid, 1)
    return str(path), grid, names


def reference_areas(grid: np.ndarray, res: float, valid: np.ndarray | None = None) -> dict[int, tuple[int, float]]:
    """Per value: (pixel count, area m²) with the exact cell area of each row."""
    rows = np.arange(grid.shape[0])
    row_area = cell_area_by_row(90 - rows * res, 90 - (rows + 1) * res, res)
    weights = np.broadcast_to(row_area[:, None], grid.shape)
    sel = grid != 0 if valid is None else valid & (grid != 0)
    values, w = grid[sel], weights[sel]
    out = {}
    for v in np.unique(values):
        m = values == v
        out[int(v)] = (int(m.sum()), float(w[m].sum()))
    return out


def test_geographic_class_areas_match_the_exact_ellipsoidal_cells(tmp_path: Path) -> None:
    path, grid, names = countries_grid(tmp_path / "countries.tif")
    res = categories(path)
    assert res.area_method == "geodesic" and res.crs == "EPSG:4326" and res.pixel_area_m2 is None
    band = res.bands[0]
    ref = reference_areas(grid, 0.5)
    assert {c.value for c in band.classes} == set(ref)
    assert band.valid_count == int((grid != 0).sum()) and band.nodata_count == int((grid == 0).sum())
    for c in band.classes:
        count, area = ref[int(c.value)]
        assert c.count == count
        assert c.area_m2 == pytest.approx(area, rel=1e-6)
        assert c.area_ha == pytest.approx(c.area_m2 / 1e4)
        assert c.fraction == pytest.approx(count / band.valid_count)
    assert band.area_m2 == pytest.approx(sum(a for _, a in ref.values()), rel=1e-6)
    # Not degrees²: Russia's 0.5-degree pixels cover about 1.7e7 km² (a degrees² sum would be ~ 3e3).
    russia = next(c for c in band.classes if names[int(c.value) - 1] == "Russia")
    assert 1.5e13 < russia.area_m2 < 1.9e13


def test_whole_globe_sums_to_the_ellipsoid_surface(tmp_path: Path) -> None:
    """Every pixel a class (no nodata): the areas add up to WGS 84's surface, 510 065 621.7 km²."""
    path = tmp_path / "globe.tif"
    data = (np.arange(180)[:, None] // 30 + np.zeros((1, 360), dtype=int)).astype("uint8")
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=360,
        height=180,
        count=1,
        dtype="uint8",
        crs="EPSG:4326",
        transform=from_origin(-180, 90, 1, 1),
    ) as ds:
        ds.write(data, 1)
    res = categories(str(path))
    surface = 2 * cell_area_by_row(np.array([90.0]), np.array([-90.0]), 180.0)[0]  # exact: 4πR_q²
    assert surface == pytest.approx(510_065_621.7e6, rel=1e-9)
    assert res.bands[0].area_m2 == pytest.approx(surface, rel=1e-9)
    # Six bands of 30 degrees of latitude, symmetric about the equator.
    areas = [c.area_m2 for c in res.bands[0].classes]
    assert areas[0] == pytest.approx(areas[5], rel=1e-9) and areas[2] == pytest.approx(areas[3], rel=1e-9)
    assert [c.fraction for c in res.bands[0].classes] == pytest.approx([1 / 6] * 6)
    assert sum(c.area_fraction for c in res.bands[0].classes) == pytest.approx(1.0)


@pytest.mark.parametrize("country", ["Brazil", "Australia", "Kazakhstan"])
def test_class_area_is_the_country_area_within_pixelation(tmp_path: Path, country: str) -> None:
    """Against Geod.geometry_area_perimeter of the polygon. Its edges are densified first, so that they are
    straight in lon/lat as they are when rasterized (Geod would take them as geodesics). Pixels are kept by
    their centre, so the difference is the boundary's pixelation: a fraction of perimeter x half a pixel."""
    path, grid, names = countries_grid(tmp_path / "countries.tif")
    value = names.index(country) + 1
    cls = next(c for c in categories(path).bands[0].classes if c.value == value)
    _, _, wkb, _ = pyogrio.raw.read(COUNTRIES)
    geom = shapely.segmentize(shapely.from_wkb(wkb[value - 1]), 0.05)
    area, perimeter = Geod(ellps="WGS84").geometry_area_perimeter(geom)
    half_pixel_m = 0.25 * 111_000
    assert abs(cls.area_m2 - abs(area)) < 0.5 * perimeter * half_pixel_m
    assert cls.area_m2 == pytest.approx(abs(area), rel=0.03)


def reclassified_rgb(path: Path) -> tuple[str, np.ma.MaskedArray]:
    """RGB.byte.tif band 1 in classes 1..4 (by 64-wide ranges), nodata 0 where band 1 is nodata."""
    with rasterio.open(RGB) as src:
        band = src.read(1, masked=True)
        profile = src.profile | {"count": 1, "dtype": "uint8", "nodata": 0}
    classes = np.ma.masked_array((np.ma.getdata(band) // 64 + 1).astype("uint8"), mask=np.ma.getmaskarray(band))
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(classes.filled(0), 1)
    return str(path), classes


def test_projected_class_areas_are_count_times_pixel_area(tmp_path: Path) -> None:
    path, classes = reclassified_rgb(tmp_path / "classes.tif")
    res = categories(path)
    with rasterio.open(path) as ds:
        pixel = abs(ds.transform.a * ds.transform.e)
    assert pixel == pytest.approx(300.04 * 300.04, rel=1e-4)
    assert res.area_method == "projected" and res.pixel_area_m2 == pytest.approx(pixel) and res.crs == "EPSG:32618"
    values, counts = np.unique(classes.compressed(), return_counts=True)
    band = res.bands[0]
    assert [c.value for c in band.classes] == values.tolist()
    assert [c.count for c in band.classes] == counts.tolist()
    assert [c.area_m2 for c in band.classes] == pytest.approx((counts * pixel).tolist(), rel=1e-12)
    assert [c.area_ha for c in band.classes] == pytest.approx((counts * pixel / 1e4).tolist(), rel=1e-12)
    assert band.nodata_count == int(classes.mask.sum())


def test_bbox_and_bands(tmp_path: Path) -> None:
    path, classes = reclassified_rgb(tmp_path / "classes.tif")
    with rasterio.open(path) as ds:
        t = ds.transform
        bbox = (t.c + 100 * t.a, t.f + 300 * t.e, t.c + 400 * t.a, t.f + 100 * t.e)  # cols 100-400, rows 100-300
    res = categories(path, bands=[1], bbox=bbox)
    assert res.window == (100, 100, 300, 200)
    values, counts = np.unique(classes[100:300, 100:400].compressed(), return_counts=True)
    assert [(c.value, c.count) for c in res.bands[0].classes] == list(zip(values.tolist(), counts.tolist(), strict=True))
    with pytest.raises(GdalMcpError) as e:
        categories(path, bands=[2])
    assert e.value.code == "invalid-argument"


def test_streamed_in_several_windows_gives_the_same_areas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, grid, _ = countries_grid(tmp_path / "countries.tif")
    whole = categories(path)
    import gdal_mcp.engine.raster.region as region_module
    import gdal_mcp.engine.tiles as tiles_module

    monkeypatch.setattr(region_module, "DEFAULT_WINDOW_PIXELS", 5000)
    monkeypatch.setattr(tiles_module, "TILE_ALIGN", 16)  # 23 tiles (full-width rows of the striped file)
    monkeypatch.setattr(tiles_module, "MAX_TILE_SIDE", 16)
    seen: list[str] = []
    split = categories(path, progress=lambda f, m="": seen.append(m))
    assert len(seen) > 20
    assert split.bands[0].valid_count == whole.bands[0].valid_count
    for a, b in zip(split.bands[0].classes, whole.bands[0].classes, strict=True):
        assert (a.value, a.count) == (b.value, b.count) and a.area_m2 == pytest.approx(b.area_m2, rel=1e-12)


def test_continuous_float_band_is_refused_with_a_way_forward(tmp_path: Path) -> None:
    path = tmp_path / "float.tif"
    rng = np.random.default_rng(0)
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=200,
        height=100,
        count=1,
        dtype="float32",
        crs="EPSG:32618",
        transform=from_origin(0, 0, 10, 10),
    ) as ds:
        ds.write(rng.random((100, 200), dtype="float32"), 1)
    with pytest.raises(GdalMcpError) as e:
        categories(str(path))
    assert e.value.code == "invalid-argument" and str(MAX_CLASSES) in e.value.message
    assert "raster_reclassify" in e.value.message


def test_float_classes_and_nan(tmp_path: Path) -> None:
    path = tmp_path / "float_classes.tif"
    data = np.array([[1.5, 1.5, np.nan], [2.0, 1.5, 2.0]], dtype="float32")
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=3,
        height=2,
        count=1,
        dtype="float32",
        crs="EPSG:3035",
        transform=from_origin(4e6, 3e6, 100, 100),
    ) as ds:
        ds.write(data, 1)
    band = categories(str(path)).bands[0]
    assert [(c.value, c.count, c.area_m2) for c in band.classes] == [(1.5, 3, 30_000.0), (2.0, 2, 20_000.0)]
    assert band.nodata_count == 1


def test_without_crs_areas_are_null(tmp_path: Path) -> None:
    path = tmp_path / "nocrs.tif"
    with rasterio.open(path, "w", driver="GTiff", width=4, height=4, count=1, dtype="uint8") as ds:
        ds.write(np.arange(16, dtype="uint8").reshape(4, 4) % 2, 1)
    res = categories(str(path))
    assert res.area_method == "none" and any("no CRS" in w for w in res.warnings)
    assert [(c.value, c.count, c.area_m2, c.fraction) for c in res.bands[0].classes] == [(0, 8, None, 0.5), (1, 8, None, 0.5)]


def test_mercator_areas_are_warned(tmp_path: Path) -> None:
    path = tmp_path / "merc.tif"
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=2,
        height=2,
        count=1,
        dtype="uint8",
        crs="EPSG:3857",
        transform=from_origin(0, 6e6, 1000, 1000),
    ) as ds:
        ds.write(np.ones((2, 2), dtype="uint8"), 1)
    res = categories(str(path))
    assert res.bands[0].area_m2 == pytest.approx(4e6) and any("Mercator" in w for w in res.warnings)


# ---------------------------------------------------------------------------------------------- zonal


def write_zones(path: Path, geoms: list, crs: str, names: list[str]) -> str:
    pyogrio.raw.write(
        str(path),
        shapely.to_wkb(np.asarray(geoms)),
        [np.asarray(names, dtype=object)],
        ["zone"],
        geometry_type="Polygon",
        crs=crs,
    )
    return str(path)


def test_zonal_class_areas_per_zone(tmp_path: Path) -> None:
    path, grid, names = countries_grid(tmp_path / "countries.tif")
    boxes = [shapely.box(-10, 35, 30, 60), shapely.box(-80, -40, -35, 10), shapely.box(150, 60, 170, 80)]
    zones = write_zones(tmp_path / "zones.gpkg", boxes, "EPSG:4326", ["europe", "south_america", "siberia"])
    result, _ = zonal_stats(path, zones, categorical=True, id_field="zone", dst=str(tmp_path / "out.gpkg"))
    assert result.stats == ["count"]
    transform = from_origin(-180, 90, 0.5, 0.5)
    for row, box in zip(result.rows, boxes, strict=True):
        inside = ~geometry_mask([box], out_shape=grid.shape, transform=transform)
        ref = reference_areas(grid, 0.5, inside)
        valid = sum(n for n, _ in ref.values())
        assert row["count"] == valid
        assert set(row["classes"]) == {str(v) for v in ref}
        for v, (n, area) in ref.items():
            got = row["classes"][str(v)]
            assert got["count"] == n and got["area_m2"] == pytest.approx(area, rel=1e-6)
            assert got["area_ha"] == pytest.approx(area / 1e4, rel=1e-6) and got["fraction"] == pytest.approx(n / valid)
    # Written: one JSON text field "classes" per zone, the same mapping.
    _, _, _, fields = pyogrio.raw.read(str(tmp_path / "out.gpkg"))
    info = pyogrio.read_info(str(tmp_path / "out.gpkg"))
    written = dict(zip(info["fields"], fields, strict=True))
    assert list(written["zone"]) == ["europe", "south_america", "siberia"]
    assert [json.loads(t) for t in written["classes"]] == [r["classes"] for r in result.rows]


def test_zonal_class_areas_projected_zones_reprojected(tmp_path: Path) -> None:
    """Projected raster, zones given in EPSG:4326: areas are counts x pixel area."""
    path, classes = reclassified_rgb(tmp_path / "classes.tif")
    with rasterio.open(path) as ds:
        t = ds.transform
        pixel = abs(t.a * t.e)
        local = shapely.box(t.c + 100 * t.a, t.f + 300 * t.e, t.c + 400 * t.a, t.f + 100 * t.e)
        from pyproj import Transformer

        to_ll = Transformer.from_crs(ds.crs.to_wkt(), "EPSG:4326", always_xy=True)
        zone_ll = shapely.transform(
            shapely.segmentize(local, 100.0), lambda xy: np.column_stack(to_ll.transform(xy[:, 0], xy[:, 1]))
        )
        back = Transformer.from_crs("EPSG:4326", ds.crs.to_wkt(), always_xy=True)
        zone_back = shapely.transform(zone_ll, lambda xy: np.column_stack(back.transform(xy[:, 0], xy[:, 1])))
        inside = ~geometry_mask([zone_back], out_shape=classes.shape, transform=t)
    zones = write_zones(tmp_path / "z.gpkg", [zone_ll], "EPSG:4326", ["a"])
    result, _ = zonal_stats(path, zones, categorical=True, stats=["count", "majority"])
    row = result.rows[0]
    values, counts = np.unique(classes[inside & ~classes.mask].data, return_counts=True)
    assert row["count"] == counts.sum()
    assert {k: v["count"] for k, v in row["classes"].items()} == {str(v): int(n) for v, n in zip(values, counts, strict=True)}
    assert {k: v["area_m2"] for k, v in row["classes"].items()} == pytest.approx(
        {str(v): n * pixel for v, n in zip(values, counts, strict=True)}
    )
    assert row["majority"] == float(values[np.argmax(counts)])


def test_rotated_geographic_grid_uses_local_scale(tmp_path: Path) -> None:
    """A lon/lat grid rotated by 10 degrees (latitude changes along a row): its total area is that of its outline."""
    from affine import Affine

    transform = Affine.translation(10, 50) @ Affine.rotation(10) @ Affine.scale(0.05, -0.05)
    path = tmp_path / "rotated.tif"
    with rasterio.open(
        path, "w", driver="GTiff", width=100, height=80, count=1, dtype="uint8", crs="EPSG:4326", transform=transform
    ) as ds:
        ds.write(np.ones((80, 100), dtype="uint8"), 1)
    res = categories(str(path))
    outline = shapely.segmentize(shapely.Polygon([transform @ p for p in ((0, 0), (100, 0), (100, 80), (0, 80))]), 0.01)
    area, _ = Geod(ellps="WGS84").geometry_area_perimeter(outline)
    assert res.area_method == "geodesic"
    assert res.bands[0].area_m2 == pytest.approx(abs(area), rel=1e-4)
