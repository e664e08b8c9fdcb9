"""Terrain products checked against analytic surfaces, an independent numpy Horn implementation and gdaldem."""

from __future__ import annotations

import math
import os
import shutil
import subprocess

import numpy as np
import pytest
import rasterio
from rasterio.transform import Affine, from_origin

import gdal_mcp.engine.raster.relief as relief_module
import gdal_mcp.engine.raster.terrain as terrain_module
from gdal_mcp.engine.raster.cog import cog_check
from gdal_mcp.engine.raster.terrain import terrain
from gdal_mcp.errors import GdalMcpError
from tests.helpers import DATA

RES = 10.0
ORIGIN = (500000.0, 4000000.0)
SRTM = f"/vsizip/{DATA}/raster/N10W110.hgt.zip/N10W110.hgt"
PRODUCTS = ["hillshade", "slope", "aspect", "tri", "tpi", "roughness"]
GDALDEM_MODE = {
    "hillshade": "hillshade",
    "slope": "slope",
    "aspect": "aspect",
    "tri": "TRI",
    "tpi": "TPI",
    "roughness": "roughness",
}


# ---------------------------------------------------------------------------------------------- helpers


def write_dem(path, z, *, transform=None, crs="EPSG:32618", nodata=-9999.0, dtype="float32") -> str:
    z = np.asarray(z)
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=z.shape[1],
        height=z.shape[0],
        count=1,
        dtype=dtype,
        crs=crs,
        transform=transform or from_origin(*ORIGIN, RES, RES),
        nodata=nodata,
    ) as ds:
        ds.write(z.astype(dtype), 1)
    return str(path)


def read(path) -> tuple[np.ndarray, float | None]:
    with rasterio.open(path) as ds:
        return ds.read(1), ds.nodata


def east_north(shape, res=RES) -> tuple[np.ndarray, np.ndarray]:
    """Pixel-centre coordinates relative to the upper-left corner: east grows with columns, north falls with rows."""
    rows, cols = np.mgrid[0 : shape[0], 0 : shape[1]]
    return (cols + 0.5) * res, -(rows + 0.5) * res


def horn(z: np.ndarray, dx: float, dy: float) -> tuple[np.ndarray, np.ndarray]:
    """Textbook Horn (1981): dz/d(east) and dz/d(north) of the interior pixels, as (H-2, W-2) arrays."""
    z = z.astype(np.float64)
    nw, n, ne = z[:-2, :-2], z[:-2, 1:-1], z[:-2, 2:]
    w, e = z[1:-1, :-2], z[1:-1, 2:]
    sw, s, se = z[2:, :-2], z[2:, 1:-1], z[2:, 2:]
    dz_east = ((ne + 2 * e + se) - (nw + 2 * w + sw)) / (8 * dx)
    dz_north = ((nw + 2 * n + ne) - (sw + 2 * s + se)) / (8 * dy)
    return dz_east, dz_north


def reference(
    product: str, z: np.ndarray, dx: float = RES, dy: float = RES, azimuth: float = 315.0, altitude: float = 45.0
) -> np.ndarray:
    """The product on the interior pixels, from the definitions (not gdaldem's arrangement of them)."""
    ge, gn = horn(z, dx, dy)
    if product == "slope":
        return np.degrees(np.arctan(np.hypot(ge, gn)))
    if product == "aspect":
        # Compass bearing of the steepest descent (-gradient).
        return np.degrees(np.arctan2(-ge, -gn)) % 360
    if product == "hillshade":
        # Lambert: cosine between the surface normal and the sun's direction, scaled to 1..255 as gdaldem does.
        az, alt = math.radians(azimuth), math.radians(altitude)
        sun = (math.sin(az) * math.cos(alt), math.cos(az) * math.cos(alt), math.sin(alt))
        norm = np.sqrt(1 + ge**2 + gn**2)
        cosine = (-ge * sun[0] - gn * sun[1] + sun[2]) / norm
        return np.where(cosine <= 0, 1, np.floor(1 + 254 * cosine + 0.5))
    z = z.astype(np.float64)
    windows = np.stack([z[r : r + z.shape[0] - 2, c : c + z.shape[1] - 2] for r in range(3) for c in range(3)])
    centre, ring = windows[4], np.delete(windows, 4, axis=0)
    if product == "tri":
        return np.sqrt(((ring - centre) ** 2).sum(axis=0))
    if product == "tpi":
        return centre - ring.mean(axis=0)
    if product == "roughness":
        return windows.max(axis=0) - windows.min(axis=0)
    raise ValueError(product)


