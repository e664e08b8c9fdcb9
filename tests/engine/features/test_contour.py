"""Contours against gdal_contour (Debian gdal-bin 3.6.2) on a real DEM: the same features, line for line."""

from __future__ import annotations

import numpy as np
import pyogrio
import pytest
import shapely

from gdal_mcp.engine.features.contour import contour
from gdal_mcp.errors import GdalMcpError
from tests.cli_reference import gdal_cli
from tests.helpers import DATA

DEM = str(DATA / "raster" / "jacksboro_dem.tif")


def read(path) -> tuple[np.ndarray, dict]:
    meta, table = pyogrio.read_arrow(str(path))
    geoms = shapely.from_wkb(table.column(meta["geometry_name"] or "wkb_geometry").to_numpy(zero_copy_only=False))
    return geoms, {name: np.array(table.column(name).to_pylist()) for name in table.column_names}


def signature(geoms: np.ndarray, values: np.ndarray) -> list[tuple[float, float, int]]:
    """Each feature as (level, length, vertex count), sorted: equal lists mean the same features."""
    return sorted(
        zip(
            values.tolist(), np.round(shapely.length(geoms), 9).tolist(), shapely.get_num_coordinates(geoms).tolist(), strict=True
        )
    )


def dem_with_nodata(tmp_path, *, nan: bool = False, declared: bool = True) -> str:
    """The DEM with a square hole and a strip on the top edge of nodata (-32768, or NaN in float32)."""
    import rasterio

    with rasterio.open(DEM) as ds:
        z, profile = ds.read(1), ds.profile
    hole = np.zeros(z.shape, bool)
    hole[100:200, 100:200] = True
    hole[0:5, 0:50] = True
    if nan:
        z = z.astype("float32")
        z[hole] = np.nan
        profile.update(dtype="float32", nodata=None)
    else:
        z[hole] = -32768
        profile.update(nodata=-32768 if declared else None)
    path = tmp_path / f"holes{'_nan' if nan else ''}{'' if declared else '_undeclared'}.tif"
    with rasterio.open(path, "w", **profile) as out:
        out.write(z, 1)
    return str(path)


@pytest.mark.parametrize("interval", [50, 10])
def test_lines_are_gdal_contours(tmp_path, interval) -> None:
    # base 0.5 keeps levels off the integer elevations (ties are tested below)
    gdal_cli("gdal_contour", "-a", "elev", "-i", str(interval), "-off", "0.5", DEM, str(tmp_path / "ref.gpkg"))
    summary, warnings = contour(DEM, str(tmp_path / "ours.gpkg"), interval=interval, base=0.5)
    ours, ours_fields = read(tmp_path / "ours.gpkg")
    ref, ref_fields = read(tmp_path / "ref.gpkg")
    assert summary.geometry_type == "LineString" and summary.fields == ["ID", "elev"] and summary.crs == "EPSG:4326"
    assert warnings == [] and summary.feature_count == len(ours)
    assert len(ours) == len(ref)
    assert sorted(set(ours_fields["elev"])) == sorted(set(ref_fields["elev"]))
    assert abs(shapely.length(ours).sum() / shapely.length(ref).sum() - 1) < 1e-9
    assert signature(ours, ours_fields["elev"]) == signature(ref, ref_fields["elev"])
    assert sorted(ours_fields["ID"]) == list(range(len(ours)))
    # lines reach the raster edge, as gdal_contour's
    assert np.allclose(shapely.total_bounds(ours), shapely.total_bounds(ref))
    # the temporary GeoPackage is gone
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ours.gpkg", "ref.gpkg"]


@pytest.mark.parametrize(
    "ours_args, cli_args",
    [
        ({"interval": 10}, ["-i", "10"]),  # levels equal to pixel values (no -off)
        ({"levels": [900, 300, 600]}, ["-fl", "300", "600", "900"]),
    ],
)
def test_ties_with_integer_levels(tmp_path, ours_args, cli_args) -> None:
    gdal_cli("gdal_contour", "-a", "height", *cli_args, DEM, str(tmp_path / "ref.gpkg"))
    contour(DEM, str(tmp_path / "ours.gpkg"), attribute="height", **ours_args)
    ours, of = read(tmp_path / "ours.gpkg")
    ref, rf = read(tmp_path / "ref.gpkg")
    assert len(ours) == len(ref)
    assert set(of["height"]) == set(rf["height"])
    if "levels" in ours_args:
        assert set(of["height"]) == {300.0, 600.0, 900.0}
    assert abs(shapely.length(ours).sum() / shapely.length(ref).sum() - 1) < 1e-9
    assert signature(ours, of["height"]) == signature(ref, rf["height"])


