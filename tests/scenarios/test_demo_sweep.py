"""`prefixsim demo`: the embedded sweep (block size 16/64 x two chat layouts x seeds 1, 2).

The embedded sweep lives in sim/demo.py rather than scenarios/, so it is checked here with them.
Runs are the demo's own (480 simulated seconds, 240 s warm-up while the chat sessions ramp
up): shorter ones are measured before a steady state and rightly marked UNSTABLE.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from sim.cli import main
from sim.demo import DEMO_SWEEP_YAML, run_demo, variant_lines
from sim.errors import InputError
from sim.sweep import load_sweep

# The demo sweep and its report end to end: make test-all.
pytestmark = pytest.mark.slow


def test_demo_sweep_expands_to_eight_runs(tmp_path: Path) -> None:
    sweep_file = tmp_path / "demo.yaml"
    sweep_file.write_text(DEMO_SWEEP_YAML)
    plan = load_sweep(sweep_file)
    assert [(run.variant, run.seed) for run in plan.runs] == [
        (f"engine.block_size={size},workload.source.layout={layout}", seed)
        for size in (16, 64)
        for layout in ("chat", "chat_user_fields_first")
        for seed in (1, 2)
    ]


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo run once, on two workers, into <tmp>/my-demo."""
    out_dir = tmp_path_factory.mktemp("demo") / "my-demo"
    result = run_demo(out_dir, num_workers=2, progress=False)
    assert result.sweep.sweep_dir == out_dir.absolute()
    assert result.sweep.failed_run_ids == []
    return out_dir


def test_demo_writes_its_sweep_and_report_into_out(demo_dir: Path) -> None:
    manifest = pd.read_parquet(demo_dir / "manifest.parquet")
    assert list(manifest["status"]) == ["ok"] * 8
    report = (demo_dir / "report.md").read_text()
    assert "Sweep of 8 runs (8 ok, 0 failed, 0 missing)" in report
    assert (demo_dir / "figures" / "hit_rate_vs_block_size.png").is_file()


def test_demo_shows_the_layout_effect(demo_dir: Path) -> None:
    manifest = pd.read_parquet(demo_dir / "manifest.parquet")
    hit_rate = manifest.groupby("workload.source.layout")["hit_rate"].max()
    # Per-request fields first leave at most the 16-token user id block to share.
    assert hit_rate["chat_user_fields_first"] < 0.05
    assert hit_rate["chat"] > 0.5
    lines = variant_lines(demo_dir)
    assert len(lines) == 4
    assert lines[0].startswith("block_size=16, layout=chat: hit rate ")  # steady: no mark
    assert lines[0].endswith("(2 seeds)")


def test_demo_command_reuses_finished_runs_and_prints_the_report(
    demo_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    summaries = sorted((demo_dir / "runs").glob("*/summary.json"))
    written_at_ns = [path.stat().st_mtime_ns for path in summaries]
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--out", str(demo_dir), "-j", "1"])
    assert exit_info.value.code == 0
    assert len(summaries) == 8
    assert [path.stat().st_mtime_ns for path in summaries] == written_at_ns
    printed = capsys.readouterr().err.replace("\n", "")
    assert "block_size=64, layout=chat_user_fields_first: hit rate " in printed
    assert f"report in {demo_dir / 'report.md'}" in printed


def test_a_bad_override_names_the_demo_sweep_not_a_scratch_file(tmp_path: Path) -> None:
    """--set duration_s=5 under the demo's 240 s warm-up: the error's place is the embedded
    sweep and its line 6 (warmup_s), not the scratch copy that is gone when it is read."""
    with pytest.raises(InputError) as raised:
        run_demo(tmp_path / "demo", overrides=["duration_s=5"], progress=False)
    assert str(raised.value).startswith(
        "the demo sweep (DEMO_SWEEP_YAML in sim/demo.py):6: sweep variant "
    )
    assert str(raised.value).endswith("warmup_s (240.0) must be shorter than duration_s (5.0)")
    assert not (tmp_path / "demo").exists()