def bumpy(shape=(97, 131), seed=1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rows, cols = np.mgrid[0 : shape[0], 0 : shape[1]]
    return 800 + 60 * np.sin(cols / 9.0) * np.cos(rows / 13.0) + 0.4 * cols - 0.7 * rows + rng.normal(0, 2, shape)


def gdaldem(mode: str, src: str, dst: str, *args: str) -> None:
    if shutil.which("gdaldem") is None:
        pytest.skip("gdaldem not on PATH: the GDAL CLI is an optional reference (apt-get install gdal-bin)")
    # PAM off: gdaldem computes statistics for percentage colour entries and would leave a .aux.xml beside the
    # (shipped, read-only) input.
    env = {**os.environ, "GDAL_PAM_ENABLED": "NO"}
    subprocess.run(["gdaldem", mode, src, dst, "-q", *args], check=True, capture_output=True, timeout=120, env=env)


def angle_difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    d = np.abs(a - b) % 360
    return np.minimum(d, 360 - d)


# ---------------------------------------------------------------------------------------------- analytic surfaces

GRADIENT_EAST, GRADIENT_NORTH = 0.3, -0.4  # rises to the east, falls to the north: |gradient| = 0.5


@pytest.fixture(scope="module")
def plane(tmp_path_factory) -> str:
    e, n = east_north((40, 50))
    return write_dem(tmp_path_factory.mktemp("plane") / "plane.tif", 1000 + GRADIENT_EAST * e + GRADIENT_NORTH * n)


def test_plane_slope_is_the_arctangent_of_its_gradient(plane, tmp_path) -> None:
    summary, warnings = terrain(plane, str(tmp_path / "s.tif"), product="slope")
    assert warnings == []
    assert (summary.dtype, summary.nodata, summary.crs) == ("float32", -9999.0, "EPSG:32618")
    s, _ = read(tmp_path / "s.tif")
    assert s[1:-1, 1:-1] == pytest.approx(math.degrees(math.atan(0.5)), abs=1e-4)
    terrain(plane, str(tmp_path / "p.tif"), product="slope", slope_units="percent")
    assert read(tmp_path / "p.tif")[0][1:-1, 1:-1] == pytest.approx(50.0, abs=1e-4)


def test_plane_aspect_points_down_the_slope(plane, tmp_path) -> None:
    terrain(plane, str(tmp_path / "a.tif"), product="aspect")
    a, _ = read(tmp_path / "a.tif")
    # Steepest descent is (-0.3 east, +0.4 north): north-north-west.
    expected = math.degrees(math.atan2(-GRADIENT_EAST, -GRADIENT_NORTH)) % 360
    assert expected == pytest.approx(323.1301, abs=1e-4)
    assert a[1:-1, 1:-1] == pytest.approx(expected, abs=1e-3)


@pytest.mark.parametrize(("azimuth", "altitude"), [(315.0, 45.0), (135.0, 30.0), (0.0, 60.0)])
def test_plane_hillshade_is_lamberts_cosine(plane, tmp_path, azimuth, altitude) -> None:
    summary, _ = terrain(plane, str(tmp_path / "h.tif"), product="hillshade", azimuth=azimuth, altitude=altitude)
    assert (summary.dtype, summary.nodata) == ("uint8", 0.0)
    h, _ = read(tmp_path / "h.tif")
    az, alt = math.radians(azimuth), math.radians(altitude)
    normal = np.array([-GRADIENT_EAST, -GRADIENT_NORTH, 1.0]) / math.sqrt(1 + 0.5**2)
    sun = np.array([math.sin(az) * math.cos(alt), math.cos(az) * math.cos(alt), math.sin(alt)])
    cosine = float(normal @ sun)
    expected = 1 if cosine <= 0 else math.floor(1 + 254 * cosine + 0.5)
    assert (h[1:-1, 1:-1] == expected).all()


def test_z_factor_steepens_slope_and_hillshade(plane, tmp_path) -> None:
    terrain(plane, str(tmp_path / "s.tif"), product="slope", z_factor=2.0)
    assert read(tmp_path / "s.tif")[0][1:-1, 1:-1] == pytest.approx(math.degrees(math.atan(1.0)), abs=1e-4)
    terrain(plane, str(tmp_path / "h1.tif"), product="hillshade")
    terrain(plane, str(tmp_path / "h2.tif"), product="hillshade", z_factor=2.0)
    assert read(tmp_path / "h1.tif")[0][5, 5] != read(tmp_path / "h2.tif")[0][5, 5]


@pytest.fixture(scope="module")
def cone(tmp_path_factory) -> tuple[str, np.ndarray, np.ndarray]:
    """A cone peaking at the centre of pixel (60, 60): elevation falls 0.25 per metre of distance."""
    e, n = east_north((121, 121))
    de, dn = e - e[60, 60], n - n[60, 60]
    z = 2000 - 0.25 * np.hypot(de, dn)
    return write_dem(tmp_path_factory.mktemp("cone") / "cone.tif", z, dtype="float64"), de, dn


def test_cone_slope_is_constant_and_aspect_points_away_from_the_apex(cone, tmp_path) -> None:
    path, de, dn = cone
    terrain(path, str(tmp_path / "s.tif"), product="slope")
    terrain(path, str(tmp_path / "a.tif"), product="aspect")
    s, _ = read(tmp_path / "s.tif")
    a, _ = read(tmp_path / "a.tif")
    r = np.hypot(de, dn) / RES
    inner = np.zeros(s.shape, dtype=bool)
    inner[1:-1, 1:-1] = True
    bearing = np.degrees(np.arctan2(de, dn)) % 360  # from the apex to the pixel
    expected = math.degrees(math.atan(0.25))
    # Horn's 3x3 differences bend over the curved cone: the error fades with the distance to the apex.
    for radius, tolerance in ((10, 0.05), (20, 0.01)):
        far = inner & (r >= radius)
        assert np.abs(s[far] - expected).max() < tolerance
        assert angle_difference(a[far], bearing[far]).max() < tolerance
    far = inner & (r >= 10)
    # Along the axes and diagonals the symmetry makes Horn exact.
    axes = far & ((de == 0) | (dn == 0) | (np.abs(de) == np.abs(dn)))
    assert axes.sum() > 100
    assert angle_difference(a[axes], bearing[axes]).max() < 1e-3


# ---------------------------------------------------------------------------------------------- vs numpy


@pytest.fixture(scope="module")
def bumpy_dem(tmp_path_factory) -> tuple[str, np.ndarray]:
    z = bumpy().astype("float32")
    return write_dem(tmp_path_factory.mktemp("bumpy") / "bumpy.tif", z), z


@pytest.mark.parametrize("product", PRODUCTS)
def test_matches_an_independent_numpy_implementation(bumpy_dem, tmp_path, product) -> None:
    path, z = bumpy_dem
    terrain(path, str(tmp_path / "o.tif"), product=product)
    got, nodata = read(tmp_path / "o.tif")
    expected = reference(product, z)
    inner = got[1:-1, 1:-1].astype(np.float64)
    if product == "hillshade":
        assert np.abs(inner - expected).max() <= 1  # rounding a float exactly at .5 may go either way
        assert (inner == expected).mean() > 0.999
    elif product == "aspect":
        assert angle_difference(inner, expected).max() < 1e-3
    else:
        assert inner == pytest.approx(expected, abs=1e-3)
    border = np.ones(got.shape, dtype=bool)
    border[1:-1, 1:-1] = False
    assert (got[border] == nodata).all() and (inner != nodata).all()


def test_non_square_pixels_and_a_south_up_grid(tmp_path) -> None:
    z = bumpy((40, 50)).astype("float32")
    path = write_dem(tmp_path / "ns.tif", z, transform=Affine(10.0, 0, 0, 0, -25.0, 0))
    terrain(path, str(tmp_path / "s.tif"), product="slope")
    assert read(tmp_path / "s.tif")[0][1:-1, 1:-1] == pytest.approx(reference("slope", z, 10.0, 25.0), abs=1e-3)
    # South-up (positive pixel height): row 0 is the south edge, so north is the other way.
    up = write_dem(tmp_path / "up.tif", z[::-1], transform=Affine(10.0, 0, 0, 0, 25.0, 0))
    terrain(up, str(tmp_path / "su.tif"), product="slope")
    assert read(tmp_path / "su.tif")[0][::-1][1:-1, 1:-1] == pytest.approx(reference("slope", z, 10.0, 25.0), abs=1e-3)


# ---------------------------------------------------------------------------------------------- edges and nodata


def test_edges_are_nodata_unless_compute_edges(plane, tmp_path) -> None:
    terrain(plane, str(tmp_path / "s.tif"), product="slope")
    s, nodata = read(tmp_path / "s.tif")
    assert (s[0] == nodata).all() and (s[-1] == nodata).all() and (s[:, 0] == nodata).all() and (s[:, -1] == nodata).all()
    terrain(plane, str(tmp_path / "e.tif"), product="slope", compute_edges=True)
    e, _ = read(tmp_path / "e.tif")
    assert (e != nodata).all()
    # Linear extrapolation is exact on a plane; gdaldem repeats the edge column at the four corners, which
    # halves the east-west gradient there.
    corners = np.zeros(e.shape, dtype=bool)
    corners[[0, 0, -1, -1], [0, -1, 0, -1]] = True
    assert e[~corners] == pytest.approx(math.degrees(math.atan(0.5)), abs=1e-4)
    assert e[corners] == pytest.approx(math.degrees(math.atan(math.hypot(0.15, 0.4))), abs=1e-4)


def test_hillshade_edges_are_zero(plane, tmp_path) -> None:
    terrain(plane, str(tmp_path / "h.tif"), product="hillshade")
    h, nodata = read(tmp_path / "h.tif")
    assert nodata == 0 and (h[0] == 0).all() and (h[:, -1] == 0).all() and (h[1:-1, 1:-1] > 0).all()


def test_a_nodata_pixel_blanks_its_neighbourhood(tmp_path) -> None:
    z = bumpy((30, 30))
    z[10, 12] = -9999
    path = write_dem(tmp_path / "hole.tif", z)
    terrain(path, str(tmp_path / "s.tif"), product="slope")
    s, nodata = read(tmp_path / "s.tif")
    blank = s == nodata
    assert blank[9:12, 11:14].all()
    assert blank[1:-1, 1:-1].sum() == 9
    # compute_edges: only the hole itself stays nodata; its neighbours use the centre in its place.
    terrain(path, str(tmp_path / "e.tif"), product="slope", compute_edges=True)
    e, _ = read(tmp_path / "e.tif")
    assert (e == nodata).sum() == 1 and e[10, 12] == nodata


@pytest.mark.parametrize("compute_edges", [False, True])
def test_a_single_row_is_all_edge(tmp_path, compute_edges) -> None:
    path = write_dem(tmp_path / "row.tif", bumpy((1, 12)))
    terrain(path, str(tmp_path / "s.tif"), product="slope", compute_edges=compute_edges)
    s, nodata = read(tmp_path / "s.tif")
    assert s.shape == (1, 12) and (s == nodata).all()


def test_nan_elevations_count_as_nodata(tmp_path) -> None:
    z = bumpy((20, 20))
    z[5, 5] = np.nan
    path = write_dem(tmp_path / "nan.tif", z, nodata=None)
    terrain(path, str(tmp_path / "t.tif"), product="tpi")
    t, nodata = read(tmp_path / "t.tif")
    assert nodata == -9999 and (t[4:7, 4:7] == nodata).all() and not np.isnan(t).any()


def test_flat_areas_have_no_aspect(tmp_path) -> None:
    path = write_dem(tmp_path / "flat.tif", np.full((10, 10), 5.0))
    terrain(path, str(tmp_path / "a.tif"), product="aspect", compute_edges=True)
    a, nodata = read(tmp_path / "a.tif")
    assert (a == nodata).all()
    terrain(path, str(tmp_path / "s.tif"), product="slope")
    assert (read(tmp_path / "s.tif")[0][1:-1, 1:-1] == 0).all()


@pytest.mark.parametrize("compute_edges", [False, True])
@pytest.mark.parametrize("product", PRODUCTS)
def test_small_windows_with_a_halo_give_the_same_result(tmp_path, monkeypatch, product, compute_edges) -> None:
    z = bumpy((70, 45))
    z[20:23, 7] = -9999
    z[0, 30] = -9999
    path = write_dem(tmp_path / "d.tif", z)
    terrain(path, str(tmp_path / "whole.tif"), product=product, compute_edges=compute_edges)
    monkeypatch.setattr(terrain_module, "WINDOW_PIXELS", 1)  # one block-row strip per window
    monkeypatch.setattr(terrain_module, "OUTPUT_BLOCK", (1, 16))
    terrain(path, str(tmp_path / "strips.tif"), product=product, compute_edges=compute_edges)
    a, _ = read(tmp_path / "whole.tif")
    b, _ = read(tmp_path / "strips.tif")
    assert np.array_equal(a, b)


# ---------------------------------------------------------------------------------------------- scale


def test_geographic_dem_with_a_scale_gets_gdaldems_single_factor(tmp_path) -> None:
    """An explicit scale on a lon/lat DEM is gdaldem's -s, on both axes (per-row ground distances by default:
    test_terrain_lonlat.py)."""
    rows, cols = np.mgrid[0:30, 0:30]
    deg = 0.001
    # Rises 0.2 m per metre northwards when a degree is taken as 111120 m.
    z = 100 + 0.2 * (-(rows * deg) * 111120)
    path = write_dem(tmp_path / "ll.tif", z, transform=from_origin(10.0, 45.0, deg, deg), crs="EPSG:4326")
    _, warnings = terrain(path, str(tmp_path / "s.tif"), product="slope", scale=111120)
    assert warnings == []
    assert read(tmp_path / "s.tif")[0][1:-1, 1:-1] == pytest.approx(math.degrees(math.atan(0.2)), abs=1e-3)
    _, warnings = terrain(path, str(tmp_path / "s2.tif"), product="slope", scale=111120 / 2)
    assert warnings == []
    assert read(tmp_path / "s2.tif")[0][1:-1, 1:-1] == pytest.approx(math.degrees(math.atan(0.4)), abs=1e-3)
    # Without it: the meridian's own metres (111.1 km per degree at 45 deg N, not 111.12), and a note saying so.
    _, warnings = terrain(path, str(tmp_path / "s3.tif"), product="slope")
    assert len(warnings) == 1 and "per row" in warnings[0] and "scale=111120" in warnings[0]
    metres_per_degree = 111132.954 - 559.822 * math.cos(math.radians(2 * 44.985)) + 1.175 * math.cos(math.radians(4 * 44.985))
    expected = math.degrees(math.atan(0.2 * 111120 / metres_per_degree))
    assert read(tmp_path / "s3.tif")[0][1:-1, 1:-1] == pytest.approx(expected, abs=1e-4)
    # Products that take no distances do not mention them.
    assert terrain(path, str(tmp_path / "t.tif"), product="tri")[1] == []


def test_projected_dem_in_feet_keeps_scale_one_and_says_so(tmp_path) -> None:
    z = bumpy((20, 20))
    path = write_dem(tmp_path / "ft.tif", z, crs="EPSG:2263")  # NY Long Island, US survey feet
    _, warnings = terrain(path, str(tmp_path / "s.tif"), product="slope")
    assert len(warnings) == 1 and "scale=0.3048" in warnings[0]
    assert read(tmp_path / "s.tif")[0][1:-1, 1:-1] == pytest.approx(reference("slope", z), abs=1e-3)


def test_parameters_a_product_ignores_are_reported(plane, tmp_path) -> None:
    _, warnings = terrain(plane, str(tmp_path / "a.tif"), product="tri", z_factor=3, azimuth=90, slope_units="percent")
    text = " ".join(warnings)
    assert "z_factor" in text and "azimuth" in text and "slope_units" in text


# ---------------------------------------------------------------------------------------------- output and errors


def test_other_bands_and_copy_only_formats(tmp_path) -> None:
    z = bumpy((64, 64))
    two = tmp_path / "two.tif"
    with rasterio.open(
        two,
        "w",
        driver="GTiff",
        width=64,
        height=64,
        count=2,
        dtype="float32",
        crs="EPSG:32618",
        transform=from_origin(*ORIGIN, RES, RES),
    ) as ds:
        ds.write(np.zeros((64, 64), dtype="float32"), 1)
        ds.write(z.astype("float32"), 2)
    summary, _ = terrain(str(two), str(tmp_path / "h.png"), product="hillshade", band=2)
    assert summary.driver == "PNG" and summary.dtype == "uint8"
    with rasterio.open(tmp_path / "h.png") as ds:
        assert ds.read(1)[1:-1, 1:-1] == pytest.approx(reference("hillshade", z.astype("float32")), abs=1)
    summary, _ = terrain(
        str(two), str(tmp_path / "s.tif"), product="slope", band=2, format="COG", creation_options={"COMPRESS": "DEFLATE"}
    )
    assert summary.driver == "GTiff" and summary.compression == "deflate"
    with rasterio.open(tmp_path / "s.tif") as ds:
        assert cog_check(ds) == ([], [])
        assert ds.read(1)[1:-1, 1:-1] == pytest.approx(reference("slope", z.astype("float32")), abs=1e-3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.png", "h.png.aux.xml", "s.tif", "two.tif"]


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"product": "curvature"}, "unknown product"),
        ({"product": "slope", "band": 2}, "band 2 does not exist"),
        ({"product": "hillshade", "altitude": 95}, "altitude"),
        ({"product": "hillshade", "z_factor": 0}, "z_factor"),
        ({"product": "slope", "scale": -1}, "scale"),
        ({"product": "slope", "slope_units": "radians"}, "slope_units"),
    ],
)
def test_bad_arguments(plane, tmp_path, kwargs, needle) -> None:
    with pytest.raises(GdalMcpError) as e:
        terrain(plane, str(tmp_path / "x.tif"), **kwargs)
    assert e.value.code == "invalid-argument" and needle in e.value.message


