"""The layering rules: the server never loads GDAL (workers do), engine code never imports MCP, each process's side
of the package imports nothing of the other's, no import cycles outside the engine, and no module grows past
MAX_LINES."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).parent.parent / "gdal_mcp"
GDAL_STACK = ("rasterio", "pyogrio", "pyarrow", "shapely", "pyproj", "numpy")
#: what runs in the workers' processes only: the GDAL work, and the workers' own loops
WORKER_SIDE = (
    "gdal_mcp.engine",
    "gdal_mcp.execution.local_worker",
    "gdal_mcp.execution.dask_worker",
    "gdal_mcp.execution.dask_confine",
    "gdal_mcp.execution.common",
)


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_server_process_does_not_load_the_gdal_stack() -> None:
    code = "import json, sys, gdal_mcp.server.build, gdal_mcp.cli; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    loaded = [m for m in json.loads(out.stdout) if _under(m, GDAL_STACK + WORKER_SIDE)]
    assert not loaded, f"the server imports {loaded}: keep GDAL work (and the workers' own code) in the workers"


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


# ---------------------------------------------------------------------------------------------- the module graph


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The ids of the nodes under `if TYPE_CHECKING:` (imports for annotations only, never run)."""
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            ids.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return ids


def _imports(module: str, *, annotations: bool = True) -> dict[str, int]:
    """The gdal_mcp modules `module` imports (at its top or inside functions) -> the line of the first import.
    `from package import name` counts as importing package.name when that is a module. Without `annotations`,
    imports under `if TYPE_CHECKING:` are left out."""
    path = MODULES[module]
    tree = ast.parse(path.read_text())
    skip = set() if annotations else _type_checking_only(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from . import x, from ..a import b
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([node.module] if node.module else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        for name in names:
            while name not in MODULES and "." in name:
                name = name.rpartition(".")[0]
            if name in MODULES and name != module:
                found.setdefault(name, node.lineno)
    return found


def _offenders(importers: tuple[str, ...], forbidden: tuple[str, ...]) -> list[str]:
    return [
        f"{MODULES[m].relative_to(PACKAGE.parent)}:{line} imports {target}"
        for m in MODULES
        if _under(m, importers)
        for target, line in _imports(m).items()
        if _under(target, forbidden)
    ]


def test_server_imports_nothing_of_the_workers_side() -> None:
    """The MCP process runs jobs through an executor (gdal_mcp.execution.local / dask_executor) and the GDAL-free
    job specifications (gdal_mcp.jobs); the engine and the workers' loops are loaded only where jobs run."""
    offenders = _offenders(("gdal_mcp.server",), WORKER_SIDE)
    assert not offenders, offenders


def test_server_code_never_imports_the_gdal_stack_even_inside_a_function() -> None:
    """Importing the server loads no GDAL or PROJ (test above), and no call may either: a dataset's WKT parsed by
    pyproj in the server would be PROJ running unconfined (the prompts did that until they sent it to a worker).
    The server side is gdal_mcp/server/, the executors, the sandbox and the root modules it imports."""
    server_side = [
        p
        for m, p in MODULES.items()
        if _under(m, ("gdal_mcp.server", "gdal_mcp.sandbox"))
        or m
        in (
            "gdal_mcp.execution",
            "gdal_mcp.execution.local",
            "gdal_mcp.execution.dask_executor",
            "gdal_mcp.jobs",
            "gdal_mcp.models",
            "gdal_mcp.errors",
            "gdal_mcp.config",
            "gdal_mcp.formats",
            "gdal_mcp.crs_text",
        )
    ]
    offenders = []
    for path in server_side:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            if any(n.split(".")[0] in GDAL_STACK for n in names):
                offenders.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert not offenders, f"server-side code imports GDAL/PROJ: {offenders}; send the work to a worker as a job"


def test_workers_side_imports_nothing_of_the_server() -> None:
    offenders = _offenders(WORKER_SIDE, ("gdal_mcp.server",))
    assert not offenders, offenders


def test_engine_imports_nothing_of_the_execution() -> None:
    """Engine functions are plain functions of their arguments (progress included): how and where they run is
    the executors' business."""
    offenders = _offenders(("gdal_mcp.engine",), ("gdal_mcp.execution",))
    assert not offenders, offenders


def test_approval_imports_neither_the_web_console_nor_the_tools() -> None:
    """The confirmation policy is asked by the tools and answered by the console (or the client): it knows
    neither."""
    offenders = _offenders(("gdal_mcp.server.approval",), ("gdal_mcp.server.web", "gdal_mcp.server.tools"))
    assert not offenders, offenders


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycles_outside_the_engine() -> None:
    """Modules import each other one way only (imports inside functions count: they are how cycles hide; imports
    under `if TYPE_CHECKING:` do not, they never run). The engine is left out: its packages have rules of their
    own (above)."""
    outside = [m for m in MODULES if not _under(m, ("gdal_mcp.engine",))]
    graph = {m: {t for t in _imports(m, annotations=False) if t in outside} for m in outside}
    cycles = _cycles(graph)
    described = [" <-> ".join(c) + ": " + "; ".join(f"{a} -> {sorted(graph[a] & set(c))}" for a in c) for c in cycles]
    assert not cycles, described


def test_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "e"}, "e": {"d"}, "f": set()}
    assert sorted(_cycles(graph)) == [["a", "b", "c"], ["d", "e"]]


# ---------------------------------------------------------------------------------------------- module size

MAX_LINES = 800
#: modules allowed over MAX_LINES, and why (remove an entry once its module is back under the limit)
LONG_MODULES = {
    "jobs.py": "one job dataclass per engine entry point, which the server imports GDAL-free; split by domain next",
    "models.py": "one plain result model per tool, shared by the engine and the server; split by domain with jobs.py",
}


def test_modules_stay_under_the_size_limit() -> None:
    """A module over MAX_LINES does several things: split it by what it does (as engine/raster/expression.py was
    out of calc.py), or name it in LONG_MODULES with the reason it cannot be."""
    sizes = {str(p.relative_to(PACKAGE)): len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")}
    too_long = {name: n for name, n in sizes.items() if n > MAX_LINES and name not in LONG_MODULES}
    assert not too_long, f"modules over {MAX_LINES} lines: {too_long}"
    stale = {name: sizes.get(name) for name in LONG_MODULES if sizes.get(name, 0) <= MAX_LINES}
    assert not stale, f"LONG_MODULES lists modules no longer over {MAX_LINES} lines (remove them): {stale}"


def test_no_module_is_named_like_a_standard_library_one() -> None:
    """`http.py`, `inspect.py` … shadow the standard library for a reader (and for tools that run a module's
    directory as a script)."""
    import sys

    names = {p.stem for p in PACKAGE.rglob("*.py")} | {p.name for p in PACKAGE.rglob("*") if p.is_dir()}
    clashes = sorted(n for n in names if n in sys.stdlib_module_names)
    assert not clashes, f"modules named like standard library ones: {clashes}"
