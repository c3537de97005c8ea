"""`prefixsim replay TRACE`: a public trace through the engine, or through the cache alone."""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TypeVar

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from sim.cli.app import app
from sim.cli.errors import print_loud
from sim.cli.run_cmd import print_summary
from sim.config import (
    KERNEL_BLOCK_MULTIPLE,
    DeploymentSettings,
    Scenario,
    ScenarioSource,
    block_size_problem,
    check_pool_size,
    deployed_engine,
    validate_scenario_data,
)
from sim.errors import InputError
from sim.fileio import check_output_dir, check_replaceable
from sim.metrics import SUMMARY_FILE
from sim.replay.trace_replay import replay_cache_only
from sim.runner import (
    check_skipped,
    deployment_num_gpu_blocks,
    max_model_len_for_pool,
    run_scenario,
)
from workloads.api import (
    TRACE_FORMATS,
    SyntheticTokens,
    WorkloadError,
    read_trace,
    trace_format_summaries,
)

# The replay sets engine.max_model_len itself, from the cache its options size.
_GROW_CACHE = "give the cache more blocks with --num-gpu-blocks or --kv-tokens"


def _default_context() -> int:
    """max_model_len of the default deployment as vLLM starts it: the model's context."""
    deployment = DeploymentSettings()
    return deployed_engine(deployment.gpu, deployment.model, deployment.tp).max_model_len


T = TypeVar("T")


def _trace_specs(trace: Path, trace_format: str, max_requests: int | None):
    return read_trace(trace_format, trace, max_requests=max_requests, tokens=SyntheticTokens())


class _RateColumn(ProgressColumn):
    """Requests per second, blank until rich has measured a speed."""

    def render(self, task: Task) -> Text:
        return Text(f"{task.speed:,.0f}/s" if task.speed is not None else "")


@contextlib.contextmanager
def _counted(specs: Iterable[T], total: int | None, enabled: bool) -> Iterator[Iterable[T]]:
    """The specs, with a progress line on stderr (requests replayed, rate, elapsed time) when
    stderr is a terminal: a log file gets no redraws."""
    console = Console(stderr=True)
    if not (enabled and console.is_terminal):
        yield specs
        return
    columns = [
        TextColumn("[bold]cache-only replay"),
        BarColumn(),
        MofNCompleteColumn() if total else TextColumn("{task.completed:,} requests"),
        _RateColumn(),
        TimeElapsedColumn(),
    ]
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("replay", total=total)

        def counting() -> Iterator[T]:
            next_update_at = time.monotonic()
            count = 0
            for spec in specs:
                yield spec
                count += 1
                now = time.monotonic()
                if now >= next_update_at:  # redraw at most 10 times a second
                    next_update_at = now + 0.1
                    progress.update(task, completed=count)
            progress.update(task, completed=count)

        yield counting()


def _length_bounds(trace: Path, trace_format: str, max_requests: int | None) -> tuple[int, int]:
    """(total tokens, longest request) over the trace: what an unbounded cache must hold."""
    total = longest = 0
    for spec in _trace_specs(trace, trace_format, max_requests):
        length = spec.num_prompt_tokens + spec.num_output_tokens
        total += length
        longest = max(longest, length)
    return total, longest


