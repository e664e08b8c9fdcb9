"""engine/algorithms.py: GDAL 3.12's algorithm API through ctypes, checked against rasterio on the same files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import rasterio

from gdal_mcp.engine import algorithms
from gdal_mcp.errors import GdalMcpError
from tests.helpers import DATA

DEM = str(DATA / "raster" / "jacksboro_dem.tif")


def test_info_output_string_matches_rasterio() -> None:
    with algorithms.algorithm(["raster", "info"], ["--format=json", DEM]) as alg:
        alg.run()
        info = alg.json()
    with rasterio.open(DEM) as ds:
        assert info["size"] == [ds.width, ds.height]
        assert info["bands"][0]["type"].lower() == ds.dtypes[0]
        assert info["geoTransform"] == pytest.approx(list(ds.transform.to_gdal()))


def test_run_writes_what_the_algorithm_computes(tmp_path: Path) -> None:
    """`gdal raster scale`-free check: set-type then compare with numpy's cast of the same pixels."""
    out = tmp_path / "f.tif"
    algorithms.run(["raster", "set-type"], ["--datatype", "Float64", DEM, str(out)])
    with rasterio.open(DEM) as a, rasterio.open(out) as b:
        assert b.dtypes[0] == "float64"
        assert np.array_equal(a.read(1).astype("float64"), b.read(1))


def test_warnings_are_collected(tmp_path: Path) -> None:
    with rasterio.open(DEM) as ds:
        left, top = ds.bounds.left, ds.bounds.top
    warnings = algorithms.run(
        ["raster", "viewshed"], ["--pos", f"{left - 1},{top + 1}", "--height", "10", DEM, str(tmp_path / "v.tif")]
    )
    assert any("outside" in w for w in warnings), warnings


def test_bad_arguments_are_invalid_argument_naming_them() -> None:
    with pytest.raises(GdalMcpError) as e:
        algorithms.run(["raster", "info"], ["--no-such-option", DEM])
    assert e.value.code == "invalid-argument" and "--no-such-option" in e.value.message


def test_unknown_algorithm_is_unsupported() -> None:
    with pytest.raises(GdalMcpError) as e:
        algorithms.run(["raster", "no-such-step"], [DEM])
    assert e.value.code == "unsupported" and "no-such-step" in e.value.message


def test_a_failing_run_is_gdal_error_with_gdals_message(tmp_path: Path) -> None:
    with pytest.raises(GdalMcpError) as e:
        algorithms.run(["raster", "info"], [str(tmp_path / "missing.tif")])
    assert e.value.code in ("gdal-error", "invalid-argument") and "missing.tif" in e.value.message


def test_a_cancel_raised_by_progress_stops_gdal(tmp_path: Path) -> None:
    seen: list[float] = []

    class Stop(Exception):
        pass

    def progress(fraction: float, message: str = "") -> None:
        seen.append(fraction)
        if fraction > 0.2:
            raise Stop

    with rasterio.open(DEM) as ds:
        x, y = ds.xy(ds.height // 2, ds.width // 2)
    with pytest.raises(Stop):
        algorithms.run(["raster", "viewshed"], ["--pos", f"{x},{y}", "--height", "10", DEM, str(tmp_path / "v.tif")], progress)
    assert seen and max(seen) < 1.0  # stopped before the end


def test_usage_lists_the_arguments() -> None:
    usage = algorithms.usage(["raster", "neighbors"])
    names = {a["name"] for a in usage["input_arguments"]}
    assert {"method", "size", "kernel", "input"} <= names


def test_number_formats_for_gdal() -> None:
    assert algorithms.number(3.0) == "3" and algorithms.number(0.1) == "0.1" and algorithms.number(-2) == "-2"


def test_gdal_data_is_found_even_after_an_env_was_left() -> None:
    """Leaving any rasterio.Env unsets GDAL_DATA in the process; an algorithm run afterwards must still find GDAL's
    data files (tiling schemes, viewer templates): `algorithm` holds an Env for its whole life."""
    import ctypes

    lib = algorithms._lib()
    lib.CPLGetConfigOption.restype, lib.CPLGetConfigOption.argtypes = ctypes.c_char_p, [ctypes.c_char_p, ctypes.c_char_p]
    with rasterio.Env():
        pass
    with algorithms.algorithm(["raster", "info"], [DEM]) as alg:
        data = lib.CPLGetConfigOption(b"GDAL_DATA", None)
        alg.run()
    assert data and (Path(data.decode()) / "tms_NZTM2000.json").is_file()


@pytest.mark.parametrize("argv", [["--where=@/etc/hostname", DEM], ["--where", "@/etc/hostname", DEM], ["@/etc/hostname"]])
def test_argument_files_are_refused(argv: list[str]) -> None:
    """Attack class: reading a file outside the sandbox through GDAL's `@file` argument syntax (a where or sql value
    starting with @ is replaced by the file's contents, and GDAL echoes them in its parse errors)."""
    with pytest.raises(GdalMcpError) as e:
        algorithms.run(["vector", "filter"], [*argv, "/tmp/never-written.gpkg"])
    assert e.value.code == "invalid-argument" and "'@'" in e.value.message
    assert not Path("/tmp/never-written.gpkg").exists()
