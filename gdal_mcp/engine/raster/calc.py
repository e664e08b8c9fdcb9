"""Band math, like gdal_calc: an expression over named input bands, evaluated window by window.

The expression is never given to `eval`. It is parsed with `ast` as a single expression, checked against
a small whitelist (numbers, the input names, arithmetic, comparisons, boolean logic and a few numpy
functions), and compiled into a tree of closures over numpy arrays. Everything else is refused with
invalid-argument naming the construct.

Semantics: inputs are read as float64 (so `B - A` on Byte bands does not wrap); a pixel that is masked in
any input the expression uses (nodata, or GDAL's mask band) is nodata in the output; so is a pixel whose
result is NaN or ±inf (division by zero, log of 0 …), with a warning saying how many. `&`, `|`, `~`, `and`,
`or`, `not` are element-wise logical operations; comparisons give 1 or 0.
"""

from __future__ import annotations

import ast
import contextlib
import keyword
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from rasterio.windows import Window

from gdal_mcp.engine.crs import crs_label
from gdal_mcp.engine.failures import wrap_gdal_errors
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.raster.opening import open_raster
from gdal_mcp.engine.raster.output import check_nodata, fits, infer_driver, parse_dtype, summarize, write_windows
from gdal_mcp.engine.raster.output import creation_options as normalize_options
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import RasterSummary

MAX_LENGTH = 2000
MAX_DEPTH = 50
MAX_EXPONENT = 64
# Output pixels per window; an expression holds a few float64 temporaries of this size per node level.
WINDOW_PIXELS = 1024 * 1024
DEFAULT_NODATA = -9999.0
# Relative tolerance when comparing the inputs' geotransforms.
GRID_RTOL = 1e-9

# name -> (numpy implementation, allowed argument counts)
FUNCTIONS: dict[str, tuple[Callable[..., Any], tuple[int, ...]]] = {
    "where": (lambda c, x, y: np.where(_as_bool(c), x, y), (3,)),
    "sqrt": (np.sqrt, (1,)),
    "log": (np.log, (1,)),
    "log10": (np.log10, (1,)),
    "log2": (np.log2, (1,)),
    "exp": (np.exp, (1,)),
    "abs": (np.abs, (1,)),
    "min": (np.minimum, (2,)),
    "max": (np.maximum, (2,)),
    "clip": (np.clip, (3,)),
    "sin": (np.sin, (1,)),
    "cos": (np.cos, (1,)),
    "tan": (np.tan, (1,)),
    "arcsin": (np.arcsin, (1,)),
    "arccos": (np.arccos, (1,)),
    "arctan": (np.arctan, (1,)),
    "arctan2": (np.arctan2, (2,)),
    "floor": (np.floor, (1,)),
    "ceil": (np.ceil, (1,)),
    "round": (np.round, (1,)),
    "isnan": (np.isnan, (1,)),
    "nan_to_num": (lambda x, v=0.0: np.where(np.isnan(x), v, x), (1, 2)),
}
CONSTANTS = {"pi": math.pi, "nan": math.nan}
FUNCTION_LIST = ", ".join(FUNCTIONS)
ALLOWED = (f"numbers, the input names, + - * / // % ** (literal exponent), comparisons, & | ~ and/or/not, "
           f"and the functions {FUNCTION_LIST}")

ARITHMETIC: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply, ast.Div: np.true_divide,
    ast.FloorDiv: np.floor_divide, ast.Mod: np.mod, ast.Pow: np.power,
}
LOGICAL: dict[type, Callable[[Any, Any], Any]] = {ast.BitAnd: np.logical_and, ast.BitOr: np.logical_or,
                                                  ast.And: np.logical_and, ast.Or: np.logical_or}
