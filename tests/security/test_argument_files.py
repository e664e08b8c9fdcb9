"""Attack class: GDAL 3.12's `@file` argument syntax. The algorithms' parser replaces a value starting with `@` by the
contents of that file (`--where=@/path`), and echoes the start of it in its parse error: a read of any file the
worker may read, with no path the sandbox ever sees. Found by a red team against vector_pipeline's filter step."""

from __future__ import annotations

from pathlib import Path

from fastmcp import Client

from tests.helpers import call


async def test_a_where_naming_a_file_is_refused_and_echoes_nothing(client: Client, ws: Path) -> None:
    secret = ws / "secret.txt"
    secret.write_text("the-secret-line\n")
    for plan_only in (True, False):
        err, res = await call(
            client,
            "vector_pipeline",
            input="vector/points.shp",
            output="out/argfile/o.gpkg",
            plan_only=plan_only,
            steps=[{"step": "filter", "where": f"@{secret}"}],
        )
        assert err and res["error"]["code"] == "invalid-argument", res
        assert "the-secret-line" not in res["error"]["message"] and "'@'" in res["error"]["message"]
    assert not (ws / "out" / "argfile").exists()
    # a where that merely contains @ (inside a string) is an ordinary filter
    err, res = await call(
        client,
        "vector_pipeline",
        input="vector/points.shp",
        output="out/argfile2/o.gpkg",
        plan_only=True,
        steps=[{"step": "filter", "where": "'@x' <> 'y'"}],
    )
    assert not err, res