@pytest.mark.parametrize(
    "level, pair, expected",
    [
        # two high pixels on a diagonal meet in one square (a saddle); centre value 0.5
        (0.4, "ul-lr", 1),
        (0.6, "ul-lr", 1),  # upper-left/lower-right always joined (centre rule: 1, then 2)
        (0.4, "ur-ll", 2),
        (0.6, "ur-ll", 2),  # upper-right/lower-left always cut off (centre rule: 1, then 2)
    ],
)
def test_saddles_are_cut_as_gdal_cuts_them(tmp_path, level, pair, expected) -> None:
    import rasterio
    from rasterio.transform import from_origin

    z = np.zeros((6, 6), "float32")
    if pair == "ul-lr":
        z[2, 2] = z[3, 3] = 1
    else:
        z[2, 3] = z[3, 2] = 1
    with rasterio.open(
        tmp_path / "saddle.tif",
        "w",
        driver="GTiff",
        width=6,
        height=6,
        count=1,
        dtype="float32",
        crs="EPSG:32630",
        transform=from_origin(0, 60, 10, 10),
    ) as out:
        out.write(z, 1)
    contour(str(tmp_path / "saddle.tif"), str(tmp_path / "ours.gpkg"), levels=[level])
    ours, _ = read(tmp_path / "ours.gpkg")
    assert len(ours) == expected and shapely.is_closed(ours).all()
    gdal_cli("gdal_contour", "-fl", str(level), str(tmp_path / "saddle.tif"), str(tmp_path / "ref.gpkg"))
    ref, _ = read(tmp_path / "ref.gpkg")
    assert len(ref) == expected
    assert sorted(np.round(shapely.length(ours), 9)) == sorted(np.round(shapely.length(ref), 9))


def test_polygons_are_gdal_contour_polygons(tmp_path) -> None:
    import rasterio

    gdal_cli("gdal_contour", "-p", "-amin", "amin", "-amax", "amax", "-i", "100", DEM, str(tmp_path / "ref.gpkg"))
    summary, _ = contour(DEM, str(tmp_path / "ours.gpkg"), interval=100, polygons=True)
    ours, of = read(tmp_path / "ours.gpkg")
    ref, rf = read(tmp_path / "ref.gpkg")
    with rasterio.open(DEM) as ds:
        z = ds.read(1)
    assert summary.geometry_type == "MultiPolygon" and summary.fields == ["ID", "amin", "amax"]
    assert len(ours) == len(ref) == int(z.max()) // 100 - int(z.min()) // 100 + 1
    # the inner bounds are the levels; the outer ones the data range (gdal_contour 3.6 writes 0 and the next level)
    assert list(of["amin"][1:]) == list(rf["amin"][1:]) and list(of["amax"][:-1]) == list(rf["amax"][:-1])
    assert (of["amin"][0], of["amax"][-1]) == (float(z.min()), float(z.max()))
    order = np.argsort(of["amax"])
    assert np.allclose(shapely.area(ours)[order], shapely.area(ref)[np.argsort(rf["amax"])], rtol=1e-9, atol=0)
    assert (shapely.get_num_geometries(ours)[order] == shapely.get_num_geometries(ref)[np.argsort(rf["amax"])]).all()
    assert shapely.is_valid(ours).all()
    # together the bands tile the raster
    assert np.isclose(shapely.area(ours).sum(), 403 * 344 * (1 / 1200) ** 2, rtol=1e-6)


