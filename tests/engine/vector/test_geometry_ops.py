"""vector_geometry engine: every operation against geopandas/shapely on naturalearth, attributes kept."""

from __future__ import annotations

from pathlib import Path

import geopandas
import pytest
import shapely

from gdal_mcp.engine.vector.geometry_ops import geometry_op
from gdal_mcp.errors import GdalMcpError

NE = Path(__file__).parents[2] / "data" / "vector" / "naturalearth_lowres.shp"


@pytest.mark.parametrize("operation", ["centroid", "point_on_surface", "convex_hull", "envelope", "boundary", "make_valid"])
def test_like_geopandas(tmp_path: Path, operation: str) -> None:
    df = geopandas.read_file(NE)
    summary, _ = geometry_op(str(NE), str(tmp_path / "o.gpkg"), operation=operation)
    out = geopandas.read_file(tmp_path / "o.gpkg")
    expected = {
        "centroid": df.centroid,
        "point_on_surface": df.representative_point(),
        "convex_hull": df.convex_hull,
        "envelope": df.envelope,
        "boundary": df.boundary,
        "make_valid": df.geometry,
    }[operation]
    assert summary.feature_count == len(df) and out["name"].tolist() == df["name"].tolist()
    for a, b in zip(out.geometry, expected, strict=True):
        assert shapely.normalize(a).equals_exact(shapely.normalize(b), 1e-9) or a.equals(b), operation


def test_explode_and_set_precision(tmp_path: Path) -> None:
    df = geopandas.read_file(NE)
    summary, _ = geometry_op(str(NE), str(tmp_path / "e.gpkg"), operation="explode")
    expected = df.explode(index_parts=False)
    out = geopandas.read_file(tmp_path / "e.gpkg")
    assert summary.feature_count == len(expected) and summary.geometry_type == "Polygon"
    assert out["name"].tolist() == expected["name"].tolist()
    assert all(a.equals_exact(b, 0) for a, b in zip(out.geometry, expected.geometry, strict=True))
    geometry_op(str(NE), str(tmp_path / "p.gpkg"), operation="set_precision", grid_size=0.1)
    snapped = geopandas.read_file(tmp_path / "p.gpkg")
    ref = shapely.set_precision(df.geometry.values, 0.1)
    for a, b in zip(snapped.geometry, ref, strict=True):
        assert (a is None and b.is_empty) or a.equals(b)
    with pytest.raises(GdalMcpError):
        geometry_op(str(NE), str(tmp_path / "q.gpkg"), operation="set_precision")
