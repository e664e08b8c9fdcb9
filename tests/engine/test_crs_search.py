"""crs_search's engine (coordinates.search) against pyproj's database and shapely: the UTM zone of a bbox's
centre first, CRSs whose area of use overlaps the bbox (containing ones first), country names with their bbox."""

from __future__ import annotations

import functools

import pytest
from pyproj import CRS
from pyproj.aoi import AreaOfInterest
from pyproj.database import query_crs_info, query_utm_crs_info
from pyproj.enums import PJType
from shapely.geometry import MultiPolygon, Polygon, box

from gdal_mcp.engine.coordinates import search

LISBON = (-9.25, 38.65, -9.05, 38.80)
PARIS = (2.22, 48.81, 2.47, 48.91)
SYDNEY = (150.9, -34.1, 151.4, -33.7)
STRADDLE = (5.0, 45.0, 8.0, 47.0)  # zones 31 (0-6°E) and 32 (6-12°E); centre 6.5°E: zone 32
STRADDLE_WEST = (4.0, 45.0, 6.5, 47.0)  # centre 5.25°E: zone 31
FIJI = (177.0, -19.0, -179.0, -16.0)  # crosses the antimeridian; centre 179°E: zone 60S
BERGEN = (5.2, 60.3, 5.4, 60.45)  # the military grid's zone 32V; EPSG's (and pyproj's) zone 31N
FRANCE = (-5.2, 41.3, 9.6, 51.1)
LUXEMBOURG = (5.7357, 49.4478, 6.5286, 50.1828)  # OpenStreetMap's bbox of the country
LUXEMBOURG_LOOSE = (5.7, 49.4, 6.55, 50.2)  # a bit larger than EPSG's area of use of LUREF
PORTUGAL = (-9.6, 36.9, -6.1, 42.2)  # mainland, a bit larger than EPSG's area of use of PT-TM06


def _centre(bbox: tuple[float, float, float, float]) -> tuple[float, float]:
    w, s, e, n = bbox
    cx = (w + e) / 2 if w <= e else (w + e + 360) / 2
    return (cx - 360 if cx >= 180 else cx), (s + n) / 2


def _shape(w: float, s: float, e: float, n: float) -> Polygon | MultiPolygon:
    """A lon/lat box, split in two where it crosses the antimeridian."""
    return box(w, s, e, n) if w <= e else MultiPolygon([box(w, s, 180, n), box(-180, s, e, n)])


@functools.cache
def _areas() -> dict[str, list[Polygon | MultiPolygon]]:
    """Every EPSG CRS's areas of use (one per usage) as shapes."""
    areas: dict[str, list[Polygon | MultiPolygon]] = {}
    for i in query_crs_info(auth_name="EPSG"):
        if i.area_of_use is not None:
            a = i.area_of_use
            areas.setdefault(f"EPSG:{i.code}", []).append(_shape(a.west, a.south, a.east, a.north))
    return areas


def _share(crs: str, bbox: tuple[float, float, float, float]) -> float:
    """The share of bbox inside the CRS's area of use, from shapely (the best of its areas of use)."""
    target = _shape(*bbox)
    return max(area.intersection(target).area / target.area for area in _areas()[crs])


@pytest.mark.parametrize("bbox", [LISBON, PARIS, SYDNEY, STRADDLE, STRADDLE_WEST, FIJI, BERGEN])
@pytest.mark.parametrize("kind", ["any", "projected"])
def test_the_utm_zone_of_the_bbox_centre_comes_first(bbox: tuple[float, float, float, float], kind: str) -> None:
    cx, cy = _centre(bbox)
    ref = query_utm_crs_info(datum_name="WGS 84", area_of_interest=AreaOfInterest(cx, cy, cx, cy))
    assert len(ref) == 1  # no centre on a zone boundary: pyproj names one zone
    res = search(bbox=bbox, kind=kind)  # type: ignore[arg-type]
    assert res.matches[0].crs == f"EPSG:{ref[0].code}" and res.matches[0].name == ref[0].name, res.matches[:3]
    assert ("S" if cy < 0 else "N") == res.matches[0].name[-1]


