"""Saving matplotlib figures: object-oriented API (no pyplot state), PNG written atomically."""

from __future__ import annotations

import io
from pathlib import Path

from matplotlib.figure import Figure

from sim.fileio import atomic_write_bytes

PNG_DPI = 110


def save_figure(figure: Figure, path: Path) -> None:
    """Render `figure` as a PNG at `path` (whole file or nothing)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=PNG_DPI)
    atomic_write_bytes(path, buffer.getvalue())
