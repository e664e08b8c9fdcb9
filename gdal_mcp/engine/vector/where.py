"""Attribute filters (`where`, OGR SQL) checked against the layer's field types before GDAL runs them.

A text field compared with a number is a mistake GDAL does not report well: a GeoPackage (SQLite) compares the
number as text ('9' > '100' holds, so `pop > 100` keeps '9'), a shapefile refuses the filter with a message that
names neither the field nor its type. `check_where` refuses it first, naming the field, its type and the fixes.
"""

from __future__ import annotations

from collections.abc import Sequence

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.sandbox import sql_tokens

COMPARISONS = frozenset({"=", "==", "<", ">", "<=", ">=", "<>", "!="})
FLIPPED = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}  # 100 < pop is pop > 100
#: OGR field types holding text (pyogrio's ogr_types)
TEXT_TYPES = frozenset({"OFTString", "OFTWideString"})
# Tokens next to a field that make it part of a larger expression (a function call, arithmetic, a qualified name).
_EXPRESSION = frozenset({"(", ".", "+", "-", "*", "/", "%", "|", "||"})


def _merged(tokens: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Tokens with two-character comparison operators joined ('<' '=' -> '<=')."""
    out: list[tuple[str, str]] = []
    for kind, text in tokens:
        if kind == "op" and out and out[-1][0] == "op" and out[-1][1] + text in COMPARISONS | {"||"}:
            out[-1] = ("op", out[-1][1] + text)
        else:
            out.append((kind, text))
    return out


def _number(tokens: list[tuple[str, str]], i: int) -> str | None:
    """The number literal starting at token i (a sign included), else None."""
    if i < len(tokens) and tokens[i][0] == "num":
        return tokens[i][1]
    if i + 1 < len(tokens) and tokens[i][1] in ("-", "+") and tokens[i + 1][0] == "num":
        return tokens[i][1] + tokens[i + 1][1]
    return None


def check_where(where: str, fields: Sequence[str], ogr_types: Sequence[str]) -> None:
    """invalid-argument when `where` compares a text field with a number (=, <, >, BETWEEN, IN)."""
    text_fields = {str(f).lower(): str(f) for f, t in zip(fields, ogr_types, strict=False) if str(t) in TEXT_TYPES}
    if not text_fields or not where:
        return
    tokens = _merged(sql_tokens(where))

    def field_at(i: int) -> str | None:
        if not 0 <= i < len(tokens) or tokens[i][0] not in ("word", "qid"):
            return None
        name = tokens[i][1]
        if tokens[i][0] == "qid":
            name = name[1:-1] if len(name) > 1 else name
        before = tokens[i - 1][1] if i > 0 else ""
        after = tokens[i + 1][1] if i + 1 < len(tokens) else ""
        if before in _EXPRESSION - {"("} or after in _EXPRESSION:
            return None
        return text_fields.get(name.lower())

    for i in range(len(tokens)):
        field = field_at(i)
        if field is not None:
            j = i + 1
            op = tokens[j][1] if j < len(tokens) else ""
            number = None
            if op in COMPARISONS:
                number = _number(tokens, j + 1)
                after = j + 1 + (2 if number and number[0] in "+-" else 1)
                if after < len(tokens) and tokens[after][1] in _EXPRESSION:
                    number = None
            else:
                if op.lower() == "not":
                    j, op = j + 1, tokens[j + 1][1] if j + 1 < len(tokens) else ""
                if op.lower() == "between":
                    number = _number(tokens, j + 1)
                elif op.lower() == "in" and j + 1 < len(tokens) and tokens[j + 1][1] == "(":
                    number = _number(tokens, j + 2)
            if number is not None:
                _refuse(field, op, number)
        elif tokens[i][0] == "num" or (tokens[i][1] in ("-", "+") and _number(tokens, i)):
            # a number first: 100 < pop
            number = _number(tokens, i)
            k = i + (2 if tokens[i][0] == "op" else 1)
            before = tokens[i - 1][1] if i > 0 else ""
            if number is None or before in _EXPRESSION - {"("} or k >= len(tokens) or tokens[k][1] not in COMPARISONS:
                continue
            field = field_at(k + 1)
            if field is not None:
                _refuse(field, FLIPPED.get(tokens[k][1], tokens[k][1]), number)


def _refuse(field: str, op: str, number: str) -> None:
    op = op.upper() if op.isalpha() else op
    raise GdalMcpError(
        "invalid-argument",
        f"where compares the field '{field}', which is text (String), with the number {number}: GDAL would compare "
        f"them as text ('9' > '100') or refuse the filter. Compare as numbers with CAST({field} AS integer) "
        f'(or AS float for decimals), e.g. "CAST({field} AS integer) {op if op in COMPARISONS else ">"} {number}", '
        f"or compare as text with a quoted value ({field} = '{number}'); vector_info lists the field types",
    )
