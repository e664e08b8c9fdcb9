"""raster_calc's expression language: band math over named inputs, or reductions of a stack of inputs.

An expression is never given to `eval`. It is parsed with `ast` as a single expression, checked against a small
whitelist (numbers, the input names, arithmetic, comparisons, boolean logic and a few numpy functions), and
compiled into a tree of closures over numpy arrays (`compile_expression`). Everything else is refused with
invalid-argument naming the construct.

Semantics: `&`, `|`, `~`, `and`, `or`, `not` are element-wise logical operations; comparisons give 1 or 0.
`min(a, b, c, …)` and `max(…)` take two or more arguments, element by element. A division by zero is recorded in
the evaluation's Env (the job makes those pixels nodata and says how many).

Stack mode: the expression sees one name, `S`, the stack of all inputs, which it reduces per pixel with `mean(S)`,
`median(S)`, `min(S)`, `max(S)`, `sum(S)`, `count(S)` or `std(S)` (population, ddof=0), computed by
`reduce_stack`: a missing (NaN) value is left out of that pixel's reduction; `count(S)` is the number of valid
inputs (0 where none), every other reduction is NaN where no input is valid. The reductions are values like any
other: `(max(S) - min(S)) / mean(S)`, `where(count(S) >= 3, median(S), nan)`.

Pure numpy: no GDAL here; reading the inputs and writing the output is the job's (engine/raster/calc.py).
"""

from __future__ import annotations

import ast
import keyword
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gdal_mcp.errors import GdalMcpError

MAX_LENGTH = 2000
MAX_DEPTH = 50
MAX_EXPONENT = 64
# Stack mode: the name of the stack and its reductions.
STACK = "S"
REDUCTIONS = ("mean", "median", "min", "max", "sum", "count", "std")

# name -> (numpy implementation, allowed argument counts)
FUNCTIONS: dict[str, tuple[Callable[..., Any], tuple[int, ...]]] = {
    "where": (lambda c, x, y: np.where(_as_bool(c), x, y), (3,)),
    "sqrt": (np.sqrt, (1,)),
    "log": (np.log, (1,)),
    "log10": (np.log10, (1,)),
    "log2": (np.log2, (1,)),
    "exp": (np.exp, (1,)),
    "abs": (np.abs, (1,)),
    "min": (np.minimum, (2,)),  # 2 or more arguments: see _Compiler._call; min(S) is a reduction
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
ALLOWED = (
    f"numbers, the input names, + - * / // % ** (literal exponent), comparisons, & | ~ and/or/not, "
    f"the functions {FUNCTION_LIST} (min and max of 2 or more arguments), and with a list of inputs the "
    f"reductions {', '.join(REDUCTIONS)} of the stack {STACK}, e.g. median({STACK})"
)

ARITHMETIC: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: np.add,
    ast.Sub: np.subtract,
    ast.Mult: np.multiply,
    ast.Div: np.true_divide,
    ast.FloorDiv: np.floor_divide,
    ast.Mod: np.mod,
    ast.Pow: np.power,
}
LOGICAL: dict[type, Callable[[Any, Any], Any]] = {
    ast.BitAnd: np.logical_and,
    ast.BitOr: np.logical_or,
    ast.And: np.logical_and,
    ast.Or: np.logical_or,
}
COMPARISONS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Lt: np.less,
    ast.LtE: np.less_equal,
    ast.Gt: np.greater,
    ast.GtE: np.greater_equal,
    ast.Eq: np.equal,
    ast.NotEq: np.not_equal,
}
REFUSED_NAMES: dict[type, str] = {
    ast.Attribute: "attribute access",
    ast.Subscript: "subscripts ([...])",
    ast.Lambda: "lambda",
    ast.ListComp: "comprehensions",
    ast.SetComp: "comprehensions",
    ast.DictComp: "comprehensions",
    ast.GeneratorExp: "comprehensions (generator expressions)",
    ast.IfExp: "conditional expressions (x if c else y; use where(c, x, y))",
    ast.NamedExpr: "assignment expressions (:=)",
    ast.Starred: "* unpacking",
    ast.List: "lists",
    ast.Tuple: "tuples",
    ast.Dict: "dicts",
    ast.Set: "sets",
    ast.JoinedStr: "string literals",
    ast.FormattedValue: "string literals",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.YieldFrom: "yield",
    ast.Slice: "slices",
}
OPERATOR_NAMES: dict[type, str] = {
    ast.MatMult: "@",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitXor: "^",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.In: "in",
    ast.NotIn: "not in",
}


