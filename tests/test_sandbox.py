"""Security suite: every sandbox rule, on the Sandbox directly (no server needed)."""

from __future__ import annotations

import os
import socket
import zipfile
from pathlib import Path

import pytest

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.sandbox import TMP_PREFIX, Sandbox


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    ws = tmp_path / "ws"
    evil = tmp_path / "ws-evil"
    outside = tmp_path / "outside"
    for d in (ws, evil, outside, ws / "sub"):
        d.mkdir()
    (ws / "a.tif").write_bytes(b"II*\x00inside")
    (ws / "sub" / "b.tif").write_bytes(b"II*\x00b")
    (evil / "secret.tif").write_bytes(b"II*\x00evil")
    (outside / "secret.tif").write_bytes(b"II*\x00secret")
    with zipfile.ZipFile(ws / "in.zip", "w") as z:
        z.writestr("dem.tif", b"II*\x00zip")
    with zipfile.ZipFile(outside / "out.zip", "w") as z:
        z.writestr("dem.tif", b"II*\x00zip")
    return {"ws": ws, "evil": evil, "outside": outside, "tmp": tmp_path}


@pytest.fixture
def sb(layout: dict[str, Path]) -> Sandbox:
    return Sandbox([layout["ws"]])


def code_of(fn, *args, **kwargs) -> str:
    with pytest.raises(GdalMcpError) as info:
        fn(*args, **kwargs)
    return info.value.code


# ----- plain paths ----------------------------------------------------------------------------
def test_relative_path_resolves_against_workspace(sb: Sandbox, layout) -> None:
    r = sb.resolve_input("sub/b.tif")
    assert r.gdal_path == str(layout["ws"].resolve() / "sub" / "b.tif")
    assert r.display == "sub/b.tif"


def test_absolute_path_inside_is_allowed(sb: Sandbox, layout) -> None:
    assert sb.resolve_input(str(layout["ws"] / "a.tif")).display == "a.tif"


def test_dotdot_escape_is_refused(sb: Sandbox) -> None:
    assert code_of(sb.resolve_input, "../outside/secret.tif") == "out-of-root"
    assert code_of(sb.resolve_input, "sub/../../outside/secret.tif") == "out-of-root"


def test_dotdot_that_stays_inside_is_fine(sb: Sandbox) -> None:
    assert sb.resolve_input("sub/../a.tif").display == "a.tif"


def test_absolute_outside_is_refused(sb: Sandbox) -> None:
    assert code_of(sb.resolve_input, "/etc/passwd") == "out-of-root"


def test_string_prefix_sibling_is_not_inside(sb: Sandbox, layout) -> None:
    # /tmp/x/ws must not admit /tmp/x/ws-evil
    assert code_of(sb.resolve_input, str(layout["evil"] / "secret.tif")) == "out-of-root"
    assert code_of(sb.resolve_input, "../ws-evil/secret.tif") == "out-of-root"


def test_symlink_to_outside_file_is_refused(sb: Sandbox, layout) -> None:
    (layout["ws"] / "link.tif").symlink_to(layout["outside"] / "secret.tif")
    assert code_of(sb.resolve_input, "link.tif") == "out-of-root"


def test_symlinked_directory_to_outside_is_refused(sb: Sandbox, layout) -> None:
    (layout["ws"] / "linkdir").symlink_to(layout["outside"], target_is_directory=True)
    assert code_of(sb.resolve_input, "linkdir/secret.tif") == "out-of-root"


def test_symlink_inside_workspace_is_followed(sb: Sandbox, layout) -> None:
    (layout["ws"] / "alias.tif").symlink_to(layout["ws"] / "a.tif")
    assert sb.resolve_input("alias.tif").gdal_path == str(layout["ws"].resolve() / "a.tif")


def test_workspace_given_through_a_symlink_still_contains(layout) -> None:
    link = layout["tmp"] / "wslink"
    link.symlink_to(layout["ws"], target_is_directory=True)
    sb = Sandbox([link])
    assert sb.resolve_input(str(link / "a.tif")).display == "a.tif"


def test_missing_file_is_not_found(sb: Sandbox) -> None:
    assert code_of(sb.resolve_input, "nope.tif") == "not-found"


def test_missing_file_outside_is_out_of_root_not_not_found(sb: Sandbox) -> None:
    # Do not let callers probe which outside files exist.
    assert code_of(sb.resolve_input, "/nonexistent/x.tif") == "out-of-root"


