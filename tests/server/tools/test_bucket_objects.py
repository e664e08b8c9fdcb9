"""Changing objects of a bucket workspace (issue 27): workspace_copy, workspace_move, workspace_delete and
overwrite=true through an MCP client on a local S3 (moto), with the person asked about the objects as they are (size,
date) and every change made only to the version the person approved (ETag, If-Match)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyogrio
import pytest
from fastmcp import Client
from mcp.types import ElicitResult

from gdal_mcp.config import Settings
from gdal_mcp.server.build import build_server
from tests.helpers import DATA, call
from tests.remote_servers import environment, local_s3

RGB = DATA / "raster" / "RGB.byte.tif"
SHP_PARTS = ("shp", "shx", "dbf", "prj", "cpg")
REPLACE = {"input": "r/RGB.byte.tif", "output": "out.tif", "format": "COG", "overwrite": True}


@pytest.fixture(scope="module")
def s3() -> Iterator[Any]:
    import boto3

    with local_s3() as (endpoint, env), environment(env):
        client = boto3.client("s3", endpoint_url=endpoint)
        client.create_bucket(Bucket="objs")
        yield client


@pytest.fixture
def bucket(s3: Any, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh prefix of the bucket for one test, with a raster and a 5-part shapefile."""
    prefix = f"t{abs(hash(request.node.name)) % 10**8}"
    s3.upload_file(str(RGB), "objs", f"{prefix}/r/RGB.byte.tif")
    for part in SHP_PARTS:
        s3.upload_file(str(DATA / "vector" / f"box.{part}"), "objs", f"{prefix}/v/box.{part}")
    yield prefix
    for o in s3.list_objects_v2(Bucket="objs", Prefix=f"{prefix}/").get("Contents", []):
        s3.delete_object(Bucket="objs", Key=o["Key"])


def _keys(s3: Any, prefix: str) -> dict[str, bytes]:
    found = s3.list_objects_v2(Bucket="objs", Prefix=f"{prefix}/").get("Contents", [])
    return {o["Key"][len(prefix) + 1 :]: s3.get_object(Bucket="objs", Key=o["Key"])["Body"].read() for o in found}


def _server(prefix: str, confirm: str = "never") -> tuple[Any, Any]:
    return build_server(Settings(workspaces=(), bucket=f"s3://objs/{prefix}", workers=1, timeout=60, confirm=confirm))  # type: ignore[arg-type]


class Person:
    """Answers confirmation questions; `meanwhile` runs while the person decides (someone else writing)."""

    def __init__(self, action: str, meanwhile: Any = None) -> None:
        self.action, self.shown, self.meanwhile = action, list[str](), meanwhile

    async def __call__(self, message: str, response_type: Any, params: Any, context: Any) -> ElicitResult:
        self.shown.append(message)
        if self.meanwhile is not None:
            self.meanwhile()
            self.meanwhile = None
        if self.action == "accept":
            return ElicitResult(action="accept", content={"confirm": True})
        return ElicitResult(action=self.action)


