"""A dataset's lineage: the steps that made it, linked by the SHA-256 digests in the provenance records
(engine/provenance.py) — an input of one step is the output of another when their digests are equal, whatever the
file is called now or where it was moved — back to the original inputs, and the chain drawn as a small graph.

The records are found by walking the workspace (bounded: MAX_RECORDS records, MAX_RECORD_BYTES each); the dataset's
own digest comes from its record while its size and date still match, else from its bytes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.engine.provenance import KEY, digest, object_digest, read_record, verified
from gdal_mcp.errors import GdalMcpError
from gdal_mcp.models import LineageResult, LineageStep
from gdal_mcp.sandbox.outputs import RECORD_SUFFIX
from gdal_mcp.sandbox.remote import is_remote

MAX_RECORDS = 20_000
MAX_STEPS = 200
#: datasets drawn in the graph at most (the nearest to the dataset): a bounded image
MAX_DRAWN = 40
SKIPPED_DIRS = (".gdal-mcp", ".git")


def _record_paths(root: str) -> Iterator[str]:
    """The provenance records below `root`: a workspace directory, or a bucket prefix (/vsis3/…: one listing)."""
    if is_remote(root):
        from gdal_mcp.engine import gdal_c

        for name, _size, _mtime, _extra in gdal_c.list_files(root, recursive=True, limit=20 * MAX_RECORDS) or []:
            if name.endswith(RECORD_SUFFIX) and not name.split("/")[-1].startswith(SKIPPED_DIRS):
                yield f"{root.rstrip('/')}/{name}"
        return
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(SKIPPED_DIRS) and not os.path.islink(os.path.join(folder, d)))
        for name in sorted(files):
            if name.endswith(RECORD_SUFFIX):
                yield os.path.join(folder, name)


def _digest(path: str) -> str | None:
    """The digest of a dataset, a file or (in a bucket) its objects; None when it is not there."""
    if not is_remote(path):
        return digest(path) if os.path.exists(path) else None
    return object_digest(path, limit=None)


def records(
    roots: Sequence[str], progress: Progress = no_progress
) -> tuple[dict[str, tuple[str, dict[str, Any]]], bool, list[str]]:
    """({output sha256: (record path, record)}, whether the walk stopped at MAX_RECORDS, the records left out as not
    signed by this server). The newest record wins where two describe the same bytes (a copy keeps its record)."""
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    unverified: list[str] = []
    seen = 0
    for root in roots:
        for path in _record_paths(root):
            seen += 1
            if seen > MAX_RECORDS:
                return found, True, unverified
            record: Any = read_record(path)
            if record is None:  # unreadable, too large or too deep
                continue
            if not verified(record):  # not signed by this server: not believed (anyone may write a file)
                unverified.append(path)
                continue
            while isinstance(record, dict):  # the record, then those it keeps of the bytes it replaced
                sha = (record.get("output") or {}).get("sha256")
                reads = {i.get("sha256") for i in record.get("inputs") or [] if isinstance(i, dict)}
                if isinstance(sha, str) and sha not in reads:  # a step cannot make what it read (a copy of itself)
                    known = found.get(sha)
                    if known is None or str(record.get("finished_at", "")) > str(known[1].get("finished_at", "")):
                        found[sha] = (path, record)
                record = record.get("x-gdal-mcp:previous")
            if seen % 500 == 0:
                progress(0.5, f"{seen} provenance records read")
    return found, False, unverified


def lineage(path: str, roots: list[str], max_steps: int = 50, key: str = "", progress: Progress = no_progress) -> LineageResult:
    """The chain of recorded steps that made the dataset at `path` (a real path in the workspace, or an object of a
    bucket workspace), back to its original inputs; paths as the records give them (workspace-relative); `roots`: the
    workspace directories (or the bucket's prefix) to search."""
    KEY.set(bytes.fromhex(key))  # only records this server signed are believed
    target = _digest(path)
    if target is None:
        raise GdalMcpError("not-found", "the dataset is not a file in the workspace (lineage follows files)")
    index, truncated, unverified = records(roots, progress)
    own = read_record(path + RECORD_SUFFIX)  # its own record first: another file with the same bytes has its history
    if own is not None and verified(own) and (own.get("output") or {}).get("sha256") == target:
        index[target] = (path + RECORD_SUFFIX, own)
    steps: dict[str, LineageStep] = {}
    order: list[str] = []
    warnings: list[str] = []

    def beside(shown: str | None, sha: str) -> tuple[str, dict[str, Any]] | None:
        """The signed record beside the file a step read (`shown`, workspace-relative), when it made these bytes:
        it wins over another record of the same bytes (a later call writing them elsewhere)."""
        if not shown or not roots:
            return None
        where = f"{roots[0].rstrip('/')}/{shown}{RECORD_SUFFIX}"
        found = read_record(where)
        ok = found is not None and verified(found) and (found.get("output") or {}).get("sha256") == sha
        return (where, found) if found is not None and ok else None

    def visit(sha: str, shown: str | None, depth: int) -> None:
        nonlocal truncated
        if sha in steps:
            return
        if len(steps) >= min(max_steps, MAX_STEPS):
            truncated = True
            return
        made = beside(shown, sha) or index.get(sha)
        if made is None:
            steps[sha] = LineageStep(sha256=sha, path=shown)
            order.append(sha)
            return
        record_path, record = made
        steps[sha] = step = LineageStep(sha256=sha, path=None)  # placed first: a cycle stops here
        inputs = [i for i in record.get("inputs") or [] if isinstance(i, dict) and isinstance(i.get("sha256"), str)]
        for entry in inputs:
            visit(entry["sha256"], str(entry.get("path") or "") or None, depth + 1)
        output = record.get("output") or {}
        step.path = str(output.get("path") or "") or None
        step.operation = str(record.get("operation") or "") or None
        step.parameters = record.get("parameters") if isinstance(record.get("parameters"), dict) else None
        step.inputs = [e["sha256"] for e in inputs]
        step.input_paths = [str(e.get("path") or "") for e in inputs]
        unhashed = [str(u) for u in record.get("x-gdal-mcp:remote_inputs") or []]
        if unhashed:
            step.unhashed_inputs = unhashed
            warnings.append(
                f"{step.path} also read {', '.join(unhashed)}, not hashed (read remotely by windows): the chain stops there"
            )
        decisions = record.get("crs_decisions")
        step.crs_decisions = decisions if isinstance(decisions, dict) else None
        step.record = record_path
        step.finished_at = record.get("finished_at")
        approval = record.get("x-gdal-mcp:approval")
        step.approval = approval if isinstance(approval, dict) else None
        file = record_path[: -len(RECORD_SUFFIX)]
        now = target if file == path else _digest(file)
        step.current = None if now is None else now == sha
        if step.current is False:
            warnings.append(f"{step.path} was changed after its record was written: its lineage is of the earlier bytes")
        order.append(sha)

    visit(target, None, 0)
    ordered = [steps[s] for s in order]
    if ordered and ordered[-1].path is None:
        ordered[-1].path = path.rsplit("/", 1)[-1]
    if index.get(target) is None:
        warnings.append("no provenance record describes these bytes: the dataset was not made by this server (or changed)")
    if unverified:
        warnings.append(
            f"{len(unverified)} provenance record(s) were left out: not signed by this server (written by something "
            f"else, edited, or from a server with another key), e.g. {unverified[0].rsplit('/', 1)[-1]}"
        )
    result = LineageResult(
        dataset=path.rsplit("/", 1)[-1],
        sha256=target,
        steps=ordered,
        origins=[s.path or s.sha256 for s in ordered if s.operation is None] + [u for s in ordered for u in s.unhashed_inputs],
        records_seen=len(index),
        truncated=truncated,
        warnings=warnings,
    )
    result.record = own if verified(own) else None
    result.graph_png = graph(result)
    progress(1.0, "lineage")
    return result


def graph(result: LineageResult) -> bytes:
    """The chain as a PNG: one box per dataset (its name, and the tool that made it), arrows from each input to what
    was made of it, original inputs on the left and the dataset on the right."""
    import io

    from PIL import Image, ImageDraw, ImageFont

    shown_steps = result.steps[-MAX_DRAWN:]  # the dataset and the steps nearest it; the list has them all
    steps = {s.sha256: s for s in shown_steps}
    depth: dict[str, int] = {}
    for s in shown_steps:  # inputs come before the steps that read them
        depth[s.sha256] = 1 + max((depth.get(i, 0) for i in s.inputs if i in steps), default=-1)
    columns: dict[int, list[str]] = {}
    for sha, d in depth.items():
        columns.setdefault(d, []).append(sha)
    box_w, box_h, gap_x, gap_y, margin = 210, 44, 60, 18, 16
    width = margin * 2 + len(columns) * box_w + max(0, len(columns) - 1) * gap_x
    height = margin * 2 + max(len(c) for c in columns.values()) * (box_h + gap_y) - gap_y if columns else 2 * margin
    image = Image.new("RGB", (max(width, 240), max(height, 80)), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=12)
    place: dict[str, tuple[int, int]] = {}
    for d, shas in sorted(columns.items()):
        for row, sha in enumerate(shas):
            place[sha] = (margin + d * (box_w + gap_x), margin + row * (box_h + gap_y))
    for sha, (x, y) in place.items():  # arrows first, under the boxes
        for source in steps[sha].inputs:
            if source in place:
                sx, sy = place[source]
                start, end = (sx + box_w, sy + box_h // 2), (x, y + box_h // 2)
                draw.line([start, end], fill=(90, 90, 90), width=2)
                draw.polygon([end, (end[0] - 8, end[1] - 4), (end[0] - 8, end[1] + 4)], fill=(90, 90, 90))
    for sha, (x, y) in place.items():
        s = steps[sha]
        last = sha == result.sha256
        fill = (255, 236, 179) if last else (232, 240, 254) if s.operation else (230, 230, 230)
        draw.rounded_rectangle([x, y, x + box_w, y + box_h], radius=6, fill=fill, outline=(60, 60, 60))
        name = os.path.basename(s.path or sha[:12])
        draw.text((x + 8, y + 6), name if len(name) <= 30 else name[:29] + "…", fill="black", font=font)
        made = s.operation or "original input"
        if s.current is False:
            made += " (changed since)"
        draw.text((x + 8, y + 24), made[:32], fill=(40, 40, 120), font=font)
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()
