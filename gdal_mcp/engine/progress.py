"""The progress callback type every engine function takes."""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    def __call__(self, fraction: float, message: str = "") -> None: ...


def no_progress(fraction: float, message: str = "") -> None:
    """A Progress that ignores reports (for direct calls and tests)."""