def test_nul_byte_and_overlong_paths(sb: Sandbox) -> None:
    assert code_of(sb.resolve_input, "a.tif\x00.png") == "invalid-argument"
    assert code_of(sb.resolve_input, "a" * 5000) == "invalid-argument"
    assert code_of(sb.resolve_input, "x/" + "b" * 300 + ".tif") == "invalid-argument"
    assert code_of(sb.resolve_input, "") == "invalid-argument"


def test_devices_and_proc_are_refused(sb: Sandbox, layout) -> None:
    assert code_of(sb.resolve_input, "/dev/zero") == "out-of-root"
    assert code_of(sb.resolve_input, "/proc/self/environ") == "out-of-root"
    (layout["ws"] / "zero").symlink_to("/dev/zero")
    assert code_of(sb.resolve_input, "zero") == "out-of-root"
    (layout["ws"] / "environ").symlink_to("/proc/self/environ")
    assert code_of(sb.resolve_input, "environ") == "out-of-root"


def test_proc_workspace_is_refused() -> None:
    with pytest.raises(ValueError):
        Sandbox(["/proc"])


def test_fifo_and_socket_are_refused(sb: Sandbox, layout) -> None:
    os.mkfifo(layout["ws"] / "pipe")
    assert code_of(sb.resolve_input, "pipe") == "unsupported"
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(layout["ws"] / "sock"))
        assert code_of(sb.resolve_input, "sock") == "unsupported"
    finally:
        s.close()


# ----- virtual paths and connection strings ------------------------------------------------------
def test_vsizip_inside_is_rewritten_to_the_real_file(sb: Sandbox, layout) -> None:
    r = sb.resolve_input("/vsizip/in.zip/dem.tif")
    assert r.gdal_path == f"/vsizip/{layout['ws'].resolve()}/in.zip/dem.tif"
    assert r.display == "/vsizip/in.zip/dem.tif"
    assert r.files == (layout["ws"].resolve() / "in.zip",)


def test_vsizip_of_an_outside_archive_is_refused(sb: Sandbox, layout) -> None:
    assert code_of(sb.resolve_input, f"/vsizip/{layout['outside']}/out.zip/dem.tif") == "out-of-root"
    assert code_of(sb.resolve_input, "/vsizip/../outside/out.zip/dem.tif") == "out-of-root"
    assert code_of(sb.resolve_input, "/vsizip/{../outside/out.zip}/dem.tif") == "out-of-root"


def test_vsizip_braces_and_chains(sb: Sandbox, layout) -> None:
    r = sb.resolve_input("/vsizip/{in.zip}/dem.tif")
    assert r.gdal_path == f"/vsizip/{{{layout['ws'].resolve()}/in.zip}}/dem.tif"
    (layout["ws"] / "a.tif.gz").write_bytes(b"\x1f\x8b")
    assert sb.resolve_input("/vsigzip/a.tif.gz").gdal_path == f"/vsigzip/{layout['ws'].resolve()}/a.tif.gz"
    assert code_of(sb.resolve_input, f"/vsigzip/{layout['outside']}/secret.tif") == "out-of-root"
    assert code_of(sb.resolve_input, "/vsitar//vsigzip/../outside/x.tar.gz/f.tif") == "out-of-root"


def test_dotdot_inside_an_archive_member_is_refused(sb: Sandbox) -> None:
    assert code_of(sb.resolve_input, "/vsizip/in.zip/../../etc/passwd") == "invalid-argument"


@pytest.mark.parametrize(
    "path",
    [
        "/vsicurl/https://example.com/a.tif",
        "/vsis3/bucket/a.tif",
        "/vsigs/b/a.tif",
        "/vsiaz/c/a.tif",
        "https://example.com/a.tif",
        "http://example.com/a.tif",
        "ftp://example.com/a.tif",
        "/vsizip//vsicurl/https://example.com/a.zip/x.tif",
        "WMS:https://example.com/wms",
        'NETCDF:"/vsicurl/https://example.com/x.nc":var',
    ],
)
def test_network_paths_refused_by_default(sb: Sandbox, path: str) -> None:
    assert code_of(sb.resolve_input, path) == "unsupported"


def test_network_paths_allowed_with_allow_network(layout) -> None:
    sb = Sandbox([layout["ws"]], allow_network=True)
    r = sb.resolve_input("/vsicurl/https://example.com/a.tif")
    assert r.network and r.gdal_path == "/vsicurl/https://example.com/a.tif"