COMPARISONS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Lt: np.less, ast.LtE: np.less_equal, ast.Gt: np.greater, ast.GtE: np.greater_equal,
    ast.Eq: np.equal, ast.NotEq: np.not_equal,
}
REFUSED_NAMES: dict[type, str] = {
    ast.Attribute: "attribute access", ast.Subscript: "subscripts ([...])", ast.Lambda: "lambda",
    ast.ListComp: "comprehensions", ast.SetComp: "comprehensions", ast.DictComp: "comprehensions",
    ast.GeneratorExp: "comprehensions (generator expressions)", ast.IfExp: "conditional expressions "
    "(x if c else y; use where(c, x, y))", ast.NamedExpr: "assignment expressions (:=)", ast.Starred: "* unpacking",
    ast.List: "lists", ast.Tuple: "tuples", ast.Dict: "dicts", ast.Set: "sets", ast.JoinedStr: "string literals",
    ast.FormattedValue: "string literals", ast.Await: "await", ast.Yield: "yield", ast.YieldFrom: "yield",
    ast.Slice: "slices",
}
OPERATOR_NAMES: dict[type, str] = {ast.MatMult: "@", ast.LShift: "<<", ast.RShift: ">>", ast.BitXor: "^",
                                   ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}


def _refuse(what: str) -> GdalMcpError:
    return GdalMcpError("invalid-argument", f"expression refused, not allowed: {what}. Expressions may use {ALLOWED}")


def _as_bool(x: Any) -> Any:
    return x if getattr(x, "dtype", None) == np.bool_ or isinstance(x, bool) else np.not_equal(x, 0)


def _as_number(x: Any) -> Any:
    return x.astype(np.float64) if getattr(x, "dtype", None) == np.bool_ else x


# ---------------------------------------------------------------------------------------------- parsing

@dataclass
class Env:
    """What one window's evaluation sees: the input arrays and where a division by zero happened."""

    values: dict[str, np.ndarray]
    divided_by_zero: np.ndarray | bool = False


Node = Callable[[Env], Any]


@dataclass
class Compiled:
    evaluate: Node
    names: list[str] = field(default_factory=list)


