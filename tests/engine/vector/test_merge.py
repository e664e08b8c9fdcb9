"""vector_merge engine against geopandas.concat and ogrmerge.py (Debian python3-gdal) when installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import geopandas
import pandas
import pyogrio
import pytest

from gdal_mcp.engine.vector.merge import merge

NE = Path(__file__).parents[2] / "data" / "vector" / "naturalearth_lowres.shp"


def _parts(tmp_path: Path) -> list[Path]:
    df = geopandas.read_file(NE)
    paths = []
    for i, cont in enumerate(["Africa", "Europe", "Asia"]):
        part = df[df.continent == cont]
        if i == 1:
            part = part.to_crs(3035).drop(columns="gdp_md_est")  # another CRS, a field missing
        if i == 2:
            part = part.assign(pop_est=part.pop_est.astype("float64") + 0.5)  # int vs real
        paths.append(tmp_path / f"{cont}.gpkg")
        part.to_file(paths[-1])
    return paths


def test_single_layer_like_geopandas_concat(tmp_path: Path) -> None:
    paths = _parts(tmp_path)
    result, warnings = merge([str(p) for p in paths], str(tmp_path / "all.gpkg"), source_names=[p.name for p in paths])
    frames = [geopandas.read_file(p).to_crs(4326).assign(source=p.name) for p in paths]
    ref = pandas.concat(frames, ignore_index=True)
    out = geopandas.read_file(tmp_path / "all.gpkg")
    assert result.feature_count == len(ref) == len(out) and out.crs.to_epsg() == 4326
    assert out["source"].tolist() == ref["source"].tolist() and out["name"].tolist() == ref["name"].tolist()
    assert out["gdp_md_est"].isna().sum() == len(frames[1])
    assert out["pop_est"].dtype.kind == "f"
    assert any("reprojected" in w for w in warnings) and any("pop_est" in w for w in warnings)
    for a, b in zip(out.geometry, ref.geometry, strict=True):
        assert a.normalize().equals_exact(b.normalize(), 1e-7)


def test_layers_mode(tmp_path: Path) -> None:
    paths = _parts(tmp_path)
    result, _ = merge([str(p) for p in paths], str(tmp_path / "l.gpkg"), mode="layers", source_names=[p.name for p in paths])
    assert [s.layer for s in result.layers] == ["Africa", "Europe", "Asia"]
    assert [n for n, _ in pyogrio.list_layers(tmp_path / "l.gpkg")] == ["Africa", "Europe", "Asia"]
    assert [s.feature_count for s in result.layers] == [len(geopandas.read_file(p)) for p in paths]


@pytest.mark.skipif(shutil.which("ogrmerge.py") is None, reason="ogrmerge.py (Debian python3-gdal) not installed")
def test_same_features_as_ogrmerge(tmp_path: Path) -> None:
    shp = []
    for cont in ("Africa", "Oceania"):
        p = tmp_path / f"{cont}.shp"
        geopandas.read_file(NE).query(f"continent == '{cont}'").to_file(p)
        shp.append(p)
    subprocess.run(
        [
            "ogrmerge.py",
            "-single",
            "-f",
            "GPKG",
            "-o",
            str(tmp_path / "ref.gpkg"),
            *map(str, shp),
            "-src_layer_field_name",
            "source",
            "-src_layer_field_content",
            "{DS_BASENAME}",
        ],
        check=True,
        capture_output=True,
    )
    merge([str(p) for p in shp], str(tmp_path / "ours.gpkg"), source_names=[p.stem for p in shp])
    ref, ours = geopandas.read_file(tmp_path / "ref.gpkg"), geopandas.read_file(tmp_path / "ours.gpkg")
    assert ours["source"].tolist() == ref["source"].tolist() and ours["name"].tolist() == ref["name"].tolist()
    assert all(a.equals(b) for a, b in zip(ours.geometry, ref.geometry, strict=True))


@pytest.mark.skipif(shutil.which("ogrmerge.py") is None, reason="ogrmerge.py (Debian python3-gdal) not installed")
def test_fields_differing_in_case_merge_like_ogrmerge(tmp_path: Path) -> None:
    """name / NAME and FIPS / fips into a GeoPackage: one field each, spelt as first seen, as ogrmerge.py -single
    gives (it compares names without case), with the same values; the warnings name both spellings."""
    ne = geopandas.read_file(NE)
    a = ne[ne.continent == "Africa"][["name", "geometry"]].assign(FIPS=range(51))
    b = ne[ne.continent == "Europe"][["name", "geometry"]].rename(columns={"name": "NAME"})
    b = b.assign(fips=[f"{i:03d}" for i in range(len(b))])
    a.to_file(tmp_path / "a.gpkg")
    b.to_file(tmp_path / "b.gpkg")
    subprocess.run(
        [
            "ogrmerge.py",
            "-single",
            "-f",
            "GPKG",
            "-o",
            str(tmp_path / "ref.gpkg"),
            str(tmp_path / "a.gpkg"),
            str(tmp_path / "b.gpkg"),
        ],
        check=True,
        capture_output=True,
    )
    result, warnings = merge([str(tmp_path / "a.gpkg"), str(tmp_path / "b.gpkg")], str(tmp_path / "ours.gpkg"), source_field=None)
    ref, ours = geopandas.read_file(tmp_path / "ref.gpkg"), geopandas.read_file(tmp_path / "ours.gpkg")
    assert list(ours.columns) == list(ref.columns) == ["name", "FIPS", "geometry"]
    assert ours["name"].tolist() == ref["name"].tolist() and ours["FIPS"].tolist() == ref["FIPS"].tolist()
    assert result.feature_count == len(ref) == len(a) + len(b)
    assert any("'name'" in w and "'NAME'" in w and "case" in w for w in warnings), warnings
    assert any("'FIPS'" in w and "'fips'" in w and "case" in w for w in warnings), warnings
