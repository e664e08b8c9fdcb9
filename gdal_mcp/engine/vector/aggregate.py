"""Statistics of groups of features, accumulated batch by batch: the `aggregate` of vector_join and vector_dissolve.

The spec is `{"*": ["count"], "pop": ["sum", "mean"]}`: field -> functions. `parse_aggregate(spec, fields)`
checks it against the layer's fields and names the outputs "<field>_<func>" ("count" for "*"). An
`Aggregator(parsed)` then takes batches (`add(group_keys, table)`: one group key per row) and gives one row of
statistics per group (`result(keys)`). Nulls are ignored (a group with no values gets null, and count 0);
count of "*" counts features. std is the sample standard deviation (n - 1, as pandas); median is exact, so its
values are kept until the end (memory grows with the rows aggregated); count_distinct keeps the distinct values.
vector_join also has count_by (`parse_aggregate(..., count_by=True)`): one count per distinct value of a field
(cities per continent), as integer fields "<field>_<value>" (categories known before writing when the layer is held
whole, else found as rows come and ordered by value at the end; at most MAX_CATEGORIES).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gdal_mcp.errors import GdalMcpError

FUNCTIONS = ("count", "sum", "mean", "min", "max", "median", "std", "first", "last", "count_distinct")
NUMERIC_ONLY = {"sum", "mean", "median", "std"}
ALL = "*"
COUNT_BY = "count_by"
MAX_CATEGORIES = 100

Spec = list[tuple[str, str, str]]  # (field, function, output field name)


def _types(fields: pa.Schema | Mapping[str, Any] | Sequence[str]) -> dict[str, Any]:
    if isinstance(fields, pa.Schema):
        return {f.name: f.type for f in fields}
    if isinstance(fields, Mapping):
        return dict(fields)
    return {f: None for f in fields}


def _numeric(t: Any) -> bool:
    return t is None or (
        isinstance(t, pa.DataType)
        and (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t) or pa.types.is_boolean(t))
    )


def parse_aggregate(
    spec: Mapping[str, Any] | None, fields: pa.Schema | Mapping[str, Any] | Sequence[str], *, count_by: bool = False
) -> Spec:
    """[(field, func, out_name)] from {"*": ["count"], "pop": ["sum", "mean"]}; errors name what is possible.

    `fields`: the layer's fields (an Arrow schema, a name -> Arrow type mapping, or names); with types,
    sum/mean/median/std on a text field are refused. count_by=True allows "count_by" (its out_name is the
    prefix of the fields it makes, one per value).
    """
    functions = (*FUNCTIONS, COUNT_BY) if count_by else FUNCTIONS
    if spec is None:
        return []
    if not isinstance(spec, Mapping) or not spec:
        raise GdalMcpError(
            "invalid-argument",
            'aggregate must be an object such as {"*": ["count"], "pop": ["sum", "mean"]}: field -> list of functions',
        )
    types = _types(fields)
    out: Spec = []
    for field, funcs in spec.items():
        funcs = [funcs] if isinstance(funcs, str) else funcs
        if not isinstance(funcs, (list, tuple)) or not funcs or not all(isinstance(f, str) for f in funcs):
            raise GdalMcpError("invalid-argument", f'aggregate[{field!r}] must be a list of functions, e.g. ["sum", "mean"]')
        if field != ALL and field not in types:
            raise GdalMcpError(
                "not-found",
                f"aggregate names field {field!r}, which the layer does not have; fields "
                f'are: {", ".join(types) or "(none)"} ("*" counts features)',
            )
        for func in funcs:
            func = func.lower()
            if func not in functions:
                raise GdalMcpError("invalid-argument", f"unknown aggregate function {func!r}; use one of {', '.join(functions)}")
            if field == ALL and func != "count":
                raise GdalMcpError("invalid-argument", f'"*" only takes "count" (got {func!r}); name a field for {func}')
            if func in NUMERIC_ONLY and field != ALL and not _numeric(types[field]):
                raise GdalMcpError(
                    "invalid-argument",
                    f"{func} needs a numeric field, but {field!r} is "
                    f"{types[field]}; use count, min, max, first, last or count_distinct",
                )
            name = "count" if field == ALL else field if func == COUNT_BY else f"{field}_{func}"
            if any(name == o[2] and (func == COUNT_BY) == (o[1] == COUNT_BY) for o in out):
                raise GdalMcpError("invalid-argument", f"aggregate asks for {name!r} twice")
            out.append((field, func, name))
    return out


def _too_many(field: str, n: int) -> GdalMcpError:
    return GdalMcpError(
        "invalid-argument",
        f"count_by on {field!r} makes one field per distinct value, and it has {n} (at most {MAX_CATEGORIES}): "
        "count by a field with fewer values, or use count_distinct",
    )


def categories(spec: Spec, table: pa.Table) -> dict[str, list[Any]]:
    """The distinct values (nulls left out, sorted) of each count_by field of `table`."""
    out: dict[str, list[Any]] = {}
    for field, func, _ in spec:
        if func == COUNT_BY and field not in out:
            values = sorted(v for v in pc.unique(table.column(field)).to_pylist() if v is not None)
            if len(values) > MAX_CATEGORIES:
                raise _too_many(field, len(values))
            out[field] = values
    return out


def category_names(prefix: str, values: Sequence[Any]) -> list[str]:
    """Field names "<prefix>_<value>" (value made a name: letters, digits, _), unique whatever their case."""
    names: list[str] = []
    taken: set[str] = set()
    for v in values:
        text = re.sub(r"\W+", "_", str(v)).strip("_") or "empty"
        name, i = f"{prefix}_{text}", 1
        while name.lower() in taken:
            i += 1
            name = f"{prefix}_{text}_{i}"
        taken.add(name.lower())
        names.append(name)
    return names


class _Column:
    """Running statistics of one field over the groups (group codes 0..n-1)."""

    def __init__(
        self, funcs: set[str], type_: pa.DataType | None, field: str = "", categories: Sequence[Any] | None = None
    ) -> None:
        self.funcs = funcs
        self.field = field
        self.fixed = categories is not None
        self.by: dict[Any, int] = {v: i for i, v in enumerate(categories or [])}
        self.by_counts = np.zeros((0, len(self.by)), dtype=np.int64)
        self.type = type_
        self.numeric = type_ is not None and _numeric(type_) and not pa.types.is_decimal(type_)
        self.integer = type_ is not None and (pa.types.is_integer(type_) or pa.types.is_boolean(type_))
        self.n = np.zeros(0, dtype=np.int64)
        self.sum: np.ndarray = np.zeros(0, dtype=np.int64 if self.integer else np.float64)
        self.mean = np.zeros(0)
        self.m2 = np.zeros(0)
        self.min: np.ndarray = np.zeros(0, dtype=object)
        self.max: np.ndarray = np.zeros(0, dtype=object)
        self.first: np.ndarray = np.zeros(0, dtype=object)
        self.last: np.ndarray = np.zeros(0, dtype=object)
        self.has_first = np.zeros(0, dtype=bool)
        self.kept: list[tuple[np.ndarray, np.ndarray]] = []  # (codes, values) for median
        self.distinct: dict[int, set[Any]] = {}

    def grow(self, size: int) -> None:
        extra = size - len(self.n)
        if extra <= 0:
            return
        self.n = np.concatenate([self.n, np.zeros(extra, dtype=np.int64)])
        self.sum = np.concatenate([self.sum, np.zeros(extra, dtype=self.sum.dtype)])
        self.mean = np.concatenate([self.mean, np.zeros(extra)])
        self.m2 = np.concatenate([self.m2, np.zeros(extra)])
        for name in ("min", "max", "first", "last"):
            setattr(self, name, np.concatenate([getattr(self, name), np.full(extra, None, dtype=object)]))
        self.has_first = np.concatenate([self.has_first, np.zeros(extra, dtype=bool)])
        self.by_counts = np.vstack([self.by_counts, np.zeros((extra, self.by_counts.shape[1]), dtype=np.int64)])

    def _count_by(self, codes: np.ndarray, column: pa.Array | pa.ChunkedArray) -> None:
        if not self.fixed:
            for v in pc.unique(column).to_pylist():
                if v not in self.by:
                    self.by[v] = len(self.by)
            if len(self.by) > MAX_CATEGORIES:
                raise _too_many(self.field, len(self.by))
            extra = len(self.by) - self.by_counts.shape[1]
            if extra:
                self.by_counts = np.hstack([self.by_counts, np.zeros((len(self.by_counts), extra), dtype=np.int64)])
        value_set = pa.array(list(self.by), type=column.type) if self.by else pa.nulls(0, type=column.type)
        cols = np.asarray(pc.fill_null(pc.index_in(column, value_set=value_set), -1).to_numpy(zero_copy_only=False))
        known = cols >= 0
        np.add.at(self.by_counts, (codes[known], cols[known]), 1)

    def category_values(self) -> list[Any]:
        """The values counted by count_by, in output order."""
        return list(self.by) if self.fixed else sorted(self.by)

    def category_counts(self, rows: np.ndarray) -> list[pa.Array]:
        seen = rows >= 0
        safe = np.where(seen, rows, 0)
        out = []
        for v in self.category_values():
            c = self.by[v]
            counts = self.by_counts[safe, c] if len(self.by_counts) else np.zeros(len(rows), dtype=np.int64)
            out.append(pa.array(np.where(seen, counts, 0).astype(np.int64)))
        return out

    def add(self, codes: np.ndarray, column: pa.Array | pa.ChunkedArray, size: int) -> None:
        self.grow(size)
        valid = ~np.asarray(column.is_null(), dtype=bool)
        codes = codes[valid]
        if not len(codes):
            return
        column = column.filter(pa.array(valid))
        if COUNT_BY in self.funcs:
            self._count_by(codes, column)
        if self.numeric:
            values = np.asarray(column.to_numpy(zero_copy_only=False))
            if values.dtype == bool:
                values = values.astype(np.int64)
        else:
            values = np.asarray(column.to_pylist(), dtype=object)
        count = np.bincount(codes, minlength=size)
        self.n += count
        if self.numeric and self.funcs & {"sum", "mean", "std"}:
            if self.integer:
                np.add.at(self.sum, codes, values.astype(np.int64))
            else:
                self.sum += np.bincount(codes, weights=values, minlength=size)
            if "std" in self.funcs:
                # Chan et al.: combine the batch's (count, mean, M2) with the running ones, per group.
                seen = count > 0
                fvalues = values.astype(np.float64)
                bmean = np.zeros(size)
                bmean[seen] = np.bincount(codes, weights=fvalues, minlength=size)[seen] / count[seen]
                bm2 = np.bincount(codes, weights=(fvalues - bmean[codes]) ** 2, minlength=size)
                before = self.n - count
                total = np.maximum(self.n, 1)
                delta = bmean - self.mean
                self.m2 = np.where(seen, self.m2 + bm2 + delta**2 * before * count / total, self.m2)
                self.mean = np.where(seen, self.mean + delta * count / total, self.mean)
        if self.funcs & {"min", "max"}:
            self._extremes(codes, values, size)
        if self.funcs & {"first", "last"}:
            order = np.arange(len(codes))
            uniq, first_at = np.unique(codes, return_index=True)
            new = ~self.has_first[uniq]
            self.first[uniq[new]] = values[first_at[new]]
            self.has_first[uniq] = True
            last_at = np.zeros(size, dtype=np.int64)
            np.maximum.at(last_at, codes, order)
            self.last[uniq] = values[last_at[uniq]]
        if "median" in self.funcs:
            self.kept.append((codes, values.astype(np.float64)))
        if "count_distinct" in self.funcs:
            for c, v in zip(codes.tolist(), values.tolist(), strict=True):
                self.distinct.setdefault(c, set()).add(v)

    def _extremes(self, codes: np.ndarray, values: np.ndarray, size: int) -> None:
        uniq = np.unique(codes)
        if self.numeric:
            lo = np.full(size, np.inf) if not self.integer else np.full(size, np.iinfo(np.int64).max)
            hi = np.full(size, -np.inf) if not self.integer else np.full(size, np.iinfo(np.int64).min)
            v = values.astype(np.int64 if self.integer else np.float64)
            np.minimum.at(lo, codes, v)
            np.maximum.at(hi, codes, v)
            for u in uniq.tolist():
                a, b = lo[u].item(), hi[u].item()
                self.min[u] = a if self.min[u] is None else min(self.min[u], a)
                self.max[u] = b if self.max[u] is None else max(self.max[u], b)
            return
        for c, v in zip(codes.tolist(), values.tolist(), strict=True):
            if self.min[c] is None or v < self.min[c]:
                self.min[c] = v
            if self.max[c] is None or v > self.max[c]:
                self.max[c] = v

    def values(self, func: str, rows: np.ndarray) -> pa.Array:
        """One statistic for the groups `rows` (codes; -1 for a group never seen)."""
        seen = rows >= 0
        safe = np.where(seen, rows, 0)
        n = np.where(seen, self.n[safe] if len(self.n) else 0, 0)
        has = n > 0
        if func == "count":
            return pa.array(n.astype(np.int64))
        if func == "sum":
            s = self.sum[safe] if len(self.sum) else np.zeros(len(rows))
            return pa.array(s, mask=~has, type=pa.int64() if self.integer else pa.float64())
        if func == "mean":
            s = self.sum[safe].astype(np.float64) if len(self.sum) else np.zeros(len(rows))
            return pa.array(s / np.maximum(n, 1), mask=~has, type=pa.float64())
        if func == "std":
            m2 = self.m2[safe] if len(self.m2) else np.zeros(len(rows))
            return pa.array(np.sqrt(m2 / np.maximum(n - 1, 1)), mask=n < 2, type=pa.float64())
        if func == "median":
            return pa.array(self._medians(rows), type=pa.float64())
        if func == "count_distinct":
            return pa.array([len(self.distinct.get(int(r), ())) if r >= 0 else 0 for r in rows], type=pa.int64())
        source = {"min": self.min, "max": self.max, "first": self.first, "last": self.last}[func]
        out = [source[r] if r >= 0 and r < len(source) else None for r in rows.tolist()]
        return pa.array(out, type=self.type) if self.type is not None else pa.array(out)

    def _medians(self, rows: np.ndarray) -> list[float | None]:
        if not self.kept:
            return [None] * len(rows)
        codes = np.concatenate([k[0] for k in self.kept])
        values = np.concatenate([k[1] for k in self.kept])
        order = np.lexsort((values, codes))
        codes, values = codes[order], values[order]
        starts = np.searchsorted(codes, np.arange(len(self.n)), side="left")
        ends = np.searchsorted(codes, np.arange(len(self.n)), side="right")
        out: list[float | None] = []
        for r in rows.tolist():
            if r < 0 or ends[r] == starts[r]:
                out.append(None)
                continue
            out.append(float(np.median(values[starts[r] : ends[r]])))
        return out


class Aggregator:
    """Statistics per group, fed batch by batch. `spec` is parse_aggregate's list; the table given to `add`
    holds the fields it names (its Arrow types decide the output types). `categories`: the values count_by
    counts, per field (from `categories()`); without them they are found as rows come."""

    def __init__(self, spec: Spec, categories: Mapping[str, Sequence[Any]] | None = None) -> None:
        self.spec = list(spec)
        self.categories = dict(categories or {})
        self.codes: dict[Any, int] = {}
        self.keys: list[Any] = []
        self.features = np.zeros(0, dtype=np.int64)
        self.columns: dict[str, _Column] = {}
        self.fields = [f for f in dict.fromkeys(f for f, _, _ in self.spec) if f != ALL]

    def _encode(self, group_keys: Any) -> np.ndarray:
        keys = np.asarray(group_keys) if not isinstance(group_keys, np.ndarray) else group_keys
        if keys.dtype != object and keys.ndim == 1:
            uniq, inverse = np.unique(keys, return_inverse=True)
            lookup = np.array([self._code(u.item()) for u in uniq], dtype=np.int64)
            return lookup[inverse] if len(uniq) else np.zeros(0, dtype=np.int64)
        items = list(group_keys) if keys.ndim != 1 or keys.dtype != object else keys.tolist()
        return np.array([self._code(k if not isinstance(k, list) else tuple(k)) for k in items], dtype=np.int64)

    def _code(self, key: Any) -> int:
        code = self.codes.get(key)
        if code is None:
            code = self.codes[key] = len(self.keys)
            self.keys.append(key)
        return code

    def add(self, group_keys: Any, table: pa.Table | pa.RecordBatch | None = None) -> None:
        """Add rows: group_keys[i] is the group of row i of `table` (hashable keys: ints, strings, tuples)."""
        codes = self._encode(group_keys)
        size = len(self.keys)
        if len(self.features) < size:
            self.features = np.concatenate([self.features, np.zeros(size - len(self.features), dtype=np.int64)])
        self.features += np.bincount(codes, minlength=size) if len(codes) else 0
        if not self.fields:
            return
        if table is None:
            raise GdalMcpError("internal-error", "aggregate needs the rows' fields")
        for field in self.fields:
            column = self.columns.get(field)
            if column is None:
                funcs = {f for fd, f, _ in self.spec if fd == field}
                column = self.columns[field] = _Column(
                    funcs, table.schema.field(field).type, field, self.categories.get(field) if COUNT_BY in funcs else None
                )
            column.add(codes, table.column(field), size)

    def _category_values(self, field: str) -> list[Any]:
        column = self.columns.get(field)
        if column is not None and COUNT_BY in column.funcs:
            return column.category_values()
        return list(self.categories.get(field, []))

    def output_schema(self, types: pa.Schema | Mapping[str, Any]) -> list[pa.Field]:
        """The Arrow fields of result() given the input field types (for empty results)."""
        t = _types(types)
        out: list[pa.Field] = []
        for field, func, name in self.spec:
            ftype = t.get(field)
            if func == COUNT_BY:
                out.extend(pa.field(n, pa.int64()) for n in category_names(name, self._category_values(field)))
            elif func in ("count", "count_distinct"):
                out.append(pa.field(name, pa.int64()))
            elif func == "sum":
                integer = ftype is not None and (pa.types.is_integer(ftype) or pa.types.is_boolean(ftype))
                out.append(pa.field(name, pa.int64() if integer else pa.float64()))
            elif func in ("mean", "std", "median"):
                out.append(pa.field(name, pa.float64()))
            else:
                out.append(pa.field(name, ftype if ftype is not None else pa.string()))
        return out

    def result(
        self, keys: Sequence[Any] | np.ndarray | None = None, types: pa.Schema | Mapping[str, Any] | None = None
    ) -> pa.Table:
        """One row per group: the groups of `keys` in that order (a group never seen gets count 0 and nulls), or
        every group seen in order of first appearance (then `.keys` names them)."""
        if keys is None:
            rows = np.arange(len(self.keys), dtype=np.int64)
        elif (
            isinstance(keys, np.ndarray)
            and keys.dtype != object
            and len(self.keys)
            and all(isinstance(k, (int, np.integer)) for k in self.keys[:1])
        ):
            lookup = self.codes
            rows = np.array([lookup.get(k, -1) for k in keys.tolist()], dtype=np.int64)
        else:
            rows = np.array([self.codes.get(k if not isinstance(k, list) else tuple(k), -1) for k in keys], dtype=np.int64)
        fields = self.output_schema(types or {f: c.type for f, c in self.columns.items()})
        arrays: list[pa.Array] = []
        for field, func, _name in self.spec:
            if func == COUNT_BY:
                column = self.columns.get(field)
                if column is not None:
                    arrays.extend(column.category_counts(rows))
                else:
                    arrays.extend(pa.array(np.zeros(len(rows), dtype=np.int64)) for _ in self._category_values(field))
                continue
            f = fields[len(arrays)]
            if field == ALL:
                safe = np.where(rows >= 0, rows, 0)
                counts = np.where(rows >= 0, self.features[safe] if len(self.features) else 0, 0)
                arrays.append(pa.array(counts.astype(np.int64)))
                continue
            column = self.columns.get(field)
            if column is None:  # no rows at all
                arrays.append(
                    pa.array([0] * len(rows), type=pa.int64())
                    if func in ("count", "count_distinct")
                    else pa.nulls(len(rows), type=f.type)
                )
                continue
            arr = column.values(func, rows)
            arrays.append(pc.cast(arr, f.type) if arr.type != f.type else arr)
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields))