def test_utm_zones_as_pyproj_names_them() -> None:
    assert search(bbox=STRADDLE).matches[0].name == "WGS 84 / UTM zone 32N"
    assert search(bbox=STRADDLE_WEST).matches[0].name == "WGS 84 / UTM zone 31N"
    assert search(bbox=FIJI).matches[0].name == "WGS 84 / UTM zone 60S"
    # beyond UTM (84°N): pyproj has no UTM zone there; UPS North's area of use holds the centre
    arctic = (-30.0, 85.0, 30.0, 89.0)
    assert query_utm_crs_info(datum_name="WGS 84", area_of_interest=AreaOfInterest(0, 87, 0, 87)) == []
    first = search(bbox=arctic).matches[0]
    ups = CRS.from_user_input(first.crs)
    assert first.crs == "EPSG:32661" and ups.area_of_use.south <= 87 and "UPS North" in ups.name


@pytest.mark.parametrize("bbox", [PARIS, STRADDLE, FRANCE, SYDNEY])
def test_bbox_keeps_the_crss_whose_area_of_use_overlaps_it(bbox: tuple[float, float, float, float]) -> None:
    res = search(bbox=bbox, kind="projected", limit=200)
    assert not res.truncated
    got = {m.crs for m in res.matches}
    aoi = AreaOfInterest(*bbox)
    infos = query_crs_info(auth_name="EPSG", pj_types=[PJType.PROJECTED_CRS], area_of_interest=aoi, contains=False)
    overlapping = {f"EPSG:{i.code}" for i in infos if not i.deprecated}
    assert got <= overlapping
    for crs in overlapping - got:  # PROJ also lists areas that only touch the bbox along an edge
        assert _share(crs, bbox) == 0, crs
    infos = query_crs_info(auth_name="EPSG", pj_types=[PJType.PROJECTED_CRS], area_of_interest=aoi, contains=True)
    containing = {f"EPSG:{i.code}" for i in infos if not i.deprecated}
    assert containing == {m.crs for m in res.matches if m.bbox_share == 1}
    deprecated = {f"EPSG:{i.code}" for i in query_crs_info(auth_name="EPSG") if i.deprecated}
    assert not got & deprecated
    for m in res.matches:
        assert m.bbox_share == pytest.approx(_share(m.crs, bbox), abs=1e-3), m


def test_containing_before_overlapping_and_national_before_continental() -> None:
    res = search(bbox=FRANCE, kind="projected", limit=200)
    codes = [m.crs for m in res.matches]
    assert codes[0] == "EPSG:32631"  # centre 2.2°E
    assert codes[1] == "EPSG:2154"  # RGF93 v1 / Lambert-93, the national CRS, contains France
    # Lambert-93's area of use is smaller than LAEA Europe's, which also contains France
    assert codes.index("EPSG:2154") < codes.index("EPSG:3035")
    assert _share("EPSG:2154", FRANCE) == 1 and _share("EPSG:3035", FRANCE) == 1
    # among current CRSs, those containing (most of) the bbox come before those merely overlapping it
    contained = [codes.index(c) for c in ("EPSG:2154", "EPSG:3035", "EPSG:3034")]
    overlapping = [codes.index(c) for c in ("EPSG:3950", "EPSG:25831", "EPSG:32630")]  # CC50, ETRS89/UTM 31N, 30N
    assert all(_share(c, FRANCE) < 0.9 for c in ("EPSG:3950", "EPSG:25831", "EPSG:32630"))
    assert max(contained) < min(overlapping)
    # the current national CRS before the historical ones that also contain the bbox
    lisbon = [m.crs for m in search(bbox=LISBON, kind="projected", limit=200).matches]
    assert lisbon[1] == "EPSG:3763" and lisbon.index("EPSG:3763") < lisbon.index("EPSG:20790")


