"""Class 2 — CRS arguments: a CRS argument that GDAL or PROJ would read as a file (an outside .prj, +init= files,
grid files, a WKT PARAMETERFILE) or fetch as a URL; and a dataset whose own CRS is a link (GeoJSON "crs"). Each
refused, nothing read, no request sent; and every form a GIS user types as a value still works."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import ClientSession

from gdal_mcp.crs_text import crs_value
from gdal_mcp.errors import GdalMcpError
from tests.security.helpers import Canary, Secrets, attack, workspace


def file_and_url_forms(secrets: Secrets, canary: Canary) -> list[str]:
    prj = secrets.path("secret.prj")
    return [
        prj,
        "file://" + prj,
        canary.url + "/crs.prj",
        canary.url.replace("http", "https") + "/crs",
        "ftp://127.0.0.1/x",
        "/vsicurl/" + canary.url + "/crs",
        "../" + Path(prj).name,
        "secret.prj",
        "~/secret.prj",
        f"+init={prj}:4326",
        f"+proj=longlat +nadgrids={prj}",
        f"+proj=longlat +geoidgrids={canary.url}/g.tif",
        f'GEOGCRS["x",PARAMETERFILE["grid","{prj}"]]',
        f'{{"type": "GeographicCRS", "name": "{canary.url}/x"}}',
        "ESRI::" + prj,
        "NETCDF:" + prj,
        "\\\\server\\share\\x.prj",
    ]


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory, secrets: Secrets) -> Path:
    ws = workspace(tmp_path_factory.mktemp("crs"))
    (ws / "local.prj").write_text((secrets.dir / "secret.prj").read_text())  # a CRS file in the workspace: still refused
    return ws


def test_values_are_accepted_files_and_urls_refused(secrets: Secrets, canary: Canary) -> None:
    """The one check itself: what users type passes, every file or URL form is invalid-argument."""
    for text in (
        "EPSG:4326",
        "4326",
        "epsg:32632",
        "OGC:CRS84",
        "ESRI:102003",
        "IAU_2015:30100",
        "EPSG:4326+5773",
        "urn:ogc:def:crs:EPSG::4326",
        "http://www.opengis.net/def/crs/EPSG/0/32632",
        "WGS 84 / UTM zone 32N",
        "NAD83(HARN) / Oregon North",
        "ETRS89 / LAEA Europe",
        "+proj=utm +zone=32 +datum=WGS84",
        "+proj=merc +nadgrids=@null +wktext",
        'GEOGCS["WGS 84",DATUM["WGS_1984",SPHEROID["WGS 84",6378137,'
        '298.257223563]],PRIMEM["Greenwich",0],UNIT["degree",0.0174532925199433]]',
    ):
        crs_value(text)
    assert crs_value("http://www.opengis.net/def/crs/EPSG/0/32632").text == "EPSG:32632"
    for text in [*file_and_url_forms(secrets, canary), "local.prj", "data/local.prj"]:
        with pytest.raises(GdalMcpError) as e:
            crs_value(text)
        assert e.value.code == "invalid-argument", text


async def test_crs_arguments_of_every_tool(served: ClientSession, ws: Path, secrets: Secrets, canary: Canary) -> None:
    """crs_info, transform_coordinates, the reproject tools' dst_crs/src_crs and bbox_crs, given files and URLs."""
    s = served
    for bad in [*file_and_url_forms(secrets, canary), "local.prj"]:
        for tool, args in (
            ("crs_info", {"crs": bad}),
            ("transform_coordinates", {"points": [[1, 2]], "src_crs": bad, "dst_crs": "EPSG:4326"}),
            ("transform_coordinates", {"points": [[1, 2]], "src_crs": "EPSG:4326", "dst_crs": bad}),
            ("raster_reproject", {"input": "good.tif", "output": "r.tif", "dst_crs": bad}),
            ("raster_reproject", {"input": "good.tif", "output": "r.tif", "dst_crs": "EPSG:4326", "src_crs": bad}),
            ("vector_reproject", {"input": "good.shp", "output": "v.gpkg", "dst_crs": bad}),
            ("raster_clip", {"input": "good.tif", "output": "c.tif", "bbox": [0, 0, 1, 1], "bbox_crs": bad}),
        ):
            assert await attack(s, tool, args, secrets=secrets, canary=canary) == "invalid-argument", (tool, bad)
    # the values themselves still work
    r = await s.call_tool("crs_info", {"crs": "WGS 84 / UTM zone 32N"})
    assert not r.is_error and r.structured_content["epsg"] == 32632
    assert not any((ws / n).exists() for n in ("r.tif", "v.gpkg", "c.tif"))


async def test_a_dataset_whose_crs_is_a_link(served: ClientSession, ws: Path, secrets: Secrets, canary: Canary) -> None:
    """A GeoJSON whose "crs" member links to a URL or to an outside file: never fetched, never read."""
    point = '{"type": "Feature", "properties": {}, "geometry": {"type": "Point", "coordinates": [1, 2]}}'
    for name, href in (("url.geojson", canary.url + "/crs.prj"), ("file.geojson", secrets.path("secret.prj"))):
        (ws / name).write_text(
            f'{{"type": "FeatureCollection", "crs": {{"type": "link", "properties": {{"href": '
            f'"{href}", "type": "esriwkt"}}}}, "features": [{point}]}}'
        )
    s = served
    for name in ("url.geojson", "file.geojson"):
        for tool, args in (
            ("vector_info", {"path": name}),
            ("vector_features", {"input": name}),
            ("vector_convert", {"input": name, "output": f"{name}.gpkg"}),
        ):
            assert await attack(s, tool, args, secrets=secrets, canary=canary) == "out-of-root", (name, tool)
