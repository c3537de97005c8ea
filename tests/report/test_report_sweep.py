"""Sweep reports: exact table text from hand-checkable manifest numbers, failed and missing runs.

The 2-variant x 2-seed sweep runs block sizes 16 and 32 for seeds 0 and 1; its manifest numbers
are then replaced by these, so every mean, CI and paired difference can be checked by hand:

    block size, seed:  hit_rate  ttft_p50_s  ttft_p99_s  e2e_p50_s  num_evictions
    16, 0              0.50      0.010       0.100       1.0        10
    16, 1              0.60      0.020       0.100       2.0        20
    32, 0              0.70      0.015       0.080       1.0        0
    32, 1              0.90      0.035       0.080       1.0        0

With two seeds the 95 % half-width is t(0.975, 1) x |a - b| / 2 = 12.7062 x |a - b| / 2.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from sim.errors import InputError
from sim.report.report import ReportResult, block_size_lines, write_report
from sim.report.runs import load_run_set

# Each fixture runs a sweep end to end: make test-all.
pytestmark = pytest.mark.slow

KNOWN_NUMBERS = {
    "bs16-chat-s0": (0.50, 0.010, 0.100, 1.0, 10),
    "bs16-chat-s1": (0.60, 0.020, 0.100, 2.0, 20),
    "bs32-chat-s0": (0.70, 0.015, 0.080, 1.0, 0),
    "bs32-chat-s1": (0.90, 0.035, 0.080, 1.0, 0),
}
T_975_ONE_DF = math.tan(0.475 * math.pi)


def set_known_numbers(sweep_dir: Path) -> pd.DataFrame:
    """Overwrite the manifest's table metrics with KNOWN_NUMBERS; returns the manifest."""
    manifest = pd.read_parquet(sweep_dir / "manifest.parquet")
    keys = ["hit_rate", "ttft_p50_s", "ttft_p99_s", "e2e_p50_s", "num_evictions"]
    for row_index, run_id in enumerate(manifest.run_id):
        for key, value in zip(keys, KNOWN_NUMBERS[run_id], strict=True):
            manifest.loc[row_index, key] = value
    manifest.to_parquet(sweep_dir / "manifest.parquet", index=False)
    return manifest


@pytest.fixture(scope="module")
def known_sweep(sweep_factory) -> Path:
    sweep_dir = sweep_factory(block_sizes=(16, 32), seeds=(0, 1))
    set_known_numbers(sweep_dir)
    return sweep_dir


@pytest.fixture(scope="module")
def known_report(known_sweep, tmp_path_factory) -> ReportResult:
    """The known sweep's report, written once into its own folder."""
    return write_report(known_sweep, tmp_path_factory.mktemp("known_report"))


def test_variant_table_means_and_intervals(known_report):
    """Block size 16: hit 55.00 ± 12.7062 x 0.05 = 63.53 pp; 32: 80.00 ± 127.06; etc."""
    text = known_report.report_path.read_text()
    assert (
        "| block_size=16 (UNSTABLE) | 2 | 55.00 ± 63.53 | 15.00 ± 63.53 | 100.00 ± 0.00 "
        "| 1.500 ± 6.353 "
        "| 15 ± 64 |"
    ) in text
    assert (
        "| block_size=32 (UNSTABLE) | 2 | 80.00 ± 127.06 | 25.00 ± 127.06 | 80.00 ± 0.00 "
        "| 1.000 ± 0.000 "
        "| 0 ± 0 |"
    ) in text


def test_a_block_size_sweep_claims_no_stable_capacity(known_report):
    """Every run of the block-size sweep is unstable, yet "stable up to" reads only on a load
    (an arrival rate): the report lists the runs and claims no capacity in block size."""
    text = known_report.report_path.read_text()
    assert "**4 of 4 finished runs reached no steady state**" in text
    assert "engine.block_size`" not in text.split("## Stability")[1].split("## ")[0]


