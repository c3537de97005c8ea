"""The composition root: scenario -> workload + engine + cost model + recorders -> result files.

A run writes into a hidden partial directory and renames it into `results/<name>/<run_id>/`
only when complete, so an interrupted or failed run never leaves (or replaces) a result.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from sim.config import DeploymentSettings, EngineSettings, Scenario
from sim.costmodel import (
    CostModel,
    get_gpu,
    get_model,
    load_cost_model,
    num_gpu_blocks,
    profile_name,
)
from sim.engine import SimulationResult, check_max_model_len_fits, simulate
from sim.errors import InputError
from sim.fileio import atomic_write_text
from sim.kvcache import MAX_NUM_GPU_BLOCKS, pool_size_problem
from sim.metrics import FLOAT_DECIMALS, SummaryRecorder, make_run_recorder
from sim.routing import Router, RouterTuning, make_router
from sim.sched import SchedulerConfig
from workloads.api import WorkloadError

GIB = 1024**3
REPLICAS_FILE = "replicas.json"


@dataclass(slots=True)
class RunResult:
    """Where a run's files are and its summary."""

    run_dir: Path
    summary: dict[str, Any]


def deployment_num_gpu_blocks(
    engine: EngineSettings, deployment: DeploymentSettings, *, use_overrides: bool = True
) -> int:
    """KV blocks per replica from GPU memory; with `use_overrides`, the engine's explicit
    `num_gpu_blocks` or `kv_cache_memory_gib` win, as in vLLM."""
    return num_gpu_blocks(
        get_gpu(deployment.gpu),
        get_model(deployment.model),
        tp=deployment.tp,
        block_size=engine.block_size,
        gpu_memory_utilization=engine.gpu_memory_utilization,
        activation_reserve_bytes=None
        if engine.activation_reserve_gib is None
        else int(engine.activation_reserve_gib * GIB),
        kv_cache_memory_bytes=None
        if engine.kv_cache_memory_gib is None or not use_overrides
        else int(engine.kv_cache_memory_gib * GIB),
        num_gpu_blocks_override=engine.num_gpu_blocks if use_overrides else None,
    )


class DeploymentConfig(Protocol):
    """What sizing the engine needs: a scenario, or a study's settings with the same sections."""

    @property
    def engine(self) -> EngineSettings: ...

    @property
    def deployment(self) -> DeploymentSettings: ...

    @property
    def cost_model(self) -> str: ...


def scheduler_config(scenario: DeploymentConfig) -> SchedulerConfig:
    """The engine settings, with `num_gpu_blocks` sized from GPU memory unless overridden."""
    engine = scenario.engine
    blocks = deployment_num_gpu_blocks(engine, scenario.deployment)
    if blocks > MAX_NUM_GPU_BLOCKS:
        raise InputError(pool_size_problem(blocks))
    return SchedulerConfig(
        num_gpu_blocks=blocks,
        block_size=engine.block_size,
        max_num_batched_tokens=engine.max_num_batched_tokens,
        max_num_seqs=engine.max_num_seqs,
        max_model_len=engine.max_model_len,
        enable_chunked_prefill=engine.enable_chunked_prefill,
        long_prefill_token_threshold=engine.long_prefill_token_threshold,
        policy=engine.policy,
        watermark=engine.watermark,
        scheduler_reserve_full_isl=engine.scheduler_reserve_full_isl,
        enable_caching=engine.enable_prefix_caching,
        hash_algo=engine.hash_algo,
        hash_seed=engine.hash_seed,
        async_scheduling=engine.async_scheduling,
        long_prefill_token_threshold_adaptive=engine.long_prefill_token_threshold_adaptive,
        max_num_active_seqs=engine.max_num_active_seqs,
        prefill_schedule_interval=engine.prefill_schedule_interval,
        max_num_queued_reqs=engine.max_num_queued_reqs,
        max_num_queued_tokens=engine.max_num_queued_tokens,
        core=engine.core,
    )


def scenario_router(scenario: Scenario) -> Router:
    """A fresh router for the deployment's replicas."""
    settings = scenario.deployment.router
    tuning = RouterTuning(
        settings.cache_threshold, settings.balance_abs_threshold, settings.balance_rel_threshold
    )
    return make_router(settings.policy, tuning)


def scenario_cost_model(scenario: DeploymentConfig, base_dir: Path) -> CostModel:
    """The scenario's step-time model; 'auto' picks the shipped profile, else roofline."""
    deployment = scenario.deployment
    spec = scenario.cost_model
    if spec == "auto":
        try:
            return load_cost_model(
                profile_name(deployment.gpu, deployment.model, deployment.tp),
                gpu=deployment.gpu,
                model=deployment.model,
                tp=deployment.tp,
            )
        except InputError:
            spec = "roofline"
    if spec.endswith((".yaml", ".yml")) and not Path(spec).is_absolute():
        spec = str(base_dir / spec)
    return load_cost_model(spec, gpu=deployment.gpu, model=deployment.model, tp=deployment.tp)


