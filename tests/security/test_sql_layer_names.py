"""SQL may name the input's own layers even when they look like files (a GeoPackage layer 'nc.gpkg'); that exception
must not reach another file. The attack class: a dataset whose layers are named like the files to steal (the outside
secret's absolute and relative paths, a workspace file beside it), then SQL naming those files, qualified, joined, in
another letter case or in a subquery. Each is refused with a stable code, no secret byte and no connection get out;
the one construct GDAL resolves to the input's own layer is answered with that layer's rows, never the file's."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import geopandas as gpd
import pytest
import shapely

from tests.security.helpers import Canary, Secrets, attack, everything_returned, session, workspace


def lures(secrets: Secrets, ws: Path) -> dict[str, str]:
    """Input -> a layer of it named like a file: GeoPackage layers 'nc.gpkg' and 'good.shp' (a workspace file's
    name), GeoJSON layers (their "name" member) named by the outside secret's absolute and relative paths."""
    return {
        "lure.gpkg": "nc.gpkg",
        "lure_shp.gpkg": "good.shp",
        "lure_abs.geojson": secrets.path("secret.csv"),
        "lure_rel.geojson": os.path.relpath(secrets.path("secret.csv"), ws),
    }


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory, secrets: Secrets) -> Path:
    ws = workspace(tmp_path_factory.mktemp("layernames"))
    decoy = gpd.GeoDataFrame({"name": ["decoy"]}, geometry=[shapely.Point(0, 0)], crs="EPSG:4326")
    for file, layer in lures(secrets, ws).items():
        if file.endswith(".gpkg"):
            decoy.to_file(ws / file, layer=layer)
        else:
            (ws / file).write_text(json.dumps({**json.loads(decoy.to_json()), "name": layer}))
    return ws


def cases(secrets: Secrets) -> list[tuple[str, dict[str, Any]]]:
    out = secrets.path("secret.csv")
    rel = "../" * 8 + out.lstrip("/")
    sqls = {
        "lure_abs.geojson": [
            f'SELECT * FROM "{out}"."secret"',  # qualified: another data source, whatever the layers are called
            f"SELECT * FROM '{out}'.secret",
            f'SELECT * FROM "{out}" JOIN "{out}".secret ON 1 = 1',
            f'SELECT * FROM "{rel}"',  # another path to the secret, not a layer name
            f'SELECT * FROM "{out.upper()}"',  # a layer name in another letter case is not that layer
        ],
        "lure.gpkg": [
            'SELECT * FROM "good.csv"',  # a workspace file that is not a layer of the input
            'SELECT * FROM "nc.gpkg" WHERE name IN (SELECT name FROM "good.csv")',
            'SELECT * FROM "nc.gpkg"."nc.gpkg"',
            f'SELECT * FROM "nc.gpkg" JOIN "{out}" ON 1 = 1',
        ],
        "lure_shp.gpkg": ['SELECT * FROM "good.shp"."good"', 'SELECT * FROM "good.dbf"'],
    }
    calls: list[tuple[str, dict[str, Any]]] = []
    for file, queries in sqls.items():
        for i, sql in enumerate(queries):
            for dialect in ("OGRSQL", "SQLITE"):
                calls.append(("vector_query", {"input": file, "sql": sql, "sql_dialect": dialect}))
                output = f"{Path(file).stem}{i}{dialect}.gpkg"
                calls.append(("vector_convert", {"input": file, "output": output, "sql": sql, "sql_dialect": dialect}))
    return calls


async def test_a_layer_name_exception_reaches_no_other_file(ws: Path, secrets: Secrets, canary: Canary) -> None:
    async with session(ws) as s:
        for tool, args in cases(secrets):
            await attack(s, tool, args, secrets=secrets, canary=canary)
        # GDAL reads an unqualified table from the input's layers only: the layer named like the secret's path is
        # that layer (the decoy), never the file.
        for dialect in ("OGRSQL", "SQLITE"):
            for file, name in lures(secrets, ws).items():
                r = await s.call_tool(
                    "vector_query", {"input": file, "sql": f'SELECT name FROM "{name}"', "sql_dialect": dialect}
                )
                returned = everything_returned(r)
                assert not r.is_error, returned[:300]
                assert secrets.token not in returned
                assert r.structured_content["rows"] == [{"name": "decoy"}]
    assert not canary.hits
