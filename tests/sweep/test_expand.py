"""Expanding sweep files: grid x zip x seeds in written order, validated, with clear errors.

Scenario: the tiny chat base of sweep_files.py plus a `sweep:` block; nothing is run here.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sweep_files import BASE_YAML, write_sweep

from sim.errors import InputError
from sim.sweep import load_sweep

GRID_ZIP_SEEDS = """\
sweep:
  grid:
    engine.block_size: [16, 32]
  zip:
    workload.arrivals.rate_per_s: [1.0, 2.0]
    description: [slow, fast]
  seeds: [3, 4]
"""


def test_grid_crossed_with_zip_then_seeds_innermost(tmp_path):
    """2 block sizes x 2 zipped (rate, description) pairs x 2 seeds = 8 runs, seeds adjacent."""
    plan = load_sweep(write_sweep(tmp_path, GRID_ZIP_SEEDS))
    assert plan.name == "tiny"
    assert plan.spec.paths == ("engine.block_size", "workload.arrivals.rate_per_s", "description")
    slow = "workload.arrivals.rate_per_s=1.0,description=slow"
    fast = "workload.arrivals.rate_per_s=2.0,description=fast"
    assert [(run.variant, run.seed) for run in plan.runs] == [
        (f"engine.block_size=16,{slow}", 3),
        (f"engine.block_size=16,{slow}", 4),
        (f"engine.block_size=16,{fast}", 3),
        (f"engine.block_size=16,{fast}", 4),
        (f"engine.block_size=32,{slow}", 3),
        (f"engine.block_size=32,{slow}", 4),
        (f"engine.block_size=32,{fast}", 3),
        (f"engine.block_size=32,{fast}", 4),
    ]
    settings_of_runs = [
        (
            run.scenario.engine.block_size,
            run.scenario.workload.arrivals.rate_per_s,
            run.scenario.description,
            run.scenario.seed,
        )
        for run in plan.runs
    ]
    assert settings_of_runs[2] == (16, 2.0, "fast", 3)
    assert settings_of_runs[5] == (32, 1.0, "slow", 4)
    assert len({run.run_id for run in plan.runs}) == 8
    assert all(run.run_id == run.scenario.run_id() for run in plan.runs)


def test_axes_follow_the_written_order(tmp_path):
    """`zip:` written before `grid:` is the outer axis and comes first in the variant."""
    sweep = "sweep:\n  zip:\n    description: [a, b]\n  grid:\n    engine.block_size: [16, 32]\n"
    plan = load_sweep(write_sweep(tmp_path, sweep))
    assert [run.variant for run in plan.runs] == [
        "description=a,engine.block_size=16",
        "description=a,engine.block_size=32",
        "description=b,engine.block_size=16",
        "description=b,engine.block_size=32",
    ]
    assert [run.seed for run in plan.runs] == [1, 1, 1, 1]  # the base's seed


def test_seeds_only(tmp_path):
    """A sweep of seeds alone: empty variants, one run per seed."""
    plan = load_sweep(write_sweep(tmp_path, "sweep:\n  seeds: [7, 5]\n"))
    assert [(run.variant, run.seed, run.scenario.seed) for run in plan.runs] == [
        ("", 7, 7),
        ("", 5, 5),
    ]


def test_extends_and_set_apply_to_the_base(tmp_path):
    """`extends:` pulls the base in; `--set duration_s=3.0` reaches every run; a `--set` on the
    swept engine.num_gpu_blocks is refused (each run's own value would replace it)."""
    (tmp_path / "base.yaml").write_text(BASE_YAML)
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(
        "extends: base.yaml\nsweep:\n  grid:\n    engine.num_gpu_blocks: [64, 256]\n"
    )
    plan = load_sweep(sweep_file, ["duration_s=3.0"])
    assert [run.scenario.duration_s for run in plan.runs] == [3.0, 3.0]
    assert [run.scenario.engine.num_gpu_blocks for run in plan.runs] == [64, 256]
    assert plan.base_dir == tmp_path.resolve()
    overrides = ["duration_s=3.0", "engine.num_gpu_blocks=512"]
    with pytest.raises(InputError, match="engine.num_gpu_blocks is swept by sweep.grid"):
        load_sweep(sweep_file, overrides)
    # A plan reads the base alone, where the override takes effect.
    assert load_sweep(sweep_file, overrides, base_only=True).base_data["engine"] == {
        "num_gpu_blocks": 512,
        "max_model_len": 1008,
    }


def test_resolved_yaml_loads_back_to_the_same_runs(tmp_path):
    """sweep.resolved.yaml is itself a sweep file giving the same run ids."""
    plan = load_sweep(write_sweep(tmp_path, GRID_ZIP_SEEDS), ["duration_s=4.0"])
    again = tmp_path / "again"
    again.mkdir()
    (again / "resolved.yaml").write_text(plan.resolved_yaml())
    reloaded = load_sweep(again / "resolved.yaml")
    assert [run.run_id for run in reloaded.runs] == [run.run_id for run in plan.runs]


@pytest.mark.parametrize(
    ("sweep", "expected"),
    [
        (
            "sweep:\n  grid:\n    engine.block_size: [16, 2048]\n  seeds: [1, 2]\n",
            "sweep.yaml:12: sweep variant engine.block_size=2048, seed 1: engine.block_size: "
            "2048 is not allowed: Input should be less than or equal to 1024",
        ),
        (
            "sweep:\n  zip:\n    engine.block_size: [16, 32]\n    description: [a]\n",
            "sweep.yaml:11: sweep.zip: all lists must have the same length; "
            "engine.block_size has 2, description has 1",
        ),
        (
            "sweep:\n  grids: {}\n",
            "sweep.yaml:11: sweep.grids: unknown key; allowed: grid, zip, seeds",
        ),
        (
            "sweep:\n  grid:\n    seed: [1, 2]\n",
            "sweep.yaml:12: sweep.grid.seed: 'seed' cannot be swept; list seeds under sweep.seeds",
        ),
        (
            "sweep:\n  grid:\n    name: [a, b]\n",
            "sweep.yaml:12: sweep.grid.name: 'name' cannot be swept; "
            "it names the sweep's output directory",
        ),
        (
            "sweep:\n  grid:\n    engine.block_size: 16\n",
            "sweep.yaml:12: sweep.grid.engine.block_size: 16 is not a non-empty list of values",
        ),
        (
            "sweep:\n  grid:\n    engine: [{block_size: 16}]\n    engine.block_size: [16]\n",
            "sweep.yaml:13: sweep.grid.engine.block_size: overlaps sweep.grid.engine; "
            "each setting is swept once",
        ),
        (
            "sweep:\n  seeds: [1, 1]\n",
            "sweep.yaml:11: sweep.seeds: [1, 1] repeats a seed",
        ),
        (
            "sweep:\n  grid:\n    warmup_s: [0, 0.0]\n",
            "sweep.yaml:10: sweep variants warmup_s=0 and warmup_s=0.0 resolve to the same config",
        ),
        (
            "sweep:\n  grid:\n    cost_model.kind: [x]\n",
            "sweep.yaml:12: sweep variant cost_model.kind=x: sweep.grid.cost_model.kind: "
            "'cost_model' is 'constant:0.02', not a mapping",
        ),
        (
            "sweep: [1]\n",
            "sweep.yaml:10: sweep: expected a mapping with any of: grid, zip, seeds",
        ),
    ],
)
def test_bad_sweeps_name_file_line_and_problem(tmp_path, sweep, expected):
    """Each problem is one InputError naming the sweep line (BASE_YAML is 9 lines long)."""
    with pytest.raises(InputError) as raised:
        load_sweep(write_sweep(tmp_path, sweep))
    assert str(raised.value).startswith(f"{tmp_path}/{expected}"), str(raised.value)


def test_a_scenario_without_sweep_and_set_on_the_sweep_are_refused(tmp_path):
    """A plain scenario is not a sweep; --set cannot edit the sweep mapping."""
    scenario = tmp_path / "plain.yaml"
    scenario.write_text(BASE_YAML)
    with pytest.raises(InputError, match=r"plain\.yaml: no 'sweep:' mapping"):
        load_sweep(scenario)
    with pytest.raises(InputError, match="--set applies to the base scenario"):
        load_sweep(write_sweep(tmp_path, "sweep:\n  seeds: [1]\n"), ["sweep.seeds=[2]"])


def test_a_sweep_path_indexes_a_list_with_ascii_digits_only(tmp_path):
    """Scenario: the base has one tenant; the grid sweeps `tenants.\u00b2.name` (a superscript
    two, which str.isdigit() takes but int() refuses): one InputError naming the index, not a
    traceback."""
    base = BASE_YAML.replace("source: {kind: chat}", "source: {kind: chat, tenants: [{name: a}]}")
    sweep = "sweep:\n  grid:\n    workload.source.tenants.\u00b2.name: [b]\n"
    with pytest.raises(InputError, match="'\u00b2' is not an index of a 1-item list"):
        load_sweep(write_sweep(tmp_path, sweep, base))


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    block_sizes=st.lists(st.sampled_from([16, 32, 48, 64]), min_size=1, max_size=3, unique=True),
    zip_length=st.integers(1, 3),
    seeds=st.none() | st.lists(st.integers(0, 50), min_size=1, max_size=3, unique=True),
)
def test_expansion_invariants(tmp_path, block_sizes, zip_length, seeds):
    """Run count is the product of axis lengths; ids unique; each variant once per seed."""
    rates = [float(index + 1) for index in range(zip_length)]
    warmups = [0.5 * index for index in range(zip_length)]
    sweep = (
        f"sweep:\n  grid:\n    engine.block_size: {block_sizes}\n"
        f"  zip:\n    workload.arrivals.rate_per_s: {rates}\n    warmup_s: {warmups}\n"
    )
    if seeds is not None:
        sweep += f"  seeds: {seeds}\n"
    plan = load_sweep(write_sweep(tmp_path, sweep))
    num_seeds = 1 if seeds is None else len(seeds)
    assert len(plan.runs) == math.prod([len(block_sizes), zip_length, num_seeds])
    assert len({run.run_id for run in plan.runs}) == len(plan.runs)
    for index, run in enumerate(plan.runs):
        block_index, rest = divmod(index, zip_length * num_seeds)
        zip_index, seed_index = divmod(rest, num_seeds)
        assert run.scenario.engine.block_size == block_sizes[block_index]
        assert run.scenario.workload.arrivals.rate_per_s == rates[zip_index]
        assert run.scenario.warmup_s == warmups[zip_index]
        assert run.seed == (1 if seeds is None else seeds[seed_index])
    variants = [run.variant for run in plan.runs]
    assert all(variants.count(variant) == num_seeds for variant in variants)
