"""Class 1 — files that name other files: a workspace file whose content makes GDAL read a file outside the
workspace (an MRF header's DataFile/IndexFile, a SQLite schema's virtual tables, an OGR VRT in another letter case,
SQL inside an OGR VRT in either dialect). Each through a real MCP client: refused, no secret byte out."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from mcp import ClientSession

from tests.security.helpers import Canary, Secrets, attack, workspace


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory, secrets: Secrets) -> Path:
    ws = workspace(tmp_path_factory.mktemp("refs"))
    out = secrets.path
    (ws / "data.mrf").write_text(
        '<MRF_META><Raster><Size x="64" y="1" c="1"/><Compression>NONE</Compression><DataType>Byte</DataType>'
        f"<DataFile>{out('secret.txt')}</DataFile><IndexFile>{out('secret.idx')}</IndexFile></Raster></MRF_META>"
    )
    (ws / "index.mrf").write_text(
        '<MRF_META><Raster><Size x="64" y="1" c="1"/><Compression>NONE</Compression><DataType>Byte</DataType>'
        f"<IndexFile>{out('secret.txt')}</IndexFile></Raster></MRF_META>"
    )
    for name, module, arg in (
        ("vtext", "VirtualText", f"'{out('secret.csv')}', 'UTF-8', 1, POINT, DOUBLEQUOTE, ','"),
        ("vshape", "VirtualShape", f"'{out('secret')}', 'UTF-8', 4326"),
        ("vogr", "VirtualOGR", f"'{out('secret.csv')}'"),
    ):
        con = sqlite3.connect(ws / f"{name}.sqlite")
        con.execute("CREATE TABLE plain(a)")
        con.execute("PRAGMA writable_schema=ON")
        con.execute(
            "INSERT INTO sqlite_master(type, name, tbl_name, rootpage, sql) VALUES('table', 'v', 'v', 0, ?)",
            (f"CREATE VIRTUAL TABLE v USING {module}({arg})",),
        )
        con.commit()
        con.close()
    (ws / "lower.vrt").write_text(
        f'<ogrvrtdatasource><ogrvrtlayer name="secret"><srcdatasource>{out("secret.csv")}'
        "</srcdatasource></ogrvrtlayer></ogrvrtdatasource>"
    )
    (ws / "mixed.vrt").write_text(
        f'<OGRVRTDataSource><OGRVRTLayer name="secret"><srcDataSource>{out("secret.csv")}'
        "</srcDataSource></OGRVRTLayer></OGRVRTDataSource>"
    )
    (ws / "ogrsql.vrt").write_text(
        '<OGRVRTDataSource><OGRVRTLayer name="x"><SrcDataSource relativeToVRT="1">good.csv</SrcDataSource>'
        f"<SrcSQL>SELECT * FROM good JOIN '{out('secret.csv')}'.secret ON good.id = secret.id</SrcSQL>"
        "</OGRVRTLayer></OGRVRTDataSource>"
    )
    (ws / "sqlitesql.vrt").write_text(
        '<OGRVRTDataSource><OGRVRTLayer name="x"><SrcDataSource relativeToVRT="1">good.csv</SrcDataSource>'
        f'<SrcSQL dialect="SQLITE">SELECT * FROM "{out("secret.csv")}"."secret"</SrcSQL>'
        "</OGRVRTLayer></OGRVRTDataSource>"
    )
    (ws / "caseSQL.vrt").write_text(
        '<OGRVRTDataSource><OGRVRTLayer name="x"><SrcDataSource relativeToVRT="1">good.csv</SrcDataSource>'
        f'<srcsql dialect="sqlite">select * from "{out("secret.csv")}".secret</srcsql>'
        "</OGRVRTLayer></OGRVRTDataSource>"
    )
    return ws


async def test_mrf_data_and_index_files_outside(served: ClientSession, ws: Path, secrets: Secrets, canary: Canary) -> None:
    """MRF headers naming DataFile/IndexFile outside: every tool that reads pixels is refused out-of-root."""
    s = served
    for tool, args in (
        ("raster_info", {"path": "data.mrf", "stats": True}),
        ("raster_stats", {"input": "data.mrf"}),
        ("raster_sample", {"input": "data.mrf", "points": [[1, 0.5]]}),
        ("raster_convert", {"input": "data.mrf", "output": "copy.tif"}),
        ("raster_to_xyz", {"input": "data.mrf", "output": "copy.xyz"}),
        ("raster_preview", {"input": "data.mrf"}),
        ("raster_stats", {"input": "index.mrf"}),
    ):
        assert await attack(s, tool, args, secrets=secrets, canary=canary) == "out-of-root", tool
    assert not (ws / "copy.tif").exists() and not (ws / "copy.xyz").exists()


async def test_sqlite_schema_virtual_tables_over_outside_files(
    served: ClientSession, ws: Path, secrets: Secrets, canary: Canary
) -> None:
    """A database whose own schema declares VirtualText, VirtualShape or VirtualOGR tables over outside files."""
    s = served
    for name in ("vtext", "vshape", "vogr"):
        for tool, args in (
            ("vector_info", {"path": f"{name}.sqlite"}),
            ("vector_features", {"input": f"{name}.sqlite", "layer": "v"}),
            ("vector_convert", {"input": f"{name}.sqlite", "layer": "v", "output": f"{name}.gpkg"}),
        ):
            assert await attack(s, tool, args, secrets=secrets, canary=canary) == "out-of-root", (name, tool)


async def test_ogr_vrt_tags_in_any_letter_case(served: ClientSession, ws: Path, secrets: Secrets, canary: Canary) -> None:
    """OGR VRT whose SrcDataSource is written in another letter case than the checker expects."""
    s = served
    for name in ("lower.vrt", "mixed.vrt"):
        for tool, args in (("vector_info", {"path": name}), ("vector_features", {"input": name})):
            await attack(s, tool, args, secrets=secrets, canary=canary)


async def test_sql_inside_an_ogr_vrt_in_both_dialects(served: ClientSession, ws: Path, secrets: Secrets, canary: Canary) -> None:
    """SrcSQL in an OGR VRT that names an outside file, in OGR SQL and in the SQLite dialect (and in lower case)."""
    s = served
    for name in ("ogrsql.vrt", "sqlitesql.vrt", "caseSQL.vrt"):
        for tool, args in (("vector_info", {"path": name}), ("vector_features", {"input": name})):
            await attack(s, tool, args, secrets=secrets, canary=canary)
