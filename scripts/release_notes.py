"""Check a release tag against the version, and write that version's CHANGELOG section as the release's notes.

    python3 scripts/release_notes.py --tag v0.2.0 --out notes.md

The version lives in one place, `gdal_mcp/__init__.py` (the wheel's version is read from it: pyproject.toml,
[tool.hatch.version]). The tag must be `v` + that version, and CHANGELOG.md must have a dated section for it
(`## [0.2.0] - 2026-12-01`; an `Unreleased` one is refused: date it in the release's own commit). Standard library
only, so the release workflow runs it before anything is installed. Exit status 2 with the reason otherwise.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def version() -> str:
    text = (ROOT / "gdal_mcp" / "__init__.py").read_text(encoding="utf-8")
    m = re.search(r'^__version__ = "([^"]+)"$', text, re.M)
    if m is None:
        raise SystemExit("release_notes: no __version__ in gdal_mcp/__init__.py")
    return m.group(1)


def section(changelog: str, wanted: str) -> str:
    """The body of `## [wanted] - date`, up to the next `## [` heading; SystemExit when missing or undated."""
    heading = re.compile(r"^## \[([^\]]+)\] - (.+)$", re.M)
    heads = list(heading.finditer(changelog))
    for i, m in enumerate(heads):
        if m.group(1) != wanted:
            continue
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", m.group(2).strip()):
            raise SystemExit(
                f"release_notes: CHANGELOG.md's section for {wanted} is '{m.group(2).strip()}', not a date: "
                "date it (## [x.y.z] - YYYY-MM-DD) in the commit the tag points at"
            )
        end = heads[i + 1].start() if i + 1 < len(heads) else len(changelog)
        return changelog[m.end() : end].strip() + "\n"
    raise SystemExit(f"release_notes: CHANGELOG.md has no section for {wanted}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/release_notes.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--tag", required=True, help="the release tag, e.g. v0.2.0")
    p.add_argument("--out", type=Path, help="write the notes here (default: stdout)")
    args = p.parse_args(argv)
    current = version()
    if args.tag != f"v{current}":
        print(f"release_notes: tag {args.tag} does not match the version v{current} (gdal_mcp/__init__.py)", file=sys.stderr)
        return 2
    try:
        notes = section((ROOT / "CHANGELOG.md").read_text(encoding="utf-8"), current)
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(notes, encoding="utf-8")
    else:
        sys.stdout.write(notes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
