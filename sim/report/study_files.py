"""Writing a study's three result files: Markdown, JSON and a PNG figure, each atomically."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from sim.fileio import atomic_write_text
from sim.report.plotting import save_figure


def write_study_files(
    out_dir: Path, stem: str, markdown: str, data: Any, figure: Figure
) -> list[Path]:
    """Write <stem>.md, <stem>.json and <stem>.png into `out_dir`; returns their paths."""
    paths = [out_dir / f"{stem}.md", out_dir / f"{stem}.json", out_dir / f"{stem}.png"]
    atomic_write_text(paths[0], markdown if markdown.endswith("\n") else markdown + "\n")
    atomic_write_text(paths[1], json.dumps(data, indent=2, sort_keys=True) + "\n")
    save_figure(figure, paths[2])
    return paths
