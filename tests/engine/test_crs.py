"""CRS parsing: codes, PROJ strings, WKT and names as people type them, checked against pyproj's database."""

from __future__ import annotations

import re

import pytest
from pyproj import CRS
from pyproj.database import query_crs_info

from gdal_mcp.engine.crs import lookup_name, parse_crs, parse_pyproj_crs
from gdal_mcp.errors import GdalMcpError


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("WGS 84 / UTM zone 32N", 32632),  # the EPSG name
        ("wgs84 / utm_zone_32n", 32632),  # case, spaces and underscores ignored
        ("WGS_1984_UTM_Zone_32N", 32632),  # the ESRI alias
        ("UTM zone 32N WGS 84", 32632),  # words in another order, datum as a hint
        ("ETRS89 / LAEA Europe", 3035),  # an EPSG alias (the name is "ETRS89-extended / LAEA Europe")
        ("ETRS89-extended / LAEA Europe", 3035),
    ],
)
def test_names_resolve_to_the_crs_pyproj_names_so(text: str, code: int) -> None:
    reference = CRS.from_epsg(code)
    assert parse_crs(text).to_epsg() == code
    assert parse_pyproj_crs(text) == reference
    # the name pyproj's database gives that code is found by that name too
    assert lookup_name(reference.name) == f"EPSG:{code}"


@pytest.mark.filterwarnings("ignore:You will likely lose")
def test_codes_proj_strings_and_wkt_still_parse() -> None:
    utm = CRS.from_epsg(32632)
    for text in ("EPSG:32632", "32632", "epsg:32632", utm.to_wkt()):
        assert parse_pyproj_crs(text).equals(utm), text
    assert parse_pyproj_crs(utm.to_proj4()).equals(utm, ignore_axis_order=True)


def test_an_ambiguous_name_lists_the_candidates() -> None:
    with pytest.raises(GdalMcpError) as e:
        parse_crs("UTM zone 32N", "dst_crs")
    assert e.value.code == "invalid-argument"
    listed = re.findall(r"(EPSG:\d+) ([^;]+?)(?=;| \(and|; pass)", e.value.message)
    assert 2 <= len(listed) <= 10
    for code, name in listed:  # every candidate is real and its name says UTM zone 32N
        assert CRS.from_user_input(code).name == name and "UTM zone 32N" in name
    current = {f"EPSG:{i.code}" for i in query_crs_info(auth_name="EPSG") if "UTM zone 32N" in i.name and not i.deprecated}
    assert {c for c, _ in listed} <= current
    total = int(re.search(r"matches (\d+) CRSs", e.value.message).group(1))  # type: ignore[union-attr]
    assert total == len(current)


@pytest.mark.parametrize("text", ["garbage", "no such projection anywhere", "+proj=nonsense", "EPSG:999999", "GEOGCS[broken", ""])
def test_garbage_is_an_invalid_argument(text: str) -> None:
    with pytest.raises(GdalMcpError) as e:
        parse_crs(text, "bbox_crs")
    assert e.value.code == "invalid-argument"
    assert "bbox_crs" in e.value.message and "EPSG:4326" in e.value.message