async def test_copy_move_and_delete_take_every_object_of_a_dataset(s3: Any, bucket: str) -> None:
    """A shapefile in a bucket is five objects: copied byte for byte under the new stem, moved (the old keys gone),
    deleted; a copy never replaces objects without overwrite=true, and objects and local files are not mixed."""
    originals = {f"v/box.{p}": (DATA / "vector" / f"box.{p}").read_bytes() for p in SHP_PARTS}
    mcp, app = _server(bucket)
    try:
        async with Client(mcp) as c:
            err, res = await call(c, "workspace_copy", input="v/box.shp", output="w/square.shp")
            assert not err, res
            assert sorted(res["files"]) == sorted(f"w/square.{p}" for p in SHP_PARTS)
            objects = _keys(s3, bucket)
            assert all(objects[f"w/square.{p}"] == originals[f"v/box.{p}"] for p in SHP_PARTS)
            err, info = await call(c, "vector_info", path="w/square.shp")
            assert not err and info["layers"][0]["feature_count"] == pyogrio.read_info(DATA / "vector" / "box.shp")["features"]

            s3.put_object(Bucket="objs", Key=f"{bucket}/w/other.tif", Body=b"kept")
            err, res = await call(c, "workspace_copy", input="v/box.shp", output="w/square.shp")  # exists
            assert err and res["error"]["code"] == "already-exists" and "overwrite=true" in res["error"]["message"], res
            err, res = await call(c, "workspace_copy", input="r/RGB.byte.tif", output="w/other.tif")
            assert err and res["error"]["code"] == "already-exists", res
            err, res = await call(c, "workspace_copy", input="v/box.shp", output="/tmp/box.shp")
            assert err and res["error"]["code"] in ("unsupported", "out-of-root"), res
            assert _keys(s3, bucket) == objects | {"w/other.tif": b"kept"}

            err, res = await call(c, "workspace_move", input="w/square.shp", output="moved/sq.shp")
            assert not err, res
            objects = _keys(s3, bucket)
            assert not [k for k in objects if k.startswith("w/square.")]
            assert all(objects[f"moved/sq.{p}"] == originals[f"v/box.{p}"] for p in SHP_PARTS)

            err, res = await call(c, "workspace_delete", input="moved/sq.shp")
            assert not err and res["files"][0] == "moved/sq.shp" and len(res["files"]) == 5, res
            err, res = await call(c, "workspace_delete", input="moved/sq.shp")
            assert err and res["error"]["code"] == "not-found", res
    finally:
        app.executor.close()
    assert set(_keys(s3, bucket)) == {"r/RGB.byte.tif", "w/other.tif", *originals}


async def test_overwrite_asks_about_the_object_and_replaces_only_the_version_shown(s3: Any, bucket: str) -> None:
    """Attack class: replacing data the person did not see. overwrite=true on an object asks the person with the
    object's size; a no leaves it as it was; an object changed while the person decides voids the answer (asked
    again, about the new version); a yes replaces it with exactly what a new key gets from the same job."""
    mcp, app = _server(bucket, confirm="destructive")
    key = f"{bucket}/out.tif"
    try:
        async with Client(mcp) as c:
            err, res = await call(c, "raster_convert", input="r/RGB.byte.tif", output="out.tif")
            assert not err, res
            first = s3.get_object(Bucket="objs", Key=key)["Body"].read()
            declines = Person("decline")
            async with Client(mcp, elicitation_handler=declines) as asking:
                err, res = await call(asking, "raster_convert", **REPLACE)
            assert err and res["error"]["code"] == "declined", res
            assert declines.shown[0].startswith("Replace out.tif (") and f"{len(first) / 1e6:.1f} MB" in declines.shown[0]
            assert s3.get_object(Bucket="objs", Key=key)["Body"].read() == first

            def someone_writes() -> None:
                s3.put_object(Bucket="objs", Key=key, Body=b"a version written meanwhile")

            accepts = Person("accept", meanwhile=someone_writes)
            async with Client(mcp, elicitation_handler=accepts) as asking:
                err, res = await call(asking, "raster_convert", **REPLACE)
            assert not err, res
            assert len(accepts.shown) == 2 and "27 bytes" in accepts.shown[1], accepts.shown  # asked again: the new version
            err, res = await call(c, "raster_convert", input="r/RGB.byte.tif", output="fresh.tif", format="COG")
            assert not err, res
        objects = _keys(s3, bucket)
        assert objects["out.tif"] == objects["fresh.tif"] != first
    finally:
        app.executor.close()


