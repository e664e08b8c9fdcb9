"""raster_edit (gdal_edit.py): metadata changes only, compared with gdal_edit.py on a copy of the same file."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import rasterio

from gdal_mcp.engine.raster.edit import edit
from gdal_mcp.errors import GdalMcpError
from tests.helpers import DATA

SLOPE = DATA / "raster" / "slope.tif"


def pixels(path: Path) -> str:
    with rasterio.open(path) as ds:
        return hashlib.sha256(ds.read().tobytes()).hexdigest()


def facts(path: Path) -> dict:
    with rasterio.open(path) as ds:
        return {
            "crs": ds.crs.to_epsg() if ds.crs else None,
            "transform": tuple(round(v, 6) for v in ds.transform),
            "nodata": ds.nodata,
            "scales": ds.scales,
            "offsets": ds.offsets,
            "units": ds.units,
            "tags": {k: v for k, v in ds.tags().items() if k.startswith("SOURCE")},
        }


@pytest.mark.skipif(shutil.which("gdal_edit.py") is None, reason="gdal_edit.py (Debian python3-gdal) not installed")
def test_same_result_as_gdal_edit(tmp_path: Path) -> None:
    ours, ref = tmp_path / "ours.tif", tmp_path / "ref.tif"
    shutil.copy(SLOPE, ours)
    shutil.copy(SLOPE, ref)
    before = pixels(ours)
    edit(
        str(ours),
        crs="EPSG:5070",
        nodata=-1,
        scale=0.5,
        offset=2,
        bounds=(0, 0, 8400, 7800),
        metadata={"SOURCE": "survey"},
        units="m",
    )
    subprocess.run(
        [
            "gdal_edit.py",
            "-a_srs",
            "EPSG:5070",
            "-a_nodata",
            "-1",
            "-scale",
            "0.5",
            "-offset",
            "2",
            "-a_ullr",
            "0",
            "7800",
            "8400",
            "0",
            "-mo",
            "SOURCE=survey",
            "-units",
            "m",
            str(ref),
        ],
        check=True,
    )
    assert facts(ours) == facts(ref)
    assert facts(ours)["crs"] == 5070 and facts(ours)["nodata"] == -1
    assert pixels(ours) == before, "metadata edits never change pixel values"


def test_unset_nodata_and_descriptions(tmp_path: Path) -> None:
    path = tmp_path / "a.tif"
    shutil.copy(SLOPE, path)
    edit(str(path), unset_nodata=True, band_descriptions=["slope (deg)"])
    with rasterio.open(path) as ds:
        assert ds.nodata is None and ds.descriptions == ("slope (deg)",)
        assert np.isclose(ds.read(1).min(), -9999)  # the former nodata pixels are plain values now


def test_refusals(tmp_path: Path) -> None:
    path = tmp_path / "a.tif"
    shutil.copy(SLOPE, path)
    for kwargs in ({}, {"nodata": 1, "unset_nodata": True}, {"scale": [1, 2]}, {"bounds": (1, 1, 0, 0)}, {"crs": "not a crs"}):
        with pytest.raises(GdalMcpError) as e:
            edit(str(path), **kwargs)  # type: ignore[arg-type]
        assert e.value.code == "invalid-argument", kwargs
    with pytest.raises(GdalMcpError) as e:
        edit(str(DATA / "raster" / "RGB.byte.tif"), nodata=300)  # not representable in Byte
    assert e.value.code == "invalid-argument"


def test_copy_path_for_formats_edited_through_a_copy(tmp_path: Path) -> None:
    src = tmp_path / "a.img"
    with rasterio.open(SLOPE) as ds:
        profile = ds.profile | {"driver": "HFA"}
        with rasterio.open(src, "w", **profile) as out:
            out.write(ds.read())
    dst = tmp_path / "copy.img"
    edit(str(src), str(dst), crs="EPSG:5070")
    with rasterio.open(dst) as ds, rasterio.open(src) as orig:
        assert ds.crs.to_epsg() == 5070 and orig.crs.to_epsg() != 5070, "the original is untouched until commit"
        assert (ds.read() == orig.read()).all()


@pytest.mark.parametrize("on_copy", [False, True])
def test_a_cog_is_edited_with_a_warning_that_it_is_no_longer_one(tmp_path: Path, on_copy: bool) -> None:
    """GDAL refuses to update a file with its COG layout marker unless told the layout may break (what gdal_edit.py
    -oo IGNORE_COG_LAYOUT_BREAK=YES does): the edit is made, every pixel stays, and the warning says to rewrite it."""
    from rasterio.shutil import copy

    cog = tmp_path / "c.tif"
    copy(DATA / "raster" / "RGB.byte.tif", cog, driver="COG")
    dst = tmp_path / "edited.tif" if on_copy else None
    _, warnings = edit(str(cog), str(dst) if dst else None, nodata=5)
    with rasterio.open(dst or cog) as ds, rasterio.open(DATA / "raster" / "RGB.byte.tif") as ref:
        assert ds.nodata == 5 and np.array_equal(ds.read(), ref.read())
    assert any("no longer a valid COG" in w for w in warnings), warnings
