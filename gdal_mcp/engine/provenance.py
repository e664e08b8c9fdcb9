"""Provenance records: `<output>.provenance.json` beside every output a tool writes, in MapSmith's open manifest format
(mapsmith-ai/manifest-spec, Apache-2.0; v1, draft.6), with this server's additions under `x-gdal-mcp:` names.

Written by the worker that ran the job, into the job's temporary directory beside the output, so the record is
committed (or uploaded) with the dataset and never describes a file that was not placed. What the server knows (the
tool, its arguments as the caller gave them, workspace-relative paths, the confirmation) comes in the job's
`provenance`; what the worker measures is added here: each local input's size, date, SHA-256 and CRS, the output's
SHA-256 and CRS, the CRS decision (the PROJ operation for a reprojection, whether it was a ballpark one), the
libraries' versions, the GDAL and PROJ settings in force, timing, warnings, and checks on the result.

Digests are streamed (1 MiB reads) and kept per worker process by (file, device, inode, size, modification time):
an input used again is not read again. A file this server wrote has its digest in its own record, with the size and
modification time (nanoseconds) it had: when both still match, that digest is used (a chain of steps hashes each file
once). A record whose output name is not the file's own is not trusted.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
import re
import time
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from typing import Any

from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.sandbox.outputs import RECORD_SUFFIX

SPEC_VERSION = "1.0.0-draft.6"
X = "x-gdal-mcp:"
CHUNK = 1024 * 1024
#: the settings recorded from a worker's environment: those known to change how GDAL and PROJ read and compute (an
#: allow-list: a setting's value may be a credential or a path of the server's, so nothing else is recorded)
SETTINGS = (
    "GDAL_CACHEMAX",
    "GDAL_NUM_THREADS",
    "GDAL_PAM_ENABLED",
    "GDAL_DISABLE_READDIR_ON_OPEN",
    "GDAL_GEOREF_SOURCES",
    "GDAL_TIFF_OVR_BLOCKSIZE",
    "GTIFF_SRS_SOURCE",
    "GTIFF_HONOUR_NEGATIVE_SCALEY",
    "GTIFF_REPORT_COMPD_CS",
    "OSR_DEFAULT_AXIS_MAPPING_STRATEGY",
    "OGR_CT_FORCE_TRADITIONAL_GIS_ORDER",
    "OGR_ENABLE_PARTIAL_REPROJECTION",
    "OGR_ARC_STEPSIZE",
    "CENTER_LONG",
    "CHECK_WITH_INVERT_PROJ",
    "PROJ_NETWORK",
    "PROJ_ONLY_BEST_DEFAULT",
    "CPL_VSIL_CURL_ALLOWED_EXTENSIONS",
    "AWS_VIRTUAL_HOSTING",
    "AWS_HTTPS",
)
ARCHIVES = (".zip", ".tar", ".tgz", ".tar.gz", ".gz", ".7z", ".rar")

#: the server's key for this job (Job.provenance["key"]): records are signed with it (HMAC-SHA256 over their canonical
#: JSON, x-gdal-mcp:signature), and only a record it verifies is believed (a digest, an earlier record, a lineage
#: step, a replay): a record is a file in the workspace, and anyone who can write there could plant one
KEY: ContextVar[bytes] = ContextVar("gdal_mcp_provenance_key", default=b"")
SIGNATURE = "x-gdal-mcp:signature"


def _canonical(record: Mapping[str, Any]) -> bytes:
    body = {k: v for k, v in record.items() if k != SIGNATURE}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def sign(record: Mapping[str, Any]) -> str:
    return "hmac-sha256:" + hmac.new(KEY.get(), _canonical(record), hashlib.sha256).hexdigest()


def verified(record: Any) -> bool:
    """Whether `record` carries this server's signature (KEY) over exactly its content."""
    if not isinstance(record, dict) or not KEY.get() or not isinstance(record.get(SIGNATURE), str):
        return False
    try:
        return hmac.compare_digest(record[SIGNATURE], sign(record))
    except (TypeError, ValueError, RecursionError):
        return False


#: (real path, state) -> SHA-256, in this worker process
_digests: dict[tuple[str, str], str] = {}


def iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"


def sha256_file(path: str, progress: Progress = no_progress) -> str:
    """The SHA-256 of a file's bytes, read in 1 MiB pieces."""
    h = hashlib.sha256()
    size = max(1, os.path.getsize(path))
    done = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            h.update(chunk)
            done += len(chunk)
            if done % (256 * CHUNK) < CHUNK:
                progress(min(1.0, done / size), "hashing")
    return h.hexdigest()