def _refuse(what: str) -> GdalMcpError:
    return GdalMcpError("invalid-argument", f"expression refused, not allowed: {what}. Expressions may use {ALLOWED}")


def _as_bool(x: Any) -> Any:
    return x if getattr(x, "dtype", None) == np.bool_ or isinstance(x, bool) else np.not_equal(x, 0)


def as_number(x: Any) -> Any:
    return x.astype(np.float64) if getattr(x, "dtype", None) == np.bool_ else x


# ---------------------------------------------------------------------------------------------- parsing


@dataclass
class Env:
    """What one window's evaluation sees: the input arrays and where a division by zero happened."""

    values: dict[str, np.ndarray]
    divided_by_zero: np.ndarray | bool = False
    #: stack mode: reduction name -> its per-pixel result for this window
    reduced: dict[str, np.ndarray] = field(default_factory=dict)


Node = Callable[[Env], Any]


@dataclass
class Compiled:
    evaluate: Node
    names: list[str] = field(default_factory=list)
    #: stack mode: the reductions of S the expression uses
    reductions: list[str] = field(default_factory=list)


def _parse(expression: str) -> ast.expr:
    if not isinstance(expression, str) or not expression.strip():
        raise GdalMcpError("invalid-argument", 'expression is empty; write e.g. "(B - A) / (B + A)"')
    if len(expression) > MAX_LENGTH:
        raise GdalMcpError(
            "invalid-argument", f"expression refused: it is {len(expression)} characters long, more than the {MAX_LENGTH} allowed"
        )
    try:
        return ast.parse(expression.strip(), mode="eval").body
    except (RecursionError, MemoryError):
        raise GdalMcpError(
            "invalid-argument",
            f"expression refused: it nests deeper than {MAX_DEPTH} levels; split it into several raster_calc steps",
        ) from None
    except (SyntaxError, ValueError) as e:
        error = e
    try:
        module = ast.parse(expression.strip(), mode="exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        module = None
    if module is not None and module.body:
        kinds = sorted({type(s).__name__.lower() for s in module.body if not isinstance(s, ast.Expr)})
        what = f"statements ({', '.join(kinds)})" if kinds else "more than one expression"
        raise GdalMcpError(
            "invalid-argument", f'expression refused, not allowed: {what}. Give one expression such as "(B - A) / (B + A)"'
        )
    detail = f": {error.msg}" if isinstance(error, SyntaxError) and error.msg else ""
    raise GdalMcpError("invalid-argument", f'expression is not valid{detail}; write one expression such as "(B - A) / (B + A)"')


def _check_depth(tree: ast.AST) -> None:
    stack: list[tuple[ast.AST, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise GdalMcpError(
                "invalid-argument",
                f"expression refused: it nests deeper than {MAX_DEPTH} levels; split it into several raster_calc steps",
            )
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


ALLOWED_NODES = (
    ast.Constant,
    ast.Name,
    ast.Load,
    ast.UnaryOp,
    ast.BinOp,
    ast.BoolOp,
    ast.Compare,
    ast.Call,
    ast.operator,
    ast.unaryop,
    ast.boolop,
    ast.cmpop,
    ast.keyword,
)


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
        if isinstance(node.value, int) and abs(node.value) > 10**300:
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
        if node.func.id not in FUNCTIONS and node.func.id not in REDUCTIONS:
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

    def __init__(self, inputs: set[str], *, stack: bool = False) -> None:
        self.inputs = inputs
        self.stack = stack
        self.used: list[str] = []
        self.reductions: list[str] = []

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
                return lambda env: np.negative(as_number(operand(env)))
            if isinstance(node.op, ast.UAdd):
                return lambda env: as_number(operand(env))
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
        if self.stack and name == STACK:
            raise GdalMcpError(
                "invalid-argument",
                f"expression refused: {STACK} is the stack of all inputs; reduce it "
                f"per pixel first, e.g. median({STACK}), mean({STACK}), count({STACK}) "
                f"({', '.join(REDUCTIONS)} take {STACK} itself as their one argument)",
            )
        if name in self.inputs:
            if name not in self.used:
                self.used.append(name)
            return lambda env: env.values[name]
        if name in CONSTANTS:
            value = CONSTANTS[name]
            return lambda env: value
        if name in FUNCTIONS or name in REDUCTIONS:
            example = f"{STACK}" if self.stack else "A"
            raise GdalMcpError("invalid-argument", f"expression refused: '{name}' is a function; call it, e.g. {name}({example})")
        if self.stack:
            raise GdalMcpError(
                "invalid-argument",
                f"expression refused: unknown name '{name}'; with a list of inputs "
                f"the only name is {STACK}, the stack of all of them (e.g. median({STACK})), besides "
                f"the constants {', '.join(CONSTANTS)}",
            )
        known = ", ".join(sorted(self.inputs)) or "none"
        raise GdalMcpError(
            "invalid-argument",
            f"expression refused: unknown name '{name}'; the inputs are {known}, the constants {', '.join(CONSTANTS)}",
        )

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
            return lambda env: np.power(as_number(left(env)), exponent)
        right = self.compile(node.right)
        if op in LOGICAL:
            return self._logical(LOGICAL[op], [left, right])
        func = ARITHMETIC[op]
        if op in (ast.Div, ast.FloorDiv, ast.Mod):

            def divide(env: Env) -> Any:
                denominator = as_number(right(env))
                zero = np.equal(denominator, 0)
                if np.any(zero):
                    env.divided_by_zero = np.logical_or(env.divided_by_zero, zero)
                return func(as_number(left(env)), denominator)

            return divide
        return lambda env: func(as_number(left(env)), as_number(right(env)))

    def _compare(self, node: ast.Compare) -> Node:
        operands = [self.compile(node.left)] + [self.compile(c) for c in node.comparators]
        funcs = [COMPARISONS[type(op)] for op in node.ops]

        def compare(env: Env) -> Any:
            values = [as_number(o(env)) for o in operands]
            result = funcs[0](values[0], values[1])
            for i, func in enumerate(funcs[1:], start=1):  # a < b < c is a < b and b < c
                result = np.logical_and(result, func(values[i], values[i + 1]))
            return result

        return compare

    def _call(self, node: ast.Call) -> Node:
        assert isinstance(node.func, ast.Name)
        name = node.func.id
        if name in REDUCTIONS and (name not in ("min", "max") or len(node.args) == 1):
            return self._reduction(name, node.args)
        func, arities = FUNCTIONS[name]
        if name in ("min", "max"):
            if len(node.args) < 2:
                raise GdalMcpError(
                    "invalid-argument",
                    f"expression refused: {name}() takes 2 or more arguments "
                    f"(element-wise), or the stack {STACK} of a list of inputs; got none",
                )
            parts = [self.compile(a) for a in node.args]

            def extreme(env: Env) -> Any:
                result = as_number(parts[0](env))
                for part in parts[1:]:
                    result = func(result, as_number(part(env)))
                return result

            return extreme
        if len(node.args) not in arities:
            wanted = " or ".join(str(a) for a in arities)
            raise GdalMcpError(
                "invalid-argument", f"expression refused: {name}() takes {wanted} argument(s), got {len(node.args)}"
            )
        args = [self.compile(a) for a in node.args]
        if name == "where":
            return lambda env: func(args[0](env), as_number(args[1](env)), as_number(args[2](env)))
        return lambda env: func(*(as_number(a(env)) for a in args))

    def _reduction(self, name: str, args: list[ast.expr]) -> Node:
        if not self.stack:
            elementwise = (
                f" ({name}(A, B, C) works element-wise)"
                if name in ("min", "max")
                else " (with named inputs write e.g. (A + B + C) / 3)"
            )
            raise GdalMcpError(
                "invalid-argument",
                f"expression refused: {name}() of one argument reduces the stack "
                f"{STACK} of a list of inputs (inputs=[…] or input_pattern), e.g. {name}({STACK})"
                f"{elementwise}",
            )
        if len(args) != 1 or not (isinstance(args[0], ast.Name) and args[0].id == STACK):
            raise GdalMcpError(
                "invalid-argument",
                f"expression refused: {name}() takes the stack {STACK} itself, "
                f"e.g. {name}({STACK}); arithmetic goes outside it: {name}({STACK}) * 2",
            )
        if name not in self.reductions:
            self.reductions.append(name)
        if STACK not in self.used:
            self.used.append(STACK)
        return lambda env: env.reduced[name]


def compile_expression(expression: str, inputs: set[str], *, stack: bool = False) -> Compiled:
    """Check `expression` against the whitelist and compile it; raises invalid-argument naming what is refused.

    With `stack`, the only name is S (the stack of a list of inputs), which reductions such as median(S) take.
    """
    tree = _parse(expression)
    _check_depth(tree)
    _check_whitelist(tree)
    compiler = _Compiler(set() if stack else inputs, stack=stack)
    evaluate = compiler.compile(tree)
    return Compiled(evaluate=evaluate, names=compiler.used, reductions=compiler.reductions)


# ---------------------------------------------------------------------------------------------- stack


def reduce_stack(stack: np.ndarray, reductions: list[str] | set[str]) -> dict[str, np.ndarray]:
    """Per-pixel reductions of `stack` ((inputs, pixels) float64, NaN where an input is missing).

    Missing values are left out; `count` is 0 and every other reduction NaN where no input is valid. Only
    O(pixels) temporaries besides a validity mask of the stack's shape; `median` sorts `stack` in place, last.
    """
    wanted = set(reductions)
    out: dict[str, np.ndarray] = {}
    valid = ~np.isnan(stack)
    count = np.count_nonzero(valid, axis=0)
    with np.errstate(all="ignore"):
        if wanted & {"sum", "mean", "std"}:
            total = np.add.reduce(stack, axis=0, where=valid)
            mean = total / count  # 0 / 0 is NaN where no input is valid
            if "sum" in wanted:
                out["sum"] = np.where(count == 0, np.nan, total)
            if "mean" in wanted:
                out["mean"] = mean
            if "std" in wanted:
                squares = np.zeros(stack.shape[1:], dtype=np.float64)
                for layer, ok in zip(stack, valid, strict=True):
                    deviation = layer - mean
                    squares += np.where(ok, deviation * deviation, 0.0)
                out["std"] = np.sqrt(squares / count)
        if "min" in wanted:
            out["min"] = np.fmin.reduce(stack, axis=0)  # fmin skips NaN; all NaN gives NaN
        if "max" in wanted:
            out["max"] = np.fmax.reduce(stack, axis=0)
        if "count" in wanted:
            out["count"] = count.astype(np.float64)
        if "median" in wanted:
            stack.sort(axis=0)  # NaN sorts last: the valid values of each pixel come first
            low = np.maximum((count - 1) // 2, 0)[None]
            high = (count // 2)[None]
            out["median"] = (np.take_along_axis(stack, low, axis=0)[0] + np.take_along_axis(stack, high, axis=0)[0]) / 2
            out["median"][count == 0] = np.nan
    return out


# ---------------------------------------------------------------------------------------------- names

NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")


def check_name(name: str) -> None:
    """Refuse an input name the expressions could not use (not a word, a Python keyword, a function or constant)."""
    if not isinstance(name, str) or not NAME.fullmatch(name) or keyword.iskeyword(name):
        raise GdalMcpError(
            "invalid-argument",
            f"input name {name!r} is not valid; use a letter or a word such as A, "
            "B, red, nir (letters, digits, _; starting with a letter)",
        )
    if name in FUNCTIONS or name in CONSTANTS or name in REDUCTIONS:
        raise GdalMcpError(
            "invalid-argument", f"input name {name!r} is taken by a function or constant; choose another (e.g. A, B, red, nir)"
        )