@pytest.mark.parametrize("path", ["/vsimem/x.tif", "/vsistdin/", "/vsisubfile/0_10,a.tif", "PG:dbname=x", "MYSQL:db"])
def test_other_virtual_filesystems_and_databases_refused(sb: Sandbox, path: str) -> None:
    assert code_of(sb.resolve_input, path) == "unsupported"


def test_connection_strings_check_the_file_inside(sb: Sandbox, layout) -> None:
    (layout["ws"] / "f.nc").write_bytes(b"CDF")
    (layout["ws"] / "f.h5").write_bytes(b"\x89HDF")
    (layout["ws"] / "m.hdf").write_bytes(b"\x0e\x03")
    (layout["ws"] / "g.gpkg").write_bytes(b"SQLite")
    real = layout["ws"].resolve()
    assert sb.resolve_input('NETCDF:"f.nc":tas').gdal_path == f'NETCDF:"{real}/f.nc":tas'
    assert sb.resolve_input("NETCDF:f.nc:tas").gdal_path == f"NETCDF:{real}/f.nc:tas"
    assert sb.resolve_input('HDF5:"f.h5"://data').gdal_path == f'HDF5:"{real}/f.h5"://data'
    assert sb.resolve_input("HDF5:f.h5://data").gdal_path == f"HDF5:{real}/f.h5://data"
    assert sb.resolve_input('HDF4_EOS:EOS_GRID:"m.hdf":grid:b1').gdal_path == f'HDF4_EOS:EOS_GRID:"{real}/m.hdf":grid:b1'
    assert sb.resolve_input("GPKG:g.gpkg:roads").gdal_path == f"GPKG:{real}/g.gpkg:roads"
    assert sb.resolve_input('NETCDF:"f.nc":tas').display == 'NETCDF:"f.nc":tas'


@pytest.mark.parametrize(
    "path",
    [
        'NETCDF:"../outside/x.nc":var',
        "NETCDF:/etc/passwd:var",
        'HDF5:"/etc/passwd"://x',
        'HDF4_EOS:EOS_GRID:"../outside/m.hdf":g:f',
        "GPKG:/etc/passwd:layer",
        "GTIFF_DIR:1:/etc/passwd",
    ],
)
def test_connection_strings_to_outside_files_are_refused(sb: Sandbox, path: str) -> None:
    assert code_of(sb.resolve_input, path) == "out-of-root"


# ----- datasets that reference other files ------------------------------------------------------
def vrt(source: str, relative: bool = False) -> str:
    return (
        f'<VRTDataset rasterXSize="1" rasterYSize="1"><VRTRasterBand dataType="Byte" band="1">'
        f'<SimpleSource><SourceFilename relativeToVRT="{int(relative)}">{source}</SourceFilename>'
        f"<SourceBand>1</SourceBand></SimpleSource></VRTRasterBand></VRTDataset>"
    )


def test_vrt_pointing_to_etc_passwd_is_refused(sb: Sandbox, layout) -> None:
    (layout["ws"] / "evil.vrt").write_text(vrt("/etc/passwd"))
    assert code_of(sb.resolve_input, "evil.vrt") == "out-of-root"


def test_vrt_pointing_outside_relative_is_refused(sb: Sandbox, layout) -> None:
    (layout["ws"] / "rel.vrt").write_text(vrt("../outside/secret.tif", relative=True))
    assert code_of(sb.resolve_input, "rel.vrt") == "out-of-root"
    (layout["ws"] / "zip.vrt").write_text(vrt(f"/vsizip/{layout['outside']}/out.zip/dem.tif"))
    assert code_of(sb.resolve_input, "zip.vrt") == "out-of-root"
    (layout["ws"] / "net.vrt").write_text(vrt("/vsicurl/http://169.254.169.254/latest"))
    assert code_of(sb.resolve_input, "net.vrt") == "out-of-root"


def test_vrt_inside_is_allowed_and_lists_its_sources(sb: Sandbox, layout) -> None:
    (layout["ws"] / "sub" / "ok.vrt").write_text(vrt("../a.tif", relative=True))
    r = sb.resolve_input("sub/ok.vrt")
    assert layout["ws"].resolve() / "a.tif" in r.files


def test_nested_vrt_reaching_outside_is_refused(sb: Sandbox, layout) -> None:
    (layout["ws"] / "inner.vrt").write_text(vrt(str(layout["outside"] / "secret.tif")))
    (layout["ws"] / "outer.vrt").write_text(vrt("inner.vrt", relative=True))
    assert code_of(sb.resolve_input, "outer.vrt") == "out-of-root"


