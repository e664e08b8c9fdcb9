"""mosaic (gdalbuildvrt / gdal_merge): the four tiles rebuild RGB.byte.tif pixel for pixel."""

from __future__ import annotations

import numpy as np
import pytest
import rasterio

from gdal_mcp.engine.raster.mosaic import mosaic
from gdal_mcp.errors import GdalMcpError
from tests.cli_reference import gdal_cli
from tests.helpers import DATA

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


# ---------------------------------------------------------------------------------------------- resolution, nodata, bbox


def coarse_copy(tmp_path, factor: int = 10) -> str:
    """rgb2.tif resampled to `factor` times coarser pixels (same extent), nearest."""
    from rasterio.enums import Resampling

    out = tmp_path / "coarse.tif"
    with rasterio.open(TILES[1]) as src:
        h, w = src.height // factor, src.width // factor
        data = src.read(out_shape=(src.count, h, w), resampling=Resampling.nearest)
        transform = src.transform * src.transform.scale(src.width / w, src.height / h)
        profile = {**src.profile, "width": w, "height": h, "transform": transform}
    with rasterio.open(out, "w", **profile) as dst:
        dst.write(data)
    return str(out)


def test_default_is_gdalbuildvrts_average_and_says_so(tmp_path) -> None:
    """Issue: the default was the highest resolution, silently upsampling a coarse input ten-fold."""
    coarse = coarse_copy(tmp_path)
    s, warnings = mosaic([TILES[0], coarse], str(tmp_path / "ours.tif"))
    with rasterio.open(TILES[0]) as a, rasterio.open(coarse) as b:
        fine, rough = a.res, b.res
    # Reference 1: the arithmetic mean of the two pixel sizes (gdalbuildvrt's AVERAGE_RESOLUTION).
    assert s.resolution == pytest.approx(((fine[0] + rough[0]) / 2, (fine[1] + rough[1]) / 2), rel=1e-12)
    assert any(
        "different resolutions" in w and f"{fine[0]:.6g}" in w and f"{rough[0]:.6g}" in w and "average" in w for w in warnings
    ), warnings
    # Reference 2: gdalbuildvrt (default -resolution average) + gdal_translate.
    gdal_cli("gdalbuildvrt", str(tmp_path / "cli.vrt"), TILES[0], coarse)
    gdal_cli("gdal_translate", str(tmp_path / "cli.vrt"), str(tmp_path / "cli.tif"))
    with rasterio.open(tmp_path / "ours.tif") as ours, rasterio.open(tmp_path / "cli.tif") as cli:
        assert ours.transform.almost_equals(cli.transform, precision=1e-9) and ours.shape == cli.shape
        assert np.array_equal(ours.read(), cli.read())
    # Same resolutions: no warning.
    assert mosaic(TILES, str(tmp_path / "same.tif"))[1] == []


def _without_nodata(src: str, dst) -> str:
    with rasterio.open(src) as ds:
        profile = {**ds.profile, "nodata": None}
        data = ds.read()
    with rasterio.open(dst, "w", **profile) as out:
        out.write(data)
    return str(dst)


def test_src_nodata_lets_black_collars_show_what_is_beneath(tmp_path) -> None:
    stripped = _without_nodata(str(R / "RGB.byte.tif"), tmp_path / "stripped.tif")
    with rasterio.open(stripped) as ds:
        profile, image = ds.profile, ds.read()
    under = tmp_path / "under.tif"
    with rasterio.open(under, "w", **profile) as out:
        out.write(np.full_like(image, 7))
    s, _ = mosaic([str(under), stripped], str(tmp_path / "ours.tif"), src_nodata=0)
    with rasterio.open(tmp_path / "ours.tif") as ds:
        ours, nodata = ds.read(), ds.nodata
    # Reference 1: numpy, band by band: zeros of the top input let the 7s through.
    assert np.array_equal(ours, np.where(image == 0, 7, image)) and (image == 0).sum() > 100000
    # Without src_nodata the collars cover the 7s.
    mosaic([str(under), stripped], str(tmp_path / "plain.tif"))
    with rasterio.open(tmp_path / "plain.tif") as ds:
        assert np.array_equal(ds.read(), image)
    # Reference 2: gdalbuildvrt -srcnodata 0 + gdal_translate (and its nodata: -vrtnodata defaults to it).
    gdal_cli("gdalbuildvrt", "-srcnodata", "0", str(tmp_path / "cli.vrt"), str(under), stripped)
    gdal_cli("gdal_translate", str(tmp_path / "cli.vrt"), str(tmp_path / "cli.tif"))
    with rasterio.open(tmp_path / "cli.tif") as cli:
        assert np.array_equal(ours, cli.read()) and nodata == cli.nodata == 0 == s.nodata
    with pytest.raises(GdalMcpError) as e:
        mosaic(TILES, str(tmp_path / "x.tif"), src_nodata=-1)
    assert e.value.code == "invalid-argument" and "src_nodata -1" in e.value.message


