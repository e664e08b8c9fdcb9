"""raster_tiles: web map tiles of a raster (gdal raster tile, the successor of gdal2tiles), as an XYZ/TMS directory or
one MBTiles file.

A tile directory is one output committed whole (sandbox/outputs.py, directory=True): GDAL writes it inside the
hidden temporary directory beside its final place, and the commit renames it into place without replacing anything,
or, with overwrite (and the person's approval: approval/policy.py DIRECTORY_OUTPUTS), renames the old one aside and
deletes it only once the new one is in place. Only a directory that holds tiles is ever replaced (`not_tiles`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from pathlib import Path
from typing import Annotated, Literal

from fastmcp import Context
from pydantic import Field

from gdal_mcp import jobs
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import TilesWriteResult
from gdal_mcp.server.app import App
from gdal_mcp.server.tools.params import BBox, BBoxCRS, Overwrite, RasterInput, as_bbox
from gdal_mcp.server.tools.registry import WRITE, tool

log = logging.getLogger("gdal_mcp.server.tools")

TilingScheme = Literal[
    "WebMercatorQuad", "WorldCRS84Quad", "WorldMercatorWGS84Quad", "GoogleCRS84Quad", "PseudoTMS_GlobalMercator"
]
TileResampling = Literal["nearest", "bilinear", "cubic", "cubic_spline", "lanczos", "average", "mode", "rms"]
#: besides z/x/y tiles, what a tile directory may hold (the pages gdal raster tile and gdal2tiles write): an existing
#: directory holding anything else is never replaced
TILE_DIRECTORY_FILES = frozenset(
    {"leaflet.html", "openlayers.html", "googlemaps.html", "mapml.mapml", "stacta.json", "tilemapresource.xml", "doc.kml"}
)
TILE_FILE = re.compile(r"\d+\.(png|webp|jpg|jpeg|kml)(\.aux\.xml)?", re.IGNORECASE)
#: entries looked at before deciding a directory is too large to be checked (and so is not replaced)
TILE_DIRECTORY_SCAN_LIMIT = 2_000_000


def not_tiles(directory: Path, limit: int = TILE_DIRECTORY_SCAN_LIMIT) -> str | None:
    """None when `directory` holds only a tile pyramid (zoom/x/y.ext, .aux.xml and .kml beside tiles, viewer pages);
    else the first entry that is something else (a link, a file of the user's …), relative to it."""
    seen = 0
    with os.scandir(directory) as top:
        for entry in top:
            seen += 1
            if entry.is_file(follow_symlinks=False) and entry.name in TILE_DIRECTORY_FILES:
                continue
            if not (entry.name.isdigit() and entry.is_dir(follow_symlinks=False)):
                return entry.name
            with os.scandir(entry.path) as columns:
                for column in columns:
                    if not (column.name.isdigit() and column.is_dir(follow_symlinks=False)):
                        return f"{entry.name}/{column.name}"
                    with os.scandir(column.path) as tiles:
                        for tile in tiles:
                            seen += 1
                            if seen > limit:
                                return f"more than {limit} entries"
                            if not (TILE_FILE.fullmatch(tile.name) and tile.is_file(follow_symlinks=False)):
                                return f"{entry.name}/{column.name}/{tile.name}"
    return None


@tool(title="Web map tiles", annotations=WRITE, tags={"raster"}, writes=True)
async def raster_tiles(
    app: App,
    input: RasterInput,
    output: Annotated[
        str,
        Field(
            description=(
                "Where to write, relative to the workspace: a new directory of z/x/y tiles (e.g. 'tiles/dem'), or one "
                "MBTiles file (.mbtiles)"
            )
        ),
    ],
    max_zoom: Annotated[
        int | None,
        Field(
            ge=0, le=30, description="Highest (most detailed) zoom level; default the level closest to the raster's resolution"
        ),
    ] = None,
    min_zoom: Annotated[
        int | None, Field(ge=0, le=30, description="Lowest zoom level; default max_zoom (that level only, as GDAL does)")
    ] = None,
    tile_format: Annotated[
        Literal["PNG", "WEBP", "JPEG"], Field(description="Image format of the tiles; JPEG has no transparency")
    ] = "PNG",
    tiling_scheme: Annotated[
        TilingScheme,
        Field(
            description=(
                "Tile grid (GDAL's names): WebMercatorQuad is the EPSG:3857 grid of web maps (Leaflet, OpenLayers, "
                "MapLibre); WorldCRS84Quad lon/lat with 2 tiles at zoom 0; MBTiles holds WebMercatorQuad only"
            )
        ),
    ] = "WebMercatorQuad",
    convention: Annotated[
        Literal["xyz", "tms"],
        Field(description="Row numbering of a tile directory: xyz counts from the top (web map default), tms from the bottom"),
    ] = "xyz",
    resampling: Annotated[
        TileResampling,
        Field(description="nearest for classes and categories; cubic (default), bilinear, lanczos or average for imagery"),
    ] = "cubic",
    webviewer: Annotated[
        Literal["none", "leaflet", "openlayers", "mapml", "stac", "all"],
        Field(description="Viewer page to write in the tile directory (leaflet.html …; it loads its map library online)"),
    ] = "none",
    skip_blank: Annotated[
        bool, Field(description="Leave out fully transparent tiles of a directory (an MBTiles file never stores them)")
    ] = False,
    bbox: BBox = None,
    bbox_crs: BBoxCRS = None,
    overwrite: Overwrite = False,
    ctx: Context | None = None,
) -> TilesWriteResult:
    """Web map tiles of an 8-bit raster with GDAL's `gdal raster tile` (the successor of gdal2tiles): a directory of
    {z}/{x}/{y}.png tiles (XYZ or TMS) for Leaflet, OpenLayers or MapLibre, or one MBTiles file (output ending in
    .mbtiles). The raster is reprojected onto the tile grid; outside its data the tiles are transparent.
    The tile count is computed before anything is written and a call over the server's limit (100000 by default) is
    refused with resource-limit: each zoom level has about 4x the tiles of the one below, so lower max_zoom or
    tile a smaller area with bbox. Elevation or other non-8-bit data: render it first (raster_terrain hillshade or
    color-relief, or raster_convert with output_type='Byte' and scale=true). overwrite=true replaces an existing tile
    directory as a whole (never a directory holding anything but tiles)."""
    directory = not output.rstrip("/").lower().endswith(".mbtiles")
    if min_zoom is not None and max_zoom is not None and min_zoom > max_zoom:
        raise GdalMcpError("invalid-argument", f"min_zoom ({min_zoom}) must not be above max_zoom ({max_zoom})")
    if not directory and tiling_scheme != "WebMercatorQuad":
        raise GdalMcpError(
            "invalid-argument", "an MBTiles file holds WebMercatorQuad tiles only; drop tiling_scheme or write a directory"
        )
    if not directory and webviewer != "none":
        raise GdalMcpError("invalid-argument", "viewer pages go with a tile directory, not an MBTiles file; set webviewer='none'")
    src = app.sandbox.resolve_input(input)
    target = app.sandbox.resolve_output(output, overwrite=overwrite, inputs=[src], directory=directory)
    try:
        if directory and overwrite and target.final.is_dir():
            other = await asyncio.to_thread(not_tiles, target.final)
            if other is not None:
                raise GdalMcpError(
                    "invalid-argument",
                    f"output '{target.display}' holds more than tiles ({other}): only a tile directory is replaced; "
                    "choose another name",
                )
        job = jobs.WebTilesJob(
            src=src.gdal_path,
            dst=str(target.tmp_path),
            tile_format=tile_format,
            tiling_scheme=tiling_scheme,
            convention=convention,
            min_zoom=min_zoom,
            max_zoom=max_zoom,
            resampling=resampling,
            webviewer=webviewer,
            skip_blank=skip_blank,
            bbox=as_bbox(bbox),
            bbox_crs=bbox_crs,
            max_tiles=app.settings.max_tiles,
            threads=app.gdal_threads(),
        )
    except BaseException:
        target.discard()
        raise
    summary, warnings = await app.execute(job, ctx=ctx, output=target)
    if ctx is not None:
        import mcp.types as mt

        try:
            await ctx.send_notification(mt.ResourceListChangedNotification())
        except Exception:  # noqa: BLE001 - a client without notifications still gets its result
            log.debug("resource list notification failed", exc_info=True)
    summary = app.scrub_model(summary)
    viewer = f"{target.display}/{summary.viewers[0]}" if summary.viewers else None
    return TilesWriteResult(
        output=target.display,
        uri=None if directory else app.sandbox.uri(target.display),
        viewer=viewer,
        viewer_uri=app.sandbox.uri(viewer) if viewer else None,
        summary=summary,
        warnings=[app.sandbox.scrub(w) for w in warnings],
    )
