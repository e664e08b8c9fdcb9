"""Header checks GDAL's bundled libraries need before they see a file.

The netCDF library sizes its tables from the counts in a classic netCDF header before it reads the
entries: a corrupt count (found by tests/fuzz) makes it allocate gigabytes for a file of a few hundred
bytes, and when that allocation fails under the worker's memory limit it dereferences NULL and the
worker dies with SIGSEGV. A count can never exceed what the rest of the file could hold, so such a
header is refused here, as corrupt, before GDAL opens it.
"""

from __future__ import annotations

import re

from gdal_mcp.errors import GdalMcpError

NETCDF_MAGIC = (b"CDF\x01", b"CDF\x02", b"CDF\x05")
NC_DIMENSION, NC_VARIABLE, NC_ATTRIBUTE = 0x0A, 0x0B, 0x0C
NC_TYPE_SIZE = {1: 1, 2: 1, 3: 2, 4: 4, 5: 4, 6: 8, 7: 1, 8: 2, 9: 4, 10: 8, 11: 8}
# The fewest bytes one entry takes in a header: name length, then the fixed fields after the name.
MIN_DIM, MIN_ATTR, MIN_VAR = 8, 12, 28
HEAD_BYTES = 1 << 20  # a header larger than this is not checked further (no corrupt count found so far)


class _Corrupt(Exception):
    pass


def file_of(path: str) -> str | None:
    """The local file a GDAL dataset name opens directly (None for /vsi… names: not checked)."""
    quoted = re.search(r'"([^"]+)"', path)
    if quoted:
        path = quoted.group(1)
    elif re.match(r"^[A-Za-z0-9_]{2,}:", path):
        return None
    return None if path.startswith("/vsi") else path


def check_header(path: str) -> None:
    """Refuse a classic netCDF file whose header declares more entries than the file could hold."""
    file = file_of(path)
    if file is None:
        return
    try:
        with open(file, "rb") as fh:
            head = fh.read(HEAD_BYTES)
            size = fh.seek(0, 2)
    except OSError:
        return  # not a plain file (a directory, a missing file): GDAL says what it is
    if head[:4] not in NETCDF_MAGIC:
        return
    try:
        _walk_netcdf(head, size)
    except _Corrupt as e:
        raise GdalMcpError("gdal-error", f"{path} is not a valid netCDF file: its header {e}") from None
    except IndexError:
        return  # the header runs past what was read: leave it to the library


def _walk_netcdf(head: bytes, size: int) -> None:
    wide = head[3] == 5  # CDF-5 counts are 64-bit
    numrecs = int.from_bytes(head[4 : 12 if wide else 8], "big")
    pos = 4 + (8 if wide else 4)  # magic, numrecs

    def count() -> int:
        nonlocal pos
        width = 8 if wide else 4
        if pos + width > len(head):
            raise IndexError
        pos += width
        return int.from_bytes(head[pos - width : pos], "big")

    def word() -> int:
        nonlocal pos
        if pos + 4 > len(head):
            raise IndexError
        pos += 4
        return int.from_bytes(head[pos - 4 : pos], "big")

    def need(n: int, each: int, what: str) -> None:
        if n * each > size - pos:
            raise _Corrupt(f"declares {n} {what} with {max(0, size - pos)} bytes left in the file")

    def name(what: str) -> None:
        nonlocal pos
        n = count()
        need(n, 1, f"bytes of a {what} name")
        pos += n + (-n % 4)

    def attributes(where: str) -> None:
        nonlocal pos
        tag, n = word(), count()
        if tag == 0 and n == 0:
            return
        need(n, MIN_ATTR, f"{where} attributes")
        for _ in range(n):
            name("attribute")
            nc_type, values = word(), count()
            if nc_type not in NC_TYPE_SIZE:
                raise IndexError  # not something this check understands: leave it to the library
            nbytes = values * NC_TYPE_SIZE[nc_type]
            need(nbytes, 1, f"bytes of {where} attribute values")
            pos += nbytes + (-nbytes % 4)

    lengths: list[int] = []
    tag, n = word(), count()
    if not (tag == 0 and n == 0):
        need(n, MIN_DIM, "dimensions")
        for _ in range(n):
            name("dimension")
            lengths.append(count())
    attributes("global")
    tag, n = word(), count()
    if tag == 0 and n == 0:
        return
    need(n, MIN_VAR, "variables")
    records: list[tuple[int, int]] = []  # (vsize, begin) of each record variable (first dimension the unlimited one)
    for _ in range(n):
        name("variable")
        ndims = count()
        need(ndims, 8 if wide else 4, "dimensions of a variable")
        first = int.from_bytes(head[pos : pos + (8 if wide else 4)], "big") if ndims else -1
        pos += ndims * (8 if wide else 4)
        attributes("variable")
        word()  # nc_type
        vsize = count()
        width = 4 if head[3] == 1 else 8
        begin = int.from_bytes(head[pos : pos + width], "big")
        pos += width  # begin
        if 0 <= first < len(lengths) and lengths[first] == 0:
            records.append((vsize, begin))
    streaming = (1 << (64 if wide else 32)) - 1  # numrecs not known (written while streaming)
    if records and numrecs and numrecs != streaming:
        # the records of all record variables follow each other; a header claiming more of them than the file holds
        # (a 1 KB file claiming 2e9 records) made the library size its tables from the claim
        per_record = max(1, sum(v for v, _ in records))
        start = min(b for _, b in records)
        if numrecs > (size - start) // per_record + 1:
            raise _Corrupt(
                f"declares {numrecs} records of {per_record} bytes while the file holds {max(0, size - start)} bytes of records"
            )
