"""The composition root: scenario -> workload + engine + cost model + recorders -> result files.

A run writes into a hidden partial directory and renames it into `results/<name>/<run_id>/`
only when complete, so an interrupted or failed run never leaves (or replaces) a result.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from sim.config import (
    GROW_CACHE,
    DeploymentSettings,
    EngineSettings,
    Scenario,
    TraceSource,
    bounded_trace,
    check_scenario_limits,
    check_total_pool,
    estimated_result_bytes,
    too_long_remedy,
)
from sim.costmodel import (
    CostModel,
    CostModelChoice,
    choose_cost_model,
    get_gpu,
    get_host_link,
    kv_bytes_per_token,
    num_gpu_blocks,
)
from sim.engine import OffloadSpec, SimulationResult, check_max_model_len_fits, simulate
from sim.errors import InputError
from sim.fileio import (
    atomic_write_text,
    check_output_dir,
    check_replaceable,
    make_dirs,
    partial_dir,
    publish,
    remove_created,
    remove_leftovers,
    writing,
)
from sim.kvcache import (
    MAX_NUM_GPU_BLOCKS,
    offload_sizing,
    pool_capacity_tokens,
    pool_size_problem,
)
from sim.metrics import (
    RUN_FILES,
    SUMMARY_FILE,
    GoodputSlos,
    SummaryRecorder,
    json_value,
    make_run_recorder,
    rejected_by_cause,
    rejection_note,
)
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
        deployment.model_spec,
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


def max_model_len_for_pool(max_model_len: int, num_gpu_blocks: int, block_size: int) -> int:
    """`max_model_len`, or where a pool of `num_gpu_blocks` cannot hold that long a sequence,
    the longest it holds: what an engine that started on that pool was given."""
    return min(max_model_len, pool_capacity_tokens(num_gpu_blocks, block_size))


def scheduler_config(scenario: DeploymentConfig) -> SchedulerConfig:
    """The engine settings, with `num_gpu_blocks` sized from GPU memory unless overridden and the
    batch limits vLLM picks for the GPU unless set."""
    engine = scenario.engine
    blocks = deployment_num_gpu_blocks(engine, scenario.deployment)
    if blocks > MAX_NUM_GPU_BLOCKS:
        raise InputError(pool_size_problem(blocks))
    max_num_batched_tokens, max_num_seqs = engine.batch_limits(get_gpu(scenario.deployment.gpu))
    problem = engine.limit_problem(max_num_batched_tokens, max_num_seqs)
    if problem is not None:  # an engine built outside a scenario or study file
        field, message = problem
        raise InputError(f"engine.{field}: {message}")
    return SchedulerConfig(
        num_gpu_blocks=blocks,
        block_size=engine.block_size,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
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


def scenario_offload(scenario: DeploymentConfig) -> OffloadSpec | None:
    """The CPU offload tier of each replica, or None when `kv_offloading_size` is off."""
    engine = scenario.engine
    if engine.kv_offloading_size is None:
        return None
    deployment = scenario.deployment
    gpu = get_gpu(deployment.gpu)
    block_bytes_per_gpu = engine.block_size * kv_bytes_per_token(
        deployment.model_spec, deployment.tp
    )
    sizing = offload_sizing(
        engine.kv_offloading_size,
        block_bytes_per_gpu,
        world_size=deployment.tp,
        block_size=engine.block_size,
    )
    if sizing.num_chunks > MAX_NUM_GPU_BLOCKS:
        most_gib = MAX_NUM_GPU_BLOCKS * sizing.chunk_bytes / GIB
        raise InputError(
            f"engine.kv_offloading_size {engine.kv_offloading_size:g} GiB is "
            f"{sizing.num_chunks:,} chunks of {sizing.chunk_bytes:,} bytes, more than the "
            f"{MAX_NUM_GPU_BLOCKS:,} a simulated CPU tier holds; give at most {most_gib:,.0f} GiB"
        )
    if sizing.num_chunks == 0:
        gpus = "its GPU" if deployment.tp == 1 else f"all {deployment.tp} GPUs"
        raise InputError(
            f"engine.kv_offloading_size {engine.kv_offloading_size} GiB holds no chunk of "
            f"{sizing.chunk_bytes:,} bytes (one block of {gpus}); give it at "
            f"least {sizing.chunk_bytes / GIB:.6f} GiB or 0 to turn offloading off"
        )
    return OffloadSpec(
        num_chunks=sizing.num_chunks,
        policy=engine.kv_offloading_policy,
        prompt_only=engine.kv_offload_prompt_only,
        link=get_host_link(deployment.host_link or gpu.key),
        chunk_bytes_per_gpu=block_bytes_per_gpu,
        sync_load_budget_bytes=engine.kv_offload_sync_load_budget_bytes,
    )


def scenario_router(scenario: Scenario) -> Router:
    """A fresh router for the deployment's replicas."""
    settings = scenario.deployment.router
    tuning = RouterTuning(
        settings.cache_threshold, settings.balance_abs_threshold, settings.balance_rel_threshold
    )
    return make_router(settings.policy, tuning)