def test_unreadable_input_is_a_gdal_error(tmp_path) -> None:
    with pytest.raises(GdalMcpError) as e:
        terrain(str(DATA / "bad" / "corrupt.tif"), str(tmp_path / "x.tif"), product="slope")
    assert e.value.code in ("gdal-error", "unsupported")


def test_rotated_grids_are_refused(tmp_path) -> None:
    path = write_dem(tmp_path / "rot.tif", bumpy((10, 10)), transform=Affine(10, 2, 0, 2, -10, 0))
    with pytest.raises(GdalMcpError) as e:
        terrain(path, str(tmp_path / "x.tif"), product="slope")
    assert e.value.code == "unsupported" and "raster_reproject" in e.value.message


# ---------------------------------------------------------------------------------------------- vs gdaldem


@pytest.mark.parametrize("compute_edges", [False, True])
@pytest.mark.parametrize("product", PRODUCTS)
def test_matches_gdaldem_on_an_integer_dem(tmp_path, product, compute_edges) -> None:
    """Int16 elevations: gdaldem's arithmetic is exact there, so the results agree to float32 precision."""
    z = np.round(bumpy((83, 121), seed=3)).astype("int16")
    z[30:33, 40:44] = -32768
    z[0, 7] = -32768
    z[50, -1] = -32768
    path = write_dem(tmp_path / "dem.tif", z, dtype="int16", nodata=-32768)
    edges = ["-compute_edges"] if compute_edges else []
    gdaldem(GDALDEM_MODE[product], path, str(tmp_path / "cli.tif"), *edges)
    terrain(path, str(tmp_path / "ours.tif"), product=product, compute_edges=compute_edges)
    ours, nodata = read(tmp_path / "ours.tif")
    cli, cli_nodata = read(tmp_path / "cli.tif")
    assert nodata == cli_nodata
    assert np.array_equal(ours == nodata, cli == cli_nodata)
    valid = ours != nodata
    assert np.abs(ours[valid].astype(float) - cli[valid].astype(float)).max() <= 1e-3


