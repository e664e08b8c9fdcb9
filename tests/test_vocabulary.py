"""One vocabulary across every tool: the same name means the same thing and reads the same to a model.

Checked on the live tools/list (not the snapshot), so a tool added without the shared types fails here.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
from fastmcp import Client

INSPECT_TOOLS = {"raster_info", "vector_info", "list_datasets"}  # keep `path`, the seeds' name for inspection
NO_FILE_TOOLS = {"crs_info", "crs_search", "transform_coordinates"}
CATALOG_TOOLS = {"stac_search"}  # reads a STAC catalog (`catalog`: a workspace JSON file or a URL), not a dataset
RETIRED = {"projwin", "projwin_crs", "dtype", "fix_output", "raster", "src", "dst", "geometry_crs_", "action_list"}
# Shared names whose description may come in a few deliberate variants (each variant lives in gdal_mcp/server/tools/params.py):
# bbox/bbox_crs: the data's CRS, or the output grid's (gdalwarp -te); input/output/format: raster, vector, CSV …
SAME_EVERYWHERE = {"overwrite", "creation_options", "layer", "where", "src_crs", "units", "output_layer"}
# Deliberate variants of a shared name (from gdal_mcp/server/tools/params.py): measure units include areas (ha), not degrees.
VARIANTS = {("vector_measure", "units"), ("vector_join", "units")}  # vector_join: units of max_distance and the distance field
ENUMS = {"resampling", "output_type", "units", "overview_resampling"}


@pytest.fixture
async def tools(client: Client) -> dict[str, dict[str, Any]]:
    return {t.name: t.input_schema for t in await client.list_tools()}


def _props(schema: dict[str, Any]) -> dict[str, Any]:
    return schema.get("properties", {})


def _description(prop: dict[str, Any]) -> str:
    return prop.get("description") or ""


def _enum_values(prop: dict[str, Any]) -> list[Any] | None:
    if "enum" in prop:
        return list(prop["enum"])
    for alt in prop.get("anyOf", []):
        if "enum" in alt:
            return list(alt["enum"])
    return None


async def test_every_tool_names_what_it_reads_input(tools: dict[str, dict[str, Any]]) -> None:
    for name, schema in tools.items():
        props = _props(schema)
        if name in INSPECT_TOOLS:
            assert "path" in props, name
        elif name in CATALOG_TOOLS:
            assert "catalog" in props and "input" not in props, name
        elif name not in NO_FILE_TOOLS:
            assert {"input", "inputs"} & set(props), f"{name} reads a dataset but has no input/inputs parameter"
            assert "path" not in props, f"{name}: the dataset read is `input`, not `path`"
        assert not RETIRED & set(props), f"{name} still has {RETIRED & set(props)}"


async def test_shared_names_read_the_same_everywhere(tools: dict[str, dict[str, Any]]) -> None:
    seen: dict[str, set[str]] = defaultdict(set)
    for name, schema in tools.items():
        if name in NO_FILE_TOOLS:  # transform_coordinates' src_crs is the CRS of the points it is given
            continue
        for pname, prop in _props(schema).items():
            if pname in SAME_EVERYWHERE and (name, pname) not in VARIANTS:
                seen[pname].add(_description(prop))
    for pname, descriptions in seen.items():
        assert len(descriptions) == 1, f"{pname} is described {len(descriptions)} ways: {sorted(descriptions)}"


async def test_bbox_always_comes_with_its_crs_and_says_which(tools: dict[str, dict[str, Any]]) -> None:
    for name, schema in tools.items():
        props = _props(schema)
        if "bbox" in props and name != "crs_search":  # crs_search's bbox is lon/lat by definition
            assert "bbox_crs" in props, f"{name} has bbox without bbox_crs"
            text = _description(props["bbox"]) + " " + _description(props["bbox_crs"])
            assert "default" in text and "CRS" in text, f"{name}: bbox must say which CRS it is in by default"


async def test_resolution_names_its_units(tools: dict[str, dict[str, Any]]) -> None:
    for name, schema in tools.items():
        prop = _props(schema).get("resolution")
        if prop is not None:
            text = _description(prop).lower()
            assert "units" in text and ("degree" in text or name == "raster_mosaic"), (name, text)


async def test_closed_sets_are_enums(tools: dict[str, dict[str, Any]]) -> None:
    for name, schema in tools.items():
        for pname, prop in _props(schema).items():
            if pname in ENUMS:
                assert _enum_values(prop), f"{name}.{pname} is not a JSON-schema enum"


async def test_outputs_list_the_formats_the_tool_writes(tools: dict[str, dict[str, Any]]) -> None:
    for name, schema in tools.items():
        prop = _props(schema).get("output")
        if prop is None:
            continue
        text = _description(prop)
        assert "(." in text or ".csv" in text or ".png" in text, f"{name}: output does not list formats: {text}"
        if name != "raster_mosaic":
            assert ".vrt" not in text, f"{name} offers VRT output it does not write"
