"""Class 1 and 4 — a STAC catalog that names files or URLs outside the workspace: stac_search's catalog argument (an
outside file, a URL on a server without the network), a workspace catalog whose child or item links leave its folder
(absolute paths, '..', a symlink, file:// and http:// links to the canary), and a forged page token. Each through a
real MCP client: refused, no secret byte out, no connection to the canary; an asset naming an outside file gets no
input and raster_info refuses its href."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession

from tests.security.helpers import Canary, Secrets, attack, everything_returned, workspace


def _catalog(links: list[dict[str, str]]) -> str:
    return json.dumps({"type": "Catalog", "stac_version": "1.0.0", "id": "c", "description": "c", "links": links})


def _item(item_id: str, asset_href: str) -> dict[str, Any]:
    return {
        "type": "Feature",
        "stac_version": "1.0.0",
        "id": item_id,
        "geometry": None,
        "properties": {"datetime": "2024-01-01T00:00:00Z"},
        "links": [],
        "assets": {"data": {"href": asset_href}},
    }


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory, secrets: Secrets, canary: Canary) -> Path:
    ws = workspace(tmp_path_factory.mktemp("stac"))
    # an outside item whose id is the secret: reading it would put the secret in the result
    (secrets.dir / "item.json").write_text(json.dumps(_item(secrets.token, "./secret.tif")))
    cases = {
        "absolute": secrets.path("item.json"),
        "dotdot": os.path.relpath(secrets.path("item.json"), ws / "dotdot"),
        "file-url": "file://" + secrets.path("item.json"),
        "canary": canary.url + "/item.json",
        "symlink": "./escape/item.json",
    }
    for name, href in cases.items():
        folder = ws / name
        folder.mkdir()
        (folder / "catalog.json").write_text(_catalog([{"rel": "item", "href": href}]))
    (ws / "symlink" / "escape").symlink_to(secrets.dir)
    (ws / "child").mkdir()
    (ws / "child" / "catalog.json").write_text(_catalog([{"rel": "child", "href": canary.url + "/catalog.json"}]))
    (ws / "assets").mkdir()
    (ws / "assets" / "a.json").write_text(json.dumps(_item("a", secrets.path("secret.tif"))))
    (ws / "assets" / "catalog.json").write_text(_catalog([{"rel": "item", "href": "./a.json"}]))
    return ws


@pytest.mark.slow  # a real server process over stdio, six attacks
async def test_catalog_links_out_of_the_workspace_are_refused(
    served: ClientSession, ws: Path, secrets: Secrets, canary: Canary
) -> None:
    s = served
    for folder in ("absolute", "dotdot", "file-url", "canary", "symlink", "child"):
        args = {"catalog": f"{folder}/catalog.json"}
        assert await attack(s, "stac_search", args, secrets=secrets, canary=canary) == "out-of-root", folder


async def test_catalog_arguments_outside_are_refused(served: ClientSession, ws: Path, secrets: Secrets, canary: Canary) -> None:
    s = served
    for catalog, codes in (
        (secrets.path("item.json"), {"out-of-root"}),
        ("../" * 12 + secrets.path("item.json").lstrip("/"), {"out-of-root"}),
        (canary.url + "/catalog.json", {"unsupported"}),  # this server reads no remote location
        ("/vsicurl/" + canary.url + "/catalog.json", {"unsupported"}),
        ("s3://bucket/catalog.json", {"unsupported"}),
    ):
        await attack(s, "stac_search", {"catalog": catalog}, secrets=secrets, canary=canary, codes=codes)


async def test_a_forged_page_token_is_refused(served: ClientSession, ws: Path, secrets: Secrets, canary: Canary) -> None:
    forged = {"v": 1, "k": "api", "q": "0" * 16, "l": {"href": canary.url + "/search", "method": "GET"}, "s": 0}
    token = base64.urlsafe_b64encode(json.dumps(forged).encode()).decode().rstrip("=")
    s = served
    args = {"catalog": "assets/catalog.json", "page_token": token}
    assert await attack(s, "stac_search", args, secrets=secrets, canary=canary) == "invalid-argument"


async def test_an_asset_outside_gets_no_input_and_stays_unreadable(
    served: ClientSession, ws: Path, secrets: Secrets, canary: Canary
) -> None:
    s = served
    r = await s.call_tool("stac_search", {"catalog": "assets/catalog.json"})
    assert not r.is_error and secrets.token not in everything_returned(r)
    (asset,) = r.structured_content["items"][0]["assets"]
    assert asset["input"] is None
    await attack(s, "raster_info", {"path": asset["href"]}, secrets=secrets, canary=canary, codes={"out-of-root"})
