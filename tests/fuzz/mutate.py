"""Deterministic mutations of real geodata files, for fuzzing the server with corrupt inputs.

`make_case(seed, index)` builds one fuzz case: a base file from tests/data (or a small file written
here byte by byte: a netCDF classic grid, VRTs, zips with fixed timestamps), mutated one to three
times. The same (seed, index) always gives the same bytes: every random choice comes from one
`random.Random` seeded with both numbers.

Mutations are structure-aware where that is cheap. Each format module below lists the *fields* of
a file (label, offset, width, encoding): TIFF IFD entry counts, types, counts and offsets,
strip/tile offset and byte-count arrays, the GeoKey directory; SQLite header and b-tree page headers
and GeoPackage geometry blobs; .shp/.shx record headers and .dbf header and field descriptors;
netCDF classic header fields; the HDF5 superblock, B-tree/heap/symbol-table nodes and object header
messages; zip end-of-central-directory, central and local headers. A structural mutation writes an
"interesting" value (0, -1, off by one, file length, 2**31 …) into one such field. VRT XML gets
element and attribute mutations (including SourceFilename values that point outside the workspace,
to the network, or back at the VRT itself). Generic mutations flip bits, overwrite, insert, delete
and truncate anywhere.
"""

from __future__ import annotations

import io
import math
import random
import re
import struct
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from xml.etree import ElementTree as ET

DATA = Path(__file__).resolve().parent.parent / "data"

# One case in eight is each of these (the TIFF twice: it has the most structure).
KINDS = ("tiff", "gpkg", "shp", "netcdf", "hdf5", "zip", "vrt", "tiff")
RASTER_KINDS = {"tiff", "netcdf", "hdf5"}


@dataclass(frozen=True)
class Field:
    """A place in a file: `enc` is 'le'/'be' (unsigned int of `size` bytes), 'le-f64'/'be-f64' or 'bytes'."""

    label: str
    offset: int
    size: int
    enc: str


@dataclass(frozen=True)
class Case:
    """One fuzz input: files to write into a fresh case directory and the dataset name to open."""

    seed: int
    index: int
    kind: str
    base: str  # what it was made from, e.g. "raster/RGB.byte.tif"
    files: dict[str, bytes]  # file name in the case directory -> bytes
    target: str  # the file that was mutated
    dataset: str  # GDAL dataset name with "{dir}" for the case directory
    raster: bool  # raster tools (else vector tools) apply
    mutations: tuple[str, ...] = field(default_factory=tuple)

    def path(self, directory: str) -> str:
        return self.dataset.replace("{dir}", directory)

    def names(self, directory: str) -> tuple[str, ...]:
        """Strings that count as 'naming the file' in an error message: the dataset's workspace path, the file
        it opens (for an archive member: the archive) and the file that was mutated (a shapefile's .dbf …)."""
        main = self.dataset.replace("{dir}/", "")
        m = re.search(r'"\{dir\}/([^"]+)"', self.dataset) or re.search(r"\{dir\}/([^/]+)", self.dataset)
        container = m.group(1) if m else main
        return tuple(dict.fromkeys([self.path(directory), f"{directory}/{container}", container, self.target]))


# ----- interesting values ---------------------------------------------------------------------------


def _int_value(rng: random.Random, size: int, current: int, length: int) -> int:
    bits = 8 * size
    choices = [
        0,
        1,
        current + 1,
        current - 1,
        current * 2,
        current // 2,
        current + 4096,
        length,
        length - 1,
        length + 1,
        length * 2,
        2 ** (bits - 1) - 1,
        2 ** (bits - 1),
        2**bits - 1,
        2 ** (bits - 1) + 1,
        rng.randrange(2**bits),
        rng.randrange(max(1, min(length, 2**bits))),
    ]
    if size >= 2:
        choices += [0x100, 0xFF, 0x7F, 0x80, 0xFFFE]
    if size >= 4:
        choices += [0x10000, 0x7FFFFFFE, 0x40000000, 0x20000000]
    return rng.choice(choices) % (2**bits)


def _float_value(rng: random.Random, current: float) -> float:
    return rng.choice(
        [math.nan, math.inf, -math.inf, 0.0, -0.0, 1e308, -1e308, 5e-324, 1e20, -1e20, -current, current * 1e6, current + 1e-9]
    )


def write_field(rng: random.Random, data: bytearray, f: Field) -> str:
    """Put an interesting value into field `f` (clipped to the data); a description of what was done."""
    if f.offset < 0 or f.offset + f.size > len(data) or f.size <= 0:
        return generic(rng, data)
    raw = bytes(data[f.offset : f.offset + f.size])
    if f.enc.endswith("f64") and f.size == 8:
        fmt = ("<" if f.enc.startswith("le") else ">") + "d"
        value = _float_value(rng, struct.unpack(fmt, raw)[0])
        data[f.offset : f.offset + 8] = struct.pack(fmt, value)
        return f"{f.label}@{f.offset}={value!r}"
    if f.enc in ("le", "be"):
        order = "little" if f.enc == "le" else "big"
        value = _int_value(rng, f.size, int.from_bytes(raw, order), len(data))
        data[f.offset : f.offset + f.size] = value.to_bytes(f.size, order)
        return f"{f.label}@{f.offset}={value}"
    new = bytes(rng.choice([0, 0xFF, 0x7F, 0x80, rng.randrange(256)]) for _ in range(f.size))
    data[f.offset : f.offset + f.size] = new
    return f"{f.label}@{f.offset}={new.hex()}"


# ----- generic mutations ------------------------------------------------------------------------------


def generic(rng: random.Random, data: bytearray) -> str:
    """A format-blind mutation: bit flips, byte/int overwrite, insert, delete, duplicate, zero, truncate."""
    n = len(data)
    if n == 0:
        data.extend(rng.randbytes(rng.randrange(1, 64)))
        return "fill"
    op = rng.choice(["flip", "flip", "byte", "int", "int", "insert", "delete", "dup", "zero", "truncate", "truncate"])
    pos = rng.randrange(n)
    if op == "flip":
        for _ in range(rng.randrange(1, 9)):
            data[rng.randrange(n)] ^= 1 << rng.randrange(8)
        return "bitflips"
    if op == "byte":
        for _ in range(rng.randrange(1, 5)):
            data[rng.randrange(n)] = rng.choice([0, 0xFF, 0x7F, 0x80, rng.randrange(256)])
        return "bytes"
    if op == "int":
        size = rng.choice([2, 4, 8])
        return write_field(rng, data, Field("int", min(pos, max(0, n - size)), min(size, n), rng.choice(["le", "be"])))
    if op == "insert":
        chunk = rng.randbytes(rng.randrange(1, 65))
        data[pos:pos] = chunk
        return f"insert {len(chunk)}@{pos}"
    if op == "delete":
        k = rng.randrange(1, min(n - pos, 4096) + 1)
        del data[pos : pos + k]
        return f"delete {k}@{pos}"
    if op == "dup":
        k = rng.randrange(1, min(n - pos, 4096) + 1)
        at = rng.randrange(n)
        data[at:at] = data[pos : pos + k]
        return f"dup {k}@{pos}->{at}"
    if op == "zero":
        k = rng.randrange(1, min(n - pos, 4096) + 1)
        data[pos : pos + k] = bytes(k)
        return f"zero {k}@{pos}"
    keep = int(n * rng.random() ** 2)
    del data[keep:]
    return f"truncate {keep}"


