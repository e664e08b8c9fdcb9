"""The layering rules: the server never loads GDAL (workers do), and engine code never imports MCP."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).parent.parent / "gdal_mcp"
GDAL_STACK = ("rasterio", "pyogrio", "pyarrow", "shapely", "pyproj", "numpy")


def test_server_process_does_not_load_the_gdal_stack() -> None:
    code = f"import sys, gdal_mcp.server.build, gdal_mcp.cli; print([m for m in {GDAL_STACK!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]", f"the server imports {out.stdout.strip()}: keep GDAL work in the workers"


def test_engine_never_imports_mcp() -> None:
    offenders = []
    for path in (PACKAGE / "engine").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else ([node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            )
            if any(n.split(".")[0] in ("fastmcp", "mcp") or n.startswith("gdal_mcp.server.tools") for n in names):
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not offenders, f"engine modules import MCP code: {offenders}"


def test_no_osgeo_and_no_print_in_the_package() -> None:
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                mod = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
                assert not (mod or "").startswith("osgeo"), f"{path}: osgeo import"
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
                assert any(k.arg == "file" for k in node.keywords), f"{path}:{node.lineno}: print() to stdout"


def _engine_imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return {n for n in names if n.startswith("gdal_mcp.engine.")}


def test_raster_and_vector_engines_do_not_import_each_other() -> None:
    """What needs both lives in engine/features (masks, rasterize, polygonize, contour, zonal, values at points),
    a package both may use."""
    forbidden = {
        "raster": ("gdal_mcp.engine.vector", "gdal_mcp.engine.preview"),
        "vector": ("gdal_mcp.engine.raster", "gdal_mcp.engine.preview"),
    }
    offenders = []
    for package, prefixes in forbidden.items():
        for path in (PACKAGE / "engine" / package).rglob("*.py"):
            bad = sorted(n for n in _engine_imports(path) if n.startswith(prefixes))
            if bad:
                offenders.append(f"engine/{package}/{path.name}: {bad}")
    assert not offenders, offenders


def test_shared_engine_modules_import_no_domain_package() -> None:
    """crs, bbox, masks, geometry_transform, grid, options … are used by every engine and depend on none."""
    domain = ("gdal_mcp.engine.raster", "gdal_mcp.engine.vector", "gdal_mcp.engine.features", "gdal_mcp.engine.preview")
    shared = (
        "crs.py",
        "bbox.py",
        "geometry_transform.py",
        "grid.py",
        "options.py",
        "progress.py",
        "failures.py",
        "guard.py",
        "tiles.py",
        "gdal_c.py",
    )
    offenders = {name: sorted(n for n in _engine_imports(PACKAGE / "engine" / name) if n.startswith(domain)) for name in shared}
    assert not {k: v for k, v in offenders.items() if v}, offenders