#: the files of a shapefile that make its digest (manifest-spec section 3.3, draft.9), each named by its extension
SHAPEFILE_MEMBERS = (".shp", ".shx", ".dbf", ".prj", ".cpg")


def shapefile_parts(name: str, names: Iterable[str]) -> dict[str, str] | None:
    """The member files of the shapefile `name` among `names` (a folder's), by lower-case extension, matched
    case-insensitively; None when two files match one member (which one GDAL read is unknown) or there is no .shp."""
    stem = name[:-4].lower()
    found: dict[str, str] = {}
    for entry in names:
        ext = entry[len(stem) :].lower()
        if entry.lower().startswith(stem) and ext in SHAPEFILE_MEMBERS:
            if ext in found:
                return None
            found[ext] = entry
    return found if ".shp" in found else None


def listing_digest(digests: Mapping[str, str]) -> str:
    """The digest of a dataset of several files: SHA-256 of '<name>\\0<sha256>\\n' per member, sorted by the bytes of
    the name (manifest-spec section 3.3, draft.9)."""
    text = "".join(f"{name}\0{sha}\n" for name, sha in sorted(digests.items(), key=lambda i: i[0].encode()))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def members(path: str) -> dict[str, str]:
    """The files a dataset's digest covers, by the name each is listed under: every regular file of a directory
    output (by relative path), a shapefile's members (by extension, shapefile_parts), else the file alone ("")."""
    if os.path.isdir(path):  # a directory output (raster_tiles): every regular file in it, by relative path
        found_in: dict[str, str] = {}
        for folder, dirs, files in os.walk(path):
            dirs[:] = [d for d in dirs if not d.startswith(".") and not os.path.islink(os.path.join(folder, d))]
            for name in files:
                full = os.path.join(folder, name)
                if not name.startswith(".") and os.path.isfile(full) and not os.path.islink(full):
                    found_in[os.path.relpath(full, path).replace(os.sep, "/")] = full
        return found_in
    if not path.lower().endswith(".shp"):
        return {"": path}
    folder, name = os.path.split(path)
    files = [e for e in os.listdir(folder or ".") if os.path.isfile(p := os.path.join(folder, e)) and not os.path.islink(p)]
    parts = shapefile_parts(name, files)
    return {ext: os.path.join(folder, entry) for ext, entry in parts.items()} if parts else {"": path}


def state(path: str) -> str:
    """What the digest of the dataset at `path` depends on, as text: each member's size and modification time (ns).
    A digest recorded with a state holds while the state is the same."""
    return ";".join(f"{name}:{os.stat(p).st_size}:{os.stat(p).st_mtime_ns}" for name, p in sorted(members(path).items()))


def digest(path: str, known_digests: Mapping[str, Any] | None = None) -> str:
    """The SHA-256 of the dataset at `path`: of the file's bytes, or for a shapefile of the listing of its members'
    digests ('<ext>\\0<sha256>\\n' per member, sorted; manifest-spec section 3.3, draft.9, so a renamed shapefile keeps its
    digest). From this process's memory, from `known_digests` (the server's, by real path: [state, sha256]), from the
    record this server wrote beside it, while the dataset's state (its files' sizes and dates) is the one recorded;
    else read."""
    files = members(path)
    now = state(path)
    key = (os.path.realpath(path), now)
    given = (known_digests or {}).get(os.path.realpath(path))
    if given and given[0] == now and re.fullmatch(r"[0-9a-f]{64}", str(given[1])):
        _digests[key] = str(given[1])
    known = _digests.get(key) or _recorded_digest(path, now)
    if known is None:
        if list(files) == [""]:
            known = sha256_file(path)
        else:
            known = listing_digest({name: sha256_file(p) for name, p in files.items()})
    _digests[key] = known
    return known


#: the largest record read (they are a few kilobytes; one keeping 20 earlier ones, tens)
MAX_RECORD_BYTES = 1024 * 1024