def scenario_cost_model_choice(scenario: DeploymentConfig, base_dir: Path) -> CostModelChoice:
    """The scenario's step-time model and front end; 'auto' picks the shipped profile of a
    registry model in its shipped dtypes, else the roofline prior (`auto_cost_model_spec`)."""
    deployment = scenario.deployment
    gpu, model = get_gpu(deployment.gpu), deployment.model_spec
    spec = scenario.cost_model
    if spec.endswith((".yaml", ".yml")) and not Path(spec).is_absolute():
        spec = str(base_dir / spec)
    # Study settings share this helper but have no `frontend` field: they take the default.
    return choose_cost_model(
        spec,
        getattr(scenario, "frontend", "auto"),
        gpu=gpu,
        model=model,
        tp=deployment.tp,
        cuda_graphs=deployment.cuda_graphs,
    )


def scenario_cost_model(scenario: DeploymentConfig, base_dir: Path) -> CostModel:
    """The scenario's step-time model (see `scenario_cost_model_choice`)."""
    return scenario_cost_model_choice(scenario, base_dir).model


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


def run_id_of(scenario: Scenario, goodput: GoodputSlos | None = None) -> str:
    """The run's id: the scenario's, or with goodput limits (which add to its summary.json) a
    hash of it and them, so a run with and one without never share a folder."""
    run_id = scenario.run_id()
    if goodput is None:
        return run_id
    return hashlib.sha256(f"{run_id} goodput {goodput.describe()}".encode()).hexdigest()[:12]


@dataclass(slots=True, frozen=True)
class EngineStart:
    """What each replica starts with: engine settings, CPU tier and step-time model."""

    config: SchedulerConfig
    offload: OffloadSpec | None
    cost_model_choice: CostModelChoice


def engine_start(
    settings: DeploymentConfig, base_dir: Path, *, cache_sized_later: bool = False
) -> EngineStart:
    """The engine a scenario or study starts, after the checks made before it starts: the
    pools' size, the CPU tier's, the step-time model loading, and one max_model_len sequence
    fitting the KV cache (vLLM refuses to start otherwise; not checked with
    `cache_sized_later`, for a search that sizes the cache itself)."""
    config = scheduler_config(settings)
    check_total_pool(config.num_gpu_blocks, settings.deployment.replicas)
    if not cache_sized_later:
        check_max_model_len_fits(config)
    return EngineStart(
        config, scenario_offload(settings), scenario_cost_model_choice(settings, base_dir)
    )


def lost_result_files(run_dir: Path) -> list[str]:
    """The result files every finished run holds that `run_dir` does not (any removed since)."""
    return [name for name in RUN_FILES if not (run_dir / name).is_file()]


