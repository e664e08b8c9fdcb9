"""Contours against gdal_contour (Debian gdal-bin) on a real DEM, and strip joins against the whole band."""

from __future__ import annotations

import numpy as np
import pyogrio
import pytest
import shapely

import gdal_mcp.engine.features.contour as contour_module
from gdal_mcp.engine.features.contour import contour
from gdal_mcp.errors import GdalMcpError
from tests.cli_reference import gdal_cli
from tests.conftest import DATA

DEM = str(DATA / "raster" / "jacksboro_dem.tif")


def read(path) -> tuple[np.ndarray, dict]:
    meta, table = pyogrio.read_arrow(str(path))
    geoms = shapely.from_wkb(table.column(meta["geometry_name"] or "wkb_geometry").to_numpy(zero_copy_only=False))
    return geoms, {name: np.array(table.column(name).to_pylist()) for name in table.column_names}


@pytest.fixture
def strips(monkeypatch):
    def set_rows(rows: int) -> None:
        monkeypatch.setattr(contour_module, "STRIP_PIXELS", rows * 403)
    return set_rows


@pytest.mark.parametrize("interval", [50, 10])
def test_lines_match_gdal_contour(tmp_path, interval) -> None:
    # base 0.5 keeps levels off the integer elevations (see the note on ties below)
    gdal_cli("gdal_contour", "-a", "elev", "-i", str(interval), "-off", "0.5", DEM, str(tmp_path / "ref.gpkg"))
    summary, warnings = contour(DEM, str(tmp_path / "ours.gpkg"), interval=interval, base=0.5)
    ours, ours_fields = read(tmp_path / "ours.gpkg")
    ref, ref_fields = read(tmp_path / "ref.gpkg")
    assert summary.geometry_type == "LineString" and summary.fields == ["ID", "elev"] and summary.crs == "EPSG:4326"
    assert sorted(set(ours_fields["elev"])) == sorted(set(ref_fields["elev"]))
    assert abs(shapely.length(ours).sum() / shapely.length(ref).sum() - 1) < 0.005
    # GDAL 3.6 resolves the saddles whose high corners are upper-right/lower-left the other way round from
    # the centre-value rule (contourpy, and GDAL for the other diagonal): a few percent more features here.
    assert abs(len(ours) / len(ref) - 1) < 0.05, (len(ours), len(ref))
    # lines reach the raster edge, as gdal_contour's
    assert np.allclose(shapely.total_bounds(ours), shapely.total_bounds(ref))


def test_strips_are_joined_into_whole_lines(tmp_path, strips) -> None:
    contour(DEM, str(tmp_path / "whole.gpkg"), interval=25, base=0.5)
    strips(3)
    contour(DEM, str(tmp_path / "strips.gpkg"), interval=25, base=0.5)
    whole, wf = read(tmp_path / "whole.gpkg")
    parts, pf = read(tmp_path / "strips.gpkg")
    assert len(parts) == len(whole)
    assert np.isclose(shapely.length(parts).sum(), shapely.length(whole).sum(), rtol=1e-9)
    assert sorted(np.round(shapely.length(parts), 9)) == sorted(np.round(shapely.length(whole), 9))


def test_fixed_levels_and_ties_with_integer_levels(tmp_path) -> None:
    gdal_cli("gdal_contour", "-a", "height", "-fl", "300", "600", "900", DEM, str(tmp_path / "ref.gpkg"))
    contour(DEM, str(tmp_path / "ours.gpkg"), levels=[900, 300, 600], attribute="height")
    ours, of = read(tmp_path / "ours.gpkg")
    ref, rf = read(tmp_path / "ref.gpkg")
    assert set(of["height"]) == set(rf["height"]) == {300.0, 600.0, 900.0}
    assert abs(shapely.length(ours).sum() / shapely.length(ref).sum() - 1) < 0.005
    assert abs(len(ours) - len(ref)) <= 0.1 * len(ref)


def test_polygons_match_gdal_contour_areas(tmp_path, strips) -> None:
    gdal_cli("gdal_contour", "-p", "-amin", "amin", "-amax", "amax", "-i", "100", DEM, str(tmp_path / "ref.gpkg"))
    strips(40)
    summary, _ = contour(DEM, str(tmp_path / "ours.gpkg"), interval=100, polygons=True)
    ours, of = read(tmp_path / "ours.gpkg")
    ref, rf = read(tmp_path / "ref.gpkg")
    assert summary.geometry_type == "MultiPolygon" and summary.fields == ["ID", "amin", "amax"]
    assert len(ours) == len(ref)
    assert list(of["amax"]) == list(rf["amax"]) and list(of["amin"][1:]) == list(rf["amin"][1:])
    assert np.allclose(shapely.area(ours), shapely.area(ref), rtol=0.005)
    assert shapely.is_valid(ours).all()
    # together the bands tile the raster
    assert np.isclose(shapely.area(ours).sum(), 403 * 344 * (1 / 1200) ** 2, rtol=1e-6)


def test_nodata_is_left_out(tmp_path) -> None:
    import rasterio

    with rasterio.open(DEM) as ds:
        z, profile = ds.read(1), ds.profile
    z[100:200, 100:200] = -32768
    profile.update(nodata=-32768)
    with rasterio.open(tmp_path / "holes.tif", "w", **profile) as out:
        out.write(z, 1)
    contour(str(tmp_path / "holes.tif"), str(tmp_path / "c.gpkg"), interval=50, base=0.5)
    lines, fields = read(tmp_path / "c.gpkg")
    assert fields["elev"].min() > 200
    hole = shapely.box(-84.41375 + 101.5 / 1200, 36.7329166667 - 198.5 / 1200, -84.41375 + 198.5 / 1200,
                       36.7329166667 - 101.5 / 1200)
    assert not shapely.intersects(lines, hole).any()


def test_bad_arguments(tmp_path) -> None:
    with pytest.raises(GdalMcpError) as e:
        contour(DEM, str(tmp_path / "x.gpkg"))
    assert e.value.code == "invalid-argument"
    with pytest.raises(GdalMcpError) as e:
        contour(DEM, str(tmp_path / "x.gpkg"), interval=0.0001)
    assert e.value.code == "invalid-argument" and "larger interval" in e.value.message
