"""Coordinates and CRS tools with no files: crs_info, crs_search, transform_coordinates."""

from __future__ import annotations

from typing import Annotated, Literal

from fastmcp import Context
from pydantic import Field

from gdal_mcp import jobs
from gdal_mcp.models import CrsDescription, CrsSearchResult, TransformResult
from gdal_mcp.server.app import App
from gdal_mcp.server.tools.params import CRS_FORMS, CrsCheck, as_bbox
from gdal_mcp.server.tools.registry import READ, tool

Point = Annotated[list[float], Field(min_length=2, max_length=3)]


@tool(title="Describe a CRS", annotations=READ, tags={"crs"})
async def crs_info(
    app: App,
    crs: Annotated[str, CrsCheck, Field(description=f"The CRS to describe: {CRS_FORMS}")],
    ctx: Context | None = None,
) -> CrsDescription:
    """Describe a coordinate reference system: name, EPSG code, kind (projected, geographic …), datum,
    ellipsoid, units, axis order (EPSG:4326 is latitude first in its definition), UTM zone, area of use (name
    and lon/lat bounds), PROJ string and WKT. Use crs_search to find a CRS by name or place."""
    return app.scrub_model(await app.execute(jobs.CrsInfoJob(crs=crs), ctx=ctx, quick=True))


@tool(title="Search CRSs", annotations=READ, tags={"crs"})
async def crs_search(
    app: App,
    query: Annotated[
        str | None,
        Field(
            description=(
                "Part of a CRS name ('Lambert-93', 'UTM zone 33N', 'LAEA Europe', 'British National Grid'), an EPSG code, "
                "or a country or region, matched against the name of each CRS's area of use ('Portugal', 'Texas'). "
                "Case, spaces, punctuation and accents are ignored"
            )
        ),
    ] = None,
    bbox: Annotated[
        list[float] | None,
        Field(
            min_length=4,
            max_length=4,
            description=(
                "[west, south, east, north] in lon/lat degrees (EPSG:4326; west > east crosses the antimeridian): only CRSs "
                "whose area of use overlaps it, those containing it first"
            ),
        ),
    ] = None,
    kind: Annotated[
        Literal["projected", "geographic", "any"],
        Field(description=("projected (metres or feet: for distances, areas, buffers), geographic (degrees) or any")),
    ] = "any",
    limit: Annotated[int, Field(ge=1, le=200, description="Most matches to return")] = 20,
    ctx: Context | None = None,
) -> CrsSearchResult:
    """Find CRSs in the EPSG database (deprecated ones left out) by name, by place name and/or by the area they
    are meant for, best first. Order: an EPSG code or exact name; for a bbox, the WGS 84 / UTM zone of its centre
    (zones of 6° from 180°W as EPSG defines them, without the Norway/Svalbard exceptions; N or S by the centre's
    latitude; UPS beyond 84°N/80°S); with kind='any', projected before geographic before compound CRSs; current
    datums and national grids (ETRS89, NAD83, GDA2020, RGF93, OSGB36 / British National Grid …) before historical
    ones; CRSs whose name contains query (without a bbox: starting or ending with it, then containing it, then
    containing all its words) before those whose area-of-use name contains it; for a bbox, areas of use
    containing at least 90% of it (bbox_share), smaller areas first, before those overlapping less, larger
    shares first; then shorter names. So the first results for a bbox are the UTM zone, then the national and
    regional CRSs: the usual choices for measuring in metres. Examples: "what UTM zone is Lisbon in":
    bbox=[-9.25, 38.65, -9.05, 38.8]; the national CRS of Portugal: query='Portugal' with its bbox."""
    job = jobs.CrsSearchJob(query=query, bbox=as_bbox(bbox), kind=kind, limit=limit)
    return app.scrub_model(await app.execute(job, ctx=ctx, quick=True))


@tool(title="Transform coordinates", annotations=READ, tags={"crs"})
async def transform_coordinates(
    app: App,
    points: Annotated[
        list[Point],
        Field(
            min_length=1,
            max_length=10000,
            description=("Points as [[x, y], …] or [[x, y, z], …]: lon/lat order for geographic CRSs when always_xy=true"),
        ),
    ],
    src_crs: Annotated[str, CrsCheck, Field(description=f"CRS of the points: {CRS_FORMS}")],
    dst_crs: Annotated[str, CrsCheck, Field(description=f"CRS to transform to: {CRS_FORMS}")],
    always_xy: Annotated[
        bool,
        Field(
            description=(
                "true (default): x/y order — longitude first, easting first — whatever the CRS definitions say; false: "
                "each CRS's own axis order (EPSG:4326 is latitude, longitude)"
            )
        ),
    ] = True,
    ctx: Context | None = None,
) -> TransformResult:
    """Transform up to 10000 points between CRSs (like cs2cs or gdaltransform), with PROJ's best available
    operation. The result states the axis order used for input and output and the operation. Points that
    cannot be transformed come back as null with a warning."""
    job = jobs.TransformJob(points=[tuple(p) for p in points], src_crs=src_crs, dst_crs=dst_crs, always_xy=always_xy)
    return app.scrub_model(await app.execute(job, ctx=ctx, quick=len(points) <= 1000))