def test_bbox_sets_the_output_extent_like_te(tmp_path) -> None:
    te = (150000.0, 2600000.0, 230000.0, 2700000.0)  # over tiles 1-4 in EPSG:32618, partly in each
    s, _ = mosaic(TILES, str(tmp_path / "ours.tif"), bbox=te)
    gdal_cli("gdalbuildvrt", "-te", *map(str, te), str(tmp_path / "cli.vrt"), *TILES)
    gdal_cli("gdal_translate", str(tmp_path / "cli.vrt"), str(tmp_path / "cli.tif"))
    with rasterio.open(tmp_path / "ours.tif") as ours, rasterio.open(tmp_path / "cli.tif") as cli:
        assert ours.transform.almost_equals(cli.transform, precision=1e-9) and ours.shape == cli.shape
        assert np.array_equal(ours.read(), cli.read())
    assert (s.bounds.left, s.bounds.top) == (te[0], te[3])
    # The same bbox given in lon/lat is transformed to the output CRS (pyproj as reference).
    from pyproj import Transformer

    ll = Transformer.from_crs("EPSG:32618", "EPSG:4326", always_xy=True).transform_bounds(*te)
    back = Transformer.from_crs("EPSG:4326", "EPSG:32618", always_xy=True).transform_bounds(*ll)
    s2, _ = mosaic(TILES, str(tmp_path / "ll.tif"), bbox=ll, bbox_crs="EPSG:4326")
    assert s2.bounds.left == pytest.approx(back[0], abs=1e-6) and s2.bounds.top == pytest.approx(back[3], abs=1e-6)
    with pytest.raises(GdalMcpError) as e:
        mosaic(TILES, str(tmp_path / "x.tif"), bbox=(0, 0, 10, 10))
    assert e.value.code == "invalid-argument" and "overlaps none of the inputs" in e.value.message
    with pytest.raises(GdalMcpError) as e:
        mosaic(TILES, str(tmp_path / "x.tif"), bbox_crs="EPSG:4326")
    assert e.value.code == "invalid-argument" and "without bbox" in e.value.message


def test_inputs_far_apart_or_in_another_crs_are_said(tmp_path) -> None:
    """Two copies of a tile 100 tile-widths apart: the mosaic is ~2 % data, which a warning says with its share (the
    union of the inputs' extents over the mosaic's, here analytic: 2 tiles in a 101 x 1 row); an input in another CRS
    is named as reprojected. Adjacent tiles give neither warning."""
    from rasterio.transform import Affine

    with rasterio.open(TILES[0]) as src:
        profile, data = src.profile, src.read()
        far = profile | {"transform": src.transform * Affine.translation(100 * src.width, 0)}
    with rasterio.open(tmp_path / "far.tif", "w", **far) as dst:
        dst.write(data)
    _, warnings = mosaic([TILES[0], str(tmp_path / "far.tif")], str(tmp_path / "m.tif"))
    sparse = [w for w in warnings if "cover about" in w]
    assert len(sparse) == 1 and "cover about 2%" in sparse[0], warnings
    _, warnings = mosaic(TILES, str(tmp_path / "adjacent.tif"))
    assert not [w for w in warnings if "cover about" in w or "another CRS" in w], warnings
    with rasterio.open(tmp_path / "ll.tif", "w", **(profile | {"crs": "EPSG:32619"})) as dst:
        dst.write(data)
    _, warnings = mosaic([TILES[0], str(tmp_path / "ll.tif")], str(tmp_path / "x.tif"))
    assert any("1 input(s) (ll.tif) are in another CRS" in w for w in warnings), warnings