@pytest.mark.parametrize("kind", ["declared", "nan", "given"])
def test_nodata_as_gdal_contour(tmp_path, kind) -> None:
    src = dem_with_nodata(tmp_path, nan=kind == "nan", declared=kind == "declared")
    extra = {"nodata": -32768.0} if kind == "given" else {}
    cli = ["-snodata", "-32768"] if kind == "given" else []
    gdal_cli("gdal_contour", "-a", "elev", "-i", "50", *cli, src, str(tmp_path / "ref.gpkg"))
    contour(src, str(tmp_path / "ours.gpkg"), interval=50, **extra)
    lines, fields = read(tmp_path / "ours.gpkg")
    ref, rf = read(tmp_path / "ref.gpkg")
    assert len(lines) == len(ref) and signature(lines, fields["elev"]) == signature(ref, rf["elev"])
    assert fields["elev"].min() > 200
    # lines reach half a pixel towards a nodata pixel, no further: the hole's inside has none
    inside = shapely.box(
        -84.41375 + 100.5 / 1200, 36.7329166667 - 199.5 / 1200, -84.41375 + 199.5 / 1200, 36.7329166667 - 100.5 / 1200
    )
    assert not shapely.intersects(lines, inside).any()
    gdal_cli("gdal_contour", "-p", "-amin", "amin", "-amax", "amax", "-i", "100", *cli, src, str(tmp_path / "refp.gpkg"))
    contour(src, str(tmp_path / "oursp.gpkg"), interval=100, polygons=True, **extra)
    polys, pf = read(tmp_path / "oursp.gpkg")
    refp, rpf = read(tmp_path / "refp.gpkg")
    assert len(polys) == len(refp)
    assert np.allclose(sorted(shapely.area(polys)), sorted(shapely.area(refp)), rtol=1e-9, atol=0)
    assert not shapely.intersects(polys, inside).any()


def test_a_band_without_valid_pixels_gives_an_empty_layer(tmp_path) -> None:
    import rasterio
    from rasterio.transform import from_origin

    with rasterio.open(
        tmp_path / "void.tif",
        "w",
        driver="GTiff",
        width=20,
        height=10,
        count=1,
        dtype="float32",
        nodata=-9999,
        crs="EPSG:32630",
        transform=from_origin(0, 100, 10, 10),
    ) as out:
        out.write(np.full((10, 20), -9999, "float32"), 1)
    summary, warnings = contour(str(tmp_path / "void.tif"), str(tmp_path / "lines.gpkg"), interval=10)
    assert summary.feature_count == 0 and summary.fields == ["ID", "elev"] and "no valid pixel" in warnings[0]
    summary, warnings = contour(str(tmp_path / "void.tif"), str(tmp_path / "bands.gpkg"), levels=[1], polygons=True)
    assert summary.feature_count == 0 and summary.geometry_type == "MultiPolygon" and "no valid pixel" in warnings[0]
    summary, warnings = contour(DEM, str(tmp_path / "none.gpkg"), levels=[5000])
    assert summary.feature_count == 0 and "no level crosses the data range 236..1076" in warnings[0]


def test_other_formats_and_layer_name(tmp_path) -> None:
    gdal_cli("gdal_contour", "-a", "elev", "-i", "100", DEM, str(tmp_path / "ref.gpkg"))
    ref, rf = read(tmp_path / "ref.gpkg")
    for name in ("c.geojson", "c.fgb", "c.shp"):
        summary, _ = contour(DEM, str(tmp_path / name), interval=100, output_layer="levels")
        ours, of = read(tmp_path / name)
        assert summary.fields == ["ID", "elev"] and summary.crs == "EPSG:4326"
        assert len(ours) == len(ref) and np.allclose(sorted(shapely.length(ours)), sorted(shapely.length(ref)))
    # CSV holds the lines as a WKT column (GDAL's CSV driver writes no geometry without GEOMETRY=AS_WKT)
    contour(DEM, str(tmp_path / "c.csv"), interval=100)
    ours, of = read(tmp_path / "c.csv")
    assert len(ours) == len(ref) and np.allclose(sorted(shapely.length(ours)), sorted(shapely.length(ref)))
    assert contour(DEM, str(tmp_path / "c.gpkg"), interval=100, output_layer="levels")[0].layer == "levels"
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".contour")]


def test_cancel_stops_gdal_and_leaves_nothing(tmp_path) -> None:
    class Cancelled(Exception):
        pass

    def progress(fraction: float, message: str) -> None:
        if message.startswith("contouring"):
            raise Cancelled

    with pytest.raises(Cancelled):
        contour(DEM, str(tmp_path / "c.gpkg"), interval=10, progress=progress)
    assert list(tmp_path.iterdir()) == []


def test_bad_arguments(tmp_path) -> None:
    with pytest.raises(GdalMcpError) as e:
        contour(DEM, str(tmp_path / "x.gpkg"))
    assert e.value.code == "invalid-argument"
    with pytest.raises(GdalMcpError) as e:
        contour(DEM, str(tmp_path / "x.gpkg"), interval=0.0001)
    assert e.value.code == "invalid-argument" and "larger interval" in e.value.message
    with pytest.raises(GdalMcpError) as e:
        contour(DEM, str(tmp_path / "x.gpkg"), interval=100, attribute="id")
    assert e.value.code == "invalid-argument" and "taken" in e.value.message
    assert list(tmp_path.iterdir()) == []