def start_key(settings: DeploymentConfig) -> str:
    """All that `engine_start` reads of `settings`, as one string: settings with equal keys
    start alike, or fail alike (the same base directory given)."""
    return json.dumps(
        [
            settings.engine.model_dump(mode="json"),
            settings.deployment.model_dump(mode="json"),
            settings.cost_model,
            getattr(settings, "frontend", "auto"),
        ],
        sort_keys=True,
    )


def preflight(
    scenario: Scenario, base_dir: Path, *, cache_sized_later: bool = False
) -> EngineStart:
    """Every check a run makes before it simulates anything: the size limits, then
    `engine_start`'s. `prefixsim validate` makes the same."""
    check_scenario_limits(scenario)
    return engine_start(scenario, base_dir, cache_sized_later=cache_sized_later)


def run_scenario(
    scenario: Scenario,
    base_dir: Path,
    *,
    results_root: Path = Path("results"),
    run_dir: Path | None = None,
    progress: bool = False,
    require_measured: bool = True,
    goodput: GoodputSlos | None = None,
    grow_cache: str = GROW_CACHE,
) -> RunResult:
    """Simulate `scenario` and write its result files; returns the run directory and summary.

    With `require_measured`, a run that measured nothing or whose requests were mostly rejected
    fails (InputError) and keeps nothing; without, its summary says `stable: false`.
    `grow_cache`: how the caller's user makes the KV cache bigger, for that failure's advice."""
    run_id = run_id_of(scenario, goodput)
    run_dir = run_dir if run_dir is not None else results_root / scenario.name / run_id
    start = preflight(scenario, base_dir)
    config = start.config
    check_output_dir(run_dir, needed_bytes=estimated_result_bytes(scenario))
    check_replaceable(run_dir, SUMMARY_FILE)
    created_dirs = make_dirs(run_dir.parent)
    remove_leftovers(run_dir.parent)  # what a killed run left
    try:
        with partial_dir(run_dir) as partial, writing(run_dir):
            summary = _simulate_into(
                partial,
                scenario,
                run_id,
                base_dir,
                config,
                start.cost_model_choice,
                progress,
                goodput,
                start.offload,
            )
            if require_measured:
                check_measured(
                    summary, config, scenario.deployment.model_spec.context_length, grow_cache
                )
            publish(partial, run_dir, SUMMARY_FILE)
    except BaseException:
        remove_created(created_dirs)
        raise
    return RunResult(run_dir, summary)


def _simulate_into(
    directory: Path,
    scenario: Scenario,
    run_id: str,
    base_dir: Path,
    config: SchedulerConfig,
    cost_model_choice: CostModelChoice,
    progress: bool,
    goodput: GoodputSlos | None,
    offload: OffloadSpec | None,
) -> dict[str, Any]:
    """Simulate `scenario` writing every result file into `directory`; returns the summary."""
    recorder = make_run_recorder(
        directory,
        max_model_len=config.max_model_len,
        num_replicas=scenario.deployment.replicas,
        scrape_interval_s=scenario.outputs.scrape_interval_s,
        warmup_s=scenario.warmup_s,
        duration_s=scenario.duration_s,
        events=scenario.outputs.events,
        goodput=goodput,
        offload=offload is not None,
    )
    specs = scenario.workload.build(
        seed=scenario.seed, until_s=scenario.duration_s, base_dir=base_dir
    )
    source = scenario.workload.source
    if isinstance(source, TraceSource):
        specs = bounded_trace(specs, source, scenario.outputs.scrape_interval_s)
    num_replicas = scenario.deployment.replicas
    # Never closed: only their summary() is read, into one replicas.json.
    replica_summaries = (
        [
            SummaryRecorder(
                directory / REPLICAS_FILE,
                warmup_s=scenario.warmup_s,
                duration_s=scenario.duration_s,
            )
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
                cost_model_choice.model,
                recorder=recorder,
                duration_s=scenario.duration_s,
                record_block_events=scenario.outputs.events,
                on_progress=on_progress,
                num_replicas=num_replicas,
                router=scenario_router(scenario),
                replica_recorders=replica_summaries,
                frontend=cost_model_choice.frontend,
                offload=offload,
            )
        except WorkloadError as error:
            raise InputError.from_workload_error(error) from None
    summary = _finish_summary(
        directory, scenario, run_id, config, result, cost_model_choice, offload
    )
    if replica_summaries is not None:
        _write_replica_summaries(directory / REPLICAS_FILE, replica_summaries, result)
    atomic_write_text(directory / "config.resolved.yaml", scenario.resolved_yaml())
    return summary


def _finish_summary(
    run_dir: Path,
    scenario: Scenario,
    run_id: str,
    config: SchedulerConfig,
    result: SimulationResult,
    cost_model_choice: CostModelChoice,
    offload: OffloadSpec | None = None,
) -> dict[str, Any]:
    path = run_dir / SUMMARY_FILE
    summary = json.loads(path.read_text())
    if offload is not None:
        summary.update(
            {
                "offload_num_chunks": offload.num_chunks,
                "offload_policy": offload.policy,
                "offload_host_link": offload.link.name,
            }
        )
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
            "cost_model": cost_model_choice.summary(),
        }
    )
    atomic_write_text(path, json.dumps(summary, sort_keys=True, indent=2) + "\n")
    return summary


