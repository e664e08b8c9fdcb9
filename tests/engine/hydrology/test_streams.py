"""stream_network on the Jacksboro DEM: stream cells are the cells whose upstream count reaches the threshold (counted
again in plain Python from the written directions), the Strahler order of every line is the one a plain-Python
Strahler pass gives, streams lie in valleys, and the preview is a PNG of the right size with streams drawn."""

from __future__ import annotations

import base64
import io

import numpy as np
import pyogrio
import pytest
import rasterio
from PIL import Image

from gdal_mcp.engine.hydrology.flow import flow_direction
from gdal_mcp.engine.hydrology.streams import ORDER_COLOURS, stream_network
from gdal_mcp.errors import GdalMcpError
from tests.engine.hydrology.dems import STEP, upstream_counts
from tests.helpers import DATA

DEM = DATA / "raster" / "jacksboro_dem.tif"


def strahler(d8: np.ndarray, stream: np.ndarray) -> np.ndarray:
    """Strahler order of the stream cells: 1 at sources; where two or more tributaries of the highest order meet, one
    more; else that highest order."""
    h, w = d8.shape
    ups: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for r, c in zip(*np.nonzero(stream), strict=True):
        code = int(d8[r, c])
        if code in STEP:
            dr, dc = STEP[code]
            ups.setdefault((r + dr, c + dc), []).append((r, c))
    order = np.zeros((h, w), dtype=int)

    def of(cell: tuple[int, int]) -> int:
        stack = [cell]
        while stack:
            top = stack[-1]
            todo = [u for u in ups.get(top, []) if order[u] == 0]
            if todo:
                stack += todo
                continue
            stack.pop()
            orders = [order[u] for u in ups.get(top, [])]
            if not orders:
                order[top] = 1
            else:
                m = max(orders)
                order[top] = m + 1 if orders.count(m) >= 2 else m
        return int(order[cell])

    for r, c in zip(*np.nonzero(stream), strict=True):
        of((int(r), int(c)))
    return order


def test_streams_threshold_order_and_valleys(tmp_path):
    threshold = 200
    result, _ = stream_network(str(DEM), str(tmp_path / "streams.gpkg"), threshold_cells=threshold)
    flow_direction(str(DEM), str(tmp_path / "d8.tif"))
    with rasterio.open(tmp_path / "d8.tif") as ds:
        d8 = ds.read(1)
        t = ds.transform
    with rasterio.open(DEM) as ds:
        z = ds.read(1).astype(float)
    counts = upstream_counts(d8)
    stream = counts >= threshold
    assert result.stream_cells == int(stream.sum()) > 0
    order = strahler(d8, stream)
    assert result.max_order == order.max() >= 3
    lines = pyogrio.read_dataframe(tmp_path / "streams.gpkg")
    assert len(lines) == result.segments
    for geom, value in zip(lines.geometry, lines["strahler"], strict=True):
        x, y = geom.coords[0]
        col, row = (int(v) for v in ~t @ (x, y))
        assert stream[row, col] and order[row, col] == value
    # upstream_cells: at the segment's own last cell, the one before the confluence it ends at (or its outlet)
    inflows = np.zeros_like(counts)
    for r, c in zip(*np.nonzero(stream), strict=True):
        if int(d8[r, c]) in STEP:
            dr, dc = STEP[int(d8[r, c])]
            inflows[r + dr, c + dc] += 1
    for geom, value in zip(lines.geometry, lines["upstream_cells"], strict=True):
        (row1, col1), (row0, col0) = (tuple(int(v) for v in (~t @ xy)[::-1]) for xy in (geom.coords[-1], geom.coords[-2]))
        own = (row1, col1) if int(d8[row1, col1]) == 0 and inflows[row1, col1] <= 1 else (row0, col0)
        assert counts[own] == value
    # every vertex is a stream cell's centre
    for geom in lines.geometry[:50]:
        for x, y in geom.coords:
            col, row = (int(v) for v in ~t @ (x, y))
            assert stream[row, col]
    # streams follow valleys: a stream cell lies below the mean of its eight neighbours
    inner = stream.copy()
    inner[0, :] = inner[-1, :] = inner[:, 0] = inner[:, -1] = False
    rows, cols = np.nonzero(inner)
    neighbours = np.mean([z[rows + dr, cols + dc] for dr, dc in STEP.values()], axis=0)
    assert np.mean(z[rows, cols] < neighbours) > 0.9
    assert (lines["length_m"] > 0).all() and result.total_length_m == pytest.approx(lines["length_m"].sum())


def test_preview_is_a_png_with_streams_over_the_hillshade(tmp_path):
    result, _ = stream_network(str(DEM), str(tmp_path / "s.gpkg"), threshold_km2=2.0, max_size=600)
    image = Image.open(io.BytesIO(base64.b64decode(result.png_base64)))
    assert image.format == "PNG" and image.size == (403, 344) == (result.preview_width, result.preview_height)
    rgba = np.asarray(image.convert("RGBA"))
    colours = {tuple(c) for c in ORDER_COLOURS.tolist()}
    blue = np.array([tuple(p) in colours for p in rgba[..., :3].reshape(-1, 3)])
    assert 0.005 < blue.mean() < 0.2  # streams drawn, over a background that is mostly hillshade
    grey = rgba[..., 0] == rgba[..., 1]
    assert grey.mean() > 0.7


def test_a_threshold_is_required(tmp_path):
    with pytest.raises(GdalMcpError) as e:
        stream_network(str(DEM), str(tmp_path / "s.gpkg"))
    assert e.value.code == "invalid-argument"


def test_upstream_attributes_are_the_segments_last_own_cell(tmp_path):
    """On a V-shaped valley (sides straight to the axis, the axis south to its outlet) with a threshold of 3 rows'
    worth of cells, the one stream is the axis from row 2 down: upstream_cells at its outlet is every cell."""
    from tests.engine.hydrology.dems import write_dem
    from tests.engine.hydrology.test_flow import valley

    h, w = 15, 11
    src = write_dem(tmp_path / "v.tif", valley(h, w))
    result, _ = stream_network(src, str(tmp_path / "s.gpkg"), threshold_cells=3 * w, condition="none")
    lines = pyogrio.read_dataframe(tmp_path / "s.gpkg")
    assert len(lines) == 1 == result.segments and list(lines["strahler"]) == [1]
    assert list(lines["upstream_cells"]) == [h * w]
    assert lines["length_m"][0] == pytest.approx((h - 3) * 10.0)
    assert result.stream_cells == h - 2


def test_too_many_stream_cells_are_refused(tmp_path, monkeypatch):
    import gdal_mcp.engine.hydrology.streams as streams_module

    monkeypatch.setattr(streams_module, "MAX_STREAM_CELLS", 1000)
    with pytest.raises(GdalMcpError) as e:
        stream_network(str(DEM), str(tmp_path / "s.gpkg"), threshold_cells=2)
    assert e.value.code == "resource-limit" and "larger threshold" in e.value.message
    assert not (tmp_path / "s.gpkg").exists()
