"""Terrain on lon/lat DEMs: ground distances per row from the CRS's ellipsoid, checked against surfaces defined in
metres on a local transverse Mercator (pyproj), gdaldem on a projected grid, pyproj.Geod, and a real DEM warped to
a projected grid (gdalwarp + gdaldem)."""

from __future__ import annotations

import math
import shutil
import subprocess

import numpy as np
import pytest
import rasterio
from pyproj import Geod, Proj, Transformer
from rasterio.transform import from_origin

import gdal_mcp.engine.raster.terrain as terrain_module
from gdal_mcp.engine.raster.terrain import LonLatGrid, terrain
from tests.cli_reference import gdal_cli
from tests.helpers import DATA

# A lon/lat DEM at 50 deg N: 240 x 240 pixels of 0.0005 deg (about 36 m east-west, 56 m north-south).
LON0, LAT0, STEP, SIZE = 8.0, 50.0, 0.0005, 240
WEST, NORTH = LON0 - SIZE / 2 * STEP, LAT0 + SIZE / 2 * STEP
TM = "+proj=tmerc +lat_0=50 +lon_0=8 +k=1 +x_0=0 +y_0=0 +ellps=WGS84 +units=m"  # local: scale 1 +- 3e-7 here


def surface(e: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Elevation (m) at easting/northing e, n (m) of the local transverse Mercator: a tilted plane with hills."""
    return 500 + 0.06 * e - 0.04 * n + 150 * np.sin(2 * np.pi * e / 8000) * np.cos(2 * np.pi * n / 9000)


def surface_gradient(e: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Analytic dz/d(easting), dz/d(northing) of `surface`."""
    ge = 0.06 + 150 * 2 * np.pi / 8000 * np.cos(2 * np.pi * e / 8000) * np.cos(2 * np.pi * n / 9000)
    gn = -0.04 - 150 * 2 * np.pi / 9000 * np.sin(2 * np.pi * e / 8000) * np.sin(2 * np.pi * n / 9000)
    return ge, gn


def lonlat_centres(shape=(SIZE, SIZE)) -> tuple[np.ndarray, np.ndarray]:
    rows, cols = np.mgrid[0 : shape[0], 0 : shape[1]]
    return WEST + (cols + 0.5) * STEP, NORTH - (rows + 0.5) * STEP


def write(path, z, transform, crs="EPSG:4326") -> str:
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=z.shape[1],
        height=z.shape[0],
        count=1,
        dtype="float32",
        crs=crs,
        transform=transform,
        nodata=-9999.0,
    ) as ds:
        ds.write(z.astype("float32"), 1)
    return str(path)


def read(path) -> np.ndarray:
    with rasterio.open(path) as ds:
        out = ds.read(1).astype(np.float64)
        out[out == ds.nodata] = np.nan
        return out


def gdaldem(*args: str) -> None:
    if shutil.which("gdaldem") is None:
        pytest.skip("gdaldem not on PATH: the GDAL CLI is an optional reference (apt-get install gdal-bin)")
    subprocess.run(["gdaldem", *args, "-q"], check=True, capture_output=True, timeout=120)


def angle_difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    d = np.abs(a - b) % 360
    return np.minimum(d, 360 - d)


@pytest.fixture(scope="module")
def hills(tmp_path_factory) -> tuple[str, dict[str, np.ndarray]]:
    """The DEM, and the analytic slope (deg), aspect (azimuth from true north, deg) and hillshade at its pixels."""
    lon, lat = lonlat_centres()
    e, n = Transformer.from_crs("EPSG:4326", TM, always_xy=True).transform(lon, lat)
    path = write(tmp_path_factory.mktemp("ll") / "hills.tif", surface(e, n), from_origin(WEST, NORTH, STEP, STEP))
    ge, gn = surface_gradient(e, n)
    # The grid's north is rotated from true north by the meridian convergence (up to 0.05 deg here).
    gamma = np.radians(Proj(TM).get_factors(lon, lat).meridian_convergence)
    g_east = ge * np.cos(gamma) + gn * np.sin(gamma)
    g_north = -ge * np.sin(gamma) + gn * np.cos(gamma)
    sun_az, sun_alt = math.radians(315), math.radians(45)
    cosine = (-g_east * math.sin(sun_az) * math.cos(sun_alt) - g_north * math.cos(sun_az) * math.cos(sun_alt)) + math.sin(sun_alt)
    return path, {
        "slope": np.degrees(np.arctan(np.hypot(g_east, g_north))),
        "aspect": np.degrees(np.arctan2(-g_east, -g_north)) % 360,
        "hillshade": np.floor(1 + 254 * cosine / np.sqrt(1 + g_east**2 + g_north**2) + 0.5),
    }