@app.command("replay")
def replay_command(
    trace: Path = typer.Argument(
        ..., help="Trace file, `.gz` allowed (formats: docs/trace_formats.md)."
    ),
    trace_format: str = typer.Option(..., "--format", help=f"One of: {trace_format_summaries()}."),
    block_size: int = typer.Option(16, "--block-size", min=1, help="Engine block size."),
    num_gpu_blocks: int | None = typer.Option(
        None, "--num-gpu-blocks", min=2, help="KV blocks, the null block included."
    ),
    kv_tokens: int | None = typer.Option(None, "--kv-tokens", min=1, help="KV capacity in tokens."),
    infinite: bool = typer.Option(False, "--infinite", help="A cache that never evicts."),
    cache_only: bool = typer.Option(
        False, "--cache-only", help="Cache alone in arrival order, no timing (fast)."
    ),
    max_requests: int | None = typer.Option(None, "--max-requests", min=1),
    out: Path | None = typer.Option(None, "--out", help="Run directory (engine mode)."),
    progress: bool = typer.Option(True, "--progress/--no-progress"),
) -> None:
    """Replay a Mooncake, Dynamo or Azure trace; the last line is the summary as JSON.

    Without a capacity option the KV cache is sized from the default deployment
    (Llama-3.1-8B on one H100 at gpu_memory_utilization 0.92).
    """
    if trace_format not in TRACE_FORMATS:
        raise InputError(f"--format {trace_format!r}: allowed: {', '.join(TRACE_FORMATS)}")
    problem = None if cache_only else block_size_problem(block_size)
    if problem is not None:
        raise InputError(f"--block-size {block_size}: {problem} (--cache-only takes any size)")
    if not trace.is_file():
        problem = "is a directory" if trace.is_dir() else "does not exist"
        raise InputError(f"{problem}; expected a {trace_format} trace file", source=str(trace))
    if (num_gpu_blocks is not None) + (kv_tokens is not None) + infinite > 1:
        raise InputError("give at most one of --num-gpu-blocks, --kv-tokens and --infinite")
    if kv_tokens is not None:
        num_gpu_blocks = kv_tokens // block_size + 1
        check_pool_size(num_gpu_blocks, f"--kv-tokens {kv_tokens} ({num_gpu_blocks} blocks)")
    elif num_gpu_blocks is not None:
        check_pool_size(num_gpu_blocks, f"--num-gpu-blocks {num_gpu_blocks}")
    if out is not None and cache_only:
        raise InputError(
            "--out: a cache-only replay writes no run directory, only its summary line; drop "
            "--out, or drop --cache-only for an engine run's files"
        )
    if out is not None:
        check_output_dir(out)
        check_replaceable(out, SUMMARY_FILE)
    try:
        if cache_only:
            if num_gpu_blocks is None and not infinite:
                # The cache alone takes any block size (no attention kernel pages it): the
                # pool is sized for it from the default deployment's engine.
                scenario = _scenario(
                    trace, trace_format, KERNEL_BLOCK_MULTIPLE, None, None, max_requests
                )
                engine = scenario.engine.model_copy(update={"block_size": block_size})
                num_gpu_blocks = deployment_num_gpu_blocks(engine, scenario.deployment)
            specs = _trace_specs(trace, trace_format, max_requests)
            with _counted(specs, max_requests, progress) as counted_specs:
                result = replay_cache_only(
                    counted_specs,
                    block_size=block_size,
                    num_gpu_blocks=None if infinite else num_gpu_blocks,
                )
            if result.num_gpu_blocks is not None:
                warning = check_skipped(
                    result.num_skipped,
                    result.num_requests,
                    result.num_gpu_blocks,
                    block_size,
                    _GROW_CACHE,
                )
                if warning is not None:
                    print_loud(Console(stderr=True), f"WARNING: {warning}")
            summary = result.summary()
        else:
            max_model_len = None
            if infinite:
                total, longest = _length_bounds(trace, trace_format, max_requests)
                num_gpu_blocks = total // block_size + 2
                max_model_len = longest + 1
            elif num_gpu_blocks is not None:
                # The longest the pool holds, as vLLM fits max_model_len to a small cache (-1).
                max_model_len = max_model_len_for_pool(
                    _default_context(), num_gpu_blocks, block_size
                )
            scenario = _scenario(
                trace, trace_format, block_size, num_gpu_blocks, max_model_len, max_requests
            )
            run = run_scenario(
                scenario, trace.parent, run_dir=out, progress=progress, grow_cache=_GROW_CACHE
            )
            print_summary(run.summary, run.run_dir)
            summary = {
                "mode": "engine",
                **run.summary,
                "queries": run.summary["num_queries"],
                "hits": run.summary["num_hits"],
            }
    except WorkloadError as error:
        raise InputError.from_workload_error(error) from None
    except InputError as error:
        raise error.at(trace) from None
    print(json.dumps(summary, sort_keys=True))


def _scenario(
    trace: Path,
    trace_format: str,
    block_size: int,
    num_gpu_blocks: int | None,
    max_model_len: int | None,
    max_requests: int | None,
) -> Scenario:
    engine: dict[str, int] = {"block_size": block_size}
    if num_gpu_blocks is not None:
        engine["num_gpu_blocks"] = num_gpu_blocks
    if max_model_len is not None:
        engine["max_model_len"] = max_model_len
    data = {
        "name": "replay-" + re.sub(r"[^A-Za-z0-9_.-]", "-", trace.stem),
        "engine": engine,
        "workload": {
            "source": {
                "kind": "trace",
                "path": str(trace.resolve()),
                "format": trace_format,
                "max_requests": max_requests,
            }
        },
        "outputs": {"events": False, "scrape_interval_s": 10.0},
    }
    return validate_scenario_data(ScenarioSource(data, trace))