def read_record(path: str) -> dict[str, Any] | None:
    """The JSON object of the record file (or object, /vsis3/…) at `path`, at most MAX_RECORD_BYTES; None when it is
    missing, unreadable, too large, too deep or not an object. Whether this server signed it is `verified`'s."""
    try:
        if path.startswith("/vsi"):
            from gdal_mcp.engine import objects

            parts: list[bytes] = []
            objects.stream(path, parts.append, limit=MAX_RECORD_BYTES + 1)
            data = b"".join(parts)
        else:
            if os.path.getsize(path) > MAX_RECORD_BYTES:
                return None
            with open(path, "rb") as fh:
                data = fh.read()
        found = json.loads(data) if len(data) <= MAX_RECORD_BYTES else None
    except (OSError, ValueError, RecursionError, GdalMcpError):
        return None
    return found if isinstance(found, dict) else None


def _recorded_digest(path: str, now: str) -> str | None:
    whole = read_record(path + RECORD_SUFFIX)
    output = (whole or {}).get("output") or {}
    if (
        isinstance(output, dict)
        and verified(whole)
        and str(output.get("path", "")).rsplit("/", 1)[-1] == os.path.basename(path)
        and output.get(X + "state") == now
        and re.fullmatch(r"[0-9a-f]{64}", str(output.get("sha256", "")))
    ):
        return str(output["sha256"])
    return None


#: an object of object storage read by a job is never read whole to hash it (it is read by windows): its digest comes
#: from the record beside it, or it is named in the record's notes
REMOTE_HASH_LIMIT = 0
#: GDAL's /vsis3/ writer sends a file above this as parts of this size (VSIS3_CHUNK_SIZE's default, 50 MiB)
S3_PART = 50 * 1024 * 1024


def object_digest(path: str, limit: int | None = REMOTE_HASH_LIMIT) -> str | None:
    """The digest of a dataset in object storage (/vsis3/, /vsiaz/): from the record uploaded beside it while the
    object is the one recorded (its size, and its ETag equal to the recorded MD5: a single-part S3 upload), else by
    reading its objects whole when they hold at most `limit` bytes (None: any size); None otherwise, or when it is not
    there."""
    from gdal_mcp.engine import objects

    folder, _, name = path.rpartition("/")
    listing = objects.folder_listing(folder)
    if name not in listing:
        return None
    parts = (shapefile_parts(name, listing) if name.lower().endswith(".shp") else None) or {"": name}
    beside = read_record(f"{path}{RECORD_SUFFIX}")
    output = (beside.get("output") or {}) if beside is not None and verified(beside) else {}
    seen = listing[name]
    if (
        list(parts) == [""]
        and output.get(X + "size") == seen["size"]
        and output.get(X + "s3_etag")
        and output.get(X + "s3_etag") == seen["etag"]
        and re.fullmatch(r"[0-9a-f]{64}", str(output.get("sha256", "")))
    ):
        return str(output["sha256"])
    if limit is not None and sum(listing[n]["size"] for n in parts.values()) > limit:
        return None
    if list(parts) == [""]:
        return objects.sha256(path)
    return listing_digest({ext: objects.sha256(f"{folder}/{n}") for ext, n in parts.items()})


#: records kept inside a record for the bytes its output replaced, one in another (the oldest dropped)
MAX_PREVIOUS = 20


def s3_etag(path: str, part: int = S3_PART) -> str:
    """The ETag S3 gives the file uploaded by GDAL's /vsis3/ writer: the MD5 of its bytes for one PUT, else the MD5 of
    its parts' MD5s and '-<parts>' (a multipart upload of `part`-sized parts)."""
    digests: list[bytes] = []
    with open(path, "rb") as fh:
        while True:
            h = hashlib.md5(usedforsecurity=False)
            left = part
            while left and (chunk := fh.read(min(CHUNK, left))):
                h.update(chunk)
                left -= len(chunk)
            if left == part and digests:
                break
            digests.append(h.digest())
            if left:
                break
    if len(digests) == 1:
        return digests[0].hex()
    return hashlib.md5(b"".join(digests), usedforsecurity=False).hexdigest() + f"-{len(digests)}"


def earlier_record(path: str) -> dict[str, Any] | None:
    """The record this server signed beside the file at `path` now (None when there is none)."""
    found = read_record(path + RECORD_SUFFIX)
    return found if verified(found) else None


def _trimmed(record: dict[str, Any], depth: int) -> dict[str, Any]:
    inner = record.get(X + "previous")
    if not isinstance(inner, dict):
        return record
    if depth <= 0:
        return {k: v for k, v in record.items() if k != X + "previous"}
    return {**record, X + "previous": _trimmed(inner, depth - 1)}