# ---------------------------------------------------------------------------------------------- analytic


@pytest.mark.parametrize("algorithm", ["Horn", "ZevenbergenThorne"])
def test_slope_and_aspect_are_those_of_the_surface_in_metres(hills, tmp_path, algorithm) -> None:
    path, expected = hills
    summary, warnings = terrain(path, str(tmp_path / "s.tif"), product="slope", algorithm=algorithm)
    assert len(warnings) == 1 and "per row" in warnings[0] and "WGS 84" in warnings[0] and "z_factor=0.3048" in warnings[0]
    terrain(path, str(tmp_path / "a.tif"), product="aspect", algorithm=algorithm)
    slope, aspect = read(tmp_path / "s.tif")[1:-1, 1:-1], read(tmp_path / "a.tif")[1:-1, 1:-1]
    want_slope, want_aspect = expected["slope"][1:-1, 1:-1], expected["aspect"][1:-1, 1:-1]
    assert np.abs(slope - want_slope).max() < 0.02  # measured 0.0033 (Horn)
    # Aspect is ill-conditioned on near-flat ground (the 3x3 gradient's own error); everywhere steeper than 1 deg:
    sloped = want_slope > 1
    assert sloped.mean() > 0.9
    assert angle_difference(aspect, want_aspect)[sloped].max() < 0.2  # measured 0.12 (0.06 above 2 deg)
    assert angle_difference(aspect, want_aspect)[want_slope > 2].max() < 0.1
    steep = (slope > 5).mean()
    assert steep == pytest.approx((want_slope > 5).mean(), abs=0.003)
    # gdaldem's single factor (-s 111120) makes an east-west pixel 1/cos(50 deg) = 1.56x too long: much gentler.
    _, warnings = terrain(path, str(tmp_path / "g.tif"), product="slope", algorithm=algorithm, scale=111120)
    assert warnings == []
    gdaldem_like = read(tmp_path / "g.tif")[1:-1, 1:-1]
    assert np.abs(gdaldem_like - want_slope).max() > 2 and (gdaldem_like > 5).mean() < steep - 0.1


def test_hillshade_is_lamberts_cosine_of_the_surface(hills, tmp_path) -> None:
    path, expected = hills
    terrain(path, str(tmp_path / "h.tif"), product="hillshade")
    with rasterio.open(tmp_path / "h.tif") as ds:
        shade = ds.read(1)[1:-1, 1:-1].astype(int)
    diff = np.abs(shade - expected["hillshade"][1:-1, 1:-1])
    assert diff.max() <= 1 and (diff == 0).mean() > 0.95


def test_compute_edges_gives_the_edge_rows_their_own_distances(hills, tmp_path) -> None:
    path, expected = hills
    terrain(path, str(tmp_path / "s.tif"), product="slope", compute_edges=True)
    slope = read(tmp_path / "s.tif")
    # The first and last rows (recomputed from an extrapolated row) and columns; corners excepted (gdaldem repeats
    # the edge column there).
    edge = np.zeros(slope.shape, dtype=bool)
    edge[[0, -1], 1:-1] = edge[1:-1, [0, -1]] = True
    assert np.abs(slope - expected["slope"])[edge].max() < 0.1


# ---------------------------------------------------------------------------------------------- vs gdaldem


