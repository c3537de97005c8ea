"""`prefixsim offload`: the sweep reaches a plateau, the answer is the smallest size meeting the
goal, and the shipped scenarios run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from offload_scenario import offload_chat_scenario
from typer.testing import CliRunner

from sim.cli import load_commands
from sim.config import load_scenario
from sim.errors import InputError
from sim.studies.offload import (
    OffloadPoint,
    OffloadResult,
    OffloadSettings,
    check_offload_settings,
    offload_study,
)

SCENARIOS = Path(__file__).parents[2] / "scenarios"
CHAT = offload_chat_scenario("offload-study", "{events: false}")


def test_answer_is_the_smallest_size_reaching_the_goal(tmp_path: Path) -> None:
    path = tmp_path / "chat.yaml"
    path.write_text(CHAT)
    loaded = load_scenario(path)
    result = offload_study(
        loaded.scenario,
        loaded.base_dir,
        OffloadSettings(target_fraction=0.99),
        scratch_dir=tmp_path / "scratch",
    )
    points = result.sorted_points()
    sizes = [point.size_gib for point in points]
    assert sizes[0] == 0.0 and points[0].hit_rate_cpu == 0.0
    assert result.gpu_kv_gib == pytest.approx(299 * 2 / 1024)  # 299 blocks of 2 MiB
    # Doubling from the GPU cache's size (0.58 GiB) until two doublings add nothing.
    assert sizes[1] == 0.58 and 0.58 * 16 in sizes
    assert result.unbounded_hit_rate == max(point.hit_rate for point in points)
    assert points[-1].hit_rate == result.unbounded_hit_rate
    goal = result.goal_hit_rate
    assert goal == pytest.approx(0.99 * result.unbounded_hit_rate)
    answer = result.answer
    assert answer is not None and answer.hit_rate >= goal and answer.size_gib > 0
    assert all(point.hit_rate < goal for point in points if point.size_gib < answer.size_gib)
    assert answer.hit_rate_cpu > 0
    assert not list((tmp_path / "scratch").glob("probe-*"))  # probe runs are cleaned up


def test_runs_without_a_steady_state_are_flagged_in_table_json_and_figure() -> None:
    # Two probes: no offload (steady) and 4 GiB, whose waiting queue grew (no steady state).
    steady = OffloadPoint(0.0, 0.5, 0.0, 0.05, 0.2, 100, stable=True)
    growing = OffloadPoint(4.0, 0.8, 0.3, 9.0, 30.0, 90, False, "the waiting queue grew by 90%")
    result = OffloadResult("agent", OffloadSettings(), 2.0, [growing, steady], 0.8, 4.0)
    warning = result.unstable_warning()
    assert warning == (
        "WARNING: UNSTABLE - 1 of 2 runs reached no steady state (4 GiB; e.g. the waiting queue "
        "grew by 90%): their TTFTs describe the run's length, not the deployment; the hit rates "
        "still compare the sizes."
    )
    markdown = result.to_markdown()
    assert f"**{warning}**" in markdown
    assert "| 0 (off) | 50.0 % | 0.0 % | 50.0 ms | 200.0 ms | 100 | yes |" in markdown
    assert "| 4 GiB **(answer)** | 80.0 % | 30.0 % | 9000.0 ms | 30000.0 ms | 90 | **no** |" in (
        markdown
    )
    assert result.as_dict()["unstable_warning"] == warning
    assert [point["stable"] for point in result.as_dict()["points"]] == [True, False]
    all_steady = OffloadResult("chat", OffloadSettings(), 2.0, [steady], 0.5, None)
    assert all_steady.unstable_warning() is None and "WARNING" not in all_steady.to_markdown()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (OffloadSettings(target_fraction=0.0), "--target 0: must be in (0, 100]"),
        (OffloadSettings(start_gib=-1.0), "--start-gib -1.0: must be a positive number"),
        (OffloadSettings(growth_tol=0.0), "--growth-tol 0.0: must be > 0"),
    ],
)
def test_bad_settings_are_refused(settings: OffloadSettings, message: str) -> None:
    with pytest.raises(InputError, match=None) as error:
        check_offload_settings(settings)
    assert message in str(error.value)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "overrides"),
    [
        ("study_offload_chat.yaml", ["duration_s=40", "warmup_s=10"]),
        ("study_offload_agent.yaml", ["duration_s=40", "warmup_s=10"]),
        ("study_offload_mooncake.yaml", ["workload.source.max_requests=30"]),
    ],
)
def test_shipped_scenarios_run_through_the_cli(
    name: str, overrides: list[str], tmp_path: Path
) -> None:
    args = ["offload", str(SCENARIOS / name), "--out", str(tmp_path)]
    for override in overrides:
        args += ["--set", override]
    result = CliRunner().invoke(load_commands(["offload"]), args)
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "offload.json").read_text())
    assert data["points"][0]["size_gib"] == 0.0 and len(data["points"]) >= 4
    assert (tmp_path / "offload.png").stat().st_size > 0
    assert "| host memory | hit rate |" in (tmp_path / "offload.md").read_text()


def test_an_output_place_that_is_a_file_is_refused_before_the_sweep(tmp_path: Path) -> None:
    """--out naming a file: exit 2 and one line, before any size is simulated (no progress
    line printed; the sweep took minutes before the write failed)."""
    out = tmp_path / "offload.md"
    out.write_text("notes\n")
    args = ["offload", str(SCENARIOS / "study_offload_chat.yaml"), "--out", str(out)]
    result = CliRunner().invoke(load_commands(["offload"]), args)
    assert result.exit_code == 2
    assert result.output == f"error: {out}: is a file, not a directory; choose another path\n"
    assert out.read_text() == "notes\n"
