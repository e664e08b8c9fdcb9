"""Further attacks of the same kinds, written as an attacker would: other formats, syntaxes and tools that name
outside files or the network — in tool arguments, inside datasets (raster and OGR VRTs in any letter case, PAM
.aux.xml, links beside a dataset, MRF, headers of formats that name their data file, service descriptions, GDAL
pipelines), in SQL and open options. Each: refused with a stable code (or, where GDAL ignores the reference by
itself, answered without following it), no secret byte out, no connection, and the server answers the next call.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tarfile
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.shared.exceptions import MCPError

from tests.helpers import DATA
from tests.security.helpers import REFUSED, Canary, Secrets, attack, everything_returned, session, workspace


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory, secrets: Secrets, canary: Canary) -> Path:
    ws = workspace(tmp_path_factory.mktemp("attacks"))
    out, url = secrets.path, canary.url
    rel_out = os.path.relpath(secrets.dir, ws)
    vrt = (
        '<VRTDataset rasterXSize="791" rasterYSize="718"><VRTRasterBand dataType="Byte" band="1">'
        "<SimpleSource><{tag}{attr}>{src}</{tag}><SourceBand>1</SourceBand></SimpleSource>"
        "</VRTRasterBand></VRTDataset>"
    )
    files = {
        "abs.vrt": vrt.format(tag="SourceFilename", attr="", src=out("secret.tif")),
        "lower.vrt": vrt.format(tag="sourcefilename", attr="", src=out("secret.tif")),
        "upper.vrt": vrt.format(tag="SOURCEFILENAME", attr="", src=out("secret.tif")),
        "relative.vrt": vrt.format(tag="SourceFilename", attr=' relativeToVRT="1"', src=f"{rel_out}/secret.tif"),
        "curl.vrt": vrt.format(tag="SourceFilename", attr="", src=f"/vsicurl/{url}/x.tif"),
        "http.vrt": vrt.format(tag="SourceFilename", attr="", src=f"{url}/x.tif"),
        "proc.vrt": vrt.format(tag="SourceFilename", attr="", src="/proc/self/environ"),
        "subfile.vrt": vrt.format(tag="SourceFilename", attr="", src=f"/vsisubfile/0_64,{out('secret.txt')}"),
        "nested.vrt": vrt.format(tag="SourceFilename", attr=' relativeToVRT="1"', src="lower.vrt"),
        "python.vrt": (
            '<VRTDataset rasterXSize="8" rasterYSize="8"><VRTRasterBand dataType="Byte" band="1" '
            'subClass="VRTDerivedRasterBand"><PixelFunctionType>f</PixelFunctionType>'
            "<PixelFunctionLanguage>Python</PixelFunctionLanguage><PixelFunctionCode><![CDATA[\n"
            f'def f(in_ar, out_ar, *args, **kw):\n    out_ar[:] = len(open("{out("secret.txt")}").read())\n'
            "]]></PixelFunctionCode></VRTRasterBand></VRTDataset>"
        ),
        "rel.mrf": (
            '<MRF_META><Raster><Size x="64" y="1" c="1"/><Compression>NONE</Compression>'
            f"<DataType>Byte</DataType><DataFile>{rel_out}/secret.txt</DataFile>"
            f"<IndexFile>{rel_out}/secret.idx</IndexFile></Raster></MRF_META>"
        ),
        "curl.mrf": (
            '<MRF_META><Raster><Size x="64" y="1" c="1"/><Compression>NONE</Compression>'
            f"<DataType>Byte</DataType><DataFile>/vsicurl/{url}/d</DataFile>"
            f"<IndexFile>/vsicurl/{url}/i</IndexFile></Raster></MRF_META>"
        ),
        "x.ers": (
            'DatasetHeader Begin\n\tVersion = "6.0"\n\tDataSetType = ERStorage\n\tDataType = Raster\n\t'
            'ByteOrder = LSBFirst\n\tCoordinateSpace Begin\n\t\tDatum = "RAW"\n\t\tProjection = "RAW"\n\t\t'
            "CoordinateType = RAW\n\tCoordinateSpace End\n\tRasterInfo Begin\n\t\tCellType = Unsigned8BitInteger"
            "\n\t\tNrOfLines = 1\n\t\tNrOfCellsPerLine = 64\n\t\tNrOfBands = 1\n\tRasterInfo End\n"
            f'DatasetHeader End\nDataFile = "{out("secret.txt")}"\n'
        ),
        "x.lbl": (
            "PDS_VERSION_ID = PDS3\nRECORD_TYPE = FIXED_LENGTH\nRECORD_BYTES = 64\n"
            f'^IMAGE = ("{out("secret.txt")}", 1)\nOBJECT = IMAGE\nLINES = 1\nLINE_SAMPLES = 64\n'
            "SAMPLE_BITS = 8\nSAMPLE_TYPE = UNSIGNED_INTEGER\nEND_OBJECT = IMAGE\nEND\n"
        ),
        "isis.cub": (
            'Object = IsisCube\n  Object = Core\n    ^Core = "' + out("secret.txt") + '"\n'
            "    Group = Dimensions\n      Samples = 64\n      Lines = 1\n      Bands = 1\n    End_Group\n"
            "    Group = Pixels\n      Type = UnsignedByte\n      ByteOrder = Lsb\n      Base = 0.0\n"
            "      Multiplier = 1.0\n    End_Group\n  End_Object\nEnd_Object\nEnd\n"
        ),
        "wms.xml": (
            f'<GDAL_WMS><Service name="TMS"><ServerUrl>{url}/${{z}}/${{x}}/${{y}}.png</ServerUrl></Service>'
            "<DataWindow><UpperLeftX>-20037508.34</UpperLeftX><UpperLeftY>20037508.34</UpperLeftY>"
            "<LowerRightX>20037508.34</LowerRightX><LowerRightY>-20037508.34</LowerRightY><TileLevel>1"
            "</TileLevel><TileCountX>1</TileCountX><TileCountY>1</TileCountY><YOrigin>top</YOrigin>"
            "</DataWindow><Projection>EPSG:3857</Projection><BlockSizeX>256</BlockSizeX><BlockSizeY>256"
            "</BlockSizeY><BandsCount>3</BandsCount></GDAL_WMS>"
        ),
        "wmts.xml": f"<GDAL_WMTS><GetCapabilitiesUrl>{url}/wmts?</GetCapabilitiesUrl><Layer>x</Layer></GDAL_WMTS>",
        "pipe.gdalg.json": (
            '{"type": "gdal_streamed_alg", "command_line": "gdal raster read '
            + out("secret.tif")
            + ' ! write --of stream streamed_dataset"}'
        ),
        "index.gti.fgb": "not really a tile index",
        "items.json": (
            '{"type": "FeatureCollection", "features": [{"type": "Feature", "stac_version": "1.0.0", '
            f'"id": "x", "assets": {{"b": {{"href": "{url}/b.tif", "type": "image/tiff"}}}}, '
            '"geometry": null, "properties": {"datetime": "2020-01-01T00:00:00Z"}}]}'
        ),
        "ogr_abs.vrt": (
            f'<OGRVRTDataSource><OGRVRTLayer name="secret"><SrcDataSource>{out("secret.csv")}'
            "</SrcDataSource></OGRVRTLayer></OGRVRTDataSource>"
        ),
        "ogr_prefix.vrt": (
            f'<OGRVRTDataSource><OGRVRTLayer name="secret"><SrcDataSource>CSV:{out("secret.csv")}'
            "</SrcDataSource></OGRVRTLayer></OGRVRTDataSource>"
        ),
        "ogr_rel.vrt": (
            '<OGRVRTDataSource><OGRVRTLayer name="secret"><SrcDataSource relativeToVRT="1">'
            f"{rel_out}/secret.csv</SrcDataSource></OGRVRTLayer></OGRVRTDataSource>"
        ),
        "ogr_curl.vrt": (
            f'<OGRVRTDataSource><OGRVRTLayer name="x"><SrcDataSource>/vsicurl/{url}/x.csv'
            "</SrcDataSource></OGRVRTLayer></OGRVRTDataSource>"
        ),
        "ogr_upper.vrt": (
            f'<OGRVRTDATASOURCE><OGRVRTLAYER name="secret"><SRCDATASOURCE>{out("secret.csv")}'
            "</SRCDATASOURCE></OGRVRTLAYER></OGRVRTDATASOURCE>"
        ),
        "pam.tif.aux.xml": (
            f'<PAMDataset><Metadata domain="OVERVIEWS"><MDI key="OVERVIEW_FILE">{out("secret.tif")}</MDI></Metadata></PAMDataset>'
        ),
        "xlink.gml": (
            '<?xml version="1.0"?><ogr:FeatureCollection xmlns:ogr="http://ogr.maptools.org/" '
            'xmlns:gml="http://www.opengis.net/gml" xmlns:xlink="http://www.w3.org/1999/xlink" '
            'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
            f'xsi:schemaLocation="http://ogr.maptools.org/ {url}/schema.xsd"><gml:featureMember>'
            f'<ogr:p fid="p.0"><ogr:geometryProperty xlink:href="{url}/geom.gml#g1"/>'
            "<ogr:name>a</ogr:name></ogr:p></gml:featureMember></ogr:FeatureCollection>"
        ),
        "net.kml": (
            '<?xml version="1.0"?><kml xmlns="http://www.opengis.net/kml/2.2"><Document><Placemark><name>a'
            "</name><Point><coordinates>1,2</coordinates></Point></Placemark><NetworkLink><Link><href>"
            f"{url}/more.kml</href></Link></NetworkLink></Document></kml>"
        ),
    }
    for name, text in files.items():
        (ws / name).write_text(text)
    shutil.copy(DATA / "raster" / "RGB.byte.tif", ws / "pam.tif")
    shutil.copy(DATA / "raster" / "RGB.byte.tif", ws / "ovr.tif")
    os.symlink(out("secret.tif"), ws / "ovr.tif.ovr")  # an overview file beside it, linked outside
    for ext in ("shp", "shx", "dbf"):
        shutil.copy(DATA / "vector" / f"points.{ext}", ws / f"linked_prj.{ext}")
    os.symlink(out("secret.prj"), ws / "linked_prj.prj")  # its CRS from an outside file
    os.symlink(out("secret.tif"), ws / "link.tif")
    os.symlink(secrets.dir, ws / "linkdir")
    con = sqlite3.connect(ws / "view.sqlite")
    con.execute("CREATE TABLE t(a)")
    con.execute("CREATE VIEW v AS SELECT readfile('/etc/passwd') AS a")
    con.commit()
    con.close()
    with tarfile.open(secrets.dir / "secret.tar", "w") as tar:
        tar.add(secrets.dir / "secret.csv", arcname="secret.csv")
    return ws


def cases(secrets: Secrets, canary: Canary) -> list[tuple[str, dict[str, Any]]]:
    out, url = secrets.path, canary.url
    return [
        # tool arguments naming outside files or the network, in the syntaxes GDAL accepts
        ("raster_info", {"path": out("secret.tif")}),
        ("raster_info", {"path": "../" * 12 + out("secret.tif").lstrip("/")}),
        ("raster_info", {"path": "/proc/self/environ"}),
        ("raster_info", {"path": f"/vsicurl/{url}/x.tif"}),
        ("raster_info", {"path": f"{url}/x.tif"}),
        ("raster_info", {"path": f"/vsisubfile/0_64,{out('secret.txt')}"}),
        ("raster_info", {"path": f"/vsicrypt/file={out('secret.txt')}"}),
        ("raster_info", {"path": f'NETCDF:"{out("secret.txt")}":v'}),
        ("raster_info", {"path": f"WMS:{url}/wms?"}),
        ("raster_info", {"path": f"/vsitar/{out('secret.tar')}/secret.csv"}),
        ("vector_info", {"path": f"CSV:{out('secret.csv')}"}),
        ("vector_info", {"path": f"GPKG:{out('secret.csv')}:x"}),
        ("vector_info", {"path": f"PG:host=127.0.0.1 port={canary.port} dbname=x"}),
        ("vector_info", {"path": f"/vsizip/{out('secret.tar')}/secret.csv"}),
        ("raster_info", {"path": "link.tif"}),
        ("vector_info", {"path": "linkdir/secret.csv"}),
        ("list_datasets", {"path": str(secrets.dir)}),
        ("list_datasets", {"path": ".", "pattern": "../" * 12 + out("*").lstrip("/")}),
        ("raster_mosaic", {"inputs": ["good.tif", out("secret.tif")], "output": "m.tif"}),
        ("raster_clip", {"input": "good.tif", "output": "c.tif", "mask": out("secret.shp")}),
        ("vector_join", {"input": "good.shp", "join": out("secret.shp"), "output": "j.gpkg"}),
        ("raster_convert", {"input": "good.tif", "output": out("planted.tif")}),
        ("raster_convert", {"input": "good.tif", "output": "../" * 12 + out("planted.tif").lstrip("/")}),
        ("raster_convert", {"input": "good.tif", "output": "/vsimem/x.tif"}),
        ("raster_convert", {"input": "good.tif", "output": "linkdir/planted.tif"}),
        # raster datasets that reference outside files or the network
        ("raster_info", {"path": "abs.vrt"}),
        ("raster_stats", {"input": "lower.vrt"}),
        ("raster_stats", {"input": "upper.vrt"}),
        ("raster_stats", {"input": "relative.vrt"}),
        ("raster_stats", {"input": "curl.vrt"}),
        ("raster_stats", {"input": "http.vrt"}),
        ("raster_stats", {"input": "proc.vrt"}),
        ("raster_stats", {"input": "subfile.vrt"}),
        ("raster_stats", {"input": "nested.vrt"}),
        ("raster_stats", {"input": "python.vrt"}),
        ("raster_stats", {"input": "rel.mrf"}),
        ("raster_stats", {"input": "curl.mrf"}),
        ("raster_info", {"path": "x.ers"}),
        ("raster_info", {"path": "x.lbl"}),
        ("raster_info", {"path": "isis.cub"}),
        ("raster_info", {"path": "wms.xml"}),
        ("raster_info", {"path": "wmts.xml"}),
        ("raster_info", {"path": "pipe.gdalg.json"}),
        ("raster_info", {"path": "index.gti.fgb"}),
        ("raster_info", {"path": "items.json"}),
        ("raster_preview", {"input": "pam.tif", "max_size": 64}),
        ("raster_preview", {"input": "ovr.tif", "max_size": 64}),
        ("vector_info", {"path": "linked_prj.shp"}),
        # vector datasets, SQL and open options
        ("vector_info", {"path": "ogr_abs.vrt"}),
        ("vector_features", {"input": "ogr_prefix.vrt"}),
        ("vector_features", {"input": "ogr_rel.vrt"}),
        ("vector_features", {"input": "ogr_curl.vrt"}),
        ("vector_features", {"input": "ogr_upper.vrt"}),
        (
            "vector_convert",
            {
                "input": "good.csv",
                "output": "s1.gpkg",
                "sql": f"SELECT * FROM good JOIN '{out('secret.csv')}'.secret ON good.id = secret.id",
            },
        ),
        (
            "vector_convert",
            {
                "input": "good.csv",
                "output": "s2.gpkg",
                "sql_dialect": "SQLITE",
                "sql": f"SELECT readfile('{out('secret.txt')}') AS x FROM good",
            },
        ),
        (
            "vector_convert",
            {"input": "good.csv", "output": "s3.gpkg", "sql_dialect": "SQLITE", "sql": f"ATTACH '{out('secret.csv')}' AS s"},
        ),
        (
            "vector_convert",
            {"input": "good.csv", "output": "s4.gpkg", "sql_dialect": "SQLITE", "sql": "SELECT load_extension('/tmp/x.so')"},
        ),
        ("vector_features", {"input": "xlink.gml", "open_options": {"GFS_TEMPLATE": out("secret.txt")}}),
        ("vector_features", {"input": "view.sqlite", "layer": "v"}),
        ("vector_info", {"path": "good.gpkg", "open_options": {"PRELUDE_STATEMENTS": f"ATTACH '{out('x')}' AS s"}}),
    ]


#: references GDAL ignores by itself (no resolution of GML xlinks or schemas, no KML NetworkLinks): the file is
#: legitimately readable, so the answer may succeed, but nothing may be followed
NOT_FOLLOWED = [
    ("vector_info", {"path": "xlink.gml"}),
    ("vector_features", {"input": "xlink.gml"}),
    ("vector_info", {"path": "net.kml"}),
    ("vector_features", {"input": "net.kml", "layer": "Document"}),
]


async def test_further_attacks_are_refused(served: ClientSession, ws: Path, secrets: Secrets, canary: Canary) -> None:
    attacks = cases(secrets, canary)
    assert len(attacks) >= 30
    codes: dict[str, int] = {}
    s = served
    for tool, args in attacks:
        code = await attack(s, tool, args, secrets=secrets, canary=canary)
        codes[code] = codes.get(code, 0) + 1
    # a resource read of an outside file (percent-encoded dots too)
    for uri in (
        f"gdal-mcp://files/{'..%2F' * 12}{secrets.path('secret.txt').lstrip('/')}",
        f"gdal-mcp://files/{secrets.path('secret.txt')}",
    ):
        try:
            got = await s.read_resource(uri)
            assert secrets.token not in str(got), uri
        except MCPError as e:
            assert secrets.token not in str(e), uri
    assert set(codes) <= REFUSED, codes
    assert not any(Path(secrets.path(n)).exists() for n in ("planted.tif", "x"))
    assert not any((ws / n).exists() for n in ("m.tif", "c.tif", "j.gpkg", "s1.gpkg", "s2.gpkg", "s3.gpkg", "s4.gpkg"))


async def test_references_gdal_ignores_are_not_followed(
    served: ClientSession, ws: Path, secrets: Secrets, canary: Canary
) -> None:
    s = served
    for tool, args in NOT_FOLLOWED:
        before = len(canary.hits)
        r = await s.call_tool(tool, args)
        assert secrets.token not in everything_returned(r) and len(canary.hits) == before, (tool, args)
        if r.is_error:
            assert r.structured_content["error"]["code"] in REFUSED, r.structured_content


async def test_red_team_findings(tmp_path: Path, secrets: Secrets, canary: Canary) -> None:
    """Held-out attacks a red team found after the suite above was written: an MRF whose data file is a file the
    workers may read but outside the workspace (their own Python environment), a KML ground overlay naming an
    outside image, and a GeoTIFF hard-linked to an outside file that raster_edit would change in place."""
    import struct

    import rasterio

    ws = workspace(tmp_path)
    inside_env = str(Path(__file__).resolve().parents[2] / "pyproject.toml")  # readable by the workers' policy
    size = Path(inside_env).stat().st_size
    (ws / "env.idx").write_bytes(struct.pack(">QQ", 0, size))
    (ws / "env.mrf").write_text(
        f'<MRF_META><Raster><Size x="{size}" y="1" c="1"/><Compression>NONE</Compression>'
        f"<DataType>Byte</DataType><datafile>{inside_env}</datafile><IndexFile>env.idx"
        "</IndexFile></Raster></MRF_META>"
    )
    (ws / "overlay.kml").write_text(
        '<?xml version="1.0"?><kml xmlns="http://www.opengis.net/kml/2.2"><GroundOverlay><Icon><href>'
        f"{secrets.path('secret.tif')}</href></Icon><LatLonBox><north>1</north><south>0</south><east>1</east>"
        "<west>0</west></LatLonBox></GroundOverlay></kml>"
    )
    outside = secrets.dir / "hardlinked.tif"
    shutil.copy(DATA / "raster" / "RGB.byte.tif", outside)
    os.link(outside, ws / "hard.tif")
    before = outside.read_bytes()
    async with session(ws) as s:
        assert (
            await attack(s, "raster_to_xyz", {"input": "env.mrf", "output": "env.xyz"}, secrets=secrets, canary=canary)
            == "out-of-root"
        )
        assert await attack(s, "raster_info", {"path": "overlay.kml"}, secrets=secrets, canary=canary) == "out-of-root"
        r = await s.call_tool("raster_edit", {"input": "hard.tif", "metadata": {"EDITED": "yes"}})
        assert not r.is_error, r.structured_content
    assert outside.read_bytes() == before  # the outside file kept every byte
    with rasterio.open(ws / "hard.tif") as ds:
        assert ds.tags()["EDITED"] == "yes"
    assert (ws / "hard.tif").stat().st_nlink == 1  # the workspace file is its own now
    assert not (ws / "env.xyz").exists()