def truncate_at(rng: random.Random, data: bytearray, fields: list[Field]) -> str:
    """Cut the file at (or just after) a structure boundary."""
    if not fields:
        return generic(rng, data)
    f = rng.choice(fields)
    keep = max(0, min(len(data), f.offset + rng.choice([0, 1, f.size // 2, f.size])))
    del data[keep:]
    return f"truncate at {f.label} ({keep})"


# ----- TIFF ----------------------------------------------------------------------------------------------

TIFF_TYPE_SIZE = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8, 11: 4, 12: 8, 13: 4, 16: 8, 17: 8, 18: 8}
TIFF_ARRAYS = {
    273: "StripOffsets",
    279: "StripByteCounts",
    324: "TileOffsets",
    325: "TileByteCounts",
    258: "BitsPerSample",
    339: "SampleFormat",
    34735: "GeoKeyDirectory",
    338: "ExtraSamples",
}
TIFF_SCALARS = {
    256: "ImageWidth",
    257: "ImageLength",
    259: "Compression",
    262: "Photometric",
    277: "SamplesPerPixel",
    278: "RowsPerStrip",
    284: "PlanarConfig",
    317: "Predictor",
    322: "TileWidth",
    323: "TileLength",
    254: "NewSubfileType",
    320: "ColorMap",
}
TIFF_DOUBLES = {33550: "ModelPixelScale", 33922: "ModelTiepoint", 34264: "ModelTransformation", 34736: "GeoDoubleParams"}
TIFF_ASCII = {42112: "GDAL_METADATA", 42113: "GDAL_NODATA", 34737: "GeoAsciiParams", 305: "Software"}
NODATA_TEXT = [
    b"nan",
    b"-nan",
    b"inf",
    b"1e400",
    b"-1e400",
    b"300",
    b"-1",
    b"-9999",
    b"65536",
    b"abc",
    b"",
    b"1.5",
    b"99999999999999999999999",
    b"0x10",
    b" ",
    b"1e-400",
]


@dataclass(frozen=True)
class _Entry:
    pos: int
    tag: int
    type: int
    count: int
    value: int

    def data_offset(self) -> int:
        size = TIFF_TYPE_SIZE.get(self.type, 1) * self.count
        return self.pos + 8 if size <= 4 else self.value


def _tiff(data: bytes) -> tuple[str, list[Field], list[_Entry]]:
    """Byte order, fields (IFD counts, entries, next pointers) and entries of a classic TIFF."""
    if data[:2] not in (b"II", b"MM") or len(data) < 8:
        raise ValueError("not a TIFF")
    e = "<" if data[:2] == b"II" else ">"
    enc = "le" if e == "<" else "be"
    if struct.unpack(e + "H", data[2:4])[0] != 42:
        raise ValueError("not a classic TIFF")
    fields = [Field("tiff.magic", 2, 2, enc), Field("tiff.first_ifd", 4, 4, enc)]
    entries: list[_Entry] = []
    off = struct.unpack(e + "I", data[4:8])[0]
    seen: set[int] = set()
    while off and off not in seen and off + 2 <= len(data) and len(seen) < 32:
        seen.add(off)
        n = struct.unpack(e + "H", data[off : off + 2])[0]
        fields.append(Field("ifd.count", off, 2, enc))
        for k in range(n):
            p = off + 2 + 12 * k
            if p + 12 > len(data):
                break
            tag, typ, cnt, val = struct.unpack(e + "HHII", data[p : p + 12])
            entries.append(_Entry(p, tag, typ, cnt, val))
            name = TIFF_ARRAYS.get(tag) or TIFF_SCALARS.get(tag) or TIFF_DOUBLES.get(tag) or TIFF_ASCII.get(tag) or str(tag)
            fields += [
                Field(f"{name}.tag", p, 2, enc),
                Field(f"{name}.type", p + 2, 2, enc),
                Field(f"{name}.count", p + 4, 4, enc),
                Field(f"{name}.value", p + 8, 4, enc),
            ]
        nxt = off + 2 + 12 * n
        if nxt + 4 > len(data):
            break
        fields.append(Field("ifd.next", nxt, 4, enc))
        off = struct.unpack(e + "I", data[nxt : nxt + 4])[0]
    return enc, fields, entries


def _tiff_elements(data: bytes, enc: str, entry: _Entry, label: str) -> list[Field]:
    width = TIFF_TYPE_SIZE.get(entry.type, 0)
    start = entry.data_offset()
    if width not in (1, 2, 4, 8) or start + width * entry.count > len(data):
        return []
    enc_el = enc + "-f64" if entry.type == 12 else enc
    return [Field(f"{label}[{i}]", start + i * width, width, enc_el) for i in range(min(entry.count, 4096))]


def mutate_tiff(rng: random.Random, data: bytearray) -> str:
    enc, fields, entries = _tiff(bytes(data))
    op = rng.choice(["field", "field", "array", "array", "scalar", "doubles", "geokeys", "ascii", "chunk", "truncate"])
    by_tag: dict[int, list[_Entry]] = {}
    for en in entries:
        by_tag.setdefault(en.tag, []).append(en)
    if op == "field":
        return write_field(rng, data, rng.choice(fields))
    if op == "truncate":
        return truncate_at(rng, data, fields)
    if op == "array":
        tags = [t for t in (273, 279, 324, 325, 258, 339) if t in by_tag]
        if tags:
            t = rng.choice(tags)
            els = _tiff_elements(bytes(data), enc, rng.choice(by_tag[t]), TIFF_ARRAYS[t])
            if els:
                if t in (273, 324) and len(els) > 1 and rng.random() < 0.3:
                    a, b = rng.sample(els, 2)  # two chunks at one offset
                    data[a.offset : a.offset + a.size] = data[b.offset : b.offset + b.size]
                    return f"{a.label}:={b.label}"
                return write_field(rng, data, rng.choice(els))
    if op == "scalar":
        tags = [t for t in TIFF_SCALARS if t in by_tag]
        if tags:
            en = rng.choice(by_tag[rng.choice(tags)])
            width = TIFF_TYPE_SIZE.get(en.type, 4) if en.count == 1 else 4
            return write_field(rng, data, Field(TIFF_SCALARS[en.tag], en.pos + 8, min(width, 4), enc))
    if op == "doubles":
        tags = [t for t in TIFF_DOUBLES if t in by_tag]
        if tags:
            t = rng.choice(tags)
            els = _tiff_elements(bytes(data), enc, by_tag[t][0], TIFF_DOUBLES[t])
            if els:
                return write_field(rng, data, rng.choice(els))
    if op == "geokeys" and 34735 in by_tag:
        els = _tiff_elements(bytes(data), enc, by_tag[34735][0], "GeoKeyDirectory")
        if els:
            return write_field(rng, data, rng.choice(els[:4] if rng.random() < 0.3 else els))
    if op == "ascii":
        tags = [t for t in TIFF_ASCII if t in by_tag]
        if tags:
            # A new value appended at the end of the file; the entry points to it.
            en = by_tag[rng.choice(tags)][0]
            if en.tag == 42113 or rng.random() < 0.4:
                text = rng.choice(NODATA_TEXT)
            else:
                old = bytes(data[en.data_offset() : en.data_offset() + en.count])
                cut = rng.randrange(len(old) + 1)
                text = old[:cut] + rng.choice([b"<", b"\xff\xfe\xc3(", b"&#0;", b"nan", b"]]>", b"\x00", b""]) + old[cut + 1 :]
            text += b"\x00"
            while len(data) % 2:
                data.append(0)
            where = len(data)
            data.extend(text + b"\x00" * 4)
            order = "little" if enc == "le" else "big"
            data[en.pos + 4 : en.pos + 8] = len(text).to_bytes(4, order)
            data[en.pos + 8 : en.pos + 12] = where.to_bytes(4, order)
            return f"{TIFF_ASCII[en.tag]}={text[:40]!r}"
    if op == "chunk":
        offs = [t for t in (273, 324) if t in by_tag]
        if offs:
            els = _tiff_elements(bytes(data), enc, by_tag[offs[0]][0], "chunk")
            if els:
                el = rng.choice(els)
                start = int.from_bytes(data[el.offset : el.offset + el.size], "little" if enc == "le" else "big")
                if start < len(data):
                    k = min(len(data) - start, rng.randrange(1, 64))
                    data[start : start + k] = rng.randbytes(k)
                    return f"chunk bytes {k}@{start}"
    return write_field(rng, data, rng.choice(fields))


# ----- SQLite / GeoPackage ----------------------------------------------------------------------------

SQLITE_HEADER = [
    ("page_size", 16, 2),
    ("write_version", 18, 1),
    ("read_version", 19, 1),
    ("reserved", 20, 1),
    ("max_payload", 21, 1),
    ("min_payload", 22, 1),
    ("leaf_payload", 23, 1),
    ("change_counter", 24, 4),
    ("db_pages", 28, 4),
    ("freelist_trunk", 32, 4),
    ("freelist_count", 36, 4),
    ("schema_cookie", 40, 4),
    ("schema_format", 44, 4),
    ("cache_size", 48, 4),
    ("autovacuum_root", 52, 4),
    ("text_encoding", 56, 4),
    ("user_version", 60, 4),
    ("incr_vacuum", 64, 4),
    ("application_id", 68, 4),
    ("version_valid_for", 92, 4),
]


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = 0
    for i in range(9):
        if pos + i >= len(data):
            raise ValueError("varint past the end")
        b = data[pos + i]
        if i == 8:
            return (value << 8) | b, pos + 9
        value = (value << 7) | (b & 0x7F)
        if not b & 0x80:
            return value, pos + i + 1
    raise ValueError("bad varint")


def _sqlite(data: bytes) -> tuple[list[Field], list[Field]]:
    """(header and b-tree page fields, cell payload fields) of an SQLite database."""
    if not data.startswith(b"SQLite format 3\x00"):
        raise ValueError("not SQLite")
    fields = [Field(f"sqlite.{n}", o, s, "be") for n, o, s in SQLITE_HEADER]
    ps = int.from_bytes(data[16:18], "big")
    ps = 65536 if ps == 1 else ps
    if ps < 512 or ps & (ps - 1):
        return fields, []
    cells: list[Field] = []
    for page in range(1, len(data) // ps + 1):
        base = (page - 1) * ps
        hdr = base + (100 if page == 1 else 0)
        kind = data[hdr]
        if kind not in (2, 5, 10, 13):
            continue
        interior = kind in (2, 5)
        fields += [
            Field(f"page{page}.type", hdr, 1, "be"),
            Field(f"page{page}.freeblock", hdr + 1, 2, "be"),
            Field(f"page{page}.cells", hdr + 3, 2, "be"),
            Field(f"page{page}.content", hdr + 5, 2, "be"),
            Field(f"page{page}.fragmented", hdr + 7, 1, "be"),
        ]
        if interior:
            fields.append(Field(f"page{page}.right", hdr + 8, 4, "be"))
        ncell = int.from_bytes(data[hdr + 3 : hdr + 5], "big")
        ptrs = hdr + (12 if interior else 8)
        for c in range(min(ncell, 64)):
            p = ptrs + 2 * c
            fields.append(Field(f"page{page}.cellptr{c}", p, 2, "be"))
            cell = base + int.from_bytes(data[p : p + 2], "big")
            if kind == 13 and cell < base + ps:
                cells.append(Field(f"page{page}.cell{c}.payload", cell, 1, "be"))
                try:
                    _, after = _varint(data, cell)
                    _, rec = _varint(data, after)
                    hlen, first = _varint(data, rec)
                    cells.append(Field(f"page{page}.cell{c}.header", rec, 1, "be"))
                    if hlen < 64:
                        cells += [
                            Field(f"page{page}.cell{c}.serial{k}", first + k, 1, "be")
                            for k in range(max(0, hlen - (first - rec)))
                        ]
                except ValueError:
                    pass
    return fields, cells


def _gpkg_blobs(data: bytes) -> list[Field]:
    """Fields of GeoPackage geometry blobs ('GP', version 0, flags, srs id, envelope, WKB)."""
    out: list[Field] = []
    for m in re.finditer(rb"GP\x00[\x00-\x0f]", data):
        o = m.start()
        flags = data[o + 3]
        env = {0: 0, 1: 32, 2: 48, 3: 48, 4: 64}.get((flags >> 1) & 7, 0)
        e = "le" if flags & 1 else "be"
        wkb = o + 8 + env
        we = "le" if wkb < len(data) and data[wkb] == 1 else "be"
        out += [
            Field("gpkg.flags", o + 3, 1, "bytes"),
            Field("gpkg.version", o + 2, 1, "be"),
            Field("gpkg.srs_id", o + 4, 4, e),
            Field("wkb.byte_order", wkb, 1, "bytes"),
            Field("wkb.type", wkb + 1, 4, we),
            Field("wkb.count", wkb + 5, 4, we),
        ]
        out += [Field(f"gpkg.envelope{k}", o + 8 + 8 * k, 8, e + "-f64") for k in range(env // 8)]
        out += [Field("wkb.coord", wkb + 9 + 8 * k, 8, we + "-f64") for k in range(4)]
    return out


def mutate_gpkg(rng: random.Random, data: bytearray) -> str:
    fields, cells = _sqlite(bytes(data))
    op = rng.choice(["header", "page", "page", "cell", "blob", "blob", "zero_page", "truncate"])
    if op == "header":
        return write_field(rng, data, rng.choice(fields[: len(SQLITE_HEADER)]))
    if op == "cell" and cells:
        return write_field(rng, data, rng.choice(cells))
    if op == "blob":
        blobs = _gpkg_blobs(bytes(data))
        if blobs:
            return write_field(rng, data, rng.choice(blobs))
    ps = int.from_bytes(data[16:18], "big") or 4096
    ps = 65536 if ps == 1 else ps
    pages = max(1, len(data) // ps)
    if op == "zero_page":
        page = rng.randrange(pages)
        data[page * ps : (page + 1) * ps] = bytes(min(ps, len(data) - page * ps))
        return f"zero page {page + 1}"
    if op == "truncate":
        keep = rng.randrange(pages) * ps + rng.choice([0, 0, 100, ps // 2])
        del data[keep:]
        return f"truncate {keep}"
    return write_field(rng, data, rng.choice(fields[len(SQLITE_HEADER) :] or fields))


# ----- Shapefile ------------------------------------------------------------------------------------

SHAPE_TYPES = [0, 1, 3, 5, 8, 11, 13, 15, 18, 21, 23, 25, 28, 31, 2, 99, 0xFFFFFFFF]
DBF_TYPES = b"CNFLDMBGPIYT@+O0X\x00"
DBF_TEXT = [
    b"\xff\xfe\xc3(",
    b"1e999",
    b"nan",
    b"abc",
    b"*****",
    b"\x00\x00",
    b"-",
    b"99999999999999999999",
    b"20231399",
    b"\xe9t\xe9",
    b"??",
    b"0x1F",
]


def _shp(data: bytes) -> list[Field]:
    if len(data) < 100 or int.from_bytes(data[:4], "big") != 9994:
        raise ValueError("not a .shp")
    fields = [
        Field("shp.code", 0, 4, "be"),
        Field("shp.length", 24, 4, "be"),
        Field("shp.version", 28, 4, "le"),
        Field("shp.type", 32, 4, "le"),
    ] + [Field(f"shp.bbox{k}", 36 + 8 * k, 8, "le-f64") for k in range(8)]
    pos, rec = 100, 0
    while pos + 12 <= len(data) and rec < 2000:
        clen = int.from_bytes(data[pos + 4 : pos + 8], "big") * 2
        body = pos + 8
        stype = int.from_bytes(data[body : body + 4], "little")
        fields += [
            Field(f"rec{rec}.number", pos, 4, "be"),
            Field(f"rec{rec}.length", pos + 4, 4, "be"),
            Field(f"rec{rec}.type", body, 4, "le"),
        ]
        if stype in (1, 11, 21):
            fields += [Field(f"rec{rec}.x", body + 4, 8, "le-f64"), Field(f"rec{rec}.y", body + 12, 8, "le-f64")]
        elif stype in (3, 5, 13, 15, 23, 25, 8, 18, 28) and body + 44 <= len(data):
            fields += [Field(f"rec{rec}.bbox{k}", body + 4 + 8 * k, 8, "le-f64") for k in range(4)]
            fields += [Field(f"rec{rec}.parts", body + 36, 4, "le")]
            if stype not in (8, 18, 28):
                nparts = int.from_bytes(data[body + 36 : body + 40], "little")
                fields += [Field(f"rec{rec}.points", body + 40, 4, "le")]
                fields += [Field(f"rec{rec}.part{k}", body + 44 + 4 * k, 4, "le") for k in range(min(nparts, 8))]
                pts = body + 44 + 4 * nparts
                fields += [Field(f"rec{rec}.coord{k}", pts + 8 * k, 8, "le-f64") for k in range(4)]
        if clen <= 0:
            break
        pos = body + clen
        rec += 1
    return fields


def _shx(data: bytes) -> list[Field]:
    if len(data) < 100 or int.from_bytes(data[:4], "big") != 9994:
        raise ValueError("not a .shx")
    fields = [Field("shx.length", 24, 4, "be"), Field("shx.type", 32, 4, "le")]
    for k in range(min((len(data) - 100) // 8, 2000)):
        fields += [Field(f"shx{k}.offset", 100 + 8 * k, 4, "be"), Field(f"shx{k}.length", 104 + 8 * k, 4, "be")]
    return fields


def _dbf(data: bytes) -> tuple[list[Field], list[Field], list[Field]]:
    """(header fields, field-descriptor fields, record value fields) of a dBASE file."""
    if len(data) < 33:
        raise ValueError("not a .dbf")
    header = [
        Field("dbf.version", 0, 1, "le"),
        Field("dbf.records", 4, 4, "le"),
        Field("dbf.header_len", 8, 2, "le"),
        Field("dbf.record_len", 10, 2, "le"),
        Field("dbf.language", 29, 1, "le"),
    ]
    desc: list[Field] = []
    widths: list[tuple[str, int]] = []
    pos = 32
    while pos + 32 <= len(data) and data[pos] != 0x0D and len(widths) < 255:
        name = data[pos : pos + 11].split(b"\x00")[0].decode("latin-1")
        desc += [
            Field(f"{name}.name", pos, 11, "bytes"),
            Field(f"{name}.type", pos + 11, 1, "bytes"),
            Field(f"{name}.length", pos + 16, 1, "le"),
            Field(f"{name}.decimals", pos + 17, 1, "le"),
        ]
        widths.append((name, data[pos + 16]))
        pos += 32
    desc.append(Field("dbf.terminator", pos, 1, "bytes"))
    hlen = int.from_bytes(data[8:10], "little")
    rlen = int.from_bytes(data[10:12], "little")
    values: list[Field] = []
    nrec = int.from_bytes(data[4:8], "little")
    for r in range(min(nrec, 200)):
        start = hlen + r * rlen
        if start + rlen > len(data) or rlen <= 0:
            break
        values.append(Field(f"row{r}.deleted", start, 1, "bytes"))
        o = start + 1
        for name, w in widths:
            values.append(Field(f"row{r}.{name}", o, w, "text"))
            o += w
    return header, desc, values


def mutate_shp(rng: random.Random, data: bytearray) -> str:
    fields = _shp(bytes(data))
    if rng.random() < 0.15:
        return truncate_at(rng, data, fields)
    head = fields[:12]
    return write_field(rng, data, rng.choice(head if rng.random() < 0.25 else fields[12:] or head))


def mutate_shx(rng: random.Random, data: bytearray) -> str:
    fields = _shx(bytes(data))
    if rng.random() < 0.15:
        return truncate_at(rng, data, fields)
    return write_field(rng, data, rng.choice(fields))


def mutate_dbf(rng: random.Random, data: bytearray) -> str:
    header, desc, values = _dbf(bytes(data))
    op = rng.choice(["header", "desc", "desc", "type", "dupname", "value", "value", "truncate"])
    names = [f for f in desc if f.label.endswith(".name")]
    if op == "header":
        return write_field(rng, data, rng.choice(header))
    if op == "type":
        types = [f for f in desc if f.label.endswith(".type")]
        if types:
            f = rng.choice(types)
            data[f.offset] = rng.choice(DBF_TYPES)
            return f"{f.label}={chr(data[f.offset])!r}"
    if op == "dupname" and len(names) > 1:
        a, b = rng.sample(names, 2)
        data[a.offset : a.offset + 11] = data[b.offset : b.offset + 11]
        return f"{a.label}:={b.label}"
    if op == "value" and values:
        f = rng.choice(values)
        if f.size > 0:
            text = rng.choice(DBF_TEXT)[: f.size].ljust(f.size, b" ")
            data[f.offset : f.offset + f.size] = text
            return f"{f.label}={text!r}"
    if op == "truncate":
        return truncate_at(rng, data, header + desc + values)
    if op == "desc" and names and rng.random() < 0.3:
        f = rng.choice(names)
        data[f.offset : f.offset + 11] = rng.choice(
            [b"\xff\xfe\xc3(\x00", b"\x00", b"a b;--'\"", b"X" * 11, b"geometry\x00", b"FID\x00"]
        ).ljust(11, b"\x00")[:11]
        return f"{f.label} renamed"
    return write_field(rng, data, rng.choice(desc or header))


# ----- netCDF classic (written here, so every field's place is known) -----------------------------------


def _nc_name(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">i", len(raw)) + raw + b"\x00" * (-len(raw) % 4)


class _NcWriter:
    def __init__(self) -> None:
        self.buf = bytearray()
        self.fields: list[Field] = []

    def put(self, label: str, raw: bytes, enc: str = "be") -> None:
        self.fields.append(Field(label, len(self.buf), len(raw), enc))
        self.buf += raw

    def name(self, label: str, text: str) -> None:
        self.put(label + ".namelen", struct.pack(">i", len(text.encode())))
        raw = text.encode()
        self.put(label + ".name", raw + b"\x00" * (-len(raw) % 4), "bytes")

    def attrs(self, label: str, attrs: list[tuple[str, int, bytes, int]]) -> None:
        if not attrs:
            self.put(label + ".absent", b"\x00" * 8)
            return
        self.put(label + ".tag", struct.pack(">i", 0x0C))
        self.put(label + ".count", struct.pack(">i", len(attrs)))
        for name, nctype, values, n in attrs:
            self.name(f"{label}.{name}", name)
            self.put(f"{label}.{name}.type", struct.pack(">i", nctype))
            self.put(f"{label}.{name}.nelems", struct.pack(">i", n))
            self.put(
                f"{label}.{name}.values",
                values + b"\x00" * (-len(values) % 4),
                "be-f64" if nctype == 6 and len(values) == 8 else "bytes",
            )


def _text(s: str) -> tuple[int, bytes, int]:
    return 2, s.encode(), len(s.encode())


def netcdf_classic(version: int = 1) -> tuple[bytes, list[Field]]:
    """A small CF grid (8 x 6 Int16 'elev', lon/lat axes, a 'crs' grid mapping) as netCDF classic bytes."""
    ny, nx = 6, 8
    ys = [40.25 + 0.5 * i for i in range(ny)]
    xs = [-120.25 + 0.5 * j for j in range(nx)]
    elev = [(-9999 if (i, j) in ((0, 0), (3, 5)) else (i * nx + j) * 37 % 500) for i in range(ny) for j in range(nx)]
    variables: list[tuple[str, list[int], list[tuple[str, int, bytes, int]], int, bytes]] = [
        (
            "crs",
            [],
            [
                ("grid_mapping_name", *_text("latitude_longitude")),
                ("semi_major_axis", 6, struct.pack(">d", 6378137.0), 1),
                ("inverse_flattening", 6, struct.pack(">d", 298.257223563), 1),
            ],
            4,
            struct.pack(">i", 0),
        ),
        ("y", [0], [("units", *_text("degrees_north")), ("standard_name", *_text("latitude"))], 6, struct.pack(f">{ny}d", *ys)),
        ("x", [1], [("units", *_text("degrees_east")), ("standard_name", *_text("longitude"))], 6, struct.pack(f">{nx}d", *xs)),
        (
            "elev",
            [0, 1],
            [
                ("_FillValue", 3, struct.pack(">h", -9999), 1),
                ("units", *_text("m")),
                ("grid_mapping", *_text("crs")),
                ("long_name", *_text("elevation")),
            ],
            3,
            struct.pack(f">{ny * nx}h", *elev),
        ),
    ]
    begins = [0] * len(variables)
    for _ in range(2):  # the second pass knows the header's length
        w = _NcWriter()
        w.put("magic", b"CDF" + bytes([version]), "bytes")
        w.put("numrecs", struct.pack(">i", 0))
        w.put("dims.tag", struct.pack(">i", 0x0A))
        w.put("dims.count", struct.pack(">i", 2))
        for name, size in (("y", ny), ("x", nx)):
            w.name(f"dim.{name}", name)
            w.put(f"dim.{name}.length", struct.pack(">i", size))
        w.attrs("global", [("Conventions", *_text("CF-1.6")), ("title", *_text("gdal-mcp fuzz base grid"))])
        w.put("vars.tag", struct.pack(">i", 0x0B))
        w.put("vars.count", struct.pack(">i", len(variables)))
        for k, (name, dims, attrs, nctype, values) in enumerate(variables):
            w.name(f"var.{name}", name)
            w.put(f"var.{name}.ndims", struct.pack(">i", len(dims)))
            for d in dims:
                w.put(f"var.{name}.dimid", struct.pack(">i", d))
            w.attrs(f"var.{name}", attrs)
            w.put(f"var.{name}.type", struct.pack(">i", nctype))
            w.put(f"var.{name}.vsize", struct.pack(">i", len(values) + (-len(values) % 4)))
            w.put(f"var.{name}.begin", struct.pack(">q" if version == 2 else ">i", begins[k]))
        pos = len(w.buf)
        for k, (_, _, _, _, values) in enumerate(variables):
            begins[k] = pos
            pos += len(values) + (-len(values) % 4)
    for name, _, _, _, values in variables:
        w.put(f"data.{name}", values + b"\x00" * (-len(values) % 4), "bytes")
    return bytes(w.buf), w.fields


def mutate_netcdf(rng: random.Random, data: bytearray, fields: list[Field]) -> str:
    f = rng.choice(fields)
    if f.label == "magic":
        data[3] = rng.choice([0, 2, 3, 5, 0xFF])
        return f"magic version {data[3]}"
    if rng.random() < 0.1:
        return truncate_at(rng, data, fields)
    return write_field(rng, data, f)


# ----- HDF5 ------------------------------------------------------------------------------------------

HDF5_SUPERBLOCK_V0 = [
    ("sb.version", 8, 1),
    ("sb.freespace_version", 9, 1),
    ("sb.root_version", 10, 1),
    ("sb.shared_version", 12, 1),
    ("sb.offset_size", 13, 1),
    ("sb.length_size", 14, 1),
    ("sb.leaf_k", 16, 2),
    ("sb.internal_k", 18, 2),
    ("sb.flags", 20, 4),
    ("sb.base", 24, 8),
    ("sb.freespace", 32, 8),
    ("sb.eof", 40, 8),
    ("sb.driver", 48, 8),
    ("sb.root.name", 56, 8),
    ("sb.root.header", 64, 8),
    ("sb.root.cache", 72, 4),
    ("sb.root.btree", 80, 8),
    ("sb.root.heap", 88, 8),
]


def _hdf5(data: bytes) -> list[Field]:
    if not data.startswith(b"\x89HDF\r\n\x1a\n") or data[8] != 0:
        raise ValueError("not an HDF5 v0 superblock")
    fields = [Field(n, o, s, "le") for n, o, s in HDF5_SUPERBLOCK_V0]
    headers = [int.from_bytes(data[64:72], "little")]
    for m in re.finditer(rb"TREE|HEAP|SNOD", data):
        o, sig = m.start(), m.group()
        if sig == b"TREE":
            fields += [
                Field("tree.type", o + 4, 1, "le"),
                Field("tree.level", o + 5, 1, "le"),
                Field("tree.used", o + 6, 2, "le"),
                Field("tree.left", o + 8, 8, "le"),
                Field("tree.right", o + 16, 8, "le"),
                Field("tree.key0", o + 24, 8, "le"),
                Field("tree.child0", o + 32, 8, "le"),
            ]
        elif sig == b"HEAP":
            fields += [
                Field("heap.version", o + 4, 1, "le"),
                Field("heap.size", o + 8, 8, "le"),
                Field("heap.free", o + 16, 8, "le"),
                Field("heap.data", o + 24, 8, "le"),
            ]
        else:
            n = int.from_bytes(data[o + 6 : o + 8], "little")
            fields += [Field("snod.version", o + 4, 1, "le"), Field("snod.count", o + 6, 2, "le")]
            for k in range(min(n, 16)):
                e = o + 8 + 40 * k
                fields += [
                    Field(f"snod{k}.name", e, 8, "le"),
                    Field(f"snod{k}.header", e + 8, 8, "le"),
                    Field(f"snod{k}.cache", e + 16, 4, "le"),
                ]
                if e + 16 <= len(data):
                    headers.append(int.from_bytes(data[e + 8 : e + 16], "little"))
    for h in headers:  # version 1 object headers and their messages
        if not 0 < h < len(data) - 16 or data[h] != 1:
            continue
        nmsg = int.from_bytes(data[h + 2 : h + 4], "little")
        fields += [Field("ohdr.version", h, 1, "le"), Field("ohdr.messages", h + 2, 2, "le"), Field("ohdr.size", h + 8, 4, "le")]
        p = h + 16
        for _ in range(min(nmsg, 32)):
            if p + 8 > len(data):
                break
            mtype = int.from_bytes(data[p : p + 2], "little")
            msize = int.from_bytes(data[p + 2 : p + 4], "little")
            fields += [
                Field(f"msg{mtype}.type", p, 2, "le"),
                Field(f"msg{mtype}.size", p + 2, 2, "le"),
                Field(f"msg{mtype}.flags", p + 4, 1, "le"),
            ]
            body = p + 8
            # Dataspace rank and dims, datatype class and size, layout class and address, filters …
            fields += [Field(f"msg{mtype}.byte{q}", body + q, 1, "le") for q in range(min(msize, 4))]
            fields += [Field(f"msg{mtype}.word{q}", body + q, 4, "le") for q in range(4, min(msize, 48) - 3, 4)]
            p = body + msize
    return fields


def mutate_hdf5(rng: random.Random, data: bytearray) -> str:
    fields = _hdf5(bytes(data))
    if rng.random() < 0.1:
        return truncate_at(rng, data, fields)
    return write_field(rng, data, rng.choice(fields))


# ----- zip ----------------------------------------------------------------------------------------------


def _zip(data: bytes) -> tuple[list[Field], list[tuple[int, int]]]:
    """Fields of the end record, central and local headers; (start, length) of each member's data."""
    eocd = data.rfind(b"PK\x05\x06")
    if eocd < 0:
        raise ValueError("no end of central directory")
    fields = [
        Field("eocd.disk", eocd + 4, 2, "le"),
        Field("eocd.cd_disk", eocd + 6, 2, "le"),
        Field("eocd.entries_disk", eocd + 8, 2, "le"),
        Field("eocd.entries", eocd + 10, 2, "le"),
        Field("eocd.cd_size", eocd + 12, 4, "le"),
        Field("eocd.cd_offset", eocd + 16, 4, "le"),
        Field("eocd.comment_len", eocd + 20, 2, "le"),
    ]
    streams: list[tuple[int, int]] = []
    p = int.from_bytes(data[eocd + 16 : eocd + 20], "little")
    k = 0
    while 0 <= p < len(data) - 46 and data[p : p + 4] == b"PK\x01\x02" and k < 64:
        fields += [
            Field(f"cd{k}.{n}", p + o, s, "le")
            for n, o, s in (
                ("version_needed", 6, 2),
                ("flags", 8, 2),
                ("method", 10, 2),
                ("crc", 16, 4),
                ("csize", 20, 4),
                ("usize", 24, 4),
                ("name_len", 28, 2),
                ("extra_len", 30, 2),
                ("comment_len", 32, 2),
                ("disk", 34, 2),
                ("ext_attr", 38, 4),
                ("local_offset", 42, 4),
            )
        ]
        nlen, xlen, clen = (int.from_bytes(data[p + o : p + o + 2], "little") for o in (28, 30, 32))
        fields.append(Field(f"cd{k}.name", p + 46, max(1, nlen), "bytes"))
        local = int.from_bytes(data[p + 42 : p + 46], "little")
        if data[local : local + 4] == b"PK\x03\x04":
            fields += [
                Field(f"local{k}.{n}", local + o, s, "le")
                for n, o, s in (
                    ("version", 4, 2),
                    ("flags", 6, 2),
                    ("method", 8, 2),
                    ("crc", 14, 4),
                    ("csize", 18, 4),
                    ("usize", 22, 4),
                    ("name_len", 26, 2),
                    ("extra_len", 28, 2),
                )
            ]
            lname, lextra = (int.from_bytes(data[local + o : local + o + 2], "little") for o in (26, 28))
            start = local + 30 + lname + lextra
            streams.append((start, int.from_bytes(data[p + 20 : p + 24], "little")))
        p += 46 + nlen + xlen + clen
        k += 1
    return fields, streams


def mutate_zip(rng: random.Random, data: bytearray) -> str:
    fields, streams = _zip(bytes(data))
    op = rng.choice(["field", "field", "field", "method", "stream", "truncate"])
    if op == "method":
        methods = [f for f in fields if f.label.endswith(".method")]
        if methods:
            f = rng.choice(methods)
            value = rng.choice([0, 1, 8, 9, 12, 14, 93, 95, 99, 0xFFFF])
            data[f.offset : f.offset + 2] = value.to_bytes(2, "little")
            return f"{f.label}={value}"
    if op == "stream" and streams:
        start, length = rng.choice(streams)
        if 0 < length and start + length <= len(data):
            pos = start + rng.randrange(length)
            k = min(rng.randrange(1, 33), start + length - pos)
            data[pos : pos + k] = rng.randbytes(k)
            return f"deflate stream bytes {k}@{pos}"
    if op == "truncate":
        return truncate_at(rng, data, fields)
    return write_field(rng, data, rng.choice(fields))


def stable_zip(members: dict[str, bytes]) -> bytes:
    """A deflated zip whose bytes depend only on `members` (fixed timestamps and attributes)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, raw in members.items():
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, raw)
    return buf.getvalue()


# ----- VRT ------------------------------------------------------------------------------------------

ALBERS = "+proj=aea +lat_0=34 +lon_0=-120 +lat_1=43 +lat_2=48 +x_0=600000 +y_0=0 +ellps=GRS80 +units=m +no_defs"
BOGUS_SOURCES = [
    "/etc/passwd",
    "../../../../../etc/passwd",
    "/vsicurl/http://127.0.0.1:9/x.tif",
    "http://127.0.0.1:9/x.tif",
    "/vsizip//etc/x.zip/a.tif",
    "missing.tif",
    "{self}",
    "/proc/self/environ",
    "/dev/zero",
    "",
    'NETCDF:"/etc/passwd":x',
    "/vsimem/x.tif",
    "/vsistdin/",
    "GTIFF_DIR:1:slope.tif",
    "/vsisubfile/0_100,slope.tif",
    "MEM:::DATAPOINTER=0x1,PIXELS=10,LINES=10",
    "slope.tif/..",
    "PG:dbname=x",
    "/vsis3/bucket/x.tif",
    "~/x.tif",
    "file:///etc/passwd",
    "slope.tif\x00.vrt",
    ".",
]
ATTR_VALUES = [
    "0",
    "-1",
    "1",
    "2147483647",
    "2147483648",
    "99999999999",
    "nan",
    "inf",
    "abc",
    "",
    "1e400",
    "-0",
    "0.5",
    "65536",
    "Float64",
    "CInt16",
    "Bogus",
]
TEXT_VALUES = [
    "",
    "abc",
    "1e400",
    "-1",
    "nan",
    "0,0,0,0,0,0",
    "1,2",
    "x" * 5000,
    "EPSG:99999",
    "\u00e9\u00e8",
    "-9999",
    "  0.0 ,  1.0,0,0,0,-1  ",
    'LOCAL_CS["x"]',
    "200000",
]


def slope_vrt() -> bytes:
    """A raster VRT over slope.tif (kept beside it): a simple source and a scaled complex source."""
    return (
        '<VRTDataset rasterXSize="84" rasterYSize="78">\n'
        f"  <SRS>{ALBERS}</SRS>\n"
        "  <GeoTransform>244300.61494985913, 25.52514657450613, 0, 1000868.7876863468, 0, -25.52514657450613</GeoTransform>\n"
        '  <VRTRasterBand dataType="Float32" band="1">\n'
        "    <NoDataValue>-9999</NoDataValue>\n"
        "    <SimpleSource>\n"
        '      <SourceFilename relativeToVRT="1">slope.tif</SourceFilename>\n'
        "      <SourceBand>1</SourceBand>\n"
        '      <SourceProperties RasterXSize="84" RasterYSize="78" DataType="Float32" BlockXSize="84" BlockYSize="24"/>\n'
        '      <SrcRect xOff="0" yOff="0" xSize="84" ySize="78"/>\n'
        '      <DstRect xOff="0" yOff="0" xSize="84" ySize="78"/>\n'
        "    </SimpleSource>\n"
        "  </VRTRasterBand>\n"
        '  <VRTRasterBand dataType="Float64" band="2">\n'
        "    <NoDataValue>-9999</NoDataValue>\n"
        "    <ComplexSource>\n"
        '      <SourceFilename relativeToVRT="1">slope.tif</SourceFilename>\n'
        "      <SourceBand>1</SourceBand>\n"
        '      <SrcRect xOff="10" yOff="10" xSize="40" ySize="40"/>\n'
        '      <DstRect xOff="0" yOff="0" xSize="84" ySize="78"/>\n'
        "      <NODATA>-9999</NODATA>\n"
        "      <ScaleOffset>1.5</ScaleOffset>\n"
        "      <ScaleRatio>2</ScaleRatio>\n"
        "    </ComplexSource>\n"
        "  </VRTRasterBand>\n"
        "</VRTDataset>\n"
    ).encode()


def points_ogr_vrt() -> bytes:
    """An OGR VRT over points.shp (kept beside it)."""
    return (
        "<OGRVRTDataSource>\n"
        '  <OGRVRTLayer name="pts">\n'
        '    <SrcDataSource relativeToVRT="1">points.shp</SrcDataSource>\n'
        "    <SrcLayer>points</SrcLayer>\n"
        "    <GeometryType>wkbPoint</GeometryType>\n"
        "    <LayerSRS>" + ALBERS + "</LayerSRS>\n"
        '    <Field name="id" type="Integer" src="id"/>\n'
        "  </OGRVRTLayer>\n"
        "</OGRVRTDataSource>\n"
    ).encode()


def mutate_xml(rng: random.Random, data: bytearray, self_name: str) -> str:
    try:
        root = ET.fromstring(bytes(data))
    except ET.ParseError:
        return mutate_xml_text(rng, data)
    elements = list(root.iter())
    el = rng.choice(elements)
    parents = {c: p for p in elements for c in p}
    op = rng.choice(["source", "source", "attr", "attr", "text", "text", "remove", "duplicate", "rename", "add"])
    sources = [e for e in elements if e.tag in ("SourceFilename", "SrcDataSource")]
    if op == "source" and sources:
        s = rng.choice(sources)
        s.text = rng.choice(BOGUS_SOURCES).replace("{self}", self_name)
        if rng.random() < 0.5:
            s.set("relativeToVRT", rng.choice(["0", "1"]))
        what = f"{s.tag}={s.text!r}"
    elif op == "attr" and el.attrib:
        key = rng.choice(sorted(el.attrib))
        el.set(key, rng.choice(ATTR_VALUES))
        what = f"{el.tag}@{key}={el.get(key)!r}"
    elif op == "text":
        el.text = rng.choice(TEXT_VALUES)
        what = f"{el.tag} text={el.text[:20]!r}"
    elif op == "remove" and el in parents:
        parents[el].remove(el)
        what = f"remove {el.tag}"
    elif op == "duplicate" and el in parents:
        parents[el].append(el)
        what = f"duplicate {el.tag}"
    elif op == "rename" and el is not root:
        old, el.tag = (
            el.tag,
            rng.choice(
                [
                    "Bogus",
                    "VRTRasterBand",
                    "ComplexSource",
                    "KernelFilteredSource",
                    "AveragedSource",
                    "OGRVRTLayer",
                    "OGRVRTUnionLayer",
                ]
            ),
        )
        what = f"rename {old}->{el.tag}"
    else:
        child = ET.SubElement(
            el,
            rng.choice(
                [
                    "PixelFunctionType",
                    "PixelFunctionLanguage",
                    "LUT",
                    "Kernel",
                    "ColorTable",
                    "Overview",
                    "MaskBand",
                    "SourceFilename",
                ]
            ),
        )
        child.text = rng.choice(["Python", "1:2,3:4", "abc", "-1", "slope.tif", "", "real"])
        if rng.random() < 0.3:
            el.set(
                "subClass",
                rng.choice(["VRTDerivedRasterBand", "VRTWarpedDataset", "VRTPansharpenedDataset", "VRTProcessedDataset"]),
            )
        what = f"add {child.tag} under {el.tag}"
    data[:] = ET.tostring(root)
    return what


def mutate_xml_text(rng: random.Random, data: bytearray) -> str:
    op = rng.choice(["truncate", "utf8", "nul", "bomb", "deep", "generic"])
    if op == "truncate":
        keep = rng.randrange(len(data) + 1)
        del data[keep:]
        return f"truncate xml {keep}"
    if op == "utf8":
        pos = rng.randrange(len(data) + 1)
        data[pos:pos] = rng.choice([b"\xff\xfe", b"\xc3(", b"\xed\xa0\x80", b"\x80"])
        return f"invalid utf-8 @{pos}"
    if op == "nul":
        pos = rng.randrange(len(data) + 1)
        data[pos:pos] = b"\x00"
        return f"nul @{pos}"
    if op == "bomb":
        ents = '<!ENTITY a "aaaaaaaaaa">' + "".join(
            f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(8)
        )
        head = f'<?xml version="1.0"?><!DOCTYPE x [{ents}]>'.encode()
        data[:0] = head
        pos = data.find(b">", len(head)) + 1
        if pos > 0:
            data[pos:pos] = b"&i;"
        return "entity expansion"
    if op == "deep":
        pos = data.find(b">") + 1
        depth = rng.choice([100, 5000])
        data[pos:pos] = b"<a>" * depth + b"</a>" * depth
        return f"nesting {depth}"
    return generic(rng, data)


# ----- bases and cases ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Base:
    kind: str
    name: str
    files: tuple[tuple[str, bytes], ...]  # written into the case directory as they are
    target: str  # the one that is mutated
    dataset: str
    raster: bool
    mutator: Callable[[random.Random, bytearray], str] | None = None


SHAPEFILES = ("naturalearth_lowres", "polygons", "lines", "points", "box")
TIFFS = ("RGB.byte.tif", "shade.tif", "slope.tif", "float_nan.tif", "test_esri_wkt.tif", "goes.tif", "rgb1.tif")


@cache
def _read(rel: str) -> bytes:
    return (DATA / rel).read_bytes()


def _shapefile(stem: str, only: tuple[str, ...] = ("shp", "shx", "dbf", "prj", "cpg")) -> tuple[tuple[str, bytes], ...]:
    return tuple((f"{stem}.{ext}", _read(f"vector/{stem}.{ext}")) for ext in only if (DATA / "vector" / f"{stem}.{ext}").exists())


@cache
def bases(kind: str) -> tuple[Base, ...]:
    """The unmutated inputs of one kind."""
    if kind == "tiff":
        return tuple(Base(kind, f"raster/{n}", ((n, _read(f"raster/{n}")),), n, "{dir}/" + n, True, mutate_tiff) for n in TIFFS)
    if kind == "gpkg":
        return (
            Base(
                kind,
                "vector/line_zm.gpkg",
                (("line_zm.gpkg", _read("vector/line_zm.gpkg")),),
                "line_zm.gpkg",
                "{dir}/line_zm.gpkg",
                False,
                mutate_gpkg,
            ),
        )
    if kind == "shp":
        out = []
        for stem in SHAPEFILES:
            files = _shapefile(stem)
            for ext, mut in (("shp", mutate_shp), ("shx", mutate_shx), ("dbf", mutate_dbf)):
                out.append(Base(kind, f"vector/{stem}.{ext}", files, f"{stem}.{ext}", "{dir}/" + stem + ".shp", False, mut))
        return tuple(out)
    if kind == "netcdf":
        out = []
        for version in (1, 2):
            raw, fields = netcdf_classic(version)
            for ds in ("{dir}/grid.nc", 'NETCDF:"{dir}/grid.nc":elev'):
                out.append(
                    Base(
                        kind,
                        f"generated netCDF classic v{version}",
                        (("grid.nc", raw),),
                        "grid.nc",
                        ds,
                        True,
                        lambda rng, data, f=fields: mutate_netcdf(rng, data, f),
                    )
                )
        return tuple(out)
    if kind == "hdf5":
        files = (("two-subs.h5", _read("raster/two-subs.h5")),)
        return tuple(
            Base(kind, "raster/two-subs.h5", files, "two-subs.h5", ds, True, mutate_hdf5)
            for ds in ('HDF5:"{dir}/two-subs.h5"://data', 'HDF5:"{dir}/two-subs.h5"://data2', "{dir}/two-subs.h5")
        )
    if kind == "zip":
        box = stable_zip({n: raw for n, raw in _shapefile("box", ("shp", "shx", "dbf", "prj"))})
        slope = stable_zip({"slope.tif": _read("raster/slope.tif")})
        return (
            Base(
                kind,
                "raster/N10W110.hgt.zip",
                (("N10W110.hgt.zip", _read("raster/N10W110.hgt.zip")),),
                "N10W110.hgt.zip",
                "/vsizip/{dir}/N10W110.hgt.zip/N10W110.hgt",
                True,
                mutate_zip,
            ),
            Base(
                kind,
                "generated slope.zip",
                (("slope.zip", slope),),
                "slope.zip",
                "/vsizip/{dir}/slope.zip/slope.tif",
                True,
                mutate_zip,
            ),
            Base(
                kind,
                "generated box.zip (shapefile)",
                (("box.zip", box),),
                "box.zip",
                "/vsizip/{dir}/box.zip/box.shp",
                False,
                mutate_zip,
            ),
        )
    if kind == "vrt":
        return (
            Base(
                kind,
                "generated slope.vrt",
                (("slope.vrt", slope_vrt()), ("slope.tif", _read("raster/slope.tif"))),
                "slope.vrt",
                "{dir}/slope.vrt",
                True,
                lambda rng, data: mutate_xml(rng, data, "slope.vrt"),
            ),
            Base(
                kind,
                "generated points.vrt (OGR)",
                (("points.vrt", points_ogr_vrt()), *_shapefile("points")),
                "points.vrt",
                "{dir}/points.vrt",
                False,
                lambda rng, data: mutate_xml(rng, data, "points.vrt"),
            ),
        )
    raise ValueError(f"unknown kind {kind}")


def make_case(seed: int, index: int, kinds: tuple[str, ...] = KINDS) -> Case:
    """Case `index` of run `seed`: always the same bytes for the same (seed, index, kinds)."""
    rng = random.Random(f"gdal-mcp-fuzz:{seed}:{index}")
    kind = kinds[index % len(kinds)]
    base = rng.choice(bases(kind))
    data = bytearray(dict(base.files)[base.target])
    done = []
    for _ in range(rng.choices([1, 2, 3], weights=[60, 25, 15])[0]):
        if base.mutator is not None and rng.random() < 0.8:
            try:
                done.append(base.mutator(rng, data))
                continue
            except (ValueError, IndexError, struct.error, OverflowError, zlib.error):
                pass  # an earlier mutation broke the structure: fall back to a generic one
        done.append(generic(rng, data))
    files = {name: (bytes(data) if name == base.target else raw) for name, raw in base.files}
    return Case(seed, index, kind, base.name, files, base.target, base.dataset, base.raster, tuple(done))
