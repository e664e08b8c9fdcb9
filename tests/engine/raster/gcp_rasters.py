"""Rasters georeferenced by GCPs or RPCs only (no geotransform), made from tests/data files inside a test."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import rasterio
from rasterio.control import GroundControlPoint
from rasterio.rpc import RPC

from tests.helpers import DATA

RGB = DATA / "raster" / "RGB.byte.tif"


def gcp_copy(path: Path, *, n: int = 6, bend: float = 0.0) -> Path:
    """RGB.byte.tif with an n x n grid of GCPs from its geotransform (x bent by `bend` map units at the centre:
    a non-linearity only a thin plate spline follows) and no geotransform."""
    with rasterio.open(RGB) as src:
        profile = src.profile
        data = src.read()
        t, crs, w, h = src.transform, src.crs, src.width, src.height
    gcps = []
    for i, r in enumerate(np.linspace(0, h, n)):
        for j, c in enumerate(np.linspace(0, w, n)):
            x, y = t * (c, r)
            x += bend * np.sin(np.pi * r / h) * np.sin(np.pi * c / w)
            gcps.append(GroundControlPoint(row=float(r), col=float(c), x=float(x), y=float(y), z=0.0, id=f"{i}_{j}"))
    profile.pop("transform")
    profile.pop("crs")
    with rasterio.open(path, "w", **profile) as out:
        out.write(data)
        out.gcps = (gcps, crs)
    return path


def rpc_raster(path: Path) -> Path:
    """A 200 x 150 image near (10 E, 45 N) with plausible RPCs (a slightly skewed affine camera), no geotransform.

    RPC00B: line = LINE_OFF + LINE_SCALE * num(P, L, H) / den(...), with P, L, H the normalised lat, lon, height;
    the terms are ordered 1, L, P, H, L*P, ...
    """
    zeros = [0.0] * 20
    line_num = list(zeros)
    line_num[2] = -1.0  # lines grow southwards
    line_num[1] = 0.02  # a little skew
    samp_num = list(zeros)
    samp_num[1] = 1.0
    samp_num[4] = 0.01  # a little non-linearity
    den = [1.0] + zeros[1:]
    rpc = RPC(
        height_off=0.0,
        height_scale=500.0,
        lat_off=45.0,
        lat_scale=0.075,
        line_den_coeff=den,
        line_num_coeff=line_num,
        line_off=75.0,
        line_scale=75.0,
        long_off=10.0,
        long_scale=0.1,
        samp_den_coeff=den,
        samp_num_coeff=samp_num,
        samp_off=100.0,
        samp_scale=100.0,
    )
    with rasterio.open(RGB) as src:
        data = src.read(1, window=((300, 450), (300, 500)))
    with rasterio.open(path, "w", driver="GTiff", width=200, height=150, count=1, dtype="uint8") as out:
        out.write(data, 1)
        out.rpcs = rpc
    return path
