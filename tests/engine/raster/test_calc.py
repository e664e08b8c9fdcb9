"""Band math: values against numpy, nodata, grids, band selection, and the expression whitelist."""

from __future__ import annotations

import shutil
import subprocess
import warnings as warnings_module

import numpy as np
import pytest
import rasterio
from rasterio.transform import from_origin

import gdal_mcp.engine.raster.calc as calc_module
from gdal_mcp.engine.raster.calc import calc, split_band
from gdal_mcp.engine.raster.expression import compile_expression
from gdal_mcp.errors import GdalMcpError
from tests.helpers import DATA

TRANSFORM = from_origin(300000.0, 4500000.0, 30.0, 30.0)
H5 = f'HDF5:"{DATA}/raster/two-subs.h5"://data'


def write(path, bands, *, nodata=None, transform=TRANSFORM, crs="EPSG:32612", dtype=None) -> str:
    bands = np.asarray(bands)
    bands = bands[None] if bands.ndim == 2 else bands
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=bands.shape[2],
        height=bands.shape[1],
        count=bands.shape[0],
        dtype=dtype or bands.dtype,
        crs=crs,
        transform=transform,
        nodata=nodata,
    ) as ds:
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
    assert (summary.dtype, summary.nodata, summary.crs, summary.width, summary.height) == (
        "float32",
        -9999.0,
        "EPSG:32612",
        80,
        64,
    )
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
        "arctan2(A, B) * 180 / pi + floor(B) + ceil(A) + round(B)": np.degrees(np.arctan2(a, b))
        + np.floor(b)
        + np.ceil(a)
        + np.round(b),
        "log10(B) + log2(B) + exp(A) + 7 // 2 + 7 % 4": np.log10(b) + np.log2(b) + np.exp(a) + 3 + 3,
        "nan_to_num(where(A > 0, nan, A), 5)": np.where(a > 0, 5, a),
        "(A > 0) + (B > 2)": (a > 0).astype(float) + (b > 2),
    }
    for i, (expression, expected) in enumerate(cases.items()):
        calc({"A": pa, "B": pb}, expression, str(tmp_path / f"o{i}.tif"))
        assert read(tmp_path / f"o{i}.tif")[0] == pytest.approx(np.asarray(expected, dtype="float64"), abs=1e-5), expression


def test_nan_results_become_nodata(tmp_path) -> None:
    a = np.array([[4.0, -4.0, 0.0]], dtype="float32")
    pa = write(tmp_path / "a.tif", a)
    _, warnings = calc({"A": pa}, "sqrt(A) + log(A + 4)", str(tmp_path / "o.tif"))
    out, _ = read(tmp_path / "o.tif")
    assert out[0, 0] == pytest.approx(2 + np.log(8)) and out[0, 1] == -9999 and out[0, 2] == pytest.approx(np.log(4))
    assert len(warnings) == 1 and "1 pixel(s) evaluated to NaN or infinity" in warnings[0]


def test_integer_outputs_round_clamp_and_pick_a_nodata_they_can_hold(landsat, tmp_path) -> None:
    red_path, nir_path, red, nir = landsat
    summary, warnings = calc(
        {"A": red_path, "B": nir_path}, "(B - A) / (B + A) * 100 + 100", str(tmp_path / "b.tif"), output_type="Byte"
    )
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
    assert f"B ({shifted}) is not on the same grid as A ({red_path})" in msg and "raster_mosaic" in msg
    # the advice, followed as written, gives inputs that calc takes
    assert f"raster_reproject input={shifted} like={red_path}" in msg
    from gdal_mcp.engine.raster.warp import reproject

    aligned = str(tmp_path / "aligned.tif")
    reproject(str(shifted), aligned, like=str(red_path), resampling="bilinear")
    calc({"A": red_path, "B": aligned}, "A + B", str(tmp_path / "x.tif"))
    for other in (write(tmp_path / "small.tif", red[:10]), write(tmp_path / "ll.tif", red, crs="EPSG:32613")):
        with pytest.raises(GdalMcpError) as e:
            calc({"A": red_path, "B": other}, "A - B", str(tmp_path / "x.tif"))
        assert "not on the same grid" in e.value.message