def local_file(path: str) -> str | None:
    """The local file a GDAL dataset name reads: itself, the archive of a /vsizip/ member, the file of a
    NETCDF:"f.nc":var name; None for a remote one or anything that is not a regular file."""
    text = path
    if text.lower().startswith(("/vsicurl", "/vsis3", "/vsigs", "/vsiaz", "/vsiadls", "/vsihttp")) or "://" in text:
        return None
    quoted = re.findall(r'"([^"]+)"', text)
    if quoted:
        text = quoted[0]
    if text.startswith("/vsi"):
        parts = text.split("/")
        for i in range(len(parts)):
            candidate = "/" + "/".join(p for p in parts[2 : i + 1] if p)
            if candidate.lower().endswith(ARCHIVES) and os.path.isfile(candidate):
                return candidate
        return None
    if not os.path.isfile(text) and (band := re.fullmatch(r"(.+):(\d+)", text)) and os.path.isfile(band[1]):
        return band[1]  # raster_calc's 'path:band'
    return text if os.path.isfile(text) else None


def crs_of(path: str) -> str | None:
    """The CRS label (EPSG:n or a name) of a raster or a vector dataset; None without one or when it cannot be read."""
    from gdal_mcp.engine.crs import crs_label

    try:
        import rasterio

        with rasterio.open(path) as ds:
            return crs_label(ds.crs)
    except Exception:  # noqa: BLE001 - not a raster: a vector, or nothing readable
        pass
    try:
        import pyogrio
        from rasterio.crs import CRS

        crs = pyogrio.read_info(path).get("crs")
        return crs_label(CRS.from_user_input(crs)) if crs else None
    except Exception:  # noqa: BLE001 - a record never fails a job for a label
        return None


def _summary(result: Any) -> Any:
    """The result's summary model: an engine function's result, its `summary`, or the first of a (model, warnings)."""
    if isinstance(result, tuple) and result:
        result = result[0]
    return getattr(result, "summary", None) or result


def _warnings(result: Any) -> list[str]:
    """The job's warnings: a result's `warnings`, or the list of a (model, warnings) result."""
    if isinstance(result, tuple) and len(result) > 1 and isinstance(result[1], list):
        return [str(w) for w in result[1]]
    return [str(w) for w in (getattr(result, "warnings", None) or [])]


def _area(path: str | None) -> Any:
    """The lon/lat bounds of a raster or vector dataset as pyproj's AreaOfInterest (PROJ then picks the operation
    valid there, as GDAL does for the data), or None."""
    if path is None:
        return None
    try:
        from pyproj.aoi import AreaOfInterest
        from rasterio.warp import transform_bounds

        try:
            import rasterio

            with rasterio.open(path) as ds:
                crs, bounds = ds.crs, ds.bounds
        except Exception:  # noqa: BLE001 - a vector
            import pyogrio
            from rasterio.crs import CRS

            info = pyogrio.read_info(path)
            crs, bounds = CRS.from_user_input(info["crs"]), info["total_bounds"]
        west, south, east, north = transform_bounds(crs, "EPSG:4326", *bounds)
        return AreaOfInterest(west, south, east, north)
    except Exception:  # noqa: BLE001 - without one, PROJ's choice for the whole area of use
        return None


