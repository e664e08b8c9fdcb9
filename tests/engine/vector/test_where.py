"""A `where` that compares a text field with a number (engine/vector/where.py): refused with the field and its type
named, before GDAL compares the number as text (GeoPackage: '9' > '100') or refuses it without saying why
(shapefile); the fix the message offers selects what pandas selects on the same values."""

from __future__ import annotations

import warnings
from pathlib import Path

import geopandas as gpd
import pyogrio
import pytest
import shapely

from gdal_mcp.engine.vector.features import features
from gdal_mcp.engine.vector.query import query
from gdal_mcp.engine.vector.stream import read_layer
from gdal_mcp.engine.vector.where import check_where
from gdal_mcp.errors import GdalMcpError

POP = ["9", "100", "250", "1000"]


@pytest.fixture(params=["gpkg", "shp"])
def layer(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    gdf = gpd.GeoDataFrame(
        {"name": list("abcd"), "pop": POP, "n": [1, 2, 3, 4]},
        geometry=[shapely.Point(i, i) for i in range(4)],
        crs="EPSG:4326",
    )
    path = tmp_path / f"towns.{request.param}"
    gdf.to_file(path)
    return str(path)


def test_gdal_alone_compares_the_number_as_text_or_fails(layer: str) -> None:
    """The reference for why: what GDAL does with `pop > 100` when nothing checks it first."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            got = sorted(pyogrio.read_dataframe(layer, where="pop > 100")["pop"])
        except Exception:  # noqa: BLE001 - the shapefile's OGR SQL refuses the type mismatch
            return
    assert got != ["1000", "250"]  # text order: '9' > '100', '1000' is not


@pytest.mark.parametrize("where", ["pop > 100", "100 < pop", '"pop" >= 100', "pop BETWEEN 100 AND 300", "pop IN (9, 100)"])
def test_text_field_against_a_number_is_refused_naming_field_and_type(layer: str, where: str) -> None:
    for run in (
        lambda: query(layer, where=where),
        lambda: features(layer, where=where),
        lambda: read_layer(layer, where=where).__enter__(),
    ):
        with pytest.raises(GdalMcpError) as e:
            run()
        assert e.value.code == "invalid-argument"
        assert "'pop'" in e.value.message and "text" in e.value.message and "CAST(pop AS integer)" in e.value.message


def test_the_suggested_cast_selects_what_pandas_selects(layer: str) -> None:
    r = query(layer, where="CAST(pop AS integer) > 100", fields=["pop"])
    assert sorted(x["pop"] for x in r.rows) == sorted(p for p in POP if int(p) > 100)
    r = query(layer, where="pop = '100'", fields=["pop"])  # text with text stays allowed
    assert [x["pop"] for x in r.rows] == ["100"]
    r = query(layer, where="n > 2", fields=["n"])  # numbers with numbers too
    assert [x["n"] for x in r.rows] == [3, 4]


@pytest.mark.parametrize(
    "where", ["CAST(pop AS integer) > 100", "pop = '100'", "length(pop) > 2", "n > 1", "name LIKE 'a%'", "pop || 'x' = '9x'"]
)
def test_expressions_that_do_not_compare_text_with_numbers_pass(where: str) -> None:
    check_where(where, ["pop", "n", "name"], ["OFTString", "OFTInteger", "OFTString"])