def test_paired_differences_by_seed(known_report):
    """32 - 16 per seed: hit +0.20, +0.30 -> +25.00 ± 63.53 pp; TTFT p99 -20 ms both seeds."""
    text = known_report.report_path.read_text()
    assert "### `engine.block_size`" in text
    assert (
        "| block_size | pairs | Δ hit rate (pp) | Δ TTFT p50 (ms) | Δ TTFT p99 (ms) "
        "| Δ E2E p50 (s) | Δ evictions |"
    ) in text
    assert (
        "| 32 − 16 | 2 | +25.00 ± 63.53 | +10.00 ± 63.53 | -20.00 ± 0.00 | -0.500 ± 6.353 "
        "| -15 ± 64 |"
    ) in text


def test_hit_rate_vs_block_size_points(known_sweep):
    """One line (no other swept setting): 0.55 and 0.80 with half-widths 12.7062 x 0.05, x 0.1."""
    (line,) = block_size_lines(load_run_set(known_sweep))
    assert line.label == ""
    assert line.block_sizes == (16, 32)
    assert line.mean_hit_rates == pytest.approx((0.55, 0.80), abs=1e-15)
    assert line.half_widths == pytest.approx((T_975_ONE_DF * 0.05, T_975_ONE_DF * 0.1), rel=1e-12)
    assert line.unstable == (True, True)  # the tiny runs measure too few requests to tell


