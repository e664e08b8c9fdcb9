"""The shared raster writer: windows, staging for CreateCopy-only drivers, no partial output on failure."""

from __future__ import annotations

import numpy as np
import pytest
import rasterio
from rasterio.transform import from_origin

from gdal_mcp.engine.raster.output import write_windows

T = from_origin(500000, 4000000, 30, 30)


def run(dst, driver, compute, count=1, dtype="float32"):
    write_windows(
        str(dst),
        driver,
        {},
        width=64,
        height=48,
        count=count,
        dtype=dtype,
        crs="EPSG:32618",
        transform=T,
        nodata=None,
        compute=compute,
        progress=lambda f, m="": None,
        what="test",
        window_pixels=256,
        block=(16, 16),
    )


@pytest.mark.parametrize("name,driver,dtype", [("x.tif", "GTiff", "float32"), ("x.png", "PNG", "uint8")])
def test_a_failed_write_leaves_no_partial_output(tmp_path, name, driver, dtype) -> None:
    calls = []

    def compute(w):
        calls.append(w)
        if len(calls) == 2:
            raise RuntimeError("boom")
        return np.zeros((int(w.height), int(w.width)), dtype=dtype)

    with pytest.raises(RuntimeError):
        run(tmp_path / name, driver, compute, dtype=dtype)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name,driver", [("m.tif", "GTiff"), ("m.png", "PNG"), ("m_cog.tif", "COG")])
def test_every_window_lands_in_place(tmp_path, name, driver) -> None:
    def compute(w):
        rows, cols = np.mgrid[int(w.row_off) : int(w.row_off + w.height), int(w.col_off) : int(w.col_off + w.width)]
        return np.stack([(rows + cols) % 251, (rows * 2) % 251]).astype("uint8")

    run(tmp_path / name, driver, compute, count=2, dtype="uint8")
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith(".aux.xml")] == [name]
    with rasterio.open(tmp_path / name) as ds:
        rows, cols = np.mgrid[0:48, 0:64]
        assert (ds.read(1) == (rows + cols) % 251).all() and (ds.read(2) == (rows * 2) % 251).all()
        assert ds.transform == T
