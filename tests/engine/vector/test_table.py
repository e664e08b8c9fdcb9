"""vector_from_table engine: CSV/XLSX/WKT tables to geometries, checked against the data written in the test."""

from __future__ import annotations

from pathlib import Path

import geopandas
import numpy as np
import pyarrow as pa
import pyogrio
import pytest
import shapely

from gdal_mcp.engine.vector.table import detect_columns, from_table
from gdal_mcp.errors import GdalMcpError

NE = Path(__file__).parents[2] / "data" / "vector" / "naturalearth_lowres.shp"


def _centroids() -> geopandas.GeoDataFrame:
    df = geopandas.read_file(NE)
    df["geometry"] = df.geometry.representative_point()
    return df


def test_csv_with_lon_lat_round_trips(tmp_path: Path) -> None:
    df = _centroids()
    table = df.drop(columns="geometry").assign(Longitude=df.geometry.x, Latitude=df.geometry.y)
    table.to_csv(tmp_path / "cities.csv", index=False)
    result, warnings = from_table(str(tmp_path / "cities.csv"), str(tmp_path / "cities.gpkg"))
    assert (result.x, result.y, result.unparsed_rows, result.rows) == ("Longitude", "Latitude", 0, len(df))
    assert any("detected" in w for w in warnings)
    back = geopandas.read_file(tmp_path / "cities.gpkg")
    assert back.crs.to_epsg() == 4326 and list(back.geom_type.unique()) == ["Point"]
    np.testing.assert_array_equal(back.geometry.x, df.geometry.x)  # repr floats round-trip exactly
    np.testing.assert_array_equal(back.geometry.y, df.geometry.y)
    assert back["pop_est"].dtype.kind in "if" and back["name"].tolist() == df["name"].tolist()
    np.testing.assert_array_equal(back["pop_est"].to_numpy(float), df["pop_est"].to_numpy(float))


def test_unreadable_coordinates_are_written_without_geometry_and_reported(tmp_path: Path) -> None:
    src = tmp_path / "t.csv"
    src.write_text("id,lat,lon,zip\n1,10.5,20.25,01234\n2,abc,3,02000\n3,,4,3000\n4,-5,7e1,4000\n")
    result, warnings = from_table(str(src), str(tmp_path / "t.gpkg"))
    assert (result.rows, result.unparsed_rows, result.unparsed_row_numbers) == (4, 2, [2, 3])
    assert any("2 of 4 row(s)" in w and "null geometry" in w for w in warnings)
    _, _, geoms, fields = pyogrio.raw.read(tmp_path / "t.gpkg")
    pts = shapely.from_wkb(geoms)
    assert pts[0].equals(shapely.Point(20.25, 10.5)) and pts[3].equals(shapely.Point(70, -5))
    assert pts[1] is None and pts[2] is None
    assert list(fields[3]) == ["01234", "02000", "3000", "4000"]  # codes stay text


def test_xlsx_written_by_gdal_and_named_columns(tmp_path: Path) -> None:
    df = _centroids().head(20)
    table = pa.table(
        {
            "name": df["name"].tolist(),
            "E": df.geometry.x.to_numpy(),
            "N": df.geometry.y.to_numpy(),
            "pop": df["pop_est"].to_numpy(),
        }
    )
    pyogrio.raw.write_arrow(
        table, tmp_path / "t.xlsx", driver="XLSX", layer="Sheet1", geometry_name=None, geometry_type=None, crs=None
    )
    with pytest.raises(GdalMcpError) as e:
        from_table(str(tmp_path / "t.xlsx"), str(tmp_path / "x.gpkg"))
    assert e.value.code == "invalid-argument" and "E, N" in e.value.message
    result, _ = from_table(str(tmp_path / "t.xlsx"), str(tmp_path / "t.gpkg"), x="e", y="N", crs="4326")
    assert result.summary.feature_count == 20 and result.summary.layer == "t"
    back = geopandas.read_file(tmp_path / "t.gpkg")
    np.testing.assert_allclose(back.geometry.x, df.geometry.x, rtol=0, atol=1e-12)
    np.testing.assert_allclose(back.geometry.y, df.geometry.y, rtol=0, atol=1e-12)
    assert back["pop"].dtype.kind in "if"


def test_wkt_column(tmp_path: Path) -> None:
    df = geopandas.read_file(NE).head(5)
    src = tmp_path / "w.csv"
    wkt = shapely.to_wkt(df.geometry.values, rounding_precision=-1)
    df.drop(columns="geometry").assign(WKT=wkt).to_csv(src, index=False)
    result, _ = from_table(str(src), str(tmp_path / "w.gpkg"))
    assert result.wkt == "WKT" and result.unparsed_rows == 0
    back = geopandas.read_file(tmp_path / "w.gpkg")
    assert all(a.equals_exact(b, 0) for a, b in zip(back.geometry, shapely.from_wkt(wkt), strict=True))


def test_detect_columns() -> None:
    assert detect_columns(["a", "LON", "Lat"], None, None, None) == ("LON", "Lat", None)
    assert detect_columns(["easting", "northing"], None, None, None) == ("easting", "northing", None)
    with pytest.raises(GdalMcpError):
        detect_columns(["a", "b"], None, None, None)
    with pytest.raises(GdalMcpError):
        detect_columns(["x", "y"], "x", None, None)