@pytest.mark.parametrize("product", PRODUCTS)
def test_matches_gdaldem_on_a_float_dem(bumpy_dem, tmp_path, product) -> None:
    """Float32 elevations: gdaldem adds them up in Float32 (we use float64), which moves a near-flat pixel's
    aspect by up to a few hundredths of a degree; everything else agrees within 1e-3."""
    path, _ = bumpy_dem
    gdaldem(GDALDEM_MODE[product], path, str(tmp_path / "cli.tif"), "-compute_edges")
    terrain(path, str(tmp_path / "ours.tif"), product=product, compute_edges=True)
    ours, nodata = read(tmp_path / "ours.tif")
    cli, _ = read(tmp_path / "cli.tif")
    assert np.array_equal(ours == nodata, cli == nodata)
    valid = ours != nodata
    if product == "aspect":
        diff = angle_difference(ours[valid].astype(float), cli[valid].astype(float))
        assert diff.max() < 0.05 and np.median(diff) < 1e-3
    else:
        assert np.abs(ours[valid].astype(float) - cli[valid].astype(float)).max() <= 1e-3


@pytest.mark.parametrize("product", ["hillshade", "slope", "aspect", "roughness"])
def test_matches_gdaldem_on_srtm_given_gdaldems_geographic_scale(tmp_path, product) -> None:
    """Real data: SRTM 3" tile (Int16, EPSG:4326); gdaldem and we given -s 111120 (gdaldem's single factor, instead
    of our per-row ground distances); aspect with a scale is gdaldem's too (square pixels), roughness takes none."""
    extra = ["-s", "111120"] if product in ("hillshade", "slope") else []
    gdaldem(GDALDEM_MODE[product], SRTM, str(tmp_path / "cli.tif"), *extra)
    scale = {"scale": 111120} if product != "roughness" else {}
    _, warnings = terrain(SRTM, str(tmp_path / "ours.tif"), product=product, **scale)
    assert bool(warnings) == (product == "aspect")
    ours, nodata = read(tmp_path / "ours.tif")
    cli, _ = read(tmp_path / "cli.tif")
    assert np.array_equal(ours == nodata, cli == nodata)
    valid = ours != nodata
    assert valid.sum() > 700
    assert np.abs(ours[valid].astype(float) - cli[valid].astype(float)).max() <= 1e-3