def _crs_decisions(
    kwargs: Mapping[str, Any],
    source: str | None,
    output_crs: str | None,
    first: str | None = None,
    crs_by_input: Mapping[str, str] | None = None,
) -> dict[str, Any] | None:
    """The CRS decision of the job: a reprojection's source and target with the PROJ operation pyproj chooses for
    them (GDAL's warper and OGR ask PROJ the same way: the first operation valid for the area), or that none was made."""
    target = kwargs.get("dst_crs")
    crs_by_input = crs_by_input or {}
    if not target:
        if output_crs is None:
            return None
        if len(set(crs_by_input.values())) > 1:  # inputs in different CRSs (a raster and a vector mask, say)
            listed = ", ".join(f"{p}: {c}" for p, c in crs_by_input.items())
            return {
                "analysis_crs": output_crs,
                "reason": f"no reprojection asked for; the inputs are in different CRSs ({listed}) and the output is "
                f"in {output_crs}: the inputs in another CRS were transformed to it",
                X + "input_crs": dict(crs_by_input),
            }
        return {"analysis_crs": output_crs, "reason": "no reprojection asked for: the tool computed in the input's CRS"}
    from pyproj import CRS, Transformer
    from pyproj.transformer import TransformerGroup

    from gdal_mcp.engine.crs import crs_label, parse_crs

    src_text = kwargs.get("src_crs") or source
    dst = parse_crs(target, "dst_crs")
    decision: dict[str, Any] = {
        "analysis_crs": crs_label(dst) or str(target),
        "reason": f"the caller asked for dst_crs={target}",
        "source_crs": src_text,
        "target_crs": crs_label(dst) or str(target),
    }
    if src_text:
        try:
            area = _area(first)
            src_crs = CRS.from_user_input(parse_crs(src_text, "src_crs").to_wkt())
            dst_crs = CRS.from_user_input(dst.to_wkt())
            t = Transformer.from_crs(src_crs, dst_crs, always_xy=True, area_of_interest=area)
            if "unavailable until proj_trans" in (t.definition or ""):  # several operations, chosen point by point
                decision[X + "transformation_note"] = (
                    f"PROJ chooses among several operations for this pair point by point (no single pipeline): {t.description}"
                )
                return decision
            ballpark = "ballpark" in (t.description or "").lower()
            better = None
            if ballpark:
                missing = [op.accuracy for op in TransformerGroup(src_crs, dst_crs).unavailable_operations if op.accuracy >= 0]
                better = min(missing) if missing else None
            decision["transformation"] = {
                "pipeline": t.definition or None,
                "accuracy_m": t.accuracy if t.accuracy >= 0 else None,
                "is_ballpark": ballpark,
                "better_available_m": better,
                X + "description": t.description,
            }
        except Exception as e:  # noqa: BLE001 - recorded, never fatal
            decision[X + "transformation_error"] = str(e)[:200]
    return decision


def _checks(
    kwargs: Mapping[str, Any], output_crs: str | None, result: Any, size: int, crs_by_input: Mapping[str, str]
) -> list[dict[str, Any]]:
    checks = [
        {
            "name": "crs_present",
            "passed": output_crs is not None,
            "detail": f"the output declares {output_crs}" if output_crs else "the output declares no CRS",
        }
    ]
    if len(crs_by_input) > 1:
        same = len(set(crs_by_input.values())) == 1
        checks.append(
            {
                "name": "inputs_share_crs",
                "passed": same,
                "detail": ("all in " + next(iter(crs_by_input.values())))
                if same
                else "; ".join(f"{p}: {c}" for p, c in crs_by_input.items()),
            }
        )
    target = kwargs.get("dst_crs")
    if target:
        from gdal_mcp.engine.crs import crs_label, parse_crs

        expected = crs_label(parse_crs(target, "dst_crs"))
        checks.append(
            {
                "name": "crs_matches",
                "passed": expected is not None and expected == output_crs,
                "detail": f"expected {expected}, got {output_crs}",
                "argument": "dst_crs",
            }
        )
    count = getattr(_summary(result), "feature_count", None)
    if isinstance(count, int):
        checks.append(
            {"name": "result_not_empty", "passed": count > 0, "detail": f"{count} feature{'s' if count != 1 else ''} written"}
        )
    checks.append({"name": X + "output_digest", "passed": size > 0, "detail": f"SHA-256 of the {size} bytes written"})
    return checks


