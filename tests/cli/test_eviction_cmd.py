"""`prefixsim eviction`: the shipped study scenario at a reduced size, through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from sim.cli import load_commands

app = load_commands()

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "study_eviction.yaml"


def test_eviction_study_writes_report_and_belady_bounds_lru(tmp_path: Path) -> None:
    # 60 simulated seconds of the RAG stream through a 1500-block pool: LRU-exact must equal the
    # simulated LRU, and Belady's optimum must not fall below any online policy.
    result = CliRunner().invoke(
        app,
        ["eviction", str(SCENARIO), "--set", "duration_s=60", "--out", str(tmp_path)],
    )
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "eviction.json").read_text())
    rows = {row["name"]: row for row in report["rows"]}
    assert rows["lru"]["hits"] == rows["lru-exact"]["hits"]
    assert rows["lru"]["queries"] == rows["lru-exact"]["queries"] > 0
    for name in ("lru-exact", "lfu", "length-aware"):
        assert rows["belady"]["hit_rate"] >= rows[name]["hit_rate"]
    assert (tmp_path / "eviction.png").stat().st_size > 0
    assert "| belady |" in (tmp_path / "eviction.md").read_text()


def test_requests_longer_than_the_cache_are_counted_loudly(tmp_path: Path) -> None:
    """30 s of the RAG stream (159 requests): a 3,000-token cache (2,992 usable) skips 23 of
    them, which the report keeps and a warning names; a 100-token one would skip all 159, and
    the study fails (exit 2, nothing written) instead of reporting zeros."""
    common = ["eviction", str(SCENARIO), "--set", "duration_s=30"]
    result = CliRunner().invoke(app, [*common, "--kv-tokens", "3000", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (
        "WARNING: 23 of 159 requests were skipped, each longer than the 2,992 tokens the cache "
        "holds: the hit rate counts only the shorter ones"
    ) in result.output
    assert json.loads((tmp_path / "eviction.json").read_text())["num_skipped"] == 23

    out = tmp_path / "tiny"
    result = CliRunner().invoke(app, [*common, "--kv-tokens", "100", "--out", str(out)])
    assert result.exit_code == 2
    assert result.output == (
        "error: replay failed: 159 of 159 requests were skipped, each longer than the 96 tokens "
        "the cache holds; give the cache more room with --kv-tokens\n"
    )
    assert not out.exists()
