"""The study notebooks run end to end at the reduced size and leave their result files.

Each notebook runs in a fresh kernel ("python3": ipykernel's spec for this interpreter) with
PREFIXSIM_NOTEBOOK_SCALE=small, which keeps the shipped sweeps' seeds and values but shortens
every run's simulated window, and with its results in a temporary directory.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

# Each notebook runs its sweeps end to end (20-40 s): make test-all.
pytestmark = pytest.mark.slow

NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "notebooks"
CELL_TIMEOUT_S = 300
# Per notebook: the files it leaves under its results directory.
EXPECTED_FILES = {
    "block_size_study.ipynb": (
        "block-size/manifest.parquet",
        "block_size_study.csv",
        "block_size_study.png",
    ),
    "capacity_planning_study.ipynb": (
        "arrival-rate/manifest.parquet",
        "capacity_planning_study.csv",
        "capacity_planning_study.png",
    ),
    "prompt_layout_study.ipynb": (
        "chat-layout/manifest.parquet",
        "rag-documents/manifest.parquet",
        "prompt_layout_study.csv",
        "prompt_layout_study.png",
    ),
}


def test_the_three_studies_are_shipped() -> None:
    assert sorted(path.name for path in NOTEBOOKS_DIR.glob("*.ipynb")) == sorted(EXPECTED_FILES)


@pytest.mark.parametrize("name", sorted(EXPECTED_FILES))
def test_notebook_is_committed_without_outputs(name: str) -> None:
    notebook = nbformat.read(NOTEBOOKS_DIR / name, as_version=4)
    nbformat.validate(notebook)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code_cells[0].metadata.get("tags") == ["parameters"]
    for cell in code_cells:
        assert cell.outputs == []
        assert cell.execution_count is None


def _output_texts(cell: nbformat.NotebookNode) -> str:
    texts = []
    for output in cell.outputs:
        texts.append(output.get("text", ""))
        texts.extend(str(value) for value in output.get("data", {}).values())
    return "\n".join(texts)


@pytest.mark.parametrize("name", sorted(EXPECTED_FILES))
def test_notebook_runs_at_small_scale(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results_dir = tmp_path / "results"
    monkeypatch.setenv("PREFIXSIM_NOTEBOOK_SCALE", "small")
    monkeypatch.setenv("PREFIXSIM_NOTEBOOK_RESULTS", str(results_dir))
    notebook = nbformat.read(NOTEBOOKS_DIR / name, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError on the first failing cell

    for relative in EXPECTED_FILES[name]:
        assert (results_dir / relative).is_file(), relative
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert any(
        "image/png" in output.get("data", {}) for cell in code_cells for output in cell.outputs
    ), "no inline figure"
    assert "**Conclusion.**" in _output_texts(code_cells[-1])
    assert re.search(r"\bnan\b", _output_texts(code_cells[-1])) is None
