"""Geometry validation report and repaired copy, on a GeoPackage with known invalid features."""

from __future__ import annotations

import numpy as np
import pyogrio
import pyogrio.raw
import pytest
import shapely

import gdal_mcp.engine.vector.layer_map as layer_map
from gdal_mcp.engine.vector.validate import split_reason, validate
from gdal_mcp.errors import GdalMcpError
from tests.helpers import DATA

BOWTIE = shapely.Polygon([(0, 0), (2, 2), (2, 0), (0, 2), (0, 0)])  # two triangles of area 1 meeting at (1, 1)
SELF_TOUCHING = shapely.Polygon([(10, 0), (20, 0), (20, 10), (15, 0), (10, 10), (10, 0)])  # shell touches itself
VALID = [shapely.box(30, 0, 31, 1), shapely.Polygon([(40, 0), (42, 0), (41, 2)]), shapely.box(50, 0, 53, 3)]


@pytest.fixture
def layer(tmp_path):
    """shapes.gpkg: valid, bow-tie, valid, null, self-touching ring, empty, valid (FIDs 1..7)."""
    geoms = np.array([VALID[0], BOWTIE, VALID[1], None, SELF_TOUCHING, shapely.Polygon(), VALID[2]], dtype=object)
    path = tmp_path / "shapes.gpkg"
    pyogrio.raw.write(
        str(path),
        shapely.to_wkb(geoms),
        [np.arange(1, 8) * 10],
        fields=["code"],
        layer="shapes",
        geometry_type="Polygon",
        crs="EPSG:32631",
        driver="GPKG",
    )
    return path


def load(path, **kwargs):
    meta, fids, wkb, fields = pyogrio.raw.read(str(path), return_fids=True, **kwargs)
    return fids, dict(zip(meta["fields"], fields, strict=True)), shapely.from_wkb(wkb)


def test_report_counts_reasons_and_examples(layer) -> None:
    fids, _, _ = load(layer)
    assert list(fids) == [1, 2, 3, 4, 5, 6, 7]
    report, warnings = validate(str(layer))
    assert warnings == [] and report.fixed_output is None
    assert (report.layer, report.feature_count, report.invalid_count, report.empty_count) == ("shapes", 7, 2, 2)
    assert report.reasons == {"Self-intersection": 1, "Ring Self-intersection": 1}
    assert report.examples == [
        {"fid": 2, "reason": "Self-intersection", "location": [1.0, 1.0]},
        {"fid": 5, "reason": "Ring Self-intersection", "location": [15.0, 0.0]},
    ]
    assert validate(str(layer), max_examples=1)[0].examples == report.examples[:1]
    assert validate(str(layer), max_examples=0)[0].examples == []


def test_repaired_copy_is_valid_and_keeps_valid_features(layer, tmp_path) -> None:
    out = tmp_path / "fixed.gpkg"
    report, warnings = validate(str(layer), dst=str(out))
    assert report.fixed_output == str(out) and report.invalid_count == 2 and report.warnings == warnings
    # The bow-tie becomes two triangles: a GeoPackage Polygon layer is promoted to MultiPolygon.
    assert len(warnings) == 1 and "MultiPolygon, not Polygon" in warnings[0]
    info = pyogrio.read_info(str(out))
    assert info["geometry_type"] == "MultiPolygon" and info["features"] == 7 and info["crs"] == "EPSG:32631"
    _, fields, fixed = load(out)
    assert list(fields["code"]) == [10, 20, 30, 40, 50, 60, 70]
    present = fixed[~shapely.is_missing(fixed)]
    assert shapely.is_valid(present).all()
    for got, want in zip(fixed[[0, 2, 6]], VALID, strict=True):  # unchanged, only wrapped as one-part Multi
        assert len(got.geoms) == 1 and shapely.equals_exact(got.geoms[0], want, tolerance=0)
    bowtie, ring = fixed[1], fixed[4]
    assert (
        len(bowtie.geoms) == 2
        and bowtie.area == pytest.approx(2.0)
        and bowtie.equals(BOWTIE.buffer(0) | (shapely.Polygon([(0, 0), (1, 1), (0, 2)])))
    )
    assert ring.area == pytest.approx(SELF_TOUCHING.area) and ring.is_valid
    assert fixed[3] is None and fixed[5].is_empty  # null and empty stay as they were
    again, _ = validate(str(out))
    assert again.invalid_count == 0 and again.empty_count == 2


def test_a_shapefile_copy_keeps_the_polygon_type(layer, tmp_path) -> None:
    report, warnings = validate(str(layer), dst=str(tmp_path / "fixed.shp"))
    assert warnings == [] and pyogrio.read_info(str(tmp_path / "fixed.shp"))["geometry_type"] == "Polygon"
    assert validate(str(tmp_path / "fixed.shp"))[0].invalid_count == 0


def test_collapsed_repairs_become_null(tmp_path) -> None:
    sliver = shapely.Polygon([(0, 0), (1, 0), (2, 0), (0, 0)])  # no area: make_valid gives a line
    path = tmp_path / "s.gpkg"
    pyogrio.raw.write(
        str(path),
        shapely.to_wkb(np.array([sliver, VALID[0]], dtype=object)),
        [np.array([1, 2])],
        fields=["n"],
        geometry_type="Polygon",
        crs="EPSG:4326",
        driver="GPKG",
    )
    report, warnings = validate(str(path), dst=str(tmp_path / "f.fgb"))
    assert report.invalid_count == 1 and list(report.reasons) == ["Self-intersection"]
    # Counted once although FlatGeobuf was written twice (its spatial index refuses null geometries).
    assert sorted(warnings) == [
        "1 invalid feature(s) collapsed when repaired (nothing of their dimension was left) "
        "and were written with a null geometry",
        "some features have no geometry, which a "
        "FlatGeobuf spatial index cannot hold: the file was written without a spatial index",
    ]
    fixed = load(tmp_path / "f.fgb")[2]
    assert fixed[0] is None and fixed[1].equals(VALID[0])


def test_many_batches_progress_and_naturalearth(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(layer_map, "READ_BATCH", 20)
    reports: list[tuple[float, str]] = []
    world = str(DATA / "vector" / "naturalearth_lowres.shp")
    report, warnings = validate(world, dst=str(tmp_path / "w.gpkg"), progress=lambda f, m="": reports.append((f, m)))
    assert (report.feature_count, report.invalid_count, report.empty_count) == (177, 0, 0) and report.reasons == {}
    fractions = [f for f, _ in reports]
    assert fractions == sorted(fractions) and reports[-1] == (1.0, "wrote 177 features") and len(reports) >= 18
    assert pyogrio.read_info(str(tmp_path / "w.gpkg"))["features"] == 177


def test_split_reason() -> None:
    assert split_reason("Self-intersection[0.5 -1e-05]") == ("Self-intersection", [0.5, -1e-05])
    assert split_reason("Too few points[1 2 3]") == ("Too few points", [1.0, 2.0])
    assert split_reason("Something else") == ("Something else", None)


def test_invalid_arguments(layer, tmp_path) -> None:
    with pytest.raises(GdalMcpError) as e:
        validate(str(layer), max_examples=-1)
    assert e.value.code == "invalid-argument"
    with pytest.raises(GdalMcpError) as e:
        validate(str(layer), dst=str(tmp_path / "x.unknown"))
    assert e.value.code == "invalid-argument"
    with pytest.raises(GdalMcpError) as e:
        validate(str(layer), layer="other")
    assert e.value.code == "not-found"
