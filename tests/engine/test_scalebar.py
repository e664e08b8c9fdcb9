"""The previews' scale bar: round lengths, labels, the ground size of a pixel (pyproj as the reference) and drawing."""

from __future__ import annotations

import numpy as np
import pytest
import rasterio
from pyproj import Geod, Transformer
from rasterio.transform import from_origin

from gdal_mcp.engine.preview import raster_preview
from gdal_mcp.engine.preview.scalebar import ground_per_pixel, label, nice_length, scale_bar


@pytest.mark.parametrize(
    ("metres", "nice"),
    [(1, 1), (1.9999, 1), (2, 2), (4.99, 2), (5, 5), (9.99, 5), (10, 10), (0.7, 0.5), (0.0031, 0.002), (7.3e6, 5e6)],
)
def test_nice_length_is_the_largest_1_2_5_not_above(metres, nice) -> None:
    assert nice_length(metres) == pytest.approx(nice, rel=1e-12)


@pytest.mark.parametrize(
    ("metres", "text"), [(5e6, "5000 km"), (2000, "2 km"), (500, "500 m"), (1, "1 m"), (0.5, "50 cm"), (0.002, "2 mm")]
)
def test_labels(metres, text) -> None:
    assert label(metres) == text


def test_feet_are_converted_to_metres() -> None:
    # EPSG:2263 (New York Long Island, US survey feet): 10 ft per pixel.
    per_px, method, how = ground_per_pixel("EPSG:2263", (1000000.0, 200000.0), (10.0, 0.0))
    assert method == "map units" and per_px == pytest.approx(10 * 1200 / 3937, rel=1e-12) and "US survey foot" in how


def test_web_mercator_far_from_the_equator_is_measured_on_the_ellipsoid() -> None:
    """At 60 N Web Mercator's metres are about twice the ground's: the bar uses geodesic metres there."""
    centre, step = (1_100_000.0, 8_400_000.0), (100.0, 0.0)
    per_px, method, how = ground_per_pixel("EPSG:3857", centre, step)
    to_ll = Transformer.from_crs("EPSG:3857", "EPSG:4326", always_xy=True)
    (lon0, lon1), (lat0, lat1) = to_ll.transform([centre[0] - 50, centre[0] + 50], [centre[1], centre[1]])
    reference = Geod(ellps="WGS84").inv(lon0, lat0, lon1, lat1)[2]
    assert method == "geodesic" and per_px == pytest.approx(reference, rel=1e-9) and "stretches" in how
    assert 1.9 < 100 / per_px < 2.1
    # Near the equator its own metres are ground metres within 1 %: kept.
    assert ground_per_pixel("EPSG:3857", (1_100_000.0, 100_000.0), step)[1] == "map units"


def test_no_crs_or_unknown_unit_gives_no_bar() -> None:
    rgba = np.zeros((100, 100, 4), np.uint8)
    bar, text = scale_bar(rgba, None, (0.0, 0.0), (1.0, 0.0))
    assert bar is None and "No scale bar" in text and not rgba.any()


def test_too_small_an_image_states_the_scale_without_drawing(tmp_path) -> None:
    path = tmp_path / "g.tif"
    with rasterio.open(
        path, "w", driver="GTiff", width=50, height=40, count=1, dtype="uint8", crs="EPSG:32632",
        transform=from_origin(500000, 5000000, 30, 30),
    ) as ds:  # fmt: skip
        ds.write(np.full((1, 40, 50), 100, np.uint8))
    small = raster_preview(str(path), max_size=16)
    assert small.scale_bar is not None and small.scale_bar.box is None and "not drawn: the image is too small" in small.legend
    off = raster_preview(str(path), max_size=400, scale_bar=False)
    on = raster_preview(str(path), max_size=400)
    assert off.scale_bar == on.scale_bar.model_copy(update={"box": None})
    assert "not drawn: scale_bar=false" in off.legend and "Scale bar (bottom left)" in on.legend