async def test_delete_and_move_of_objects_ask_and_bind_to_the_version(s3: Any, bucket: str) -> None:
    """workspace_delete and workspace_move of objects ask the person, naming every object; a no changes nothing; a yes
    deletes exactly the objects described."""
    mcp, app = _server(bucket, confirm="destructive")
    try:
        declines = Person("decline")
        async with Client(mcp, elicitation_handler=declines) as c:
            err, res = await call(c, "workspace_delete", input="v/box.shp")
            assert err and res["error"]["code"] == "declined", res
            err, res = await call(c, "workspace_move", input="v/box.shp", output="v/renamed.shp")
            assert err and res["error"]["code"] == "declined", res
        assert declines.shown[0].startswith("Delete v/box.shp") and "4 side files" in declines.shown[0]
        assert all(f"box.{p}" in declines.shown[0] for p in SHP_PARTS[1:])
        assert declines.shown[1].startswith("Move v/box.shp") and "to v/renamed.shp" in declines.shown[1]
        assert len(_keys(s3, bucket)) == 6
        accepts = Person("accept")
        async with Client(mcp, elicitation_handler=accepts) as c:
            err, res = await call(c, "workspace_move", input="v/box.shp", output="v/renamed.shp")
            assert not err, res
            err, res = await call(c, "workspace_delete", input="r/RGB.byte.tif")
            assert not err, res
        assert set(_keys(s3, bucket)) == {f"v/renamed.{p}" for p in SHP_PARTS}
    finally:
        app.executor.close()


# ----- the engine: the conditions themselves (a change between the approval and the request) -----
def _vsis3(prefix: str, name: str) -> str:
    return f"/vsis3/objs/{prefix}/{name}"


def test_a_delete_or_replace_of_a_version_that_changed_meanwhile_changes_nothing(s3: Any, bucket: str, tmp_path: Path) -> None:
    """Attack class: replacing or deleting data after the person approved another version of it. The approved ETag
    no longer matches: conflict, and the object keeps what the other writer put there."""
    from gdal_mcp.engine import objects, upload
    from gdal_mcp.errors import GdalMcpError

    key = f"{bucket}/r/RGB.byte.tif"
    approved = hashlib.md5(RGB.read_bytes(), usedforsecurity=False).hexdigest()
    assert objects.describe([_vsis3(bucket, "r/RGB.byte.tif")])[_vsis3(bucket, "r/RGB.byte.tif")]["files"][0]["etag"] == approved
    s3.put_object(Bucket="objs", Key=key, Body=b"newer")
    with pytest.raises(GdalMcpError) as e:
        objects.delete([(_vsis3(bucket, "r/RGB.byte.tif"), approved)])
    assert e.value.code == "conflict"
    new = tmp_path / "RGB.byte.tif"
    new.write_bytes(b"the job's output")
    with pytest.raises(GdalMcpError) as e:
        upload.upload([str(new)], [_vsis3(bucket, "r/RGB.byte.tif")], replace={_vsis3(bucket, "r/RGB.byte.tif"): approved})
    assert e.value.code == "conflict"
    assert s3.get_object(Bucket="objs", Key=key)["Body"].read() == b"newer"


def test_a_replace_that_fails_part_way_puts_back_what_it_replaced(s3: Any, bucket: str, tmp_path: Path) -> None:
    """Attack class: a dataset left half replaced. Replacing a 3-object dataset, the second object is changed by
    someone else while the first is uploaded: the second upload is refused (If-Match), the first object gets its old
    bytes back, and the main object is never touched."""
    from gdal_mcp.engine import upload
    from gdal_mcp.errors import GdalMcpError

    names = ["d.dbf", "d.shx", "d.shp"]  # side files first, the dataset's own object last
    for n in names:
        s3.put_object(Bucket="objs", Key=f"{bucket}/x/{n}", Body=f"old {n}".encode())
        (tmp_path / n).write_bytes(f"new {n}".encode())

    def someone_writes(fraction: float, message: str = "") -> None:
        if "d.dbf" in message:
            s3.put_object(Bucket="objs", Key=f"{bucket}/x/d.shx", Body=b"someone else's")

    targets = [_vsis3(bucket, f"x/{n}") for n in names]
    old = {n: hashlib.md5(f"old {n}".encode(), usedforsecurity=False).hexdigest() for n in names}  # single-part ETags
    approved = {t: old[n] for t, n in zip(targets, names, strict=True)}
    with pytest.raises(GdalMcpError) as e:
        upload.upload([str(tmp_path / n) for n in names], targets, someone_writes, replace=approved)
    assert e.value.code == "conflict", e.value.message
    assert _keys(s3, f"{bucket}/x") == {"d.dbf": b"old d.dbf", "d.shx": b"someone else's", "d.shp": b"old d.shp"}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".replaced-")]  # the backups went