def _parse(expression: str) -> ast.expr:
    if not isinstance(expression, str) or not expression.strip():
        raise GdalMcpError("invalid-argument", "expression is empty; write e.g. \"(B - A) / (B + A)\"")
    if len(expression) > MAX_LENGTH:
        raise GdalMcpError("invalid-argument", f"expression refused: it is {len(expression)} characters long, more "
                           f"than the {MAX_LENGTH} allowed")
    try:
        return ast.parse(expression.strip(), mode="eval").body
    except (RecursionError, MemoryError):
        raise GdalMcpError("invalid-argument", f"expression refused: it nests deeper than {MAX_DEPTH} levels; split it "
                           "into several raster_calc steps") from None
    except (SyntaxError, ValueError) as e:
        error = e
    try:
        module = ast.parse(expression.strip(), mode="exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        module = None
    if module is not None and module.body:
        kinds = sorted({type(s).__name__.lower() for s in module.body if not isinstance(s, ast.Expr)})
        what = f"statements ({', '.join(kinds)})" if kinds else "more than one expression"
        raise GdalMcpError("invalid-argument", f"expression refused, not allowed: {what}. Give one expression "
                           "such as \"(B - A) / (B + A)\"")
    detail = f": {error.msg}" if isinstance(error, SyntaxError) and error.msg else ""
    raise GdalMcpError("invalid-argument", f"expression is not valid{detail}; write one expression such as "
                       "\"(B - A) / (B + A)\"")


def _check_depth(tree: ast.AST) -> None:
    stack: list[tuple[ast.AST, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise GdalMcpError("invalid-argument", f"expression refused: it nests deeper than {MAX_DEPTH} levels; "
                               "split it into several raster_calc steps")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def _literal(node: ast.expr) -> float | None:
    """The value of a numeric literal, allowing a leading sign; None if not one."""
    sign = 1.0
    while isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        sign = -sign if isinstance(node.op, ast.USub) else sign
        node = node.operand
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return sign * float(node.value)
    return None


ALLOWED_NODES = (ast.Constant, ast.Name, ast.Load, ast.UnaryOp, ast.BinOp, ast.BoolOp, ast.Compare, ast.Call,
                 ast.operator, ast.unaryop, ast.boolop, ast.cmpop, ast.keyword)


def _violation(node: ast.AST) -> str | None:
    """Why `node` is refused, or None when the whitelist allows it (names are checked when compiling)."""
    refused = REFUSED_NAMES.get(type(node))
    if isinstance(node, ast.Attribute):
        return f"attribute access ('.{node.attr}')"
    if refused:
        return refused
    if not isinstance(node, ALLOWED_NODES):
        return f"'{type(node).__name__}'"
    if type(node) in OPERATOR_NAMES:
        kind = "comparison" if isinstance(node, ast.cmpop) else "operator"
        return f"the {kind} '{OPERATOR_NAMES[type(node)]}'"
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str | bytes):
            return f"the string literal {str(node.value)[:40]!r}"
        if type(node.value) not in (int, float):
            return f"the literal {node.value!r} (only numbers are)"
        if isinstance(node.value, int) and abs(node.value) > 10 ** 300:
            return "a number this large"
    if isinstance(node, ast.Name) and node.id.startswith("__"):
        return f"the dunder name '{node.id}'"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        exponent = _literal(node.right)
        if exponent is None:
            return "an exponent that is not a literal number (e.g. 2 ** 10 ** 10 or A ** B)"
        if abs(exponent) > MAX_EXPONENT:
            return f"the exponent {exponent:g} (|exponent| must be at most {MAX_EXPONENT})"
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name):
            return None if isinstance(node.func, ast.Attribute | ast.Lambda) else "calling anything but a named function"
        if node.func.id.startswith("__"):
            return None  # reported as a dunder name
        if node.func.id not in FUNCTIONS:
            return f"the function '{node.func.id}'"
        if node.keywords:
            words = ", ".join(f"{k.arg}=" if k.arg else "**" for k in node.keywords)
            return f"keyword arguments ({words} in {node.func.id}())"
    return None


def _check_whitelist(tree: ast.AST) -> None:
    problems: list[str] = []
    for node in ast.walk(tree):
        problem = _violation(node)
        if problem and problem not in problems:
            problems.append(problem)
    if problems:
        raise _refuse("; ".join(problems[:6]))


class _Compiler:
    """Turns a checked tree into closures over an Env; only names and arities are left to check."""

    def __init__(self, inputs: set[str]) -> None:
        self.inputs = inputs
        self.used: list[str] = []

    def compile(self, node: ast.AST) -> Node:
        if isinstance(node, ast.Constant):
            assert isinstance(node.value, int | float)
            number = float(node.value)
            return lambda env: number
        if isinstance(node, ast.Name):
            return self._name(node.id)
        if isinstance(node, ast.UnaryOp):
            operand = self.compile(node.operand)
            if isinstance(node.op, ast.USub):
                return lambda env: np.negative(_as_number(operand(env)))
            if isinstance(node.op, ast.UAdd):
                return lambda env: _as_number(operand(env))
            return lambda env: np.logical_not(_as_bool(operand(env)))  # not, ~
        if isinstance(node, ast.BinOp):
            return self._binop(node)
        if isinstance(node, ast.BoolOp):
            return self._logical(LOGICAL[type(node.op)], [self.compile(v) for v in node.values])
        if isinstance(node, ast.Compare):
            return self._compare(node)
        if isinstance(node, ast.Call):
            return self._call(node)
        raise _refuse(f"'{type(node).__name__}'")  # unreachable after _check_whitelist

    def _name(self, name: str) -> Node:
        if name in self.inputs:
            if name not in self.used:
                self.used.append(name)
            return lambda env: env.values[name]
        if name in CONSTANTS:
            value = CONSTANTS[name]
            return lambda env: value
        if name in FUNCTIONS:
            raise GdalMcpError("invalid-argument", f"expression refused: '{name}' is a function; call it, "
                               f"e.g. {name}(A)")
        known = ", ".join(sorted(self.inputs)) or "none"
        raise GdalMcpError("invalid-argument", f"expression refused: unknown name '{name}'; the inputs are {known}, "
                           f"the constants {', '.join(CONSTANTS)}")

    @staticmethod
    def _logical(func: Callable[[Any, Any], Any], parts: list[Node]) -> Node:
        def logical(env: Env) -> Any:
            result = _as_bool(parts[0](env))
            for part in parts[1:]:
                result = func(result, _as_bool(part(env)))
            return result

        return logical

    def _binop(self, node: ast.BinOp) -> Node:
        op = type(node.op)
        left = self.compile(node.left)
        if op is ast.Pow:
            exponent = _literal(node.right)
            assert exponent is not None
            return lambda env: np.power(_as_number(left(env)), exponent)
        right = self.compile(node.right)
        if op in LOGICAL:
            return self._logical(LOGICAL[op], [left, right])
        func = ARITHMETIC[op]
        if op in (ast.Div, ast.FloorDiv, ast.Mod):
            def divide(env: Env) -> Any:
                denominator = _as_number(right(env))
                zero = np.equal(denominator, 0)
                if np.any(zero):
                    env.divided_by_zero = np.logical_or(env.divided_by_zero, zero)
                return func(_as_number(left(env)), denominator)

            return divide
        return lambda env: func(_as_number(left(env)), _as_number(right(env)))

    def _compare(self, node: ast.Compare) -> Node:
        operands = [self.compile(node.left)] + [self.compile(c) for c in node.comparators]
        funcs = [COMPARISONS[type(op)] for op in node.ops]

        def compare(env: Env) -> Any:
            values = [_as_number(o(env)) for o in operands]
            result = funcs[0](values[0], values[1])
            for i, func in enumerate(funcs[1:], start=1):  # a < b < c is a < b and b < c
                result = np.logical_and(result, func(values[i], values[i + 1]))
            return result

        return compare

    def _call(self, node: ast.Call) -> Node:
        assert isinstance(node.func, ast.Name)
        name = node.func.id
        func, arities = FUNCTIONS[name]
        if len(node.args) not in arities:
            wanted = " or ".join(str(a) for a in arities)
            raise GdalMcpError("invalid-argument", f"expression refused: {name}() takes {wanted} argument(s), "
                               f"got {len(node.args)}")
        args = [self.compile(a) for a in node.args]
        if name == "where":
            return lambda env: func(args[0](env), _as_number(args[1](env)), _as_number(args[2](env)))
        return lambda env: func(*(_as_number(a(env)) for a in args))


def compile_expression(expression: str, inputs: set[str]) -> Compiled:
    """Check `expression` against the whitelist and compile it; raises invalid-argument naming what is refused."""
    tree = _parse(expression)
    _check_depth(tree)
    _check_whitelist(tree)
    compiler = _Compiler(inputs)
    evaluate = compiler.compile(tree)
    return Compiled(evaluate=evaluate, names=compiler.used)


# ---------------------------------------------------------------------------------------------- inputs

NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
BAND_SUFFIX = re.compile(r"^(.+):(\d+)$")


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not NAME.fullmatch(name) or keyword.iskeyword(name):
        raise GdalMcpError("invalid-argument", f"input name {name!r} is not valid; use a letter or a word such as A, "
                           "B, red, nir (letters, digits, _; starting with a letter)")
    if name in FUNCTIONS or name in CONSTANTS:
        raise GdalMcpError("invalid-argument", f"input name {name!r} is taken by a function or constant; choose "
                           "another (e.g. A, B, red, nir)")


def split_band(spec: str) -> tuple[str, int]:
    """(dataset, band) of "path" or "path:band". A trailing ":<digits>" is a band only when what precedes it
    opens as a raster, so GDAL names that contain ':' (NETCDF:"f.nc":var, HDF5:"f.h5"://x) stay whole."""
    match = BAND_SUFFIX.match(spec)
    if match:
        try:
            with open_raster(match.group(1)):
                pass
        except GdalMcpError as e:
            if e.code == "out-of-root":
                raise
        else:
            return match.group(1), int(match.group(2))
    return spec, 1


def _grid_text(ds: Any) -> str:
    t = ds.transform
    return f"{ds.width}x{ds.height} pixels of {abs(t.a):.6g} x {abs(t.e):.6g}, origin ({t.c:.6f}, {t.f:.6f}), " \
           f"CRS {crs_label(ds.crs) or 'none'}"


def _same_grid(a: Any, b: Any) -> bool:
    if (a.width, a.height) != (b.width, b.height):
        return False
    if (a.crs is None or not a.crs.to_wkt()) != (b.crs is None or not b.crs.to_wkt()):
        return False
    if a.crs and a.crs.to_wkt() and a.crs != b.crs:
        return False
    ta, tb = a.transform, b.transform
    pixel = max(abs(ta.a), abs(ta.e), abs(ta.b), abs(ta.d))
    return all(math.isclose(x, y, rel_tol=GRID_RTOL, abs_tol=pixel * 1e-6) for x, y in zip(ta[:6], tb[:6], strict=True))


def _grid_error(first: str, ds_first: Any, name: str, ds: Any) -> GdalMcpError:
    b = ds_first.bounds
    crs = crs_label(ds_first.crs)
    fix = (f"reproject {name} onto {first}'s grid with raster_reproject (dst_crs={crs}, "
           f"bbox=[{b.left!r}, {b.bottom!r}, {b.right!r}, {b.top!r}], size=[{ds_first.width}, {ds_first.height}], "
           "resampling nearest for classes or bilinear for continuous values)") if crs else \
        f"give {name} the same size and georeferencing as {first}"
    return GdalMcpError("invalid-argument", f"input {name} is not on the same grid as {first}: {first} is "
                        f"{_grid_text(ds_first)}; {name} is {_grid_text(ds)}. All inputs must share CRS, transform "
                        f"and size: {fix}, or clip both to a common extent with raster_clip first")


# ---------------------------------------------------------------------------------------------- output

def _output_nodata(dtype: str, nodata: float | None, warnings: list[str]) -> float:
    if nodata is not None:
        return check_nodata(nodata, dtype)
    if fits(DEFAULT_NODATA, dtype):
        return DEFAULT_NODATA
    info = np.iinfo(np.dtype(dtype))
    value = float(info.max if info.min == 0 else info.min)
    warnings.append(f"{dtype} cannot hold -9999: nodata is {value:g}; pass nodata= to choose another")
    return value


@dataclass
class _Counts:
    divided_by_zero: int = 0
    not_finite: int = 0
    clamped: int = 0
    hit_nodata: int = 0


def _warnings(counts: _Counts, dtype: str, nodata: float) -> list[str]:
    out: list[str] = []
    if counts.divided_by_zero:
        out.append(f"{counts.divided_by_zero} pixel(s) divided by zero; they are nodata in the output "
                   "(where(B == 0, 0, A / B) gives them a value instead)")
    if counts.not_finite:
        out.append(f"{counts.not_finite} pixel(s) evaluated to NaN or infinity (log or sqrt of a negative number or "
                   "of 0, overflow …); they are nodata in the output")
    if counts.clamped:
        out.append(f"{counts.clamped} pixel value(s) fell outside the range of {dtype} and were clamped; choose a "
                   "wider output_type or scale the expression")
    if counts.hit_nodata:
        out.append(f"{counts.hit_nodata} valid pixel(s) computed exactly the nodata value {nodata:g} and will read as "
                   "nodata; pass another nodata= to keep them")
    return out


# ---------------------------------------------------------------------------------------------- calc

@wrap_gdal_errors
def calc(inputs: dict[str, str], expression: str, dst: str, *, output_type: str | None = None,
         nodata: float | None = None, format: str | None = None, creation_options: dict[str, Any] | None = None,
         progress: Progress = no_progress) -> tuple[RasterSummary, list[str]]:
    """Evaluate `expression` over the bands named in `inputs` ({"A": "red.tif", "B": "bands.tif:4"}) into `dst`."""
    warnings: list[str] = []
    if not isinstance(inputs, dict) or not inputs:
        raise GdalMcpError("invalid-argument", 'inputs must name at least one raster, e.g. {"A": "red.tif", '
                           '"B": "scene.tif:4"}')
    for name in inputs:
        _check_name(name)
    compiled = compile_expression(expression, set(inputs))
    if not compiled.names:
        raise GdalMcpError("invalid-argument", f"the expression uses none of the inputs ({', '.join(inputs)}); "
                           "refer to them by name, e.g. A * 2")
    unused = [n for n in inputs if n not in compiled.names]
    if unused:
        warnings.append(f"input(s) {', '.join(unused)} are not used by the expression and were not read")
    dtype = parse_dtype(output_type) or "float32"
    out_nodata = _output_nodata(dtype, nodata, warnings)
    driver = infer_driver(dst, format)
    if driver in ("VRT", "MEM"):
        raise GdalMcpError("unsupported", f"calc cannot write {driver}; write GTiff or COG instead")
    options = normalize_options(creation_options)

    with contextlib.ExitStack() as stack:
        sources: dict[str, tuple[Any, int]] = {}
        for name in compiled.names:
            path, band = split_band(inputs[name])
            ds = stack.enter_context(open_raster(path))
            if not 1 <= band <= ds.count:
                raise GdalMcpError("invalid-argument", f"input {name}: band {band} does not exist; {inputs[name]} has "
                                   f"{ds.count} band(s) (write \"path:N\" for band N)")
            sources[name] = (ds, band)
        first = compiled.names[0]
        ref = sources[first][0]
        for name, (ds, _) in sources.items():
            if name != first and not _same_grid(ref, ds):
                raise _grid_error(first, ref, name, ds)

        counts = _Counts()
        integer = np.issubdtype(np.dtype(dtype), np.integer)

        def compute(w: Window) -> np.ndarray:
            shape = (int(w.height), int(w.width))
            values: dict[str, np.ndarray] = {}
            masked = np.zeros(shape, dtype=bool)
            for name, (ds, band) in sources.items():
                data = ds.read(band, window=w, masked=True, out_dtype="float64")
                values[name] = np.ma.getdata(data)
                masked |= np.ma.getmaskarray(data)
            env = Env(values=values)
            with np.errstate(all="ignore"):
                result = np.broadcast_to(_as_number(compiled.evaluate(env)), shape).astype(np.float64)
            bad = ~np.isfinite(result) & ~masked
            if bad.any():
                by_zero = bad & env.divided_by_zero
                counts.divided_by_zero += int(by_zero.sum())
                counts.not_finite += int((bad & ~by_zero).sum())
            invalid = masked | bad
            if integer:
                info = np.iinfo(np.dtype(dtype))
                rounded = np.round(result)
                counts.clamped += int(((rounded < info.min) | (rounded > info.max))[~invalid].sum())
                result = np.clip(np.where(invalid, 0, rounded), info.min, info.max)
            out = result.astype(dtype)
            if not integer:
                overflow = ~np.isfinite(out) & ~invalid  # beyond Float32's range
                if overflow.any():
                    counts.not_finite += int(overflow.sum())
                    invalid = invalid | overflow
            counts.hit_nodata += int((out[~invalid] == out_nodata).sum())
            out[invalid] = out_nodata
            return out

        write_windows(dst, driver, options, width=ref.width, height=ref.height, count=1, dtype=dtype, crs=ref.crs,
                      transform=ref.transform, nodata=out_nodata, compute=compute, progress=progress, what="calc",
                      window_pixels=WINDOW_PIXELS)
    warnings.extend(_warnings(counts, dtype, out_nodata))
    return summarize(dst), warnings
