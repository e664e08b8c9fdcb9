"""CSV keeps its numbers both ways: every vector writer writes a .csvt sidecar, so GDAL, QGIS and geopandas read the
integers and reals back as numbers (geopandas/pyogrio, with its defaults, is the reference); and a CSV written
elsewhere (pandas, no .csvt) is read here with GDAL's type detection, as pandas reads it."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import geopandas as gpd
import pandas as pd
import pytest

from gdal_mcp.engine.vector.convert import convert
from gdal_mcp.engine.vector.features import features
from gdal_mcp.engine.vector.geometry import buffer, dissolve
from gdal_mcp.engine.vector.info import vector_info
from gdal_mcp.engine.vector.measure import measure
from gdal_mcp.engine.vector.query import query
from tests.helpers import DATA

NE = str(DATA / "vector" / "naturalearth_lowres.shp")


def read(path: Path) -> gpd.GeoDataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gpd.read_file(path)  # pyogrio's defaults: no type detection, the .csvt decides


@pytest.fixture(scope="module")
def ne() -> gpd.GeoDataFrame:
    return read(Path(NE))


WRITERS: dict[str, Callable[[str], object]] = {
    "convert": lambda dst: convert(NE, dst),
    "convert_sql": lambda dst: convert(NE, dst, sql="SELECT name, pop_est, gdp_md_est FROM naturalearth_lowres"),
    "buffer": lambda dst: buffer(NE, dst, distance=1000),
    "measure": lambda dst: measure(NE, dst=dst, measures=["area"]),
}


@pytest.mark.parametrize("writer", list(WRITERS))
def test_csv_written_by_each_tool_reads_back_with_numbers(tmp_path: Path, ne: gpd.GeoDataFrame, writer: str) -> None:
    dst = tmp_path / "out.csv"
    WRITERS[writer](str(dst))
    assert (tmp_path / "out.csvt").exists()
    back = read(dst)
    assert back["pop_est"].dtype.kind == "i" and back["gdp_md_est"].dtype.kind == "f", back.dtypes.to_dict()
    assert back["pop_est"].tolist() == ne["pop_est"].tolist()
    assert back["gdp_md_est"].tolist() == pytest.approx(ne["gdp_md_est"].tolist(), rel=1e-12)
    if writer == "measure":
        assert back["area_m2"].dtype.kind == "f"


def test_aggregates_written_to_csv_keep_their_types(tmp_path: Path, ne: gpd.GeoDataFrame) -> None:
    dst = tmp_path / "by_continent.csv"
    dissolve(NE, str(dst), by="continent", aggregate={"*": ["count"], "pop_est": ["sum", "mean"]})
    back = read(dst).set_index("continent")
    g = ne.groupby("continent")
    assert back["count"].dtype.kind == "i" and back["pop_est_sum"].dtype.kind == "i" and back["pop_est_mean"].dtype.kind == "f"
    assert back["count"].to_dict() == g.size().to_dict()
    assert back["pop_est_sum"].to_dict() == g["pop_est"].sum().to_dict()


def test_a_csv_without_csvt_is_read_with_its_types_detected(tmp_path: Path) -> None:
    """Written by pandas (no .csvt): numbers are numbers, a code with a leading zero stays text, as pandas reads it
    with the code declared text."""
    df = pd.DataFrame({"code": ["01234", "00007", "12345"], "n": [1, 20, 300], "x": [0.5, 1.25, -3.0], "name": list("abc")})
    path = tmp_path / "foreign.csv"
    df.to_csv(path, index=False)
    expected = pd.read_csv(path, dtype={"code": str})
    info = vector_info(str(path))
    types = {f.name: f.type for f in info.layers[0].fields}
    assert types == {"code": "OFTString", "n": "OFTInteger", "x": "OFTReal", "name": "OFTString"}
    r = query(str(path), where="n > 10")
    assert r.columns == {"code": "text", "n": "integer", "x": "float", "name": "text"}
    assert r.rows == expected[expected.n > 10].to_dict("records")
    page = features(str(path), where="x < 1", geometry_mode="none")
    assert [f["properties"] for f in page.features] == expected[expected.x < 1].to_dict("records")
    out = tmp_path / "copy.csv"
    convert(str(path), str(out))
    assert read(out)[["code", "n", "x", "name"]].to_dict("records") == expected.to_dict("records")
