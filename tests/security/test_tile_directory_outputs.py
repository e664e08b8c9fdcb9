"""Directory outputs (raster_tiles' z/x/y tiles): the sandbox's `resolve_output(directory=True)` and the commit that
renames a whole directory into place (sandbox/outputs.py). Each test names the attack class it covers:

- symlinked parent: a path through a link to outside the workspace, or an output that is itself a link;
- existing directory without overwrite: never replaced, also when it appears while the job runs;
- `..` traversal: out of the workspace, or naming the workspace (or a workspace root) itself;
- output path that is an existing file: a directory never replaces a file, overwrite or not;
- overwrite of a directory: only with overwrite (and the approval policy's replace question), only a directory of
  tiles, never one holding an input; the old one set aside and deleted only after the new one is in place;
- partial output: a failed or cancelled job leaves nothing, links a job made are never placed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gdal_mcp.config import Settings
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.sandbox import Sandbox, outputs
from tests.security.helpers import Canary, Secrets, attack, session, workspace


def tree(root: Path) -> dict[str, bytes | None]:
    """Every entry under `root` (links not followed): files with their bytes, directories as None."""
    found: dict[str, bytes | None] = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs:
            found[os.path.relpath(os.path.join(dirpath, name), root)] = None
        for name in files:
            path = os.path.join(dirpath, name)
            found[os.path.relpath(path, root)] = Path(path).read_bytes()
    return found


def tile_dir(root: Path, marker: str = "old") -> Path:
    (root / "3" / "2").mkdir(parents=True)
    (root / "3" / "2" / "1.png").write_text(marker)
    return root


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return workspace(tmp_path)


def refused(sandbox: Sandbox, path: str, code: str, **kwargs: object) -> str:
    with pytest.raises(GdalMcpError) as e:
        sandbox.resolve_output(path, directory=True, **kwargs)  # type: ignore[arg-type]
    assert e.value.code == code, (path, e.value.code, e.value.message)
    return e.value.message


def no_temporaries(root: Path) -> bool:
    return not any(name.startswith(".gdal-mcp-tmp-") for _, dirs, files in os.walk(root) for name in [*dirs, *files])


# ----- symlinked parent ---------------------------------------------------------------------------
def test_symlinked_parent_or_output_link(ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / "out_link").symlink_to(outside)  # a parent that leads out
    (ws / "inner").mkdir()
    (ws / "in_link").symlink_to(ws / "inner")  # the output itself a link, inside
    (ws / "tiles_out").symlink_to(outside)  # the output itself a link, out
    sandbox = Sandbox([ws])
    refused(sandbox, "out_link/tiles", "out-of-root")
    refused(sandbox, "out_link/new/deeper/tiles", "out-of-root")
    refused(sandbox, "tiles_out", "out-of-root", overwrite=True)
    assert "symbolic link" in refused(sandbox, "in_link", "invalid-argument", overwrite=True)
    assert list(outside.iterdir()) == [] and list((ws / "inner").iterdir()) == []
    # a link to a directory inside the workspace is a real place to write under: its canonical path is used
    target = sandbox.resolve_output("in_link/tiles", directory=True)
    assert target.final == ws / "inner" / "tiles"
    target.discard()
    assert no_temporaries(ws)


# ----- existing directory without overwrite --------------------------------------------------------
def test_existing_directory_is_never_replaced_without_overwrite(ws: Path) -> None:
    tile_dir(ws / "tiles")
    before = tree(ws / "tiles")
    sandbox = Sandbox([ws])
    assert "overwrite=true" in refused(sandbox, "tiles", "already-exists")
    refused(sandbox, "tiles/", "already-exists")
    # one that appears while the job runs is not replaced either: the commit is a no-replace rename
    target = sandbox.resolve_output("late", directory=True)
    tile_dir(target.tmp_path, "new")
    tile_dir(ws / "late", "appeared meanwhile")
    with pytest.raises(GdalMcpError) as e:
        target.commit()
    assert e.value.code == "already-exists"
    assert (ws / "late" / "3" / "2" / "1.png").read_text() == "appeared meanwhile"
    assert tree(ws / "tiles") == before and no_temporaries(ws)


# ----- .. traversal ------------------------------------------------------------------------------
def test_dot_dot_and_the_workspace_itself(ws: Path, tmp_path: Path) -> None:
    sandbox = Sandbox([ws])
    refused(sandbox, "../tiles", "out-of-root")
    refused(sandbox, "a/../../tiles", "out-of-root")
    refused(sandbox, str(tmp_path / "elsewhere"), "out-of-root")
    for name in ("tiles/..", ".", "./", ".."):
        with pytest.raises(GdalMcpError) as e:
            sandbox.resolve_output(name, directory=True, overwrite=True)
        assert e.value.code in ("invalid-argument", "out-of-root"), name
    # a second workspace root inside the first is never a directory output, nor anything holding one
    (ws / "second").mkdir()
    both = Sandbox([ws, ws / "second"])
    assert "workspace root" in refused(both, "second", "invalid-argument", overwrite=True)
    assert not (tmp_path / "tiles").exists() and not (tmp_path / "elsewhere").exists() and no_temporaries(ws)


# ----- output path that is an existing file ---------------------------------------------------------
def test_a_directory_never_replaces_a_file(ws: Path) -> None:
    before = (ws / "good.tif").read_bytes()
    sandbox = Sandbox([ws])
    for overwrite in (False, True):
        assert "existing file" in refused(sandbox, "good.tif", "invalid-argument", overwrite=overwrite)
    # nor at commit time, when a file took the name while the job ran (overwrite asked for a directory)
    tile_dir(ws / "t")
    target = sandbox.resolve_output("t", directory=True, overwrite=True)
    tile_dir(target.tmp_path, "new")
    for p in sorted((ws / "t").rglob("*"), reverse=True):
        p.unlink() if p.is_file() else p.rmdir()
    (ws / "t").rmdir()
    (ws / "t").write_text("a file now")
    with pytest.raises(GdalMcpError) as e:
        target.commit()
    assert e.value.code == "already-exists" and (ws / "t").read_text() == "a file now"
    assert (ws / "good.tif").read_bytes() == before and no_temporaries(ws)


# ----- overwrite of a directory --------------------------------------------------------------------
def test_overwrite_puts_the_new_directory_in_place_and_only_then_deletes_the_old(ws: Path) -> None:
    sandbox = Sandbox([ws])
    tile_dir(ws / "tiles", "old")
    target = sandbox.resolve_output("tiles", directory=True, overwrite=True)
    tile_dir(target.tmp_path, "new")
    assert target.commit() == [ws / "tiles"]
    assert tree(ws / "tiles") == {"3": None, "3/2": None, "3/2/1.png": b"new"} and no_temporaries(ws)


def test_a_failed_placement_puts_the_old_directory_back(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sandbox = Sandbox([ws])
    tile_dir(ws / "tiles", "old")
    before = tree(ws / "tiles")
    target = sandbox.resolve_output("tiles", directory=True, overwrite=True)
    tile_dir(target.tmp_path, "new")
    real = outputs.rename_noreplace
    calls: list[Path] = []

    def failing_second(src: Path, dst: Path) -> None:
        calls.append(dst)
        if len(calls) == 2:  # the old one is aside; placing the new one fails (disk error, …)
            raise OSError(5, "Input/output error", str(dst))
        real(src, dst)

    monkeypatch.setattr(outputs, "rename_noreplace", failing_second)
    with pytest.raises(OSError):
        target.commit()
    assert tree(ws / "tiles") == before and no_temporaries(ws)


def test_a_cancel_during_the_commit_never_loses_both_directories(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cancel arriving between "old set aside" and "new in place" (App.execute discards the target while the commit
    runs in a thread): the discard waits for the renames, then removes only what was replaced."""
    import threading
    import time

    sandbox = Sandbox([ws])
    tile_dir(ws / "tiles", "old")
    target = sandbox.resolve_output("tiles", directory=True, overwrite=True)
    tile_dir(target.tmp_path, "new")
    real = outputs.rename_noreplace
    cancel = threading.Thread(target=target.discard)

    def rename_then_cancel(src: Path, dst: Path) -> None:
        real(src, dst)
        if dst.name == outputs.REPLACED_NAME:  # the old directory is aside: the cancel arrives now
            cancel.start()
            time.sleep(0.2)

    monkeypatch.setattr(outputs, "rename_noreplace", rename_then_cancel)
    target.commit()
    cancel.join()
    assert tree(ws / "tiles") == {"3": None, "3/2": None, "3/2/1.png": b"new"} and no_temporaries(ws)


