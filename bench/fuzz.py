"""`python -m bench.fuzz`: corrupt inputs against the real server (see bench/README.md).

Mutates real files (tests/fuzz/mutate.py), runs every reading tool on each through one gdal-mcp
server over stdio (tests/fuzz/drive.py), and reports outcome codes, server deaths, hangs, internal
errors and error messages that do not name the file. Exit status 1 if any of those occurred.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

from tests.fuzz.drive import RASTER_TOOLS, VECTOR_TOOLS, FuzzServer, Outcome, run_case
from tests.fuzz.mutate import KINDS, make_case


def log(msg: str) -> None:
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.fuzz", description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=2000, help="number of cases (default 2000)")
    p.add_argument("--seed", type=int, default=1, help="run seed; case i of seed s is always the same bytes")
    p.add_argument("--start", type=int, default=0, help="first case index (default 0)")
    p.add_argument("--only", default="", help="comma-separated case indices to run instead (reproduce a finding)")
    p.add_argument("--kinds", default="", help=f"only these file kinds, comma-separated: {', '.join(dict.fromkeys(KINDS))}")
    p.add_argument("--timeout", type=float, default=20.0, help="server job timeout, --timeout (default 20 s)")
    p.add_argument("--margin", type=float, default=20.0, help="client waits timeout+margin before calling a hang")
    p.add_argument("--workers", type=int, default=2, help="server worker processes (default 2)")
    p.add_argument("--workdir", type=Path, help="workspace directory (default: a fresh one in the temp dir, removed)")
    p.add_argument("--jsonl", type=Path, help="write one JSON line per call here")
    p.add_argument("--server-log", type=Path, help="the server's stderr (default: in the workdir, shown on problems)")
    p.add_argument("--markdown", type=Path, help="also write the report to this file")
    p.add_argument("--keep", action="store_true", help="keep the case directories")
    return p.parse_args(argv)


def _indices(args: argparse.Namespace) -> list[int]:
    if args.only:
        return [int(x) for x in args.only.split(",") if x.strip()]
    if args.kinds:
        wanted = {k.strip() for k in args.kinds.split(",")}
        unknown = wanted - set(KINDS)
        if unknown:
            raise SystemExit(f"unknown kinds: {', '.join(sorted(unknown))}")
        out, i = [], args.start
        while len(out) < args.cases:
            if KINDS[i % len(KINDS)] in wanted:
                out.append(i)
            i += 1
        return out
    return list(range(args.start, args.start + args.cases))


def snapshot(into: Path) -> Path:
    """Copy gdal_mcp/ as it is now: the server (and every worker it respawns) runs this copy, so edits made
    to the checkout during a long run cannot mix two versions of the code in one server."""
    shutil.copytree(
        Path(__file__).resolve().parent.parent / "gdal_mcp", into / "gdal_mcp", ignore=shutil.ignore_patterns("__pycache__")
    )
    return into


async def run(
    args: argparse.Namespace, indices: list[int], workdir: Path, source: Path, errlog: object
) -> tuple[list[Outcome], FuzzServer]:
    outcomes: list[Outcome] = []
    jsonl = open(args.jsonl, "w", encoding="utf-8") if args.jsonl else None  # noqa: SIM115
    server = FuzzServer(workdir, timeout=args.timeout, margin=args.margin, workers=args.workers, errlog=errlog, source=source)  # type: ignore[arg-type]
    t0 = time.monotonic()
    try:
        async with server:
            for n, i in enumerate(indices):
                case = make_case(args.seed, i)
                got = await run_case(server, case, keep=args.keep)
                outcomes += got
                if jsonl:
                    for o in got:
                        jsonl.write(json.dumps(o.as_dict()) + "\n")
                for o in got:
                    if o.problems:
                        log(f"case {i} {o.kind} {o.tool}: {', '.join(o.problems)}: {o.code}: {o.message[:300]}")
                if (n + 1) % 50 == 0 or n + 1 == len(indices):
                    log(
                        f"[{time.monotonic() - t0:7.1f} s] {n + 1}/{len(indices)} cases, {len(outcomes)} calls, "
                        f"{sum(bool(o.problems) for o in outcomes)} problems, {server.deaths} server deaths"
                    )
    finally:
        if jsonl:
            jsonl.close()
    return outcomes, server


def _table(head: list[str], rows: list[list[object]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


def _provenance(source: Path) -> str:
    """The checkout's commit (and whether the tree differed from it) and the server's library versions."""
    root = Path(__file__).resolve().parent.parent

    def out(cmd: list[str], cwd: Path) -> str:
        try:
            return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    commit = out(["git", "rev-parse", "--short", "HEAD"], root) or "unknown"
    dirty = " with uncommitted changes" if out(["git", "status", "--porcelain", "gdal_mcp"], root) else ""
    versions = out([sys.executable, "-m", "gdal_mcp", "--version"], source).replace("\n", "; ")
    return f"Code: commit {commit}{dirty}. {versions}."


def report(
    args: argparse.Namespace, indices: list[int], outcomes: list[Outcome], server: FuzzServer, wall: float, provenance: str = ""
) -> tuple[str, bool]:
    cases_by_kind = Counter(KINDS[i % len(KINDS)] for i in indices)
    calls_by_case: dict[int, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        calls_by_case[o.index].append(o)
    readable = Counter(KINDS[i % len(KINDS)] for i, got in calls_by_case.items() if all(o.code == "ok" for o in got))
    codes = Counter(o.code for o in outcomes)
    problems = Counter(p for o in outcomes for p in o.problems)
    crashes = sum(o.code == "internal-error" and "worker" in o.message for o in outcomes)
    bad = [o for o in outcomes if o.problems]
    lines = [
        f"Command: `uv run --frozen python -m bench.fuzz {' '.join(sys.argv[1:])}`".rstrip(),
        "",
        f"Seed {args.seed}, {len(indices)} cases, {len(outcomes)} calls, wall time {wall:.0f} s "
        f"({wall / max(1, len(indices)):.2f} s per case); server `--timeout {args.timeout:g}`, hang limit "
        f"{args.timeout + args.margin:g} s, `--workers {args.workers}`. Machine: {platform.machine()}, "
        f"{os.cpu_count()} CPUs (shared; load average {', '.join(f'{v:.1f}' for v in os.getloadavg())} at the "
        f"end), Python {platform.python_version()}. {provenance}",
        "",
        f"**Server deaths: {server.deaths} (restarts: {server.restarts}). Hangs: {problems['hang']}. "
        f"internal-error: {problems['internal-error']} "
        f"(worker crashes among them: {crashes}). Error messages without the file name: {problems['unnamed']}. "
        f"Protocol errors: {problems['protocol-error']}.**",
        "",
        f"Worker processes started over the run (the warm pool included): {len(server.workers_seen)}.",
        "",
        "Cases per file kind:",
        "",
        *_table(
            ["kind", "cases", "every call succeeded"],
            [[k, cases_by_kind[k], readable[k]] for k in dict.fromkeys(KINDS) if cases_by_kind[k]],
        ),
        "",
        "Outcome codes of all calls:",
        "",
        *_table(["code", "calls"], [[c, n] for c, n in codes.most_common()]),
        "",
        "Calls per tool and outcome (p50 / p95 / max seconds):",
        "",
    ]
    seen_codes = [c for c, _ in codes.most_common()]
    rows = []
    by_tool: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_tool[o.tool].append(o)
    for tool in dict.fromkeys((*RASTER_TOOLS, *VECTOR_TOOLS)):
        got = by_tool.get(tool, [])
        if not got:
            continue
        c = Counter(o.code for o in got)
        secs = sorted(o.seconds for o in got)
        p95 = secs[min(len(secs) - 1, int(0.95 * len(secs)))]
        rows.append(
            [
                tool,
                len(got),
                *[c.get(code, 0) for code in seen_codes],
                f"{statistics.median(secs):.2f} / {p95:.2f} / {secs[-1]:.2f}",
            ]
        )
    lines += _table(["tool", "calls", *seen_codes, "seconds"], rows)
    lines += ["", "Calls per file kind and outcome:", ""]
    rows = []
    for kind in dict.fromkeys(KINDS):
        got = [o for o in outcomes if o.kind == kind]
        if got:
            c = Counter(o.code for o in got)
            rows.append([kind, len(got), *[c.get(code, 0) for code in seen_codes]])
    lines += _table(["kind", "calls", *seen_codes], rows)
    if bad:
        lines += ["", f"Problems ({len(bad)} calls; reproduce one with `--seed {args.seed} --only INDEX`):", ""]
        lines += _table(
            ["case", "kind", "tool", "problems", "message", "mutations"],
            [
                [
                    o.index,
                    o.kind,
                    o.tool,
                    ", ".join(o.problems),
                    o.message[:160].replace("|", "\\|"),
                    "; ".join(o.mutations)[:120].replace("|", "\\|"),
                ]
                for o in bad[:40]
            ],
        )
    ok = not bad and server.deaths == 0
    return "\n".join(lines) + "\n", ok


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    indices = _indices(args)
    made = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="gdal-mcp-fuzz-")) if made else args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = args.server_log or Path(tempfile.gettempdir()) / f"gdal-mcp-fuzz-{args.seed}-server.log"
    log(f"workspace {workdir}; server log {log_path}")
    source = snapshot(Path(tempfile.mkdtemp(prefix="gdal-mcp-fuzz-src-")))
    provenance = _provenance(source)
    t0 = time.monotonic()
    try:
        with open(log_path, "w", encoding="utf-8") as errlog:
            outcomes, server = asyncio.run(run(args, indices, workdir, source, errlog))
    finally:
        shutil.rmtree(source, ignore_errors=True)
        if made and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    wall = time.monotonic() - t0
    text, ok = report(args, indices, outcomes, server, wall, provenance)
    sys.stdout.write(text)
    if args.markdown:
        args.markdown.write_text(text, encoding="utf-8")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
