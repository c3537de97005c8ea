"""manifest.parquet rows and column types, from run records given by hand (nothing is run)."""

from __future__ import annotations

import json

import pyarrow as pa
from sweep_files import write_sweep

from sim.sweep import RunRecord, load_sweep
from sim.sweep.manifest import manifest_table, read_run_record

# 2 x 2 = 4 runs; the zip mixes a number with a mapping, booleans, and ints with floats.
TYPED_SWEEP = """\
sweep:
  grid:
    engine.num_gpu_blocks: [null, 128]
  zip:
    workload.source.turns_per_session: [3, {dist: uniform, low: 1, high: 4}]
    engine.enable_prefix_caching: [true, false]
    workload.arrivals.rate_per_s: [1, 2.5]
"""


def test_columns_types_and_rows(tmp_path):
    """Fixed columns, swept paths in native types (mixed -> text), numeric summary keys sorted.

    A metric that is an int in one summary and a float in another is a float column.
    """
    plan = load_sweep(write_sweep(tmp_path, TYPED_SWEEP))
    ids = [run.run_id for run in plan.runs]
    records = {
        ids[0]: RunRecord(
            "ok",
            summary={
                "hit_rate": 0.5,
                "num_requests": 10,
                "scenario": "tiny",
                "seed": 1,
                "cached": True,
                "ttft_p99_s": None,
            },
        ),
        ids[1]: RunRecord(
            "ok",
            summary={
                "hit_rate": 1,
                "num_requests": 12,
                "ttft_p99_s": 2.0,
                "stable": False,
                "unstable_reason": "draining took 9 s",
            },
        ),
        ids[2]: RunRecord("failed", "RuntimeError: boom"),
        ids[3]: RunRecord("missing"),
    }
    table = manifest_table(plan.runs, plan.spec.paths, records)
    assert table.schema == pa.schema(
        [
            ("run_id", pa.string()),
            ("status", pa.string()),
            ("error", pa.string()),
            ("run_dir", pa.string()),
            ("variant", pa.string()),
            ("seed", pa.int64()),
            ("engine.num_gpu_blocks", pa.int64()),
            ("workload.source.turns_per_session", pa.string()),
            ("engine.enable_prefix_caching", pa.bool_()),
            ("workload.arrivals.rate_per_s", pa.float64()),
            ("hit_rate", pa.float64()),
            ("num_requests", pa.int64()),
            ("ttft_p99_s", pa.float64()),
            ("stable", pa.bool_()),
            ("unstable_reason", pa.string()),
        ]
    )
    uniform = '{"dist":"uniform","high":4,"low":1}'
    rows = table.to_pylist()
    assert rows[1] == {
        "run_id": ids[1],
        "status": "ok",
        "error": None,
        "run_dir": f"runs/{ids[1]}",
        "variant": "engine.num_gpu_blocks=null,workload.source.turns_per_session="
        f"{uniform},engine.enable_prefix_caching=false,workload.arrivals.rate_per_s=2.5",
        "seed": 1,
        "engine.num_gpu_blocks": None,
        "workload.source.turns_per_session": uniform,
        "engine.enable_prefix_caching": False,
        "workload.arrivals.rate_per_s": 2.5,
        "hit_rate": 1.0,
        "num_requests": 12,
        "ttft_p99_s": 2.0,
        "stable": False,
        "unstable_reason": "draining took 9 s",
    }
    assert [row["stable"] for row in rows] == [None, False, None, None]
    assert [row["status"] for row in rows] == ["ok", "ok", "failed", "missing"]
    assert [row["error"] for row in rows] == [None, None, "RuntimeError: boom", None]
    assert [row["engine.num_gpu_blocks"] for row in rows] == [None, None, 128, 128]
    assert [row["workload.source.turns_per_session"] for row in rows] == ["3", uniform] * 2
    assert [row["num_requests"] for row in rows] == [10, 12, None, None]
    assert [row["ttft_p99_s"] for row in rows] == [None, 2.0, None, None]


def test_run_records_read_from_disk(tmp_path):
    """summary.json wins; an error record means failed; unreadable summaries mean not done; a
    summary without the run's other result files means not done (removed since)."""
    runs = tmp_path / "runs"
    (runs / "aaa").mkdir(parents=True)
    for name in ("requests.parquet", "steps.parquet", "metrics.parquet"):
        (runs / "aaa" / name).write_bytes(b"")
    (runs / "aaa" / "summary.json").write_text('{"hit_rate": 0.5}')
    (runs / "fff").mkdir()
    (runs / "fff" / "summary.json").write_text('{"hit_rate": 0.5}')
    (runs / "fff" / "steps.parquet").write_bytes(b"")
    (runs / "aaa.error.json").write_text('{"error": "old", "kind": "input"}')
    (runs / "bbb.error.json").write_text(json.dumps({"error": "boom", "kind": "exception"}))
    (runs / "ccc").mkdir()
    (runs / "ccc" / "summary.json").write_text('{"hit_rate": ')
    (runs / "ddd.error.json").write_text("{")
    assert read_run_record(tmp_path, "aaa") == RunRecord("ok", summary={"hit_rate": 0.5})
    assert read_run_record(tmp_path, "bbb") == RunRecord("failed", "boom")
    assert read_run_record(tmp_path, "ccc") == RunRecord("missing")
    assert read_run_record(tmp_path, "ddd") == RunRecord(
        "failed", "unreadable error record ddd.error.json"
    )
    assert read_run_record(tmp_path, "eee") == RunRecord("missing")
    assert read_run_record(tmp_path, "fff") == RunRecord(
        "missing", "requests.parquet, metrics.parquet lost since it finished: it runs again"
    )
