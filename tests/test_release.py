"""scripts/release_notes.py: a release tag must match the version in its one place (gdal_mcp/__init__.py, which the
wheel's version is read from), and the notes are that version's dated CHANGELOG section."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "release_notes.py"


def load() -> object:
    spec = importlib.util.spec_from_file_location("release_notes", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_version_has_one_place() -> None:
    import gdal_mcp

    notes = load()
    assert notes.version() == gdal_mcp.__version__  # type: ignore[attr-defined]
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject and not re.search(r"^version\s*=", pyproject, re.M)
    assert 'path = "gdal_mcp/__init__.py"' in pyproject


def test_a_tag_that_does_not_match_is_refused() -> None:
    import gdal_mcp

    wrong = subprocess.run([sys.executable, str(SCRIPT), "--tag", "v999.0.0"], capture_output=True, text=True)
    assert wrong.returncode == 2 and f"v{gdal_mcp.__version__}" in wrong.stderr


def test_the_notes_are_the_dated_section_of_that_version() -> None:
    notes = load()
    changelog = (
        "# Changelog\n\n## [0.3.0] - Unreleased\n\n- next\n\n## [0.2.0] - 2026-12-01\n\n### Added\n\n- a\n\n"
        "## [0.1.0] - 2026-11-21\n\n- b\n"
    )
    assert notes.section(changelog, "0.2.0") == "### Added\n\n- a\n"  # type: ignore[attr-defined]
    assert notes.section(changelog, "0.1.0") == "- b\n"  # type: ignore[attr-defined]
    with pytest.raises(SystemExit, match="not a date"):
        notes.section(changelog, "0.3.0")  # type: ignore[attr-defined]
    with pytest.raises(SystemExit, match="no section"):
        notes.section(changelog, "9.9.9")  # type: ignore[attr-defined]