def test_kind_any_lists_projected_crss_first() -> None:
    res = search(bbox=PARIS, limit=200)
    kinds = [m.kind for m in res.matches]
    assert kinds[: kinds.count("projected")] == ["projected"] * kinds.count("projected")
    assert "geographic" in kinds and "compound" in kinds


@pytest.mark.parametrize(
    ("query", "bbox", "national"),
    [
        ("Luxembourg", LUXEMBOURG, "EPSG:2169"),  # LUREF / Luxembourg TM
        ("Luxembourg", LUXEMBOURG_LOOSE, "EPSG:2169"),
        ("Portugal", PORTUGAL, "EPSG:3763"),  # ETRS89 / Portugal TM06
        ("France", FRANCE, "EPSG:2154"),  # RGF93 v1 / Lambert-93: only its area of use is named France
        ("Lambert", FRANCE, "EPSG:2154"),
        ("Switzerland", (5.9, 45.8, 10.5, 47.8), "EPSG:2056"),  # CH1903+ / LV95
    ],
)
def test_a_country_with_its_bbox_finds_its_national_crs(
    query: str, bbox: tuple[float, float, float, float], national: str
) -> None:
    res = search(query=query, bbox=bbox, kind="projected")
    codes = [m.crs for m in res.matches]
    assert national in codes[:2], codes  # first, or second after the UTM zone of the centre
    assert all(not c.startswith("EPSG:326") for c in codes[: codes.index(national)][1:])
    assert CRS.from_user_input(national).area_of_use is not None and _share(national, bbox) > 0.8


def test_the_loose_bbox_was_not_contained_so_overlap_is_needed() -> None:
    """What failed before: PROJ's containment filter drops the national CRS of a country's own (slightly larger) bbox."""
    for query, bbox, national in (("Luxembourg", LUXEMBOURG_LOOSE, "2169"), ("Portugal", PORTUGAL, "3763")):
        contained = query_crs_info(auth_name="EPSG", area_of_interest=AreaOfInterest(*bbox), contains=True)
        assert national not in {i.code for i in contained}
        assert [m.crs for m in search(query=query, bbox=bbox).matches].index(f"EPSG:{national}") <= 1
        assert f"EPSG:{national}" in [m.crs for m in search(bbox=bbox, limit=200).matches]


def test_no_match_says_what_helps() -> None:
    res = search(query="Lambert-93", bbox=LISBON)  # Lambert-93 is for France: the bbox excludes it
    assert res.matches == [] and len(res.warnings) == 1
    hint = res.warnings[0]
    assert "EPSG:2154" in hint and "leave bbox out" in hint and "larger" not in hint
    res = search(query="no such crs anywhere", bbox=LISBON)
    assert res.matches == [] and "'Portugal'" in res.warnings[0] and "leave query out" in res.warnings[0]
    assert "larger" not in res.warnings[0]
    res = search(query="Lambert-93", kind="geographic")
    assert res.matches == [] and "kind='any'" in res.warnings[0]
    assert search(query="no such crs anywhere").warnings[0].endswith("or give bbox to list the CRSs of a place")


def test_a_bbox_wider_than_a_utm_zone_warns_and_names_a_containing_crs() -> None:
    res = search(bbox=FRANCE)
    assert res.matches[0].crs == "EPSG:32631" and len(res.warnings) == 1
    assert "14.8° wide" in res.warnings[0] and "EPSG:2154" in res.warnings[0]
    assert search(bbox=PARIS).warnings == []


def test_antimeridian_bbox_finds_the_fiji_grid() -> None:
    res = search(query="Fiji", bbox=FIJI, kind="projected")
    fiji = next(m for m in res.matches if m.crs == "EPSG:3460")  # Fiji 1986 / Fiji Map Grid
    area = CRS.from_epsg(3460).area_of_use
    assert area.west > area.east  # its area of use crosses the antimeridian too
    assert fiji.bbox_share == pytest.approx(_share("EPSG:3460", FIJI), abs=1e-3) and fiji.bbox_share > 0
