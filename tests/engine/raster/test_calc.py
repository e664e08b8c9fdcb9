"""Band math: values against numpy, nodata, grids, band selection, and the expression whitelist."""

from __future__ import annotations

import numpy as np
import pytest
import rasterio
from rasterio.transform import from_origin

import gdal_mcp.engine.raster.calc as calc_module
from gdal_mcp.engine.raster.calc import calc, compile_expression, split_band
from gdal_mcp.errors import GdalMcpError
from tests.conftest import DATA

TRANSFORM = from_origin(300000.0, 4500000.0, 30.0, 30.0)
H5 = f'HDF5:"{DATA}/raster/two-subs.h5"://data'


def write(path, bands, *, nodata=None, transform=TRANSFORM, crs="EPSG:32612", dtype=None) -> str:
    bands = np.asarray(bands)
    bands = bands[None] if bands.ndim == 2 else bands
    with rasterio.open(path, "w", driver="GTiff", width=bands.shape[2], height=bands.shape[1], count=bands.shape[0],
                       dtype=dtype or bands.dtype, crs=crs, transform=transform, nodata=nodata) as ds:
        ds.write(bands.astype(dtype or bands.dtype))
    return str(path)


def read(path) -> tuple[np.ndarray, dict]:
    with rasterio.open(path) as ds:
        return ds.read(1), ds.profile


@pytest.fixture
def landsat(tmp_path) -> tuple[str, str, np.ndarray, np.ndarray]:
    """Landsat 7-style red (band 3) and near-infrared (band 4) as Byte rasters, 255 = nodata on NIR."""
    rng = np.random.default_rng(7)
    red = rng.integers(5, 120, (64, 80)).astype("uint8")
    nir = rng.integers(20, 250, (64, 80)).astype("uint8")
    nir[3, 4] = 255
    red[10, 10] = 0
    return write(tmp_path / "b3.tif", red), write(tmp_path / "b4.tif", nir, nodata=255), red, nir


# ---------------------------------------------------------------------------------------------- values

def test_ndvi_of_two_landsat_bands(landsat, tmp_path) -> None:
    red_path, nir_path, red, nir = landsat
    summary, warnings = calc({"A": red_path, "B": nir_path}, "(B - A) / (B + A)", str(tmp_path / "ndvi.tif"))
    assert warnings == []
    assert (summary.dtype, summary.nodata, summary.crs, summary.width, summary.height) == ("float32", -9999.0,
                                                                                         "EPSG:32612", 80, 64)
    out, profile = read(tmp_path / "ndvi.tif")
    assert profile["transform"] == TRANSFORM
    r, n = red.astype(np.float64), nir.astype(np.float64)
    expected = ((n - r) / (n + r)).astype("float32")
    valid = nir != 255
    # Byte inputs do not wrap around: B - A is negative where red is brighter.
    assert ((n - r) < 0).any()
    assert np.array_equal(out[valid], expected[valid])
    assert out[3, 4] == -9999 and (out[valid] >= -1).all() and (out[valid] <= 1).all()


def test_nodata_of_any_used_input_propagates(tmp_path) -> None:
    a = np.arange(12, dtype="int16").reshape(3, 4)
    b = np.full((3, 4), 10, dtype="float32")
    b[2, 3] = np.nan
    pa = write(tmp_path / "a.tif", a, nodata=0)
    pb = write(tmp_path / "b.tif", b, nodata=float("nan"))
    _, warnings = calc({"A": pa, "B": pb}, "A * 2 + B", str(tmp_path / "o.tif"), nodata=-1)
    out, profile = read(tmp_path / "o.tif")
    assert profile["nodata"] == -1 and warnings == []
    expected = a * 2 + 10.0
    expected[0, 0] = -1  # A's nodata
    expected[2, 3] = -1  # B's nodata (NaN)
    assert np.array_equal(out, expected)