def test_matches_gdaldem_on_a_local_transverse_mercator_grid(hills, tmp_path) -> None:
    """The same surface sampled on a projected grid (40 m square pixels, inside the DEM), gdaldem slope and aspect
    there; ours taken at those points (bilinear between our pixel centres)."""
    path, _ = hills
    res, n = 40.0, 180
    rows, cols = np.mgrid[0:n, 0:n]
    e, nn = -n / 2 * res + (cols + 0.5) * res, n / 2 * res - (rows + 0.5) * res
    projected = write(tmp_path / "tm.tif", surface(e, nn), from_origin(-n / 2 * res, n / 2 * res, res, res), crs=TM)
    gdaldem("slope", projected, str(tmp_path / "tm_s.tif"))
    gdaldem("aspect", projected, str(tmp_path / "tm_a.tif"))
    ref_slope, ref_aspect = read(tmp_path / "tm_s.tif"), read(tmp_path / "tm_a.tif")
    terrain(path, str(tmp_path / "s.tif"), product="slope")
    terrain(path, str(tmp_path / "a.tif"), product="aspect")
    slope, aspect = read(tmp_path / "s.tif"), np.radians(read(tmp_path / "a.tif"))

    lon, lat = Transformer.from_crs(TM, "EPSG:4326", always_xy=True).transform(e, nn)
    fr, fc = (NORTH - lat) / STEP - 0.5, (lon - WEST) / STEP - 0.5
    r0, c0 = np.floor(fr).astype(int), np.floor(fc).astype(int)
    tr, tc = fr - r0, fc - c0

    def at_points(img: np.ndarray) -> np.ndarray:
        return (
            img[r0, c0] * (1 - tr) * (1 - tc)
            + img[r0 + 1, c0] * tr * (1 - tc)
            + img[r0, c0 + 1] * (1 - tr) * tc
            + img[r0 + 1, c0 + 1] * tr * tc
        )

    ours_slope = at_points(slope)
    ours_aspect = np.degrees(np.arctan2(at_points(np.sin(aspect)), at_points(np.cos(aspect)))) % 360
    # gdaldem's aspect is from grid north; true north is the meridian convergence away.
    true_aspect = ref_aspect + Proj(TM).get_factors(lon, lat).meridian_convergence
    inner = (slice(1, -1), slice(1, -1))
    assert np.abs(ours_slope - ref_slope)[inner].max() < 0.1  # measured 0.063
    assert (ours_slope[inner] > 5).mean() == pytest.approx((ref_slope[inner] > 5).mean(), abs=0.002)  # 0.5919 / 0.5920
    steep = ref_slope[inner] > 3
    assert angle_difference(ours_aspect, true_aspect)[inner][steep].max() < 0.1  # measured 0.046


def test_a_real_dem_at_49n_matches_gdaldem_after_gdalwarp(tmp_path) -> None:
    """Real relief (Vancouver Island, 48-50 deg N, ~2.4 km pixels) warped to a local transverse Mercator with
    gdalwarp and given to gdaldem slope; our slope is taken to the same grid (gdalwarp, bilinear) and compared away
    from the edges. Resampling a real DEM blurs single pixels, so the comparison is statistical: the share of
    pixels steeper than 5 deg and the median difference."""
    dem = str(DATA / "raster" / "topobathy.tif")
    tm = "+proj=tmerc +lat_0=49 +lon_0=236 +k=1 +ellps=WGS84 +units=m"
    grid = ["-t_srs", tm, "-tr", "2430", "2430", "-overwrite"]
    gdal_cli("gdalwarp", *grid, "-r", "cubic", dem, str(tmp_path / "tm.tif"))
    gdaldem("slope", str(tmp_path / "tm.tif"), str(tmp_path / "ref.tif"))
    ref = read(tmp_path / "ref.tif")
    shares = {}
    for name, kwargs in (("ours", {}), ("single-factor", {"scale": 111120})):
        terrain(dem, str(tmp_path / f"{name}.tif"), product="slope", **kwargs)
        gdal_cli("gdalwarp", *grid, "-r", "bilinear", str(tmp_path / f"{name}.tif"), str(tmp_path / f"{name}_tm.tif"))
        got = read(tmp_path / f"{name}_tm.tif")
        assert got.shape == ref.shape
        valid = ~np.isnan(ref) & ~np.isnan(got)
        valid[:3] = valid[-3:] = False
        valid[:, :3] = valid[:, -3:] = False
        assert valid.sum() > 9000
        shares[name] = ((got[valid] > 5).mean(), float(np.median(got[valid] - ref[valid])))
        reference_share = (ref[valid] > 5).mean()
    # measured: reference 0.163, ours 0.166 (median difference 0.003 deg), single factor 0.105 (-0.12 deg)
    assert shares["ours"][0] == pytest.approx(reference_share, abs=0.01) and abs(shares["ours"][1]) < 0.03
    assert shares["single-factor"][0] < reference_share - 0.04 and shares["single-factor"][1] < -0.08


# ---------------------------------------------------------------------------------------------- the distances