@pytest.mark.parametrize(
    ("inputs", "needle"),
    [
        ({}, "at least one raster"),
        ({"1A": "x.tif"}, "not valid"),
        ({"_a": "x.tif"}, "not valid"),
        ({"lambda": "x.tif"}, "not valid"),
        ({"sqrt": "x.tif"}, "taken by a function"),
    ],
)
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


# ---------------------------------------------------------------------------------------------- several expressions

GDAL_CALC = shutil.which("gdal_calc.py")


def gdal_calc_runs() -> bool:
    if not GDAL_CALC:
        return False
    return subprocess.run([GDAL_CALC, "--help"], capture_output=True, check=False).returncode == 0


@pytest.mark.skipif(not gdal_calc_runs(), reason="gdal_calc.py (Debian python3-gdal) is not installed here")
def test_several_expressions_give_one_band_each_like_gdal_calc(tmp_path) -> None:
    rgb = str(DATA / "raster" / "RGB.byte.tif")
    expressions = ["(B - A) / (B + A)", "max(A, B, C)", "min(A, B, C, 40) * 2", "A"]
    summary, warnings = calc({"A": f"{rgb}:1", "B": f"{rgb}:2", "C": f"{rgb}:3"}, expressions, str(tmp_path / "ours.tif"))
    assert summary.count == 4 and summary.dtype == "float32" and warnings == []
    reference = tmp_path / "gdal.tif"
    f = "A.astype(numpy.float64)"
    subprocess.run(
        [
            GDAL_CALC,
            "--quiet",
            "-A",
            rgb,
            "--A_band=1",
            "-B",
            rgb,
            "--B_band=2",
            "-C",
            rgb,
            "--C_band=3",
            f"--calc=(B - {f}) / (B + {f})",
            "--calc=numpy.maximum(numpy.maximum(A, B), C)",
            "--calc=numpy.minimum(numpy.minimum(numpy.minimum(A, B), C), 40) * 2.0",
            "--calc=A",
            "--type=Float32",
            "--NoDataValue=-9999",
            f"--outfile={reference}",
        ],
        check=True,
    )
    with rasterio.open(rgb) as ds:
        a, b, _ = ds.read().astype(np.float64)
        nodata_a = ds.read_masks(1) == 0
        nodata_ab = nodata_a | (ds.read_masks(2) == 0)
    with rasterio.open(tmp_path / "ours.tif") as ours, rasterio.open(reference) as theirs:
        assert ours.count == theirs.count == 4
        assert ours.descriptions == tuple(expressions)
        assert ours.transform == theirs.transform and ours.crs == theirs.crs
        for band in range(1, 5):
            got, want = ours.read(band), theirs.read(band)
            # gdal_calc makes a pixel nodata where any input is; its NaN results (0 / 0 in the nodata collar) stay
            # NaN (it computes nodata * 1 + NaN * 0), ours are nodata.
            invalid = (want == -9999) | np.isnan(want)
            assert np.array_equal(got[~invalid], want[~invalid]), band
            if band in (2, 3):  # they use all three inputs
                assert np.array_equal(got == -9999, invalid), band
            else:
                # Ours masks only the inputs an expression uses: where just C is nodata, A and B still give values.
                used_nodata = nodata_ab if band == 1 else nodata_a
                assert np.array_equal(got == -9999, used_nodata), band
                others = invalid & ~used_nodata
                assert others.sum() > 100
                expected = (b - a) / (b + a) if band == 1 else a
                assert np.array_equal(got[others], expected[others].astype("float32")), band
        assert (ours.read(1) != -9999).sum() > 300_000