# ---------------------------------------------------------------------------------------------- gdaldem options

JACKSBORO = str(DATA / "raster" / "jacksboro_dem.tif")  # Int16 SRTM DEM, EPSG:4326, no nodata
TOPOBATHY = str(DATA / "raster" / "topobathy.tif")  # Float32 topography and bathymetry, EPSG:4326, no nodata
GEOGRAPHIC = ["-s", "111120"]  # gdaldem's single factor for a lon/lat DEM: terrain() takes it as scale=111120
HILLSHADE_FLAG = {"standard": [], "combined": ["-combined"], "multidirectional": ["-multidirectional"], "igor": ["-igor"]}


def read_all(path) -> np.ndarray:
    with rasterio.open(path) as ds:
        return ds.read()


@pytest.mark.parametrize("algorithm", ["Horn", "ZevenbergenThorne"])
@pytest.mark.parametrize("mode", ["standard", "combined", "multidirectional", "igor"])
def test_hillshade_modes_are_pixel_identical_to_gdaldem(tmp_path, mode, algorithm) -> None:
    """Byte output on a real Int16 DEM: every pixel as gdaldem writes it, edges included."""
    alg = ["-alg", algorithm] if algorithm != "Horn" else []
    # gdaldem refuses -az with -multidirectional (fixed lights) and -alt with -igor (no elevation of the light).
    light = {"azimuth": 300.0, "altitude": 35.0, "z_factor": 2.0}
    if mode == "multidirectional":
        del light["azimuth"]
    if mode == "igor":
        del light["altitude"]
    flag = {"azimuth": "-az", "altitude": "-alt", "z_factor": "-z"}
    cli_light = [arg for name, value in light.items() for arg in (flag[name], f"{value:g}")]
    gdaldem(
        "hillshade", JACKSBORO, str(tmp_path / "cli.tif"), *GEOGRAPHIC, *alg, *HILLSHADE_FLAG[mode], *cli_light, "-compute_edges"
    )
    terrain(
        JACKSBORO,
        str(tmp_path / "ours.tif"),
        product="hillshade",
        hillshade_mode=mode,
        algorithm=algorithm,
        compute_edges=True,
        scale=111120,
        **light,
    )
    ours, cli = read_all(tmp_path / "ours.tif"), read_all(tmp_path / "cli.tif")
    assert ours.dtype == cli.dtype == np.uint8
    assert np.array_equal(ours, cli), f"{(ours != cli).sum()} pixels differ"
    assert len(np.unique(ours)) > 50  # real relief, not a flat image


