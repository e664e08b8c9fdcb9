"""to_xyz (gdal2xyz -csv): rows, coordinates and values against numpy and gdal2xyz itself."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import rasterio
from rasterio.windows import Window

import gdal_mcp.engine.raster.xyz as xyz_mod
from gdal_mcp.engine.raster.xyz import to_xyz
from gdal_mcp.errors import GdalMcpError
from tests.helpers import DATA

R = DATA / "raster"
RGB = str(R / "RGB.byte.tif")
SLOPE = str(R / "slope.tif")
FLOAT_NAN = str(R / "float_nan.tif")
RGB4 = str(R / "rgb4.tif")  # a 392x319 tile of RGB.byte.tif, nodata 0


def read_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    return rows[0], rows[1:]


def centres(ds, rows: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    gt = ds.transform.to_gdal()
    return (gt[0] + (cols + 0.5) * gt[1] + (rows + 0.5) * gt[2], gt[3] + (cols + 0.5) * gt[4] + (rows + 0.5) * gt[5])


@pytest.fixture(scope="module")
def rgb_csv(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    dst = tmp_path_factory.mktemp("xyz") / "rgb.csv"
    messages: list[str] = []
    result, _ = to_xyz(RGB, str(dst), progress=lambda f, m="": messages.append(m))
    assert messages and messages[-1].startswith("xyz: window")
    return result, dst


def test_rgb_rows_are_the_pixels_with_any_valid_band(rgb_csv: tuple[dict, Path]) -> None:
    result, dst = rgb_csv
    with rasterio.open(RGB) as ds:
        arr = ds.read(masked=True)
        keep = ~np.ma.getmaskarray(arr).all(axis=0)
        rows, cols = np.nonzero(keep)
        xs, ys = centres(ds, rows, cols)
    assert result == {"rows": int(keep.sum()), "columns": ["x", "y", "band_1", "band_2", "band_3"]}
    assert result["rows"] == 383115  # gdal2xyz -allbands -skipnodata on this file gives as many lines
    header, body = read_csv(dst)
    assert header == result["columns"] and len(body) == result["rows"]
    for i in (0, 1, 1000, 200_000, len(body) - 1):
        r, c = rows[i], cols[i]
        assert body[i] == [repr(float(xs[i])), repr(float(ys[i]))] + [str(int(arr.data[b, r, c])) for b in range(3)]
    assert body[0][:2] == ["149841.04930467764", "2825864.8537604455"]
    # Partly valid pixels keep their stored nodata value in the invalid bands.
    partial = np.nonzero(keep & np.ma.getmaskarray(arr).any(axis=0))
    if partial[0].size:
        i = int(np.searchsorted(rows * 791 + cols, partial[0][0] * 791 + partial[1][0]))
        assert "0" in body[i][2:]


def test_float32_values_round_trip_and_bbox_and_band_choice(tmp_path: Path) -> None:
    with rasterio.open(SLOPE) as ds:
        t = ds.transform
        left, top = t @ (10, 20)
        right, bottom = t @ (50, 60)
        arr = ds.read(1, masked=True, window=Window(10, 20, 40, 40))
    dst = tmp_path / "slope.csv"
    result, _ = to_xyz(SLOPE, str(dst), bands=[1], bbox=(left, bottom, right, top))
    header, body = read_csv(dst)
    assert header == ["x", "y", "band_1"] and result["rows"] == arr.count() == len(body)
    values = np.array([np.float32(r[2]) for r in body])
    assert np.array_equal(values, arr.compressed()), "float32 text must read back to the stored values"
    assert all(r[2] != "-9999.0" for r in body)


def test_keep_nodata_rows_and_south_up(tmp_path: Path) -> None:
    dst = tmp_path / "fn.csv"
    result, _ = to_xyz(FLOAT_NAN, str(dst), skip_nodata=False)
    header, body = read_csv(dst)
    assert result == {"rows": 6, "columns": ["x", "y", "band_1"]}
    assert body == [
        ["50.0", "50.0", "1.41"],
        ["150.0", "50.0", "1.23"],
        ["250.0", "50.0", "nan"],
        ["50.0", "150.0", "0.32"],
        ["150.0", "150.0", "-0.23"],
        ["250.0", "150.0", "-1.88"],
    ]
    assert to_xyz(FLOAT_NAN, str(dst))[0]["rows"] == 5  # NaN is nodata here
    assert ["250.0", "50.0", "nan"] not in read_csv(dst)[1]


def test_small_windows_keep_row_major_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = tmp_path / "whole.csv"
    to_xyz(SLOPE, str(whole))
    monkeypatch.setattr(xyz_mod, "XYZ_WINDOW_CELLS", 90)  # 30 pixels a window: rows cut in three
    pieces = tmp_path / "pieces.csv"
    messages: list[str] = []
    to_xyz(SLOPE, str(pieces), progress=lambda f, m="": messages.append(m))
    assert len(messages) == 3 * 78 and whole.read_text() == pieces.read_text()


def test_errors(tmp_path: Path) -> None:
    with pytest.raises(GdalMcpError) as e:
        to_xyz(RGB, str(tmp_path / "x.csv"), bands=[0, 4])
    assert e.value.code == "invalid-argument" and "3 band(s)" in e.value.message
    with pytest.raises(GdalMcpError) as e:
        to_xyz(RGB, str(tmp_path / "x.csv"), bbox=(0, 0, 10, 10))
    assert e.value.code == "invalid-argument" and "bounds" in e.value.message
    with pytest.raises(GdalMcpError) as e:
        to_xyz(RGB, str(tmp_path / "missing-dir" / "x.csv"))
    assert "cannot write" in e.value.message


def _gdal2xyz(args: list[str]) -> None:
    exe = shutil.which("gdal2xyz") or shutil.which("gdal2xyz.py")
    if exe is None:
        pytest.skip("gdal2xyz not on PATH (install Debian gdal-bin)")
    subprocess.run([exe, *args], check=True, capture_output=True, timeout=120, env={**os.environ, "GDAL_PAM_ENABLED": "NO"})


@pytest.mark.parametrize("path", [SLOPE, RGB4])
def test_matches_gdal2xyz(path: str, tmp_path: Path) -> None:
    """Same rows, coordinates and values as gdal2xyz -allbands -skipnodata -csv (Float32 and 3-band Byte)."""
    ref = tmp_path / "ref.csv"
    _gdal2xyz(["-allbands", "-skipnodata", "-csv", path, str(ref)])
    ours = tmp_path / "ours.csv"
    to_xyz(path, str(ours))
    # gdal2xyz writes no header, x,y with 3 decimals (projected CRS) and values with %g.
    b = np.loadtxt(ref, delimiter=",", ndmin=2)
    a = np.loadtxt(ours, delimiter=",", skiprows=1, ndmin=2)
    assert read_csv(ours)[0] == ["x", "y", "band_1"] + (["band_2", "band_3"] if path == RGB4 else [])
    assert a.shape == b.shape
    assert a.shape[0] > 1000 and np.abs(a[:, :2] - b[:, :2]).max() <= 0.0005 + 1e-9
    assert np.allclose(a[:, 2:], b[:, 2:], rtol=5e-6, atol=0)