def test_min_and_max_of_many_arguments_against_numpy(tmp_path) -> None:
    rng = np.random.default_rng(3)
    arrays = [rng.normal(0, 10, (30, 40)).astype("float32") for _ in range(5)]
    arrays[2][4, 5] = -9999
    paths = {
        name: write(tmp_path / f"{name}.tif", a, nodata=-9999 if name == "C" else None)
        for name, a in zip("ABCDE", arrays, strict=True)
    }
    calc(paths, ["min(A, B, C, D, E)", "max(A, B, C, D, E) - max(A, 0, B)"], str(tmp_path / "o.tif"), output_type="Float64")
    with rasterio.open(tmp_path / "o.tif") as ds:
        low, high = ds.read(1), ds.read(2)
    a = [x.astype(np.float64) for x in arrays]
    expected_low = np.minimum.reduce(a)
    expected_high = np.maximum.reduce(a) - np.maximum(np.maximum(a[0], 0), a[1])
    valid = arrays[2] != -9999
    assert np.array_equal(low[valid], expected_low[valid]) and np.array_equal(high[valid], expected_high[valid])
    assert low[4, 5] == -9999 and high[4, 5] == -9999  # C's nodata, as for any element-wise function


def test_an_error_names_the_expression_it_is_in(landsat, tmp_path) -> None:
    red_path, nir_path, _, _ = landsat
    with pytest.raises(GdalMcpError) as e:
        calc({"A": red_path, "B": nir_path}, ["A + B", "A.real"], str(tmp_path / "x.tif"))
    assert e.value.message.startswith("expression 2 of 2 ('A.real'): expression refused")
    for bad in ([], [1], ["A"] * 101):
        with pytest.raises(GdalMcpError) as e:
            calc({"A": red_path}, bad, str(tmp_path / "x.tif"))
        assert "a list of 1 to 100 strings" in e.value.message


# ---------------------------------------------------------------------------------------------- stack reductions


@pytest.fixture
def scenes(tmp_path) -> tuple[list[str], np.ndarray]:
    """Seven "scenes" on RGB.byte.tif's grid made from its three bands with offsets, each with nodata holes of
    its own (the file's nodata-0 collar, plus random holes; one Float32 scene uses NaN without declared nodata).
    Returns the paths and the stack as float64 with NaN where a scene has no valid value."""
    with rasterio.open(DATA / "raster" / "RGB.byte.tif") as ds:
        bands = ds.read().astype(np.float64)
        profile = ds.profile
    rng = np.random.default_rng(11)
    paths, layers = [], []
    for i in range(7):
        values = bands[i % 3] + 7 * i
        missing = (bands[i % 3] == 0) | (rng.random(values.shape) < 0.25)
        path = tmp_path / f"scene{i}.tif"
        if i == 4:
            data, nodata, dtype = np.where(missing, np.nan, values).astype("float32"), None, "float32"
        else:
            data, nodata, dtype = np.where(missing, 65535, values).astype("uint16"), 65535, "uint16"
        p = {**profile, "dtype": dtype, "nodata": nodata, "count": 1}
        with rasterio.open(path, "w", **p) as out:
            out.write(data, 1)
        paths.append(str(path))
        layers.append(np.where(missing, np.nan, values))
    return paths, np.stack(layers)