@contextlib.contextmanager
def _progress_reporter(
    scenario: Scenario, enabled: bool
) -> Iterator[Callable[[float], None] | None]:
    if not enabled:
        yield None
        return
    total = scenario.duration_s
    columns = [TextColumn(f"[bold]{scenario.name}"), BarColumn(), TextColumn("{task.description}")]
    with Progress(*columns, TimeElapsedColumn(), transient=True) as progress:
        task = progress.add_task("0 s simulated", total=total)
        next_update_at = time.monotonic()

        def report(now: float) -> None:
            nonlocal next_update_at
            wall = time.monotonic()
            if wall >= next_update_at:  # redraw at most 10 times a wall second
                next_update_at = wall + 0.1
                completed = min(now, total) if total is not None else None
                progress.update(task, completed=completed, description=f"{now:,.0f} s simulated")

        yield report


def run_scenario(
    scenario: Scenario,
    base_dir: Path,
    *,
    results_root: Path = Path("results"),
    run_dir: Path | None = None,
    progress: bool = False,
) -> RunResult:
    """Simulate `scenario` and write its result files; returns the run directory and summary."""
    run_id = scenario.run_id()
    run_dir = run_dir if run_dir is not None else results_root / scenario.name / run_id
    config = scheduler_config(scenario)
    check_max_model_len_fits(config)
    cost_model = scenario_cost_model(scenario, base_dir)
    created_dirs = _make_dirs(run_dir.parent)
    partial_dir = run_dir.parent / f".{run_dir.name}.partial"
    shutil.rmtree(partial_dir, ignore_errors=True)
    partial_dir.mkdir()
    try:
        recorder = make_run_recorder(
            partial_dir,
            scrape_interval_s=scenario.outputs.scrape_interval_s,
            warmup_s=scenario.warmup_s,
            events=scenario.outputs.events,
        )
        specs = scenario.workload.build(
            seed=scenario.seed, until_s=scenario.duration_s, base_dir=base_dir
        )
        num_replicas = scenario.deployment.replicas
        # Never closed: only their summary() is read, into one replicas.json.
        replica_summaries = (
            [
                SummaryRecorder(partial_dir / REPLICAS_FILE, warmup_s=scenario.warmup_s)
                for _ in range(num_replicas)
            ]
            if num_replicas > 1
            else None
        )
        with _progress_reporter(scenario, progress) as on_progress:
            try:
                result = simulate(
                    specs,
                    config,
                    cost_model,
                    recorder=recorder,
                    duration_s=scenario.duration_s,
                    record_block_events=scenario.outputs.events,
                    on_progress=on_progress,
                    num_replicas=num_replicas,
                    router=scenario_router(scenario),
                    replica_recorders=replica_summaries,
                )
            except WorkloadError as error:
                raise InputError.from_workload_error(error) from None
        summary = _finish_summary(partial_dir, scenario, run_id, config, result)
        if replica_summaries is not None:
            _write_replica_summaries(partial_dir / REPLICAS_FILE, replica_summaries, result)
        atomic_write_text(partial_dir / "config.resolved.yaml", scenario.resolved_yaml())
        if run_dir.exists():
            shutil.rmtree(run_dir)
        partial_dir.rename(run_dir)
    except BaseException:
        shutil.rmtree(partial_dir, ignore_errors=True)
        for directory in reversed(created_dirs):
            with contextlib.suppress(OSError):
                directory.rmdir()  # only if still empty
        raise
    return RunResult(run_dir, summary)


def _make_dirs(directory: Path) -> list[Path]:
    """Create `directory` and missing parents; returns those created, outermost first."""
    missing = [path for path in (directory, *directory.parents) if not path.exists()]
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(
            f"cannot create the results directory {directory}: {error.strerror}"
        ) from None
    return list(reversed(missing))


def _finish_summary(
    run_dir: Path,
    scenario: Scenario,
    run_id: str,
    config: SchedulerConfig,
    result: SimulationResult,
) -> dict[str, Any]:
    path = run_dir / "summary.json"
    summary = json.loads(path.read_text())
    summary.update(
        {
            "scenario": scenario.name,
            "run_id": run_id,
            "seed": scenario.seed,
            "num_gpu_blocks": config.num_gpu_blocks,
            "block_size": config.block_size,
            "num_submitted": result.num_submitted,
            "num_rejected": result.num_rejected,
            "num_rejected_queue_full": result.num_rejected_queue_full,
            "num_engine_steps": result.num_steps,
            "num_replicas": scenario.deployment.replicas,
            "router_policy": scenario.deployment.router.policy,
        }
    )
    atomic_write_text(path, json.dumps(summary, sort_keys=True, indent=2) + "\n")
    return summary


def _json_number(value: float | int | None) -> float | int | None:
    if isinstance(value, float):
        return round(value, FLOAT_DECIMALS) if math.isfinite(value) else None
    return value


def _write_replica_summaries(
    path: Path, recorders: list[SummaryRecorder], result: SimulationResult
) -> None:
    """replicas.json: each replica's summary numbers (as in summary.json) and routed count."""
    replicas = []
    for index, recorder in enumerate(recorders):
        numbers = {
            key: _json_number(value) for key, value in recorder.summary(result.end_at).items()
        }
        replicas.append({"replica": index, "num_routed": result.num_routed[index], **numbers})
    document = {"replicas": replicas}
    atomic_write_text(path, json.dumps(document, sort_keys=True, indent=2, allow_nan=False) + "\n")