async def test_in_place_changes_of_an_object_are_asked_and_keep_its_pixels(s3: Any, bucket: str, tmp_path: Path) -> None:
    """raster_edit, raster_overviews and vector_convert mode=append change an object: the person is asked about it,
    a no leaves it, a yes replaces it with the changed copy (the pixels and features as numpy and pyogrio read them
    before, nodata and overview levels as asked)."""
    import numpy as np
    import rasterio

    mcp, app = _server(bucket, confirm="destructive")
    key = f"{bucket}/r/RGB.byte.tif"

    def local(name: str) -> Path:
        path = tmp_path / name
        path.write_bytes(s3.get_object(Bucket="objs", Key=key)["Body"].read())
        return path

    try:
        declines = Person("decline")
        async with Client(mcp, elicitation_handler=declines) as c:
            err, res = await call(c, "raster_edit", input="r/RGB.byte.tif", nodata=7)
            assert err and res["error"]["code"] == "declined", res
        assert declines.shown[0].startswith("Change r/RGB.byte.tif (1.7 MB")
        assert local("same.tif").read_bytes() == RGB.read_bytes()
        accepts = Person("accept")
        async with Client(mcp, elicitation_handler=accepts) as c:
            err, res = await call(c, "raster_edit", input="r/RGB.byte.tif", nodata=7)
            assert not err and res["summary"]["nodata"] == 7, res
            with rasterio.open(local("edited.tif")) as ds, rasterio.open(RGB) as ref:
                assert ds.nodata == 7 and np.array_equal(ds.read(), ref.read()) and ds.crs == ref.crs
            err, res = await call(c, "raster_overviews", input="r/RGB.byte.tif", levels=[2, 4])
            assert not err and res["levels"] == [2, 4], res
            with rasterio.open(local("ovr.tif")) as ds, rasterio.open(RGB) as ref:
                assert ds.overviews(1) == [2, 4] and np.array_equal(ds.read(), ref.read()) and ds.nodata == 7
            err, res = await call(c, "vector_convert", input="v/box.shp", output="v/box.shp", mode="append")
            assert not err, res
            err, res = await call(c, "raster_convert", input="r/RGB.byte.tif", output="r/cog.tif", format="COG")
            assert not err, res
            err, res = await call(c, "raster_overviews", input="r/cog.tif", levels=[2])  # no .ovr beside an object
            assert err and res["error"]["code"] == "unsupported", res
            assert "overwrite=true" in res["error"]["message"] and "external=true" not in res["error"]["message"]
            err, res = await call(c, "raster_edit", input="r/cog.tif", nodata=5)  # the layout breaks: said
            assert not err and any("no longer a valid COG" in w for w in res["warnings"]), res
        (tmp_path / "v").mkdir()
        for part in SHP_PARTS:
            s3.download_file("objs", f"{bucket}/v/box.{part}", str(tmp_path / "v" / f"box.{part}"))
        ref = pyogrio.read_dataframe(DATA / "vector" / "box.shp")
        appended = pyogrio.read_dataframe(tmp_path / "v" / "box.shp")
        assert len(appended) == 2 * len(ref) and appended.geometry.iloc[len(ref) :].reset_index(drop=True).equals(ref.geometry)
        assert len(accepts.shown) == 5 and accepts.shown[2].startswith("Append the features of v/box.shp to v/box.shp (")
    finally:
        app.executor.close()