def test_an_input_inside_the_directory_is_never_replaced(ws: Path) -> None:
    tile_dir(ws / "tiles")
    (ws / "tiles" / "src.tif").write_bytes((ws / "good.tif").read_bytes())
    sandbox = Sandbox([ws])
    src = sandbox.resolve_input("tiles/src.tif")
    with pytest.raises(GdalMcpError) as e:
        sandbox.resolve_output("tiles", directory=True, overwrite=True, inputs=[src])
    assert e.value.code == "invalid-argument" and "holds an input" in e.value.message
    assert (ws / "tiles" / "src.tif").exists() and no_temporaries(ws)


def test_replacing_a_directory_is_a_replace_question(ws: Path) -> None:
    """Under --confirm destructive an overwrite of an existing tile directory asks the person (binding to the
    directory's identity), a new directory does not, and a link is not offered as something to replace."""
    from gdal_mcp.server.app import App
    from gdal_mcp.server.approval.policy import plan
    from gdal_mcp.server.tools.registry import WRITE

    tile_dir(ws / "tiles")
    (ws / "in_link").symlink_to(ws / "tiles")
    app = App(Settings(workspaces=(ws,), confirm="destructive", allow_unconfined=True))
    try:
        args = {"input": "good.tif", "output": "tiles", "overwrite": True}
        question = plan(app, "raster_tiles", "Web map tiles", WRITE, args, writes=True)
        assert question is not None and question.kind == "replace"
        assert "directory tiles/" in question.message and "everything in it" in question.message
        assert question.targets[0].size == len("old")
        assert plan(app, "raster_tiles", "Web map tiles", WRITE, {**args, "output": "new_tiles"}, writes=True) is None
        assert plan(app, "raster_tiles", "Web map tiles", WRITE, {**args, "output": "in_link"}, writes=True) is None
        # another tool's output never names a directory: no question about one (the tool refuses it itself)
        assert plan(app, "raster_convert", "Convert raster", WRITE, args, writes=True) is None
    finally:
        app.executor.close()