def test_warped_and_ogr_vrts_are_checked(sb: Sandbox, layout) -> None:
    (layout["ws"] / "warp.vrt").write_text(
        '<VRTDataset rasterXSize="1" rasterYSize="1" subClass="VRTWarpedDataset"><GDALWarpOptions>'
        '<SourceDataset relativeToVRT="0">/etc/shadow</SourceDataset></GDALWarpOptions></VRTDataset>'
    )
    assert code_of(sb.resolve_input, "warp.vrt") == "out-of-root"
    (layout["ws"] / "ogr.vrt").write_text(
        '<OGRVRTDataSource><OGRVRTLayer name="x"><SrcDataSource>/etc/passwd</SrcDataSource></OGRVRTLayer></OGRVRTDataSource>'
    )
    assert code_of(sb.resolve_input, "ogr.vrt") == "out-of-root"


def test_pipelines_and_tile_indexes_are_refused(sb: Sandbox, layout) -> None:
    (layout["ws"] / "p.gdalg.json").write_text('{"type": "gdal_streamed_alg", "command_line": "gdal raster read /etc/passwd"}')
    assert code_of(sb.resolve_input, "p.gdalg.json") == "unsupported"
    (layout["ws"] / "hidden.json").write_text('{"type": "gdal_streamed_alg"}')
    assert code_of(sb.resolve_input, "hidden.json") == "unsupported"
    (layout["ws"] / "t.xml").write_text("<GDALTileIndexDataset><IndexDataset>x.gpkg</IndexDataset></GDALTileIndexDataset>")
    assert code_of(sb.resolve_input, "t.xml") == "unsupported"


def test_check_referenced_after_open(sb: Sandbox, layout) -> None:
    sb.check_referenced([str(layout["ws"] / "a.tif"), str(layout["ws"] / "a.tif.aux.xml")])
    assert code_of(sb.check_referenced, [str(layout["outside"] / "secret.tif")]) == "out-of-root"


# ----- outputs -------------------------------------------------------------------------------
def test_output_goes_through_a_hidden_temporary_directory(sb: Sandbox, layout) -> None:
    out = sb.resolve_output("new.tif")
    assert out.final == layout["ws"].resolve() / "new.tif"
    assert out.tmp_dir.parent == out.final.parent and out.tmp_dir.name.startswith(TMP_PREFIX)
    out.tmp_path.write_bytes(b"data")
    (out.tmp_dir / "new.tif.aux.xml").write_text("<PAMDataset/>")
    placed = out.commit()
    assert (layout["ws"] / "new.tif").read_bytes() == b"data"
    assert {p.name for p in placed} == {"new.tif", "new.tif.aux.xml"}
    assert not out.tmp_dir.exists()


def test_discarded_output_leaves_nothing(sb: Sandbox, layout) -> None:
    before = sorted(p.name for p in layout["ws"].rglob("*"))
    out = sb.resolve_output("deep/er/new.tif")
    out.tmp_path.write_bytes(b"partial")
    out.discard()
    assert sorted(p.name for p in layout["ws"].rglob("*")) == before


def test_existing_output_needs_overwrite(sb: Sandbox, layout) -> None:
    assert code_of(sb.resolve_output, "a.tif") == "already-exists"
    out = sb.resolve_output("a.tif", overwrite=True)
    out.tmp_path.write_bytes(b"new")
    out.commit()
    assert (layout["ws"] / "a.tif").read_bytes() == b"new"


def test_output_equal_to_input_is_refused(sb: Sandbox, layout) -> None:
    src = sb.resolve_input("a.tif")
    assert code_of(sb.resolve_output, "a.tif", overwrite=True, inputs=[src]) == "invalid-argument"
    assert code_of(sb.resolve_output, "./sub/../a.tif", overwrite=True, inputs=[src]) == "invalid-argument"
    (layout["ws"] / "alias.tif").symlink_to(layout["ws"] / "a.tif")
    assert code_of(sb.resolve_output, "alias.tif", overwrite=True, inputs=[src]) == "invalid-argument"