@pytest.mark.parametrize("algorithm", ["Horn", "ZevenbergenThorne"])
@pytest.mark.parametrize(
    ("product", "kwargs", "flags"),
    [
        ("slope", {}, []),
        ("slope", {"slope_units": "percent"}, ["-p"]),
        ("aspect", {}, []),
        ("aspect", {"trigonometric": True}, ["-trigonometric"]),
    ],
)
def test_slope_and_aspect_options_match_gdaldem(tmp_path, product, kwargs, flags, algorithm) -> None:
    alg = ["-alg", algorithm] if algorithm != "Horn" else []
    scale = GEOGRAPHIC if product == "slope" else []
    gdaldem(product, JACKSBORO, str(tmp_path / "cli.tif"), *scale, *alg, *flags)
    # scale=111120: gdaldem's single factor (slope) and its square-pixel aspect, instead of per-row ground distances
    terrain(JACKSBORO, str(tmp_path / "ours.tif"), product=product, algorithm=algorithm, scale=111120, **kwargs)
    ours, nodata = read(tmp_path / "ours.tif")
    cli, cli_nodata = read(tmp_path / "cli.tif")
    assert nodata == cli_nodata == -9999
    assert np.array_equal(ours == nodata, cli == nodata)
    valid = ours != nodata
    assert valid.sum() > 100000
    diff = ours[valid].astype(float) - cli[valid].astype(float)
    if product == "aspect":
        diff = angle_difference(ours[valid].astype(float), cli[valid].astype(float))
    assert np.abs(diff).max() <= 1e-4


def test_zevenbergen_thorne_uses_only_the_four_edge_neighbours(plane, tmp_path) -> None:
    """On a plane both gradients are exact; a spike on a diagonal neighbour changes Horn but not ZT."""
    with rasterio.open(plane) as ds:
        z, profile = ds.read(1), ds.profile
    z[10, 10] += 50
    profile.update(nodata=None)
    spiked = tmp_path / "spiked.tif"
    with rasterio.open(spiked, "w", **profile) as ds:
        ds.write(z, 1)
    terrain(str(spiked), str(tmp_path / "zt.tif"), product="slope", algorithm="ZevenbergenThorne")
    terrain(str(spiked), str(tmp_path / "horn.tif"), product="slope")
    zt, horn_slope = read(tmp_path / "zt.tif")[0], read(tmp_path / "horn.tif")[0]
    expected = math.degrees(math.atan(0.5))
    assert zt[11, 11] == pytest.approx(expected, abs=1e-4)  # (10, 10) is its diagonal neighbour
    assert horn_slope[11, 11] != pytest.approx(expected, abs=1e-2)
    assert zt[10, 11] != pytest.approx(expected, abs=1e-2)  # an edge neighbour counts


def test_zero_for_flat_gives_flat_pixels_zero_and_keeps_nodata(tmp_path) -> None:
    """gdaldem -zero_for_flat writes 0 on flat pixels -- and also on its edges, with no nodata declared; we keep
    the edges nodata and agree everywhere else."""
    gdaldem("aspect", JACKSBORO, str(tmp_path / "cli.tif"), "-zero_for_flat")
    # scale=111120: gdaldem's aspect of a lon/lat DEM (square pixels), instead of per-row ground distances
    terrain(JACKSBORO, str(tmp_path / "ours.tif"), product="aspect", zero_for_flat=True, scale=111120)
    terrain(JACKSBORO, str(tmp_path / "plain.tif"), product="aspect", scale=111120)
    ours, nodata = read(tmp_path / "ours.tif")
    cli, cli_nodata = read(tmp_path / "cli.tif")
    plain, _ = read(tmp_path / "plain.tif")
    assert cli_nodata is None and nodata == -9999
    assert (ours[0] == nodata).all() and (cli[0] == 0).all()
    flat = (plain == nodata) & (ours != nodata)
    assert flat.sum() > 100 and (ours[flat] == 0).all()  # the SRTM DEM has flat valley floors
    valid = ours != nodata
    assert angle_difference(ours[valid].astype(float), cli[valid].astype(float)).max() <= 1e-4