# ----- partial output ------------------------------------------------------------------------------
def test_failed_jobs_leave_nothing_and_links_are_never_placed(ws: Path, secrets: Secrets) -> None:
    sandbox = Sandbox([ws])
    target = sandbox.resolve_output("new/deeper/tiles", directory=True)
    tile_dir(target.tmp_path)
    target.discard()  # what App.execute does when the job fails or is cancelled
    assert not (ws / "new").exists() and no_temporaries(ws)

    target = sandbox.resolve_output("linked", directory=True)
    tile_dir(target.tmp_path, "new")
    (target.tmp_path / "secret.png").symlink_to(secrets.path("secret.txt"))
    (target.tmp_path / "3" / "out").symlink_to(secrets.dir)
    os.mkfifo(target.tmp_path / "fifo")
    target.commit()
    assert tree(ws / "linked") == {"3": None, "3/2": None, "3/2/1.png": b"new"}
    assert not any(p.is_symlink() for p in (ws / "linked").rglob("*"))


# ----- through the server -----------------------------------------------------------------------------
@pytest.mark.slow  # a real server process over stdio (its start-up is most of the time)
async def test_the_tool_refuses_each_class(ws: Path, tmp_path: Path, secrets: Secrets, canary: Canary) -> None:
    """The same attacks through a real MCP client: refused with a stable code, nothing written outside or over
    anything, and the server answers the next call."""
    (ws / "out_link").symlink_to(secrets.dir)
    tile_dir(ws / "tiles")
    (ws / "tiles" / "readme.txt").write_text("the user's")
    (ws / "tile_link").symlink_to(ws / "tiles")
    before = tree(ws / "tiles")
    outside_before = sorted(p.name for p in secrets.dir.iterdir())
    async with session(ws) as s:
        for args, code in (
            ({"output": "out_link/tiles"}, "out-of-root"),
            ({"output": "../tiles"}, "out-of-root"),
            ({"output": "tiles"}, "already-exists"),
            ({"output": "tiles", "overwrite": True}, "invalid-argument"),  # holds readme.txt: not a tile directory
            ({"output": "tile_link", "overwrite": True}, "invalid-argument"),
            ({"output": "good.tif", "overwrite": True}, "invalid-argument"),
            ({"output": "x", "max_zoom": 8, "min_zoom": 0, "tiling_scheme": "WorldCRS84Quad", "bbox": [0, 0, 1, 1]}, None),
        ):
            found = await attack(s, "raster_tiles", {"input": "good.tif", "max_zoom": 6, **args}, secrets=secrets, canary=canary)
            assert code is None or found == code, (args, found)
    assert tree(ws / "tiles") == before
    assert sorted(p.name for p in secrets.dir.iterdir()) == outside_before
    assert not (tmp_path / "tiles").exists() and not (ws / "x").exists() and no_temporaries(ws)
