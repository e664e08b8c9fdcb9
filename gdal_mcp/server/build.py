"""Builds the FastMCP server: the instructions, the tools, resources and prompts, the middleware (middleware.py),
MCP tasks, and over HTTP the console, downloads and /healthz."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
from datetime import timedelta
from typing import Any

os.environ.setdefault("FASTMCP_SHOW_SERVER_BANNER", "false")
os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")
# py-key-value (FastMCP's session state, the tasks extension's client) type-checks itself with beartype, which only
# warns: O0 skips building those checks (~60-100 ms of the cold start), nothing else changes.
os.environ.setdefault("PY_KEY_VALUE_DISABLE_BEARTYPE", "true")

from fastmcp import FastMCP  # noqa: E402
from fastmcp.server.lifespan import lifespan  # noqa: E402
from fastmcp_tasks import TasksExtension  # noqa: E402
from fastmcp_tasks.settings import DocketSettings  # noqa: E402

from gdal_mcp import __version__  # noqa: E402
from gdal_mcp.config import Settings, format_size  # noqa: E402
from gdal_mcp.server.app import App  # noqa: E402
from gdal_mcp.server.approval.parked import ParkedConfirmations  # noqa: E402
from gdal_mcp.server.jobboard import JobBoard  # noqa: E402
from gdal_mcp.server.middleware import EnvelopeAndAudit, SchemasDereferencedOnce  # noqa: E402
from gdal_mcp.server.tools import analysis as analysis_tools  # noqa: E402
from gdal_mcp.server.tools import approval as approval_tools  # noqa: E402
from gdal_mcp.server.tools import compare as compare_tools  # noqa: E402
from gdal_mcp.server.tools import crs as crs_tools  # noqa: E402
from gdal_mcp.server.tools import cube as cube_tools  # noqa: E402
from gdal_mcp.server.tools import datasets as dataset_tools  # noqa: E402
from gdal_mcp.server.tools import focal as focal_tools  # noqa: E402
from gdal_mcp.server.tools import footprints as footprints_tools  # noqa: E402
from gdal_mcp.server.tools import hydrology as hydrology_tools  # noqa: E402
from gdal_mcp.server.tools import interpolate as interpolate_tools  # noqa: E402
from gdal_mcp.server.tools import join as join_tools  # noqa: E402
from gdal_mcp.server.tools import pipeline as pipeline_tools  # noqa: E402
from gdal_mcp.server.tools import preview as preview_tools  # noqa: E402
from gdal_mcp.server.tools import prompts as prompt_tools  # noqa: E402
from gdal_mcp.server.tools import provenance as provenance_tools  # noqa: E402
from gdal_mcp.server.tools import query as query_tools  # noqa: E402
from gdal_mcp.server.tools import raster as raster_tools  # noqa: E402
from gdal_mcp.server.tools import resources as resource_tools  # noqa: E402
from gdal_mcp.server.tools import stac as stac_tools  # noqa: E402
from gdal_mcp.server.tools import vector as vector_tools  # noqa: E402
from gdal_mcp.server.tools import vector_pipeline as vector_pipeline_tools  # noqa: E402
from gdal_mcp.server.tools import visibility as visibility_tools  # noqa: E402
from gdal_mcp.server.tools import web_tiles as web_tiles_tools  # noqa: E402
from gdal_mcp.server.tools import workspace as workspace_tools  # noqa: E402
from gdal_mcp.server.tools.registry import register_prompts, register_resources, register_tools  # noqa: E402
from gdal_mcp.server.tools.schema_cache import ToolSchemas  # noqa: E402
from gdal_mcp.server.web import console, downloads  # noqa: E402
from gdal_mcp.server.web.guards import register_health  # noqa: E402

log = logging.getLogger("gdal_mcp")


def remote_instructions(app: App) -> str:
    """What the model must know of remote data on this server: the locations it may read, or nothing."""
    sb, settings = app.sandbox, app.settings
    lines = []
    if sb.bucket is not None:
        lines.append(
            f"- The workspace is the bucket {sb.bucket.url.rstrip('/')}: relative paths name its objects (list_datasets "
            "lists them); outputs are uploaded there and never replace an object unless overwrite=true (the user approves "
            "it); input_pattern globs match its object names; workspace_copy, workspace_move and workspace_delete work "
            "on its objects, and in-place changes (raster_edit, raster_overviews, vector_convert mode=append) rewrite "
            "the object (approved first; internal overviews only). output may equal input with overwrite=true."
        )
    if sb.remote:
        where = "every remote location" if sb.remote.any_location else ", ".join(sb.remote.describe())
        budget = f" (at most {format_size(settings.max_remote_bytes)} per call)" if settings.max_remote_bytes else ""
        lines.append(
            f"- Remote data: this server reads {where} and below. Give a URL (https://…/x.tif, s3://bucket/key, or a "
            "stac:// asset uri) as input= or path= to any tool; remote COGs are read by windows (a bbox reads only its "
            f"tiles), and each result's `remote` says the requests and bytes fetched{budget}. An output in an allowed "
            "s3:// or az:// location is uploaded (replacing an object only with overwrite=true; its uri is its URL; gs:// "
            "is read only). stac_search finds scenes in a STAC catalog; list_datasets path=s3://… lists a prefix. "
            "Any other remote location is out-of-root."
        )
    return ("\n" + "\n".join(lines)) if lines else ""


INSTRUCTIONS = """\
GDAL MCP: inspect, convert, reproject, clip, mosaic and analyse geospatial rasters and vectors with GDAL,
inside a sandboxed workspace.
- Paths are relative to the workspace; list_datasets (or the gdal-mcp://catalog resource) shows what is there.
  Archives: /vsizip/a.zip/f.tif; subdatasets: NETCDF:"f.nc":var, HDF5:"f.h5"://x. Outside paths are refused.
- Inspect first: raster_info / vector_info, then raster_preview / vector_preview to look at the data.
  Multi-layer sources (GPKG, GPX, OSM) need layer=.
- One vocabulary everywhere: `input`/`inputs` (or `input_pattern`, a glob such as 'tiles/*.tif') is what a tool
  reads (the inspection tools raster_info, vector_info and list_datasets take `path`), `output` what it writes;
  `bbox` is in `bbox_crs`, by default the CRS of the data read (the output CRS where the bbox defines a new grid);
  `resolution` is in the units of its CRS (DEGREES on EPSG:4326). CRS arguments take codes, PROJ/WKT or names
  ("WGS 84 / UTM zone 32N"); crs_search finds one for a place or name, crs_info describes it,
  transform_coordinates converts points.
- Prefer COG for raster outputs (raster_convert format="COG"); keep analysis in a projected CRS. Distances
  (vector_buffer, vector_simplify, vector_join max_distance) are in metres by default, also on lon/lat layers;
  areas and lengths on lon/lat data are geodesic (vector_measure, raster_stats categorical=true). "What share is
  above 0.3": raster_stats / zonal_stats thresholds=[0.3] (share and area above and at-or-below each value).
- Analysis: vector_join (points in polygons, k nearest with geodesic distances on lon/lat, attribute join;
  aggregate for counts/sums per zone, count_by for counts per value of a join field),
  vector_overlay, vector_dissolve, vector_from_table (CSV/XLSX to points), vector_merge; raster_calc (band math,
  composites of many scenes), raster_reclassify, raster_contour, raster_terrain, zonal_stats (categorical=true for
  class areas per zone), raster_fill_nodata, raster_sieve, raster_proximity, raster_sample (points_input writes
  values to a point layer).
- Several steps at once: raster_pipeline (reproject, clip, resize, select, set-type, fill-nodata, terrain) and
  vector_pipeline (filter, reproject, select, sql, clip, buffer, simplify …) run in one pass with one approval;
  plan_only=true shows each step's grid or layer first. More: raster_focal (moving-window statistics),
  raster_viewshed (visibility from observers on a projected DEM), vector_interpolate (points to a grid: IDW,
  nearest, linear …), raster_footprint (valid-data outline), dataset_index (tile index of many files),
  raster_tiles (XYZ/TMS tiles or MBTiles), raster_compare (check a result: what differs, where, by how much).
- Time series in netCDF/HDF5/Zarr (climate, ocean): cube_info (dimensions, dates in the file's calendar, levels),
  then cube_aggregate (monthly/seasonal/yearly means or other statistics, climatology=true, anomaly_reference=
  [start, end]), cube_series (values through time at points, or area-weighted over zones), cube_subset.
- Hydrology on a DEM: dem_condition (fill/breach), flow_direction (D8), flow_accumulation, watershed (pour points,
  snapped), stream_network (Strahler lines and a preview); each conditions the DEM itself by default (condition='fill').
- Finding imagery: stac_search queries a STAC API or a static STAC catalog (collections, bbox, datetime, query such
  as {"eo:cloud_cover": {"lt": 20}}, sortby) page by page; pass an asset's `input` to raster_info or any raster tool.
- Questions about a layer's rows (features per continent, the ten largest, sums and means, any read-only SQL
  SELECT) are answered by vector_query directly, paged, with no file written.
- Workspace files: workspace_copy, workspace_move (rename) and workspace_delete take a dataset with its side files
  (shapefile parts, .aux.xml, .ovr, world files); delete and move ask the user first.
- Provenance: every output has <output>.provenance.json beside it (tool, arguments, inputs' SHA-256, the CRS
  transformation used and whether it was a ballpark one, who approved it). "How was this made?": dataset_lineage
  (the chain back to the original inputs, with a graph). "Redo it for June's scene": replay with substitute=
  {old input: new input} (plan_only=true first, then plan_only=false).
- Write tools never overwrite unless overwrite=true and never leave partial files. Each returns a
  gdal-mcp://files/… URI: resources/read returns the file (small files), gdal-mcp://info/raster|vector/… the
  metadata. Prompts help choose a CRS, a resampling method, web publishing and zonal workflows.
- Failures return {"success": false, "error": {"code", "message"}}; the message says what to do. Codes:
  invalid-argument (fix the argument), not-found (check list_datasets / layer names), out-of-root (stay in the
  workspace), already-exists (overwrite=true or rename), unsupported, gdal-error (GDAL's own message), timeout
  and resource-limit (work on a smaller area), cancelled, read-only (server started read-only), declined (the
  user refused the change: nothing was done; do not retry unless they ask), confirmation-required (this client
  cannot ask its user to approve a change: tell the user; never approve it yourself), internal-error.
- Changing existing data (overwrite=true on an existing file, raster_overviews, raster_edit, workspace_move,
  workspace_delete, vector_convert mode=append/add_layer) first asks the user to approve, through the client
  (elicitation). Over HTTP a client that cannot ask gets confirmation-required with a confirmation_id and the
  approval console's URL: tell the user, wait (confirmation_status), then repeat the call with the same arguments
  plus confirmation_id=<id> (every tool accepts it).
"""


async def _index_tool_schemas(mcp: FastMCP) -> None:
    """Give the MCP SDK a tool-schema lookup for its Mcp-Param header check on 2026-07-28 HTTP calls.

    Without one, the SDK lists (and dereferences) every tool's schema on every tools/call: about
    20 ms of CPU per call, most of a metadata call's cost. The tools are fixed once the server is built.
    """
    schemas = {tool.name: tool.parameters for tool in await mcp.list_tools(run_middleware=False)}
    mcp._mcp_server.get_tool_input_schema = schemas.get


#: the longest the server waits before it starts the rest of its worker pool (sooner: after its first answer)
REST_OF_POOL_AFTER = 2.0


def _start_rest(app: App) -> None:
    try:
        app.executor.start()
    except Exception:  # noqa: BLE001 - a timer callback: the next job starts them (LocalExecutor.run)
        log.warning("could not start the rest of the worker pool", exc_info=True)


#: How long Docket's worker (MCP tasks) waits for a new task before it looks again. Its read of the in-memory
#: backend returns as soon as a task is queued, so this sets only how often an idle server wakes up, not how fast a
#: task starts: measured, a quick task's round trip 31 ms at FastMCP's default of 50 ms and 34 ms at 1 s, while an
#: idle stdio server took 3.4 % of a core at 50 ms and 1.3 % at 1 s (on a laptop, and beside every job's tiles).
TASKS_CHECK_INTERVAL = timedelta(seconds=1)


def tasks_check_interval() -> timedelta | None:
    """TASKS_CHECK_INTERVAL, unless FastMCP's own setting says otherwise (FASTMCP_DOCKET_MINIMUM_CHECK_INTERVAL, in
    the environment or FastMCP's .env file: None then, and the extension reads it)."""
    return None if "minimum_check_interval" in DocketSettings().model_fields_set else TASKS_CHECK_INTERVAL


def build_server(settings: Settings, *, auth: Any = None, app: App | None = None) -> tuple[FastMCP, App]:
    """The FastMCP server and its App (sandbox, executor, audit); `app` if one was built already."""
    app = App(settings) if app is None else app

    swept = False

    @lifespan
    async def warm_workers(server: Any) -> Any:
        nonlocal swept
        app.executor.start(1)  # idempotent; workers import GDAL in the background
        # The rest of the pool after the first answer (the executor starts it then) or REST_OF_POOL_AFTER at the
        # latest: on 2 cores, two more workers importing GDAL at once slowed the first answer of a cold start.
        rest = asyncio.get_running_loop().call_later(REST_OF_POOL_AFTER, _start_rest, app)
        if not swept and not settings.read_only:
            swept = True  # once: remove the temporaries of servers killed mid-write (sandbox decides which)
            await asyncio.to_thread(app.sandbox.sweep_stale_temporaries)
        if settings.transport == "http":
            await _index_tool_schemas(mcp)
        try:
            yield {"app": app}
        finally:
            rest.cancel()

    schemas = ToolSchemas.for_server(app.sandbox.roots)  # derived on a first start, then read (schema_cache.py)
    mcp = FastMCP(
        "gdal-mcp",
        instructions=INSTRUCTIONS + remote_instructions(app),
        version=__version__,
        middleware=[EnvelopeAndAudit(app), SchemasDereferencedOnce(schemas.listed)],
        lifespan=warm_workers,
        auth=auth,
        mask_error_details=True,
        dereference_schemas=False,  # done by SchemasDereferencedOnce, once per tool
    )
    # MCP tasks (2026-07-28 clients): the write tools may run in the background, polled by task id. One
    # server, so the in-memory backend; Docket's worker runs in this event loop, beside the executor. Its own
    # memory:// name: servers built in one process (tests) must not take each other's tasks.
    tasks_backend = f"gdal-mcp-{secrets.token_hex(6)}"
    mcp.add_extension(
        TasksExtension(url=f"memory://{tasks_backend}", name=tasks_backend, minimum_check_interval=tasks_check_interval())
    )
    register_tools(
        mcp,
        app,
        dataset_tools,
        raster_tools,
        pipeline_tools,  # raster_pipeline
        web_tiles_tools,  # raster_tiles
        vector_tools,
        vector_pipeline_tools,
        join_tools,
        query_tools,
        preview_tools,
        analysis_tools,
        focal_tools,  # raster_focal
        visibility_tools,  # raster_viewshed
        interpolate_tools,  # vector_interpolate
        footprints_tools,  # raster_footprint, dataset_index
        compare_tools,  # raster_compare
        hydrology_tools,  # dem_condition, flow_direction, flow_accumulation, watershed, stream_network
        crs_tools,
        stac_tools,  # stac_search
        workspace_tools,
        provenance_tools,  # dataset_lineage, replay
        cube_tools,  # cube_info, cube_aggregate, cube_series, cube_subset
        schemas=schemas,
    )
    register_resources(mcp, app, resource_tools)
    register_prompts(mcp, app, prompt_tools)
    if settings.transport == "http":
        downloads.register(mcp, app)  # GET/HEAD /files/<path> beside /mcp
        register_health(mcp, app.confined)  # GET /healthz, without a token (container health checks)
        if settings.console:  # the approval console: confirmations parked for a person, the job board, /console
            approvals = app.approvals = ParkedConfirmations(app.audit, timeout=settings.confirm_timeout)
            jobs = app.jobs = JobBoard(app.audit)
            app.console = console.register(mcp, app, approvals, jobs)
            register_tools(mcp, app, approval_tools, schemas=schemas)  # confirmation_status
    schemas.save()
    return mcp, app