# ---------------------------------------------------------------------------------------------- color relief


def color_file(path, entries) -> str:
    """gdaldem's text colour file for the same ramp."""
    path.write_text("".join(" ".join(str(v) for v in entry) + "\n" for entry in entries))
    return str(path)


def interpolated(values: np.ndarray, entries: list) -> np.ndarray:
    """Independent reference: np.interp per channel (the unrounded colour), for strictly increasing values."""
    xs = np.array([e[0] for e in entries], dtype=float)
    return np.stack([np.interp(values, xs, [e[c] for e in entries]) for c in (1, 2, 3)])


TOPOBATHY_RAMP = [
    [-1500, 8, 29, 88],
    [-200, 37, 52, 148],
    [0, 29, 145, 192],
    [0, 26, 120, 60],
    [300, 86, 153, 62],
    [1200, 168, 120, 66],
    [2200, 255, 255, 255],
]


def test_color_relief_nearest_entry_is_pixel_identical_to_gdaldem_with_negative_values(tmp_path) -> None:
    """Float32 topography and bathymetry, with a step (two entries at 0: sea, then land)."""
    cfile = color_file(tmp_path / "c.txt", TOPOBATHY_RAMP)
    gdaldem("color-relief", TOPOBATHY, cfile, str(tmp_path / "cli.tif"), "-nearest_color_entry")
    summary, warnings = terrain(
        TOPOBATHY, str(tmp_path / "ours.tif"), product="color-relief", colors=TOPOBATHY_RAMP, color_mode="nearest"
    )
    assert warnings == [] and summary.count == 3 and summary.dtype == "uint8"
    ours, cli = read_all(tmp_path / "ours.tif"), read_all(tmp_path / "cli.tif")
    assert ours.shape == cli.shape == (3, 91, 120)
    assert np.array_equal(ours, cli)
    with rasterio.open(tmp_path / "ours.tif") as ds:
        assert ds.nodata is None and [c.name for c in ds.colorinterp] == ["red", "green", "blue"]
        dem = rasterio.open(TOPOBATHY)
        assert ds.crs == dem.crs and ds.transform == dem.transform
        assert (ds.read(1)[dem.read(1) < -1600] == 8).all()  # below the first entry: the first colour
        dem.close()


def test_color_relief_interpolation_matches_numpy_and_gdaldem(tmp_path) -> None:
    """Interpolated colours round as GDAL >= 3.9.2 does (+0.5); Debian's gdaldem 3.6 rounds with +0.45, so it
    may be exactly one lower where the unrounded colour's fraction is in [0.5, 0.55)."""
    ramp = [e for i, e in enumerate(TOPOBATHY_RAMP) if i != 3]  # no step: np.interp is the reference
    terrain(TOPOBATHY, str(tmp_path / "ours.tif"), product="color-relief", colors=ramp, alpha=True)
    ours = read_all(tmp_path / "ours.tif").astype(int)
    with rasterio.open(TOPOBATHY) as ds:
        dem = ds.read(1).astype(np.float64)
    exact = interpolated(dem, ramp)
    assert np.array_equal(ours[:3], np.floor(exact + 0.5)) and (ours[3] == 255).all()
    gdaldem("color-relief", TOPOBATHY, color_file(tmp_path / "c.txt", ramp), str(tmp_path / "cli.tif"), "-alpha")
    cli = read_all(tmp_path / "cli.tif").astype(int)
    diff = ours - cli
    assert set(np.unique(diff)) <= {0, 1}
    frac = (exact - np.floor(exact))[diff[:3] == 1]
    assert ((frac >= 0.5 - 1e-9) & (frac < 0.55 + 1e-9)).all()
    assert (diff == 0).mean() > 0.9


@pytest.mark.parametrize("ramp", ["terrain", "elevation", "bathymetry", "gray"])
def test_named_ramps_are_percentages_of_the_exact_range(tmp_path, ramp) -> None:
    """Percent entries use the band's exact min..max (236..1076 on the Jacksboro DEM), as gdaldem computes them."""
    entries = [e for e in relief_module.NAMED_RAMPS[ramp] if e[0] != "nv"]  # the DEM has no nodata
    gdaldem("color-relief", JACKSBORO, color_file(tmp_path / "c.txt", entries), str(tmp_path / "cli.tif"), "-nearest_color_entry")
    _, warnings = terrain(JACKSBORO, str(tmp_path / "ours.tif"), product="color-relief", colors=ramp, color_mode="nearest")
    assert warnings == []
    ours, cli = read_all(tmp_path / "ours.tif"), read_all(tmp_path / "cli.tif")
    assert np.array_equal(ours, cli)
    # Independently: 0% is the minimum, 100% the maximum.
    with rasterio.open(JACKSBORO) as ds:
        dem = ds.read(1)
    low, high = dem == dem.min(), dem == dem.max()
    assert (ours[:, low].T == entries[0][1:4]).all() and (ours[:, high].T == entries[-1][1:4]).all()
    terrain(JACKSBORO, str(tmp_path / "i.tif"), product="color-relief", colors=ramp)
    values = [float(dem.min()) + float(e[0][:-1]) / 100 * float(dem.max() - dem.min()) for e in entries]
    exact = interpolated(dem.astype(float), [[v, *e[1:4]] for v, e in zip(values, entries, strict=True)])
    assert np.abs(read_all(tmp_path / "i.tif").astype(int) - np.floor(exact + 0.5)).max() <= 1