async def test_objects_that_appear_or_change_after_the_check_are_not_changed(
    s3: Any, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack class: approval bypass by a race (an agent creates or rewrites objects between the policy's look and the
    job). An object absent when the call was checked (so nobody was asked) but there when the tool runs is not deleted
    or replaced; a side file rewritten after the person's yes is not replaced; a side file the question never named
    (the output's main object absent) is not replaced either. Each is conflict or already-exists, and the objects keep
    what their writer put there."""
    from gdal_mcp.server.approval import policy

    real_describe, real_check = policy.describe_objects, policy.check
    after_describe: list[Any] = []
    after_yes: list[Any] = []

    async def describe_then(*args: Any, **kwargs: Any) -> Any:
        found = await real_describe(*args, **kwargs)
        while after_describe:
            after_describe.pop()()
        return found

    async def check_then(*args: Any, **kwargs: Any) -> Any:
        answer = await real_check(*args, **kwargs)
        while after_yes and answer is None:  # the yes is in (not a question handed back to the client)
            after_yes.pop()()
        return answer

    monkeypatch.setattr(policy, "describe_objects", describe_then)
    monkeypatch.setattr(policy, "check", check_then)

    def put(key: str, body: bytes) -> Any:
        return lambda: s3.put_object(Bucket="objs", Key=f"{bucket}/{key}", Body=body)

    s3.put_object(Bucket="objs", Key=f"{bucket}/precious.tif", Body=b"the person's")
    mcp, app = _server(bucket, confirm="destructive")
    try:
        accepts = Person("accept")
        async with Client(mcp, elicitation_handler=accepts) as c:
            after_describe.append(put("late.tif", b"appeared after the check"))
            err, res = await call(c, "workspace_delete", input="late.tif")
            assert err and res["error"]["code"] == "conflict", res
            after_describe.append(put("junk.tif", b"agent junk"))
            err, res = await call(c, "workspace_move", input="junk.tif", output="precious.tif", overwrite=True)
            assert err and res["error"]["code"] == "conflict", res
            assert not accepts.shown  # nobody was asked: the objects were not there when the call was checked

            s3.put_object(Bucket="objs", Key=f"{bucket}/u/data.prj", Body=b"another dataset's")
            err, res = await call(c, "vector_convert", input="v/box.shp", output="u/data.shp", overwrite=True)
            assert err and res["error"]["code"] == "already-exists", res

            err, res = await call(c, "workspace_copy", input="v/box.shp", output="w/sq.shp")
            assert not err, res
            after_yes.append(put("w/sq.dbf", b"written after the yes"))
            err, res = await call(c, "workspace_copy", input="v/box.shp", output="w/sq.shp", overwrite=True)
            assert err and res["error"]["code"] == "conflict", res
            assert len(accepts.shown) == 1 and "sq.dbf" in accepts.shown[0]
    finally:
        app.executor.close()
    objects = _keys(s3, bucket)
    assert objects["late.tif"] == b"appeared after the check" and objects["junk.tif"] == b"agent junk"
    assert objects["precious.tif"] == b"the person's" and objects["u/data.prj"] == b"another dataset's"
    assert objects["w/sq.dbf"] == b"written after the yes" and "u/data.shp" not in objects


async def test_object_keys_with_empty_segments_or_reserved_names_are_refused(s3: Any, bucket: str) -> None:
    """'a//b.tif' is another key than 'a/b.tif' though a person reads them alike; temporary and probe objects are the
    server's own."""
    s3.put_object(Bucket="objs", Key=f"{bucket}/.gdal-mcp-tmp-x.tif", Body=b"in progress")
    mcp, app = _server(bucket)
    try:
        async with Client(mcp) as c:
            for tool, args in (
                ("workspace_copy", {"input": "r/RGB.byte.tif", "output": "a//b.tif"}),
                ("raster_convert", {"input": "r/RGB.byte.tif", "output": "a///b.tif"}),
                ("workspace_delete", {"input": ".gdal-mcp-tmp-x.tif"}),
                ("workspace_copy", {"input": "r/RGB.byte.tif", "output": ".gdal-mcp-condition-probe-1.tif"}),
            ):
                err, res = await call(c, tool, **args)
                assert err and res["error"]["code"] == "invalid-argument", (tool, res)
    finally:
        app.executor.close()
    assert set(_keys(s3, bucket)) == {"r/RGB.byte.tif", ".gdal-mcp-tmp-x.tif", *(f"v/box.{p}" for p in SHP_PARTS)}