@functools.lru_cache(maxsize=1)
def _versions() -> dict[str, str]:
    """The libraries' versions (from their installed metadata: no import of a library this job did not load)."""
    from importlib.metadata import PackageNotFoundError, version

    import pyproj

    found = {"PROJ": pyproj.proj_version_str}
    for name in ("rasterio", "pyogrio", "pyproj", "shapely", "numpy", "pyarrow"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


def settings() -> dict[str, str]:
    """The GDAL and PROJ settings of SETTINGS set in this worker's environment."""
    from gdal_mcp.credentials import redact

    return {k: redact(os.environ[k]) for k in sorted(SETTINGS) if k in os.environ}


def record(
    context: Mapping[str, Any],
    *,
    output: str,
    inputs: list[str],
    kwargs: Mapping[str, Any],
    result: Any,
    started: float,
    progress: Progress = no_progress,
    before: Mapping[str, tuple[str, dict[str, Any] | None]] | None = None,
    to: str | None = None,
    md5: bool = False,
) -> str:
    """Write the record of the output at `output` (its real path in the job's directory) beside it, or to `to`; its
    path. `context`: the server's part (jobs.Job.provenance). `inputs`: the real paths the job read; `before`: for a
    file the job changed in place, (its digest before, its record before) by path: the record then names the earlier
    bytes as its input and keeps the earlier record (x-gdal-mcp:previous), so lineage goes on through the change."""
    import rasterio

    from gdal_mcp import __version__

    shown: Mapping[str, str] = context.get("inputs") or {}
    entries: list[dict[str, Any]] = []
    remote: list[str] = []
    first_crs: str | None = None
    previous: dict[str, Any] | None = None
    first_path: str | None = None
    crs_by_input: dict[str, str] = {}  # each input's CRS label, by its path as shown
    for i, path in enumerate(dict.fromkeys(inputs)):
        file = local_file(path)
        if file is None:
            found = object_digest(path, REMOTE_HASH_LIMIT) if path.startswith(("/vsis3/", "/vsiaz/")) else None
            if found is None:  # read by windows: not read whole to hash it
                remote.append(shown.get(path, path))
            else:
                entries.append({"path": shown.get(path, path), "sha256": found, "crs": crs_of(path)})
            continue
        st = os.stat(file)
        label = crs_of(path)
        first_crs = first_crs or label
        first_path = first_path or path
        if label is not None:
            crs_by_input[shown.get(path, os.path.basename(file))] = label
        earlier = (before or {}).get(path)
        if earlier is None and shown.get(path) == context.get("output"):  # replaced by the output (overwrite=true)
            earlier = (digest(file, context.get("digests")), earlier_record(file))
        sha = earlier[0] if earlier else digest(file, context.get("digests"))
        if earlier and earlier[1] is not None and (earlier[1].get("output") or {}).get("sha256") == sha:
            previous = earlier[1]
        given = shown.get(path, shown.get(file, os.path.basename(file)))
        band = re.fullmatch(r"(.+):(\d+)", given) if file != path else None  # raster_calc's 'path:band'
        entries.append(
            {
                "path": band[1] if band else given,
                **({X + "read_as": given} if band else {}),
                "sha256": sha,
                "crs": label,
                X + "size": st.st_size,
                X + "modified": iso(st.st_mtime),
                X + "state": state(file),
            }
        )
        progress((i + 1) / (len(inputs) + 1), "recording provenance")
    files = members(output)
    size = sum(os.path.getsize(f) for f in files.values())
    out_digest = digest(output)
    summary = _summary(result)
    output_crs = getattr(summary, "crs", None) if hasattr(summary, "crs") else crs_of(output)
    finished = time.time()
    manifest: dict[str, Any] = {
        "spec_version": SPEC_VERSION,
        "operation": str(context.get("tool") or "unknown"),
        "parameters": dict(context.get("arguments") or {}),
        "parameters_redacted": bool(context.get("redacted")),
        "inputs": entries,
        "output": {
            "path": str(context.get("output") or os.path.basename(output)),
            "sha256": out_digest,
            "crs": output_crs,
            X + "size": size,
            X + "state": state(output),
            # an output uploaded to object storage: the ETag S3 gives its upload (object_digest)
            **({X + "s3_etag": s3_etag(output)} if md5 and list(files) == [""] else {}),
        },
        "engine": {"name": "GDAL", "version": rasterio.__gdal_version__, X + "libraries": _versions()},
        "producer": {"name": "gdal-mcp", "version": __version__},
        "verification": _checks(kwargs, output_crs, result, size, crs_by_input),
        "started_at": iso(started),
        "finished_at": iso(max(finished, started)),
        "environment": settings(),
        X + "job_id": str(context.get("job_id") or ""),
        X + "approval": context.get("approval"),
        **({X + "replay_of": context["replay_of"]} if context.get("replay_of") else {}),
        X + "warnings": _warnings(result),
        X + "duration_s": round(finished - started, 3),
    }
    if previous is not None:  # the record of the bytes this output replaced: lineage follows it (at most MAX_PREVIOUS)
        manifest[X + "previous"] = _trimmed(previous, MAX_PREVIOUS - 1)
    decisions = _crs_decisions(kwargs, first_crs, output_crs, first_path, crs_by_input)
    if decisions is not None:
        manifest["crs_decisions"] = decisions
    if remote:
        manifest["notes"] = [f"read remotely, not hashed (its bytes were read by windows): {r}" for r in remote]
        manifest[X + "remote_inputs"] = remote
    if KEY.get():
        manifest[SIGNATURE] = sign(manifest)
    path = to or output + RECORD_SUFFIX
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=2, ensure_ascii=False)
        fh.write("\n")
    return path