def test_color_relief_nodata_entry_and_alpha(tmp_path) -> None:
    """'nv' colours the nodata pixels (transparent with alpha); percentages ignore them; neighbours of the
    nodata value do not take its colour."""
    with rasterio.open(JACKSBORO) as ds:
        dem, profile = ds.read(1), ds.profile
    dem[100:120, 50:90] = -32768
    profile.update(nodata=-32768)
    path = tmp_path / "holes.tif"
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(dem, 1)
    ramp = [["nv", 0, 0, 0, 0], ["0%", 0, 97, 71], ["50%", 212, 196, 120], ["100%", 255, 255, 255]]
    gdaldem(
        "color-relief",
        str(path),
        color_file(tmp_path / "c.txt", ramp),
        str(tmp_path / "cli.tif"),
        "-alpha",
        "-nearest_color_entry",
    )
    terrain(str(path), str(tmp_path / "ours.tif"), product="color-relief", colors=ramp, color_mode="nearest", alpha=True)
    ours, cli = read_all(tmp_path / "ours.tif"), read_all(tmp_path / "cli.tif")
    assert ours.shape[0] == 4 and np.array_equal(ours, cli)
    hole = dem == -32768
    assert (ours[:, hole] == 0).all() and (ours[3, ~hole] == 255).all()
    with rasterio.open(tmp_path / "ours.tif") as ds:
        assert [c.name for c in ds.colorinterp] == ["red", "green", "blue", "alpha"]


def test_exact_color_entry(tmp_path) -> None:
    """Only values equal to an entry get its colour; the others 0,0,0,0. (Debian's gdaldem 3.6 is no reference
    here: before GDAL 3.9.2 it missed every exact match but the first entry's, OSGeo/gdal#10596.)"""
    with rasterio.open(JACKSBORO) as ds:
        dem = ds.read(1)
    levels = sorted({int(v) for v in np.unique(dem)[::7]})
    ramp = [[v, (3 * v) % 256, v % 256, (v // 7) % 256, 200] for v in levels]
    terrain(JACKSBORO, str(tmp_path / "ours.tif"), product="color-relief", colors=ramp, color_mode="exact", alpha=True)
    ours = read_all(tmp_path / "ours.tif")
    lookup = {e[0]: e[1:] for e in ramp}
    expected = np.zeros_like(ours)
    for v, rgba in lookup.items():
        expected[:, dem == v] = np.array(rgba)[:, None]
    assert np.array_equal(ours, expected)
    assert 0 < (ours[3] == 200).mean() < 0.5


def test_color_relief_small_windows_give_the_same_result(tmp_path, monkeypatch) -> None:
    terrain(TOPOBATHY, str(tmp_path / "whole.tif"), product="color-relief", colors="terrain", alpha=True)
    monkeypatch.setattr(relief_module, "WINDOW_PIXELS", 1)
    monkeypatch.setattr(relief_module, "OUTPUT_BLOCK", (1, 16))
    terrain(TOPOBATHY, str(tmp_path / "strips.tif"), product="color-relief", colors="terrain", alpha=True)
    assert np.array_equal(read_all(tmp_path / "whole.tif"), read_all(tmp_path / "strips.tif"))


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"product": "color-relief"}, "needs colors"),
        ({"product": "color-relief", "colors": "rainbow"}, "unknown colour ramp"),
        ({"product": "color-relief", "colors": [[0, 1, 2]]}, "colors[0]"),
        ({"product": "color-relief", "colors": [[0, 1, 2, 300]]}, "0..255"),
        ({"product": "color-relief", "colors": [["120%", 1, 2, 3]]}, "0%..100%"),
        ({"product": "color-relief", "colors": [["high", 1, 2, 3]]}, "must be a number"),
        ({"product": "color-relief", "colors": [["nv", 1, 2, 3]]}, "besides 'nv'"),
        ({"product": "color-relief", "colors": "gray", "color_mode": "closest"}, "unknown color_mode"),
        ({"product": "slope", "algorithm": "Sobel"}, "unknown algorithm"),
        ({"product": "hillshade", "hillshade_mode": "soft"}, "unknown hillshade_mode"),
    ],
)
def test_bad_color_relief_and_option_arguments(plane, tmp_path, kwargs, needle) -> None:
    with pytest.raises(GdalMcpError) as e:
        terrain(plane, str(tmp_path / "x.tif"), **kwargs)
    assert e.value.code == "invalid-argument" and needle in e.value.message


def test_options_a_product_ignores_are_reported(plane, tmp_path) -> None:
    _, warnings = terrain(
        plane, str(tmp_path / "s.tif"), product="slope", trigonometric=True, colors="gray", hillshade_mode="igor"
    )
    text = " ".join(warnings)
    assert "trigonometric" in text and "colors" in text and "hillshade_mode" in text
    _, warnings = terrain(plane, str(tmp_path / "h.tif"), product="hillshade", hillshade_mode="multidirectional", azimuth=90)
    assert any("multidirectional" in w for w in warnings)
    _, warnings = terrain(
        plane, str(tmp_path / "c.tif"), product="color-relief", colors=[[0, 0, 0, 0], ["nv", 1, 1, 1]], compute_edges=True
    )
    assert any("compute_edges" in w for w in warnings)
