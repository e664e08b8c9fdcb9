"""Temporary output directories carry their owner; stale ones (owner gone) are swept, nothing else is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

from gdal_mcp.sandbox import OWNER_FILE, TMP_PREFIX, Sandbox, _owner_identity


def dead_owner() -> dict[str, object]:
    """The identity of a process that has exited (a real pid, now gone)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return {**_owner_identity(), "pid": proc.pid, "start": ""}


def temporary(parent: Path, owner: dict[str, object] | None) -> Path:
    d = parent / f"{TMP_PREFIX}{uuid.uuid4().hex}"
    d.mkdir(parents=True)
    (d / "x.tif").write_bytes(b"partial")
    if owner is not None:
        (d / OWNER_FILE).write_text(json.dumps(owner))
    return d


def test_an_output_carries_its_owner_and_commit_leaves_the_marker_behind(tmp_path: Path) -> None:
    sb = Sandbox([tmp_path])
    target = sb.resolve_output("a/b.tif")
    owner = json.loads((target.tmp_dir / OWNER_FILE).read_text())
    assert owner == _owner_identity() and owner["pid"] == os.getpid()
    target.tmp_path.write_bytes(b"data")
    assert target.commit() == [tmp_path / "a" / "b.tif"]
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["b.tif"]  # no marker, no temporary


def test_sweep_removes_only_temporaries_whose_owner_is_gone(tmp_path: Path) -> None:
    stale = temporary(tmp_path / "x" / "y", dead_owner())
    live = temporary(tmp_path / "x", _owner_identity())
    unmarked = temporary(tmp_path, None)
    garbage = temporary(tmp_path / "g", None)
    (garbage / OWNER_FILE).write_text("{not json")
    as_file = tmp_path / f"{TMP_PREFIX}{uuid.uuid4().hex}"  # a file named like one: not a directory
    as_file.write_text(json.dumps(dead_owner()))
    target = temporary(tmp_path.parent / f"{tmp_path.name}-elsewhere", dead_owner())
    link = tmp_path / f"{TMP_PREFIX}{uuid.uuid4().hex}"
    link.symlink_to(target, target_is_directory=True)  # a link named like one: never followed, never removed

    assert Sandbox([tmp_path]).sweep_stale_temporaries() == [stale]
    assert not stale.exists() and (tmp_path / "x" / "y").is_dir()  # its parent stays
    assert live.exists() and unmarked.exists() and garbage.exists() and as_file.exists()
    assert link.is_symlink() and target.exists()


def test_sweep_is_bounded(tmp_path: Path) -> None:
    deep = temporary(tmp_path / "a" / "b" / "c", dead_owner())
    assert Sandbox([tmp_path]).sweep_stale_temporaries(max_dirs=2) == []  # visits the root and a/ only
    assert deep.exists()
    assert Sandbox([tmp_path]).sweep_stale_temporaries(max_seconds=-1) == []
    assert Sandbox([tmp_path]).sweep_stale_temporaries() == [deep]


def test_a_full_disk_refuses_the_output_before_any_job(tmp_path: Path) -> None:
    import pytest

    from gdal_mcp.errors import GdalMcpError
    from tests.faults import mount_small_tmpfs, unmount

    where = tmp_path / "small"
    reason = mount_small_tmpfs(where, "64k")
    if reason:
        pytest.skip(reason)
    try:
        with open(where / "filler", "wb", buffering=0) as fh:  # fill it up, to the last block
            try:
                while fh.write(bytes(4096)):
                    pass
            except OSError:
                pass
        with pytest.raises(GdalMcpError) as e:
            Sandbox([where]).resolve_output("new/out.tif")
        assert e.value.code == "resource-limit" and "the disk is full (No space left on device)" in e.value.message
        assert sorted(p.name for p in where.iterdir()) == ["filler"]  # nothing left: no temporary, no new/
    finally:
        unmount(where)