def test_division_by_zero_becomes_nodata_with_a_warning(landsat, tmp_path) -> None:
    red_path, nir_path, red, nir = landsat
    zeros = write(tmp_path / "z.tif", np.where(np.arange(80) % 2 == 0, 0, 2)[None].repeat(64, 0).astype("uint8"))
    _, warnings = calc({"A": red_path, "Z": zeros}, "A / Z", str(tmp_path / "o.tif"))
    out, _ = read(tmp_path / "o.tif")
    assert (out[:, ::2] == -9999).all() and not np.isinf(out).any()
    assert np.array_equal(out[:, 1::2], red[:, 1::2] / 2)
    assert len(warnings) == 1 and f"{64 * 40} pixel(s) divided by zero" in warnings[0]
    # Guarded with where(): no nodata, no warning.
    _, warnings = calc({"A": red_path, "Z": zeros}, "where(Z == 0, 0, A / Z)", str(tmp_path / "g.tif"))
    assert warnings == [] and (read(tmp_path / "g.tif")[0][:, ::2] == 0).all()


def test_logic_comparisons_and_functions(tmp_path) -> None:
    a = np.linspace(-2, 2, 20, dtype="float32").reshape(4, 5)
    b = np.linspace(1, 3, 20, dtype="float32").reshape(4, 5)
    pa, pb = write(tmp_path / "a.tif", a), write(tmp_path / "b.tif", b)
    cases = {
        "(A > 0) & (B < 2.5) | ~(A > -1)": ((a > 0) & (b < 2.5)) | ~(a > -1),
        "A > 0 and not B >= 2": np.logical_and(a > 0, ~(b >= 2)),
        "-1 < A < 1": (a > -1) & (a < 1),
        "where(A > 0, sqrt(abs(A)), -A ** 2)": np.where(a > 0, np.sqrt(np.abs(a)), -(a.astype(float) ** 2)),
        "max(A, B) - min(A, B) + clip(A, -1, 1)": np.maximum(a, b) - np.minimum(a, b) + np.clip(a, -1, 1),
        "arctan2(A, B) * 180 / pi + floor(B) + ceil(A) + round(B)": np.degrees(np.arctan2(a, b)) + np.floor(b)
        + np.ceil(a) + np.round(b),
        "log10(B) + log2(B) + exp(A) + 7 // 2 + 7 % 4": np.log10(b) + np.log2(b) + np.exp(a) + 3 + 3,
        "nan_to_num(where(A > 0, nan, A), 5)": np.where(a > 0, 5, a),
        "(A > 0) + (B > 2)": (a > 0).astype(float) + (b > 2),
    }
    for i, (expression, expected) in enumerate(cases.items()):
        calc({"A": pa, "B": pb}, expression, str(tmp_path / f"o{i}.tif"))
        assert read(tmp_path / f"o{i}.tif")[0] == pytest.approx(np.asarray(expected, dtype="float64"), abs=1e-5), \
            expression


def test_nan_results_become_nodata(tmp_path) -> None:
    a = np.array([[4.0, -4.0, 0.0]], dtype="float32")
    pa = write(tmp_path / "a.tif", a)
    _, warnings = calc({"A": pa}, "sqrt(A) + log(A + 4)", str(tmp_path / "o.tif"))
    out, _ = read(tmp_path / "o.tif")
    assert out[0, 0] == pytest.approx(2 + np.log(8)) and out[0, 1] == -9999 and out[0, 2] == pytest.approx(np.log(4))
    assert len(warnings) == 1 and "1 pixel(s) evaluated to NaN or infinity" in warnings[0]


def test_integer_outputs_round_clamp_and_pick_a_nodata_they_can_hold(landsat, tmp_path) -> None:
    red_path, nir_path, red, nir = landsat
    summary, warnings = calc({"A": red_path, "B": nir_path}, "(B - A) / (B + A) * 100 + 100", str(tmp_path / "b.tif"),
                             output_type="Byte")
    assert summary.dtype == "uint8" and summary.nodata == 255
    assert any("cannot hold -9999" in w for w in warnings)
    out, _ = read(tmp_path / "b.tif")
    r, n = red.astype(float), nir.astype(float)
    valid = nir != 255
    assert np.array_equal(out[valid], np.round((n - r) / (n + r) * 100 + 100)[valid].astype("uint8"))
    _, warnings = calc({"A": red_path}, "A * 10", str(tmp_path / "c.tif"), output_type="UInt8", nodata=0)
    assert any("clamped" in w for w in warnings)
    assert read(tmp_path / "c.tif")[0].max() == 255
    summary, _ = calc({"A": red_path}, "A - 100", str(tmp_path / "i.tif"), output_type="Int16")
    assert summary.nodata == -9999 and read(tmp_path / "i.tif")[0].min() < 0
    with pytest.raises(GdalMcpError) as e:
        calc({"A": red_path}, "A", str(tmp_path / "x.tif"), output_type="Byte", nodata=-1)
    assert e.value.code == "invalid-argument" and "cannot be stored" in e.value.message


