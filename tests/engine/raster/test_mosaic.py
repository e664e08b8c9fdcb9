"""mosaic (gdalbuildvrt / gdal_merge): the four tiles rebuild RGB.byte.tif pixel for pixel."""

from __future__ import annotations

import numpy as np
import pytest
import rasterio

from gdal_mcp.engine.raster.mosaic import mosaic
from gdal_mcp.errors import GdalMcpError
from tests.cli_reference import gdal_cli
from tests.conftest import DATA

R = DATA / "raster"
TILES = [str(R / f"rgb{i}.tif") for i in (1, 2, 3, 4)]


def same_as_rgb(path) -> bool:
    with rasterio.open(path) as a, rasterio.open(R / "RGB.byte.tif") as b:
        return a.shape == b.shape and a.transform == b.transform and bool((a.read() == b.read()).all())


def test_tiles_rebuild_the_original(tmp_path) -> None:
    s, _ = mosaic(TILES, str(tmp_path / "m.tif"))
    assert (s.width, s.height, s.count) == (791, 718, 3)
    assert same_as_rgb(tmp_path / "m.tif")


def test_order_does_not_matter_for_identical_overlaps(tmp_path) -> None:
    mosaic(list(reversed(TILES)), str(tmp_path / "r.tif"))
    assert same_as_rgb(tmp_path / "r.tif")


def test_vrt_output_references_inputs_relatively(tmp_path) -> None:
    s, _ = mosaic(TILES, str(tmp_path / "m.vrt"), vrt_dir=str(R))
    text = (tmp_path / "m.vrt").read_text()
    assert 'relativeToVRT="1">rgb1.tif<' in text and str(R) not in text
    assert s.driver == "VRT" and s.file_size == len(text.encode())


def test_later_inputs_win(tmp_path) -> None:
    twice = tmp_path / "twice.tif"
    with rasterio.open(TILES[0]) as src:
        profile = src.profile
        data = np.full((src.count, src.height, src.width), 7, dtype="uint8")
    with rasterio.open(twice, "w", **profile) as dst:
        dst.write(data)
    mosaic([TILES[0], str(twice)], str(tmp_path / "a.tif"))
    mosaic([str(twice), TILES[0]], str(tmp_path / "b.tif"))
    with rasterio.open(tmp_path / "a.tif") as a, rasterio.open(tmp_path / "b.tif") as b, rasterio.open(TILES[0]) as t:
        assert (a.read() == 7).all()
        original = t.read()
        valid = original != 0
        assert (b.read()[valid] == original[valid]).all()


def test_resolution_choices_and_separate(tmp_path) -> None:
    s, _ = mosaic(TILES, str(tmp_path / "low.tif"), resolution=[600.0758533501896, 600.08356545961])
    assert (s.width, s.height) == (396, 359)
    s, _ = mosaic(TILES[:2], str(tmp_path / "sep.tif"), separate=True)
    assert s.count == 6


def test_inputs_in_another_crs_are_warped(tmp_path) -> None:
    s, w = mosaic([TILES[0], str(R / "RGB.byte.tif")], str(tmp_path / "w.tif"), dst_crs="EPSG:4326")
    assert s.crs == "EPSG:4326" and s.count == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.tif"], "temporary warped inputs left behind"
    with pytest.raises(GdalMcpError) as e:
        mosaic([TILES[0], str(R / "RGB.byte.tif")], str(tmp_path / "w.vrt"), dst_crs="EPSG:4326")
    assert e.value.code == "unsupported"


def test_mismatched_bands_are_refused(tmp_path) -> None:
    with pytest.raises(GdalMcpError) as e:
        mosaic([TILES[0], str(R / "shade.tif")], str(tmp_path / "x.tif"))
    assert e.value.code == "invalid-argument" and "separate" in e.value.message


def test_matches_gdalbuildvrt_plus_translate(tmp_path) -> None:
    mosaic(TILES, str(tmp_path / "ours.tif"))
    gdal_cli("gdalbuildvrt", str(tmp_path / "cli.vrt"), *TILES)
    gdal_cli("gdal_translate", str(tmp_path / "cli.vrt"), str(tmp_path / "cli.tif"))
    with rasterio.open(tmp_path / "ours.tif") as a, rasterio.open(tmp_path / "cli.tif") as b:
        assert a.transform == b.transform and (a.read() == b.read()).all()
