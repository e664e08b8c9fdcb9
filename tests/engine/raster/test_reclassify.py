"""raster_reclassify against numpy computed independently in the test, and gdal_calc.py."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import rasterio

from gdal_mcp.engine.raster.reclassify import reclassify
from gdal_mcp.errors import GdalMcpError
from tests.helpers import DATA

SLOPE = DATA / "raster" / "slope.tif"  # Float32, nodata -9999, values 0 .. 737.93
CLASSES = [
    {"min": 0, "max": 5, "value": 1},
    {"min": 5, "max": 15, "value": 2},
    {"min": 15, "max": 45, "value": 3},
    {"min": 45, "value": 4},
]


def test_slope_into_four_classes(tmp_path: Path) -> None:
    dst = tmp_path / "classes.tif"
    summary, warnings = reclassify(str(SLOPE), str(dst), classes=CLASSES)
    assert summary.dtype == "uint8"
    with rasterio.open(SLOPE) as ds:
        v = ds.read(1, masked=True)
    expected = np.select([v < 5, v < 15, v < 45], [1, 2, 3], 4)
    with rasterio.open(dst) as out:
        got = out.read(1, masked=True)
        assert out.nodata is not None and out.nodata not in (1, 2, 3, 4)
    assert (np.ma.getmaskarray(got) == np.ma.getmaskarray(v)).all()
    assert (got.compressed() == np.ma.masked_array(expected, v.mask).compressed()).all()
    assert not warnings or "matched no class" not in " ".join(warnings)


def test_last_range_is_closed_and_default(tmp_path: Path) -> None:
    vmax = float(np.ma.max(rasterio.open(SLOPE).read(1, masked=True)))
    dst = tmp_path / "top.tif"
    _, warnings = reclassify(str(SLOPE), str(dst), classes=[{"min": 100, "max": vmax, "value": 7}], default="keep")
    with rasterio.open(dst) as out, rasterio.open(SLOPE) as ds:
        got, src = out.read(1, masked=True), ds.read(1, masked=True)
        assert out.dtypes[0] == "float32"
    top = src == vmax
    assert (got[top] == 7).all(), "the maximum belongs to the last, closed range"
    low = src < 100
    assert np.allclose(got[low].compressed(), src[low].compressed()), "default=keep keeps unmatched values"
    assert any("matched no class" in w for w in warnings)


def test_exact_mapping_on_a_categorical_raster(tmp_path: Path) -> None:
    src = DATA / "raster" / "RGB.byte.tif"
    dst = tmp_path / "map.tif"
    reclassify(str(src), str(dst), mapping={"1": 10, "255": 20}, default=0)
    with rasterio.open(src) as ds, rasterio.open(dst) as out:
        b = ds.read(1, masked=True)
        got = out.read(1, masked=True)
    exp = np.where(b == 1, 10, np.where(b == 255, 20, 0))
    valid = ~np.ma.getmaskarray(b)
    assert (got.data[valid] == exp[valid]).all()
    assert np.ma.getmaskarray(got)[~valid].all(), "input nodata stays nodata"


@pytest.mark.skipif(shutil.which("gdal_calc.py") is None, reason="gdal_calc.py (Debian python3-gdal) not installed")
def test_agrees_with_gdal_calc(tmp_path: Path) -> None:
    ours = tmp_path / "ours.tif"
    ref = tmp_path / "ref.tif"
    reclassify(str(SLOPE), str(ours), classes=CLASSES, output_type="Byte")
    subprocess.run(
        [
            "gdal_calc.py",
            "-A",
            str(SLOPE),
            f"--outfile={ref}",
            "--type=Byte",
            "--NoDataValue=255",
            "--calc=1*(A<5)+2*((A>=5)*(A<15))+3*((A>=15)*(A<45))+4*(A>=45)",
            "--quiet",
        ],
        check=True,
    )
    with rasterio.open(ours) as a, rasterio.open(ref) as b:
        x, y = a.read(1, masked=True), b.read(1, masked=True)
    assert (np.ma.getmaskarray(x) == np.ma.getmaskarray(y)).all()
    assert (x.compressed() == y.compressed()).all()


def test_refusals(tmp_path: Path) -> None:
    for kwargs in (
        {},
        {"classes": CLASSES, "mapping": {"1": 2}},
        {"classes": [{"min": 5, "max": 1, "value": 1}]},
        {"mapping": {"x": 1}},
        {"classes": CLASSES, "default": "drop"},
        {"classes": [{"min": 0, "value": 300}], "output_type": "Byte"},
    ):
        with pytest.raises(GdalMcpError) as e:
            reclassify(str(SLOPE), str(tmp_path / "x.tif"), **kwargs)  # type: ignore[arg-type]
        assert e.value.code == "invalid-argument", kwargs
    assert not (tmp_path / "x.tif").exists()