def test_reductions_of_a_stack_against_numpy(scenes, tmp_path) -> None:
    paths, stack = scenes
    expressions = ["median(S)", "mean(S)", "min(S)", "max(S)", "sum(S)", "count(S)", "std(S)"]
    summary, warnings = calc(paths, expressions, str(tmp_path / "o.tif"), output_type="Float64")
    assert summary.count == 7
    count = np.sum(~np.isnan(stack), axis=0)
    empty = count == 0
    assert empty.sum() > 1000 and (count == 7).sum() > 1000 and ((count > 0) & (count < 7)).sum() > 1000
    with np.errstate(all="ignore"), warnings_module.catch_warnings():
        warnings_module.simplefilter("ignore", RuntimeWarning)  # all-NaN pixels
        reference = [
            np.nanmedian(stack, 0),
            np.nanmean(stack, 0),
            np.nanmin(stack, 0),
            np.nanmax(stack, 0),
            np.where(empty, np.nan, np.nansum(stack, 0)),
            count,
            np.nanstd(stack, 0),
        ]
    with rasterio.open(tmp_path / "o.tif") as ds:
        assert ds.descriptions == tuple(expressions) and ds.nodata == -9999
        for b, (expression, want) in enumerate(zip(expressions, reference, strict=True), start=1):
            got = ds.read(b)
            if expression == "count(S)":
                assert np.array_equal(got, count)  # 0, not nodata, where no scene is valid
                continue
            assert (got[empty] == -9999).all(), expression
            assert np.allclose(got[~empty], want[~empty], rtol=1e-12, atol=1e-9), expression
    # Each reduction other than count says how many pixels had no valid input at all.
    assert len(warnings) == 6 and all(
        f"{int(empty.sum())} pixel(s) have no valid value in any of the 7 inputs" in w for w in warnings
    )


def test_reductions_combine_with_other_math(scenes, tmp_path) -> None:
    paths, stack = scenes
    _, warnings = calc(
        paths, "where(count(S) >= 5, (max(S) - min(S)) / mean(S), 0)", str(tmp_path / "o.tif"), output_type="Float64"
    )
    assert warnings == []  # the where() gives every pixel a value
    count = np.sum(~np.isnan(stack), axis=0)
    with np.errstate(all="ignore"), warnings_module.catch_warnings():
        warnings_module.simplefilter("ignore", RuntimeWarning)
        want = np.where(count >= 5, (np.nanmax(stack, 0) - np.nanmin(stack, 0)) / np.nanmean(stack, 0), 0)
    assert np.allclose(read(tmp_path / "o.tif")[0], want, rtol=1e-12)


def test_small_windows_give_the_same_composite_and_bound_the_stack(scenes, tmp_path, monkeypatch) -> None:
    paths, _ = scenes
    calc(paths, ["median(S)", "std(S)"], str(tmp_path / "one.tif"))
    seen: list[int] = []
    reduce_stack = calc_module.reduce_stack

    def spy(layers, reductions):
        seen.append(layers.size)
        return reduce_stack(layers, reductions)

    monkeypatch.setattr(calc_module, "reduce_stack", spy)
    monkeypatch.setattr(calc_module, "STACK_VALUES", 7 * 5000)
    calc(paths, ["median(S)", "std(S)"], str(tmp_path / "many.tif"))
    assert len(seen) > 100 and max(seen) <= 7 * 5000
    with rasterio.open(tmp_path / "one.tif") as one, rasterio.open(tmp_path / "many.tif") as many:
        assert np.array_equal(one.read(), many.read())


def test_a_thousand_small_scenes(tmp_path) -> None:
    rng = np.random.default_rng(5)
    stack = rng.integers(0, 1000, (1000, 6, 9)).astype(np.float64)
    stack[rng.random(stack.shape) < 0.3] = np.nan
    stack[:, 0, 0] = np.nan  # no valid scene at all
    paths = [
        write(tmp_path / f"s{i:04}.tif", np.nan_to_num(layer, nan=-1).astype("int16"), nodata=-1) for i, layer in enumerate(stack)
    ]
    calc(paths, ["median(S)", "count(S)"], str(tmp_path / "o.tif"), output_type="Float64")
    with rasterio.open(tmp_path / "o.tif") as ds, warnings_module.catch_warnings():
        warnings_module.simplefilter("ignore", RuntimeWarning)
        median = np.nanmedian(stack, 0)
        assert np.array_equal(ds.read(1)[1:], median[1:]) and ds.read(1)[0, 0] == -9999
        assert np.array_equal(ds.read(2), np.sum(~np.isnan(stack), axis=0))
    monkeypatch = pytest.MonkeyPatch()
    with monkeypatch.context() as m, pytest.raises(GdalMcpError) as e:
        m.setattr(calc_module, "MAX_STACK_INPUTS", 999)
        calc(paths, "median(S)", str(tmp_path / "x.tif"))
    assert e.value.code == "invalid-argument" and "1000 inputs are more than the 999" in e.value.message


