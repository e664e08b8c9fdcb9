"""vector_overlay's engine against geopandas.overlay: naturalearth countries against a grid of boxes (in another
CRS) and against buffered points; areas within 1e-6 relative, the same pieces, the same fields."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import shapely

from gdal_mcp.engine.vector import overlay as overlay_mod
from gdal_mcp.engine.vector.overlay import overlay
from gdal_mcp.errors import GdalMcpError

gpd = pytest.importorskip("geopandas")
COUNTRIES = Path(__file__).parents[2] / "data" / "vector" / "naturalearth_lowres.shp"
HOWS = ["intersection", "union", "difference", "symmetric_difference", "identity"]


@pytest.fixture(scope="module")
def layers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("overlay")
    xs, ys = np.meshgrid(np.arange(-30, 60, 12.5), np.arange(-35, 70, 10))
    grid = gpd.GeoDataFrame(
        {"name": [f"cell {i}" for i in range(xs.size)], "cell": np.arange(xs.size)},
        geometry=shapely.box(xs.ravel(), ys.ravel(), xs.ravel() + 12.5, ys.ravel() + 10),
        crs=4326,
    )
    grid.to_crs(3857).to_file(tmp / "grid.gpkg")  # another CRS: reprojected to the input's
    rng = np.random.default_rng(5)
    centres = gpd.GeoSeries(gpd.points_from_xy(rng.uniform(-20, 40, 60), rng.uniform(-30, 60, 60)), crs=4326)
    blobs = gpd.GeoDataFrame({"bid": np.arange(60)}, geometry=centres.buffer(rng.uniform(1, 6, 60)), crs=4326)
    blobs.to_file(tmp / "blobs.gpkg")
    return {"grid": tmp / "grid.gpkg", "blobs": tmp / "blobs.gpkg", "tmp": tmp}


def _key(df: object, cols: list[str]) -> list[tuple]:
    def norm(v: object) -> str:
        if v is None or (isinstance(v, float) and np.isnan(v)):
            return "<null>"
        return f"{float(v):g}" if isinstance(v, (int, float, np.integer, np.floating)) else str(v)

    return [tuple(norm(v) for v in row) for row in df[cols].itertuples(index=False)]  # type: ignore[index]


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("other", ["grid", "blobs"])
def test_areas_equal_geopandas(layers: dict[str, Path], how: str, other: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(overlay_mod, "READ_BATCH", 50)  # several batches: overlay leftovers carried across them
    out_path = layers["tmp"] / f"{other}_{how}.gpkg"
    summary, _ = overlay(str(COUNTRIES), str(out_path), overlay=str(layers[other]), how=how)
    ne = gpd.read_file(COUNTRIES)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = gpd.overlay(ne, gpd.read_file(layers[other]).to_crs(ne.crs), how=how)
    out = gpd.read_file(out_path)
    assert summary.feature_count == len(ref) > 0
    assert list(out.columns) == list(ref.columns)  # same fields, same suffixes (name_1 / name_2)
    assert set(out.geom_type) == {"MultiPolygon"}
    keys = [c for c in ref.columns if c in ("name_1", "name_2", "name", "cell", "bid")]
    got = sorted(zip(_key(out, keys), out.area, strict=True))
    want = sorted(zip(_key(ref, keys), ref.area, strict=True))
    assert [k for k, _ in got] == [k for k, _ in want]
    np.testing.assert_allclose([a for _, a in got], [a for _, a in want], rtol=1e-6)


def test_keep_fields_and_geometry_types(layers: dict[str, Path]) -> None:
    tmp = layers["tmp"]
    overlay(str(COUNTRIES), str(tmp / "input.gpkg"), overlay=str(layers["grid"]), keep_fields="input")
    assert "cell" not in gpd.read_file(tmp / "input.gpkg").columns
    overlay(str(COUNTRIES), str(tmp / "none.gpkg"), overlay=str(layers["grid"]), keep_fields="none")
    assert list(gpd.read_file(tmp / "none.gpkg").columns) == ["geometry"]
    # Touching boxes: their shared edges are lines, dropped unless keep_geom_type is false.
    boxes = gpd.GeoDataFrame({"b": [1, 2]}, geometry=[shapely.box(0, 0, 1, 1), shapely.box(1, 0, 2, 1)], crs=4326)
    boxes.to_file(tmp / "boxes.gpkg")
    _, warns = overlay(str(tmp / "boxes.gpkg"), str(tmp / "self.gpkg"), overlay=str(tmp / "boxes.gpkg"))
    out = gpd.read_file(tmp / "self.gpkg")
    assert len(out) == 2 and set(out.geom_type) == {"MultiPolygon"} and any("dropped" in w for w in warns)
    overlay(str(tmp / "boxes.gpkg"), str(tmp / "all.gpkg"), overlay=str(tmp / "boxes.gpkg"), keep_geom_type=False)
    assert len(gpd.read_file(tmp / "all.gpkg")) == 4


def test_bad_arguments(layers: dict[str, Path]) -> None:
    with pytest.raises(GdalMcpError) as e:
        overlay(str(COUNTRIES), str(layers["tmp"] / "x.gpkg"), overlay=str(layers["grid"]), how="erase")
    assert e.value.code == "invalid-argument" and "symmetric_difference" in e.value.message