def test_sweep_report_draws_all_six_figures(known_report):
    """Block size is swept, so the hit-rate-vs-block-size figure joins the other five."""
    result = known_report
    names = [path.name for path in result.figure_paths]
    assert names == [
        "ttft_cdf.png",
        "hit_rate_vs_block_size.png",
        "hit_rate_over_time.png",
        "evictions.png",
        "kv_usage.png",
        "prefill_saved.png",
    ]
    text = result.report_path.read_text()
    figures_dir = result.report_path.parent / "figures"
    for name in names:
        assert (figures_dir / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"](figures/{name})" in text
    assert "Sweep of 4 runs (4 ok, 0 failed, 0 missing): 2 variants x seeds 0, 1." in text
    assert "Swept settings: `engine.block_size` ∈ {16, 32}." in text
    assert "None: every run finished." in text


def test_two_swept_settings_pair_within_groups(sweep_factory, tmp_path):
    """Block size x layout: each difference is taken with the other setting held equal."""
    sweep_dir = sweep_factory(block_sizes=(16, 32), seeds=(0,), layouts=("chat", "agent"))
    run_set = load_run_set(sweep_dir)
    assert run_set.parameter_paths == ("engine.block_size", "workload.source.layout")
    text = write_report(sweep_dir, tmp_path).report_path.read_text()
    assert "| other settings | block_size | pairs |" in text
    assert "| layout=chat | 32 − 16 | 1 |" in text
    assert "| layout=agent | 32 − 16 | 1 |" in text
    assert "| block_size=16 | agent − chat | 1 |" in text
    assert "| block_size=32 | agent − chat | 1 |" in text
    lines = block_size_lines(run_set)
    assert [line.label for line in lines] == ["layout=chat", "layout=agent"]


def test_failed_and_missing_runs_are_listed_and_left_out(sweep_factory, tmp_path):
    """Seed 1 of block size 32 failed, seed 2 is missing and seed 3 lost its run directory."""
    sweep_dir = sweep_factory(block_sizes=(16, 32), seeds=(0, 1))
    manifest = set_known_numbers(sweep_dir)
    failed = manifest.run_id == "bs32-chat-s1"
    manifest.loc[failed, "status"] = "failed"
    manifest.loc[failed, "error"] = "InputError: engine.max_model_len 9999 | too large"
    extra = manifest[failed].copy()
    extra["run_id"], extra["seed"], extra["status"] = "bs32-chat-s2", 2, "missing"
    extra["error"], extra["run_dir"] = None, "runs/bs32-chat-s2"
    ghost = manifest[failed].copy()
    ghost["run_id"], ghost["seed"], ghost["status"] = "ghost", 3, "ok"
    ghost["error"], ghost["run_dir"] = None, "runs/ghost"
    pd.concat([manifest, extra, ghost]).to_parquet(sweep_dir / "manifest.parquet", index=False)

    text = write_report(sweep_dir, tmp_path).report_path.read_text()
    assert "Sweep of 6 runs (3 ok, 1 failed, 2 missing): 2 variants x seeds 0, 1, 2, 3." in text
    # Only seed 0 of block size 32 is left: means alone, and one pair without a CI. The tiny
    # runs measure too few requests for a verdict of steadiness, so the variant is marked.
    assert "| block_size=32 (UNSTABLE) | 1 | 70.00 | 15.00 | 80.00 | 1.000 | 0 |" in text
    assert "| 32 − 16 | 1 | +20.00 | +5.00 | -20.00 | +0.000 | -10 |" in text
    assert "## Failed and missing runs" in text
    assert (
        "| bs32-chat-s1 | failed | block_size=32 (UNSTABLE) | 1 "
        "| InputError: engine.max_model_len 9999 \\| too large |"
    ) in text
    assert "| bs32-chat-s2 | missing | block_size=32 (UNSTABLE) | 2 |  |" in text
    assert (
        "| ghost | missing | block_size=32 (UNSTABLE) | 3 | runs/ghost/summary.json not found |"
    ) in text


def test_variant_without_finished_runs_shows_na(sweep_factory, tmp_path):
    """Every seed of block size 32 failed: its row has 0 seeds and n/a; pairs are 0."""
    sweep_dir = sweep_factory(block_sizes=(16, 32), seeds=(0,))
    manifest = pd.read_parquet(sweep_dir / "manifest.parquet")
    manifest.loc[manifest["engine.block_size"] == 32, ["status", "error"]] = ["failed", "boom"]
    manifest.to_parquet(sweep_dir / "manifest.parquet", index=False)
    result = write_report(sweep_dir, tmp_path)
    text = result.report_path.read_text()
    assert "| block_size=32 | 0 | n/a | n/a | n/a | n/a | n/a |" in text
    assert "| 32 − 16 | 0 | n/a | n/a | n/a | n/a | n/a |" in text
    # One block size with data: no hit-rate-vs-block-size figure.
    assert "hit_rate_vs_block_size.png" not in [path.name for path in result.figure_paths]


def test_a_sweep_without_a_finished_run_is_refused(sweep_factory, tmp_path):
    """Both runs of a sweep failed or never ran (a sweep killed early): no report of n/a cells
    claiming every finished run was stable, but one error naming the counts; nothing written."""
    sweep_dir = sweep_factory(block_sizes=(16, 32), seeds=(0,))
    manifest = pd.read_parquet(sweep_dir / "manifest.parquet")
    manifest["status"] = ["failed", "missing"]
    manifest.to_parquet(sweep_dir / "manifest.parquet", index=False)
    with pytest.raises(InputError) as raised:
        write_report(sweep_dir, tmp_path / "report")
    assert str(raised.value) == (
        f"{sweep_dir}: no run has finished (1 failed, 1 missing), so there is nothing to "
        "report; run or resume the sweep first"
    )
    assert not (tmp_path / "report").exists()


def test_bad_manifest_is_an_input_error(tmp_path):
    """A status outside ok/failed/missing, or a missing fixed column, names the manifest."""
    rows = [
        {"run_id": "a", "status": "ok", "error": None, "run_dir": "runs/a", "variant": "x=1",
         "seed": 0, "x": 1},
        {"run_id": "b", "status": "done", "error": None, "run_dir": "runs/b", "variant": "x=2",
         "seed": 0, "x": 2},
    ]  # fmt: skip
    pd.DataFrame(rows).to_parquet(tmp_path / "manifest.parquet", index=False)
    with pytest.raises(InputError, match=r"manifest.parquet: row 2: status 'done' is not one of"):
        load_run_set(tmp_path)
    pd.DataFrame(rows).drop(columns=["seed"]).to_parquet(tmp_path / "manifest.parquet")
    with pytest.raises(InputError, match=r"manifest lacks columns \['seed'\]"):
        load_run_set(tmp_path)