def test_band_of_every_input_in_a_stack(tmp_path) -> None:
    rgb = str(DATA / "raster" / "RGB.byte.tif")
    with rasterio.open(rgb) as ds:
        b2, b3 = ds.read(2).astype(np.float64), ds.read(3).astype(np.float64)
    b2[b2 == 0], b3[b3 == 0] = np.nan, np.nan
    with warnings_module.catch_warnings():
        warnings_module.simplefilter("ignore", RuntimeWarning)
        want = np.nanmax(np.stack([b2, b2, b3]), 0)
    valid = ~np.isnan(want)
    _, warnings = calc([rgb, rgb, f"{rgb}:3"], "max(S)", str(tmp_path / "o.tif"), band=2)
    assert np.array_equal(read(tmp_path / "o.tif")[0][valid], want[valid])
    assert not any("several bands" in w for w in warnings)
    # Without band= the first band of a multi-band input is read, and the result says so.
    _, warnings = calc([rgb, f"{rgb}:2"], "count(S)", str(tmp_path / "c.tif"))
    assert any("1 of the 2 inputs have several bands; band 1 of each was read" in w for w in warnings)
    with pytest.raises(GdalMcpError) as e:
        calc([rgb, rgb], "mean(S)", str(tmp_path / "x.tif"), band=4)
    assert "inputs[0]: band 4 does not exist" in e.value.message


def test_a_stack_on_another_grid_is_refused(landsat, tmp_path) -> None:
    red_path, _, red, _ = landsat
    shifted = write(tmp_path / "shifted.tif", red, transform=from_origin(300015.0, 4500000.0, 30.0, 30.0))
    with pytest.raises(GdalMcpError) as e:
        calc([red_path, red_path, shifted], "median(S)", str(tmp_path / "x.tif"))
    assert f"input inputs[2] ({shifted}) is not on the same grid as inputs[0] ({red_path})" in e.value.message
    assert "raster_reproject" in e.value.message


def test_integer_count_of_valid_scenes(scenes, tmp_path) -> None:
    paths, stack = scenes
    summary, warnings = calc(paths, "count(S)", str(tmp_path / "n.tif"), output_type="Byte", nodata=255)
    assert summary.dtype == "uint8" and warnings == []
    assert np.array_equal(read(tmp_path / "n.tif")[0], np.sum(~np.isnan(stack), axis=0))


def stack_refused(expression: str) -> str:
    with pytest.raises(GdalMcpError) as e:
        compile_expression(expression, set(), stack=True)
    assert e.value.code == "invalid-argument"
    return e.value.message


def test_stack_refusals() -> None:
    assert "S is the stack of all inputs; reduce it per pixel first" in stack_refused("S + 1")
    assert "S is the stack of all inputs" in stack_refused("where(S > 0, 1, 0)")
    assert "median() takes the stack S itself, e.g. median(S)" in stack_refused("median(S * 2)")
    assert "mean() takes the stack S itself" in stack_refused("mean(S, S)")
    assert "count() takes the stack S itself" in stack_refused("count(1)")
    assert "unknown name 'A'; with a list of inputs the only name is S" in stack_refused("median(S) - A")
    assert "attribute access ('.median')" in stack_refused("np.median(S)")
    assert "attribute access ('.sum')" in stack_refused("S.sum()")
    assert "subscripts" in stack_refused("S[0]")
    assert "comprehensions" in stack_refused("sum(x for x in S)")
    assert "keyword arguments (axis= in median())" in stack_refused("median(S, axis=0)")
    assert "the function 'nanmedian'" in stack_refused("nanmedian(S)")
    assert "the dunder name '__import__'" in stack_refused("__import__('numpy').median(S)")
    assert "'median' is a function; call it, e.g. median(S)" in stack_refused("median + 1")
    assert "min() takes 2 or more arguments" in stack_refused("min()")
    compiled = compile_expression("median(S) - min(S) + max(count(S), 3)", set(), stack=True)
    assert compiled.names == ["S"] and compiled.reductions == ["median", "min", "count"]