def test_output_outside_is_refused(sb: Sandbox, layout) -> None:
    assert code_of(sb.resolve_output, "../outside/x.tif") == "out-of-root"
    assert code_of(sb.resolve_output, "/tmp/x.tif") == "out-of-root"
    assert code_of(sb.resolve_output, "../ws-evil/x.tif") == "out-of-root"
    (layout["ws"] / "escape").symlink_to(layout["outside"], target_is_directory=True)
    assert code_of(sb.resolve_output, "escape/x.tif") == "out-of-root"
    (layout["ws"] / "dangling.tif").symlink_to(layout["outside"] / "new.tif")
    assert code_of(sb.resolve_output, "dangling.tif", overwrite=True) == "out-of-root"


def test_output_must_be_a_plain_file(sb: Sandbox) -> None:
    assert code_of(sb.resolve_output, "/vsimem/x.tif") == "unsupported"
    assert code_of(sb.resolve_output, "/vsizip/in.zip/x.tif") == "unsupported"
    assert code_of(sb.resolve_output, "sub") == "invalid-argument"
    assert code_of(sb.resolve_output, "sub/") == "invalid-argument"
    assert code_of(sb.resolve_output, TMP_PREFIX + "x.tif") == "invalid-argument"


# ----- messages -------------------------------------------------------------------------------
def test_messages_never_show_the_server_layout(sb: Sandbox, layout) -> None:
    root = str(layout["ws"].resolve())
    for bad in ("nope.tif", "../outside/secret.tif", "a.tif"):
        try:
            sb.resolve_input(bad) if bad != "a.tif" else sb.resolve_output(bad)
        except GdalMcpError as e:
            assert root not in e.message and str(layout["tmp"]) not in e.message
    text = f"GDAL: {root}/sub/b.tif: TIFFReadDirectory failed; {root}/{TMP_PREFIX}{'0' * 32}/o.tif"
    assert sb.scrub(text) == "GDAL: sub/b.tif: TIFFReadDirectory failed; o.tif"


def test_second_workspace_is_addressed_by_absolute_path(layout) -> None:
    sb = Sandbox([layout["ws"], layout["outside"]])
    r = sb.resolve_input(str(layout["outside"] / "secret.tif"))
    assert r.gdal_path == str(layout["outside"].resolve() / "secret.tif")
    assert code_of(sb.resolve_input, str(layout["evil"] / "secret.tif")) == "out-of-root"


@pytest.mark.parametrize(
    "pattern",
    ["scenes/*.tif", "**/*.tif", "scenes/**/*.tif", "a/b/**/c?.tif", "s*/[ab]*.tif", "s*/[!a]*", "*/x.tif", "scenes/2024-*/*",
     "**/[[]x].tif", "*"],
)  # fmt: skip
def test_object_globs_match_what_pathlib_globs_match(tmp_path: Path, pattern: str) -> None:
    """A bucket workspace's input_pattern (object names: sandbox/inputs.pattern_parts, engine/catalog.glob_match)
    matches the same names as pathlib's glob on the same tree of files (the local workspace's input_pattern)."""
    from gdal_mcp.engine.catalog import glob_match
    from gdal_mcp.sandbox.inputs import pattern_parts

    names = [
        "top.tif", "scenes/a.tif", "scenes/b.tif", "scenes/b.txt", "scenes/2024-06/x.tif", "scenes/2024-07/deep/y.tif",
        "a/b/c1.tif", "a/b/d/e/c2.tif", "a/b/cc.tif", "s1/ax.tif", "s1/bx.tif", "s1/cx.tif", "t/x.tif", "[x].tif",
        "q/[x].tif",
    ]  # fmt: skip
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    expected = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.glob(pattern) if p.is_file())
    fixed, rest = pattern_parts(pattern)
    base = f"{fixed}/" if fixed else ""
    parts = tuple(rest.split("/"))
    got = sorted(n for n in names if n.startswith(base) and glob_match(parts, tuple(n[len(base) :].split("/"))))
    assert got == expected and expected, (pattern, fixed, rest)


def test_an_object_glob_takes_linear_time() -> None:
    """Attack class: denial of service by a glob (catastrophic backtracking). A regex over whole names took 11.8 s for
    this pattern and a 200-character name; level by level with fnmatch it takes milliseconds."""
    import time

    from gdal_mcp.engine.catalog import glob_match

    name = ("out", "a" * 200 + ".tif")
    t0 = time.perf_counter()
    for _ in range(100):
        assert not glob_match(("out", "*a*a*a*a*a*a*a*a*b.tif"), name)
        assert not glob_match(("**", "**", "**", "*a*a*a*b"), ("x",) * 60 + ("a" * 100,))
    assert time.perf_counter() - t0 < 2.0