def test_many_windows_give_the_same_result(landsat, tmp_path, monkeypatch) -> None:
    red_path, nir_path, _, _ = landsat
    calc({"A": red_path, "B": nir_path}, "(B - A) / (B + A)", str(tmp_path / "one.tif"))
    monkeypatch.setattr(calc_module, "WINDOW_PIXELS", 1)
    calc({"A": red_path, "B": nir_path}, "(B - A) / (B + A)", str(tmp_path / "many.tif"), format="COG")
    assert np.array_equal(read(tmp_path / "one.tif")[0], read(tmp_path / "many.tif")[0])


# ---------------------------------------------------------------------------------------------- inputs

def test_path_colon_band_selects_a_band(tmp_path) -> None:
    stack = np.stack([np.full((5, 6), v, dtype="uint16") for v in (1, 2, 3)])
    path = write(tmp_path / "stack.tif", stack)
    assert split_band(f"{path}:2") == (path, 2)
    assert split_band(path) == (path, 1)
    calc({"A": f"{path}:2", "B": f"{path}:3", "C": path}, "A * 100 + B * 10 + C", str(tmp_path / "o.tif"))
    assert (read(tmp_path / "o.tif")[0] == 231).all()
    with pytest.raises(GdalMcpError) as e:
        calc({"A": f"{path}:4"}, "A", str(tmp_path / "x.tif"))
    assert e.value.code == "invalid-argument" and "band 4 does not exist" in e.value.message


def test_colons_inside_gdal_names_are_not_bands(tmp_path) -> None:
    # HDF5:"f.h5"://data contains ':' but no band suffix; with ":1" the part before it opens.
    assert split_band(H5) == (H5, 1)
    assert split_band(f"{H5}:1") == (H5, 1)
    odd = tmp_path / "a:7.tif"  # a file name with a colon and digits in it
    write(odd, np.ones((2, 2), dtype="uint8"))
    assert split_band(str(odd)) == (str(odd), 1)
    assert split_band(f"{odd}:1") == (str(odd), 1)
    assert split_band("/nowhere/missing.tif:3") == ("/nowhere/missing.tif:3", 1)
    with rasterio.open(H5) as ds:
        expected = ds.read(1)
    calc({"X": f"{H5}:1"}, "X * 2", str(tmp_path / "h.tif"))
    assert read(tmp_path / "h.tif")[0] == pytest.approx(expected * 2)


def test_inputs_on_another_grid_are_refused_with_the_fix(landsat, tmp_path) -> None:
    red_path, _, red, _ = landsat
    shifted = write(tmp_path / "shifted.tif", red, transform=from_origin(300015.0, 4500000.0, 30.0, 30.0))
    with pytest.raises(GdalMcpError) as e:
        calc({"A": red_path, "B": shifted}, "A + B", str(tmp_path / "x.tif"))
    msg = e.value.message
    assert e.value.code == "invalid-argument"
    assert "B is not on the same grid as A" in msg and "raster_reproject" in msg and "raster_clip" in msg
    assert "size=[80, 64]" in msg and "bbox=[300000.0, 4498080.0, 302400.0, 4500000.0]" in msg and "EPSG:32612" in msg
    for other in (write(tmp_path / "small.tif", red[:10]), write(tmp_path / "ll.tif", red, crs="EPSG:32613")):
        with pytest.raises(GdalMcpError) as e:
            calc({"A": red_path, "B": other}, "A - B", str(tmp_path / "x.tif"))
        assert "not on the same grid" in e.value.message