MAX_REJECTED_FRACTION = 0.5


def check_measured(
    summary: dict[str, Any],
    config: SchedulerConfig,
    model_context: int | None,
    grow_cache: str,
) -> None:
    """A run that measured nothing, or whose requests were mostly rejected, is a failed run:
    raises an InputError saying why (the caller then keeps no result). `model_context`: the
    model's context length (None where its config names none), past which max_model_len
    cannot be raised; `grow_cache`: how the cache is made bigger."""
    num_submitted, num_rejected = summary["num_submitted"], summary["num_rejected"]
    if num_submitted and num_rejected > MAX_REJECTED_FRACTION * num_submitted:
        too_long, queue_full = rejected_by_cause(summary)
        remedies = []
        if too_long:
            pool_tokens = pool_capacity_tokens(config.num_gpu_blocks, config.block_size)
            remedies.append(
                too_long_remedy(config.max_model_len, model_context, pool_tokens, grow_cache)
            )
        if queue_full:
            remedies.append("raise the queue limits or lower the load")
        raise InputError(f"run failed: {rejection_note(summary)}; {' or '.join(remedies)}")
    if summary["num_requests"] == 0:
        why = (
            "no request arrived after warm-up"
            if num_submitted
            else "the workload submitted no request"
        )
        raise InputError(f"run failed: nothing was measured ({why}); lengthen duration_s")


def check_skipped(
    num_skipped: int, num_requests: int, num_gpu_blocks: int, block_size: int, grow_cache: str
) -> str | None:
    """Requests a cache-only replay skipped, each longer than a pool of `num_gpu_blocks` holds:
    more than MAX_REJECTED_FRACTION of them fail the replay (InputError, as a run that rejected
    them fails), fewer give the warning to show; None when none was skipped."""
    if not num_skipped:
        return None
    note = (
        f"{num_skipped:,} of {num_requests:,} requests were skipped, each longer than the "
        f"{pool_capacity_tokens(num_gpu_blocks, block_size):,} tokens the cache holds"
    )
    if num_skipped > MAX_REJECTED_FRACTION * num_requests:
        raise InputError(f"replay failed: {note}; {grow_cache}")
    return f"{note}: the hit rate counts only the shorter ones"


def _write_replica_summaries(
    path: Path, recorders: list[SummaryRecorder], result: SimulationResult
) -> None:
    """replicas.json: each replica's summary numbers (as in summary.json) and routed count."""
    replicas = []
    for index, recorder in enumerate(recorders):
        numbers = {key: json_value(value) for key, value in recorder.summary(result.end_at).items()}
        replicas.append({"replica": index, "num_routed": result.num_routed[index], **numbers})
    document = {"replicas": replicas}
    atomic_write_text(path, json.dumps(document, sort_keys=True, indent=2, allow_nan=False) + "\n")