@pytest.mark.parametrize(("crs", "ellps"), [("EPSG:4326", "WGS84"), ("EPSG:4267", "clrk66"), ("EPSG:4019", "GRS80")])
def test_row_distances_are_geodesic_on_the_crs_ellipsoid(crs, ellps) -> None:
    """East-west: the geodesic over one column at the row's latitude (a geodesic over 0.001 deg differs from the
    parallel's arc by ~1e-12 relative); north-south: the meridian's geodesic between the rows above and below."""
    step = 0.001
    grid = LonLatGrid.of(rasterio.crs.CRS.from_user_input(crs), from_origin(10.0, 89.0, step, step))
    assert grid is not None
    rows = np.array([0, 1000, 30000, 60000, 89000, 120000, 170000])
    geod = Geod(ellps=ellps)
    for row in rows:
        ew, ns = grid.steps(int(row), 1)
        lat = 89.0 - (row + 0.5) * step
        _, _, along_parallel = geod.inv(10.0, lat, 10.0 + step, lat)
        _, _, along_meridian = geod.inv(10.0, lat + step, 10.0, lat - step)
        assert ew[0] == pytest.approx(along_parallel, rel=1e-9)
        assert ns[0] == pytest.approx(-along_meridian / 2, rel=1e-9)  # negative: rows go south


def test_rows_at_a_pole_are_nodata_and_south_up_grids_keep_north(tmp_path) -> None:
    lon, lat = lonlat_centres((60, 50))
    e, n = Transformer.from_crs("EPSG:4326", TM, always_xy=True).transform(lon, lat)
    z = surface(e, n)
    north_up = write(tmp_path / "n.tif", z, from_origin(WEST, NORTH, STEP, STEP))
    # The same pixels, row 0 at the south edge (positive pixel height).
    south_up = write(tmp_path / "s.tif", z[::-1], rasterio.Affine(STEP, 0, WEST, 0, STEP, NORTH - 60 * STEP))
    for product in ("slope", "aspect", "hillshade"):
        terrain(north_up, str(tmp_path / f"n_{product}.tif"), product=product)
        terrain(south_up, str(tmp_path / f"s_{product}.tif"), product=product)
        a, b = read(tmp_path / f"n_{product}.tif"), read(tmp_path / f"s_{product}.tif")[::-1]
        assert np.allclose(a, b, atol=1e-3, equal_nan=True) and np.isfinite(a[1:-1, 1:-1]).all()
    # A grid whose first row is centred on the North Pole: no east-west distance there.
    polar = write(tmp_path / "p.tif", np.random.default_rng(0).normal(0, 5, (6, 8)), from_origin(0, 90.5, 1, 1))
    terrain(polar, str(tmp_path / "p_s.tif"), product="slope", compute_edges=True)
    slope = read(tmp_path / "p_s.tif")
    assert np.isnan(slope[0]).all() and np.isfinite(slope[1:]).all()


@pytest.mark.parametrize("compute_edges", [False, True])
@pytest.mark.parametrize("product", ["hillshade", "slope", "aspect"])
def test_small_windows_give_the_same_result(tmp_path, monkeypatch, product, compute_edges) -> None:
    """Each window computes its rows' distances from its own offset: windows of one pixel give the same pixels."""
    rows, cols = np.mgrid[0:40, 0:45]
    z = 800 + 60 * np.sin(cols / 9.0) * np.cos(rows / 13.0) + np.random.default_rng(1).normal(0, 2, rows.shape)
    z[20:23, 7] = -9999
    path = write(tmp_path / "dem.tif", z, from_origin(WEST, NORTH, STEP, STEP))
    terrain(path, str(tmp_path / "whole.tif"), product=product, compute_edges=compute_edges)
    monkeypatch.setattr(terrain_module, "WINDOW_PIXELS", 1)
    monkeypatch.setattr(terrain_module, "OUTPUT_BLOCK", (1, 16))
    terrain(path, str(tmp_path / "strips.tif"), product=product, compute_edges=compute_edges)
    with rasterio.open(tmp_path / "whole.tif") as a, rasterio.open(tmp_path / "strips.tif") as b:
        assert np.array_equal(a.read(), b.read())


def test_products_without_distances_say_nothing_and_scale_on_aspect_is_gdaldems(hills, tmp_path) -> None:
    path, _ = hills
    for product in ("tri", "tpi", "roughness"):
        assert terrain(path, str(tmp_path / f"{product}.tif"), product=product)[1] == []
    _, warnings = terrain(path, str(tmp_path / "a.tif"), product="aspect")
    assert len(warnings) == 1 and "per row" in warnings[0] and "z_factor" not in warnings[0]
    _, warnings = terrain(path, str(tmp_path / "g.tif"), product="aspect", scale=111120)
    assert len(warnings) == 1 and "as if the pixels were square" in warnings[0]
