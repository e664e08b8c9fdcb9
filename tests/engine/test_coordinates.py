"""crs_info, crs_search (by name; by bbox in test_crs_search.py) and transform_coordinates engines against pyproj and
the GDAL CLI (gdaltransform)."""

from __future__ import annotations

import math
import shutil
import subprocess

import pytest
from pyproj import CRS, Transformer

from gdal_mcp.engine.coordinates import describe, same_crs, search, transform, wgs84_bounds
from gdal_mcp.errors import GdalMcpError


def test_search_by_name() -> None:
    res = search(query="Lambert-93")
    assert res.matches[0].crs == "EPSG:2154" and res.matches[0].name == "RGF93 v1 / Lambert-93"
    assert search(query="ETRS89 / LAEA Europe").matches[0].crs == "EPSG:3035"
    assert search(query="EPSG:32632").matches[0].name == "WGS 84 / UTM zone 32N"
    geo = search(query="WGS 84", kind="geographic")
    assert geo.matches[0].crs == "EPSG:4326" and all(m.kind.startswith("geographic") for m in geo.matches)
    assert search(query="no such crs anywhere").matches == []
    # a place: names of areas of use, accents and punctuation ignored
    assert search(query="Portugal", kind="projected").matches[0].name == "ETRS89 / Portugal TM06"
    ivory = search(query="Côte d'Ivoire", kind="projected", limit=200)
    assert [m.crs for m in ivory.matches] == [m.crs for m in search(query="cote divoire", kind="projected", limit=200).matches]
    for m in ivory.matches:
        area = CRS.from_user_input(m.crs).area_of_use
        assert "côte d'ivoire" in (m.name + area.name).lower(), m
    with pytest.raises(GdalMcpError) as e:
        search()
    assert e.value.code == "invalid-argument"


def test_describe_matches_pyproj() -> None:
    d = describe("EPSG:4326")
    ref = CRS.from_epsg(4326)
    assert (d.epsg, d.kind, d.datum, d.ellipsoid) == (4326, "geographic", ref.datum.name, ref.ellipsoid.name)
    assert d.axis_order == "Lat/Lon" and d.units == ["degree"]
    assert d.area_of_use and d.area_of_use.west == -180
    u = describe("32629")
    assert u.kind == "projected" and u.utm_zone == "29N" and u.units == ["metre"] and u.projection == "Transverse Mercator"
    assert u.axis_order == "E/N" and u.semi_major_m == pytest.approx(6378137.0)


def test_transform_agrees_with_pyproj() -> None:
    pts = [(-9.1393, 38.7223), (2.3522, 48.8566), (-74.006, 40.7128)]
    res = transform(pts, "EPSG:4326", "EPSG:3857")
    ref = Transformer.from_crs(4326, 3857, always_xy=True)
    for (x, y), out in zip(pts, res.points, strict=True):
        ex, ey = ref.transform(x, y)
        assert abs(out[0] - ex) < 1e-3 and abs(out[1] - ey) < 1e-3
    assert res.always_xy and res.src_axis_order.startswith("x/y")
    back = transform([tuple(p) for p in res.points], "EPSG:3857", "EPSG:4326")  # type: ignore[misc]
    for (x, y), out in zip(pts, back.points, strict=True):
        assert abs(out[0] - x) < 1e-9 and abs(out[1] - y) < 1e-9
    native = transform([(38.7223, -9.1393)], "EPSG:4326", "EPSG:32629", always_xy=False)
    xy = transform([(-9.1393, 38.7223)], "EPSG:4326", "EPSG:32629")
    assert native.points[0] == pytest.approx(xy.points[0], abs=1e-6)
    assert native.src_axis_order.startswith("Lat")


def test_transform_failures_are_null_with_a_warning() -> None:
    res = transform([(0, 0), (179.9, 0)], "EPSG:4326", "+proj=geos +h=35786023 +lon_0=-75 +sweep=x")
    assert res.points[1] == [None, None] and res.failed == 1 and res.warnings


@pytest.mark.skipif(shutil.which("gdaltransform") is None, reason="gdaltransform (Debian gdal-bin) not installed")
def test_transform_agrees_with_gdaltransform() -> None:
    pts = [(-9.1393, 38.7223), (-8.6291, 41.1579)]
    out = subprocess.run(
        ["gdaltransform", "-s_srs", "EPSG:4326", "-t_srs", "EPSG:3763", "-output_xy"],
        input="\n".join(f"{x} {y}" for x, y in pts),
        capture_output=True,
        text=True,
        check=True,
    )
    ref = [tuple(map(float, line.split())) for line in out.stdout.splitlines() if line.strip()]
    res = transform(pts, "EPSG:4326", "EPSG:3763")
    for got, exp in zip(res.points, ref, strict=True):
        assert abs(got[0] - exp[0]) < 1e-3 and abs(got[1] - exp[1]) < 1e-3  # 1 mm


def test_same_crs_ignores_how_the_crs_is_written() -> None:
    assert same_crs(CRS.from_epsg(4326).to_wkt(), "EPSG:4326")  # WKT (lat-first axes) and the code
    assert same_crs(CRS.from_epsg(32618).to_wkt("WKT1_GDAL"), "EPSG:32618")
    assert not same_crs("EPSG:4326", "EPSG:3857")
    assert same_crs("not a crs", "not a crs") and not same_crs("not a crs", "EPSG:4326")


def test_wgs84_bounds_of_a_web_mercator_box() -> None:
    r = 6378137.0  # Web Mercator: x = R·lon, y = R·ln(tan(π/4 + lat/2)), so 1°x1° from (0, 0) is:
    top = r * math.log(math.tan(math.pi / 4 + math.radians(1) / 2))
    west, south, east, north = wgs84_bounds("EPSG:3857", (0.0, 0.0, r * math.radians(1), top)) or (0, 0, 0, 0)
    assert (west, south) == pytest.approx((0.0, 0.0), abs=1e-9) and (east, north) == pytest.approx((1.0, 1.0), abs=1e-9)
    assert wgs84_bounds("EPSG:4326", (10.0, 40.0, 11.0, 41.0)) == pytest.approx((10.0, 40.0, 11.0, 41.0))