@pytest.mark.parametrize(("inputs", "needle"), [
    ({}, "at least one raster"),
    ({"1A": "x.tif"}, "not valid"),
    ({"_a": "x.tif"}, "not valid"),
    ({"lambda": "x.tif"}, "not valid"),
    ({"sqrt": "x.tif"}, "taken by a function"),
])
def test_bad_input_names(tmp_path, inputs, needle) -> None:
    with pytest.raises(GdalMcpError) as e:
        calc(inputs, "1", str(tmp_path / "x.tif"))
    assert e.value.code == "invalid-argument" and needle in e.value.message


def test_unused_inputs_are_reported_and_an_expression_needs_one(landsat, tmp_path) -> None:
    red_path, nir_path, _, _ = landsat
    _, warnings = calc({"A": red_path, "B": nir_path, "C": "/does/not/exist.tif"}, "A + 1", str(tmp_path / "o.tif"))
    assert any("B, C are not used" in w for w in warnings)
    with pytest.raises(GdalMcpError) as e:
        calc({"A": red_path}, "1 + 2", str(tmp_path / "x.tif"))
    assert "uses none of the inputs" in e.value.message


# ---------------------------------------------------------------------------------------------- whitelist

def refused(expression: str) -> str:
    with pytest.raises(GdalMcpError) as e:
        compile_expression(expression, {"A", "B"})
    assert e.value.code == "invalid-argument"
    return e.value.message


def test_refuses_attribute_access() -> None:
    assert "attribute access ('.__class__')" in refused("A.__class__")
    assert "attribute access ('.__subclasses__')" in refused("(1).__class__.__base__.__subclasses__()")


def test_refuses_dunder_import() -> None:
    message = refused("__import__('os').system('id')")
    # Every offending construct is named, not only the outermost.
    assert "the dunder name '__import__'" in message and "attribute access ('.system')" in message
    assert "the string literal 'os'" in message


def test_refuses_eval() -> None:
    assert "not allowed: the function 'eval'" in refused("eval('A')")


def test_refuses_open() -> None:
    assert "not allowed: the function 'open'" in refused("open('/etc/passwd')")


def test_refuses_lambda() -> None:
    assert "lambda" in refused("(lambda: A)()")


def test_refuses_comprehensions() -> None:
    assert "comprehensions" in refused("[a for a in A]")
    assert "comprehensions" in refused("sum(a for a in A)")


def test_refuses_subscripts() -> None:
    assert "subscripts" in refused("A[0]")


def test_refuses_huge_and_non_literal_exponents() -> None:
    assert "exponent that is not a literal" in refused("2 ** 10 ** 10")
    assert "exponent 100" in refused("A ** 100")
    assert "exponent that is not a literal" in refused("A ** B")
    compile_expression("A ** 2 + A ** -0.5 + 10 ** 64", {"A"})


def test_refuses_string_literals() -> None:
    assert "string literal 'abc'" in refused("'abc'")
    assert "string literal" in refused("where(A > 0, 'x', 1)")


def test_refuses_keyword_arguments() -> None:
    assert "keyword arguments (nan= in nan_to_num())" in refused("nan_to_num(A, nan=0)")


def test_refuses_statements() -> None:
    assert "statements (import)" in refused("import os")
    assert "statements (assign)" in refused("A = 1")
    assert "more than one expression" in refused("A; B")


def test_refuses_expressions_too_long_or_too_deep() -> None:
    assert "characters long" in refused("A + " * 600 + "A")
    assert "nests deeper than 50" in refused("sqrt(" * 60 + "A" + ")" * 60)
    assert "nests deeper than 50" in refused("-" * 1500 + "A")
    compile_expression("sqrt(" * 20 + "A" + ")" * 20, {"A"})


def test_refuses_unknown_names_and_functions() -> None:
    assert "unknown name 'C'; the inputs are A, B" in refused("C + 1")
    assert "the function 'system'" in refused("system('id')")
    assert "'sqrt' is a function" in refused("sqrt + A")
    assert "where() takes 3 argument(s), got 2" in refused("where(A, B)")
    assert "the operator '@'" in refused("A @ B")
    assert "the comparison 'in'" in refused("A in B")
    assert "where(c, x, y)" in refused("A if B else 0")
    assert "the literal True" in refused("where(A > 0, True, B)")
