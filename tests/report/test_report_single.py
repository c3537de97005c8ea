"""A single run's report: its figures, sections and numbers, byte-identical when written again."""

from __future__ import annotations

import json
import shutil

import pytest
from report_runs import run_tiny

from sim.report.report import write_report

SINGLE_RUN_FIGURES = [
    "ttft_cdf.png",
    "hit_rate_over_time.png",
    "evictions.png",
    "kv_usage.png",
    "prefill_saved.png",
]


def test_single_run_report_has_figures_and_sections(single_run_dir, tmp_path):
    """Five figures (block size is not swept), the summary row from summary.json, run details."""
    result = write_report(single_run_dir, tmp_path)
    assert result.report_path == tmp_path / "report.md"
    assert [path.name for path in result.figure_paths] == SINGLE_RUN_FIGURES
    for path in result.figure_paths:
        assert path.parent == tmp_path / "figures"
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = result.report_path.read_text()
    summary = json.loads((single_run_dir / "summary.json").read_text())
    assert text.startswith("# prefixsim report: run\n")
    assert (
        f"Run `{summary['run_id']}` of scenario `tiny-chat`, seed 0: "
        f"{summary['num_requests']} requests measured over"
    ) in text
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == [
        "## Summary",
        "## Stability",
        "## Cost model",
        "## Run details",
        "## Figures",
    ]
    # 17 requests are too few for the stability test to call the run steady: marked.
    expected_row = (
        f"| tiny-chat (UNSTABLE) | 1 | {100 * summary['hit_rate']:.2f} "
        f"| {1e3 * summary['ttft_p50_s']:,.2f} "
        f"| {1e3 * summary['ttft_p99_s']:,.2f} | {summary['e2e_p50_s']:.3f} "
        f"| {summary['num_evictions']:,} |"
    )
    assert expected_row in text
    assert f"| num_evictions | {summary['num_evictions']:,} |" in text
    for name in SINGLE_RUN_FIGURES:
        assert f"](figures/{name})" in text
    assert not [line for line in text.splitlines() if line.startswith("|") and "±" in line]


@pytest.mark.slow
def test_report_is_deterministic_and_defaults_to_the_run_dir(single_run_dir, tmp_path):
    """Written elsewhere, then into a copy of the run itself: the same report.md bytes."""
    elsewhere = write_report(single_run_dir, tmp_path / "elsewhere").report_path.read_bytes()
    copy = tmp_path / "run"
    shutil.copytree(single_run_dir, copy)
    in_place = write_report(copy)
    assert in_place.report_path == copy / "report.md"
    assert elsewhere == in_place.report_path.read_bytes()
    assert sorted(path.name for path in (copy / "figures").iterdir()) == sorted(SINGLE_RUN_FIGURES)


def test_run_without_events_still_gets_every_figure(tmp_path):
    """outputs.events: false: no events.parquet, yet evictions.png is drawn (rates from steps)."""
    run_tiny(tmp_path / "run", seed=0, events=False)
    result = write_report(tmp_path / "run")
    assert [path.name for path in result.figure_paths] == SINGLE_RUN_FIGURES
    assert (tmp_path / "run" / "figures" / "evictions.png").stat().st_size > 0