def test_reductions_need_a_list_of_inputs() -> None:
    assert "median() of one argument reduces the stack S of a list of inputs" in refused("median(A)")
    assert "(with named inputs write e.g. (A + B + C) / 3)" in refused("mean(A)")
    assert "min(A, B, C) works element-wise" in refused("min(A)")
    assert "min() takes 2 or more arguments" in refused("min()")
    # With named inputs, "S" is just a name; it is never a stack.
    assert "reduces the stack S of a list of inputs" in refused("median(S)")
    with pytest.raises(GdalMcpError) as e:
        compile_expression("median(S)", {"S"})
    assert "of a list of inputs" in e.value.message


def test_a_stack_expression_must_reduce_the_stack(scenes, tmp_path) -> None:
    paths, _ = scenes
    with pytest.raises(GdalMcpError) as e:
        calc(paths, "1 + 2", str(tmp_path / "x.tif"))
    assert "uses no reduction of the stack S" in e.value.message
    with pytest.raises(GdalMcpError) as e:
        calc(paths, ["median(S)", "nan"], str(tmp_path / "x.tif"))
    assert e.value.message.startswith("expression 2 of 2 ('nan'): the expression uses no reduction")
    for name in ("mean", "median", "count"):
        with pytest.raises(GdalMcpError) as e:
            calc({name: paths[0]}, f"{name} + 1", str(tmp_path / "x.tif"))
        assert "taken by a function" in e.value.message


def test_a_bbox_computes_the_window_it_touches_in_any_crs(tmp_path) -> None:
    """bbox (here in lon/lat on a UTM raster) limits the output to the window of the grid the bbox touches, outward to
    whole pixels: the same pixels as numpy on that window, found with rasterio's densified transform_bounds."""
    import math

    from rasterio.warp import transform_bounds

    src = str(DATA / "raster" / "RGB.byte.tif")
    lonlat = [-77.5, 24.4, -77.2, 24.6]
    summary, _ = calc({"A": src, "B": f"{src}:2"}, "A * 2 + B", str(tmp_path / "o.tif"), bbox=lonlat, bbox_crs="EPSG:4326")
    with rasterio.open(src) as ds:
        # the bbox's corners do not bound its outline in UTM: its edges are densified
        x0, y0, x1, y1 = transform_bounds("EPSG:4326", ds.crs, *lonlat, densify_pts=21)
        inv = ~ds.transform
        (c0, r1), (c1, r0) = inv * (x0, y0), inv * (x1, y1)
        window = ((max(0, math.floor(r0 + 1e-6)), math.ceil(r1 - 1e-6)), (max(0, math.floor(c0 + 1e-6)), math.ceil(c1 - 1e-6)))
        a = ds.read(1, window=window, masked=True).astype(np.float64)
        b = ds.read(2, window=window, masked=True).astype(np.float64)
        expected_transform = ds.window_transform(window)
    with rasterio.open(tmp_path / "o.tif") as out:
        got = out.read(1, masked=True)
        assert out.transform == expected_transform and out.shape == a.shape
    expected = a * 2 + b
    assert np.array_equal(got.mask, np.ma.getmaskarray(expected))
    assert np.array_equal(got.compressed(), expected.compressed().astype(np.float32))
    assert (summary.width, summary.height) == (a.shape[1], a.shape[0])
