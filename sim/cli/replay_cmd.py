"""`prefixsim cache replay` and `prefixsim engine replay`: the op-by-op fidelity harnesses."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterable
from pathlib import Path

import typer

from sim.cli.app import app
from sim.fileio import atomic_writer, check_output_file
from sim.replay import ReplayLine, compare_expectations, replay_offload
from sim.replay.cache_replay import replay_cache
from sim.replay.engine_replay import replay_engine

cache_app = typer.Typer(help="Drive the KV cache directly.", no_args_is_help=True)
app.add_typer(cache_app, name="cache")
engine_app = typer.Typer(help="Drive the scheduler step by step.", no_args_is_help=True)
app.add_typer(engine_app, name="engine")
_OUT_OPTION = typer.Option(None, "--out", help="Write output lines here instead of stdout.")
_CHECK_OPTION = typer.Option(False, "--check", help="Compare each op's 'expect' with its result.")


def write_replay(lines: Iterable[ReplayLine], out: Path | None, check: bool) -> None:
    """Print or save replay output lines; with `check`, exit 1 at the first failed expectation."""
    mismatches: list[str] = []
    if out is not None:
        check_output_file(out)
    sink = atomic_writer(out) if out is not None else contextlib.nullcontext(sys.stdout)
    with sink as handle:
        for replay_line in lines:
            if replay_line.line is not None:
                handle.write(json.dumps(replay_line.line) + "\n")
            op = replay_line.op
            if check and op is not None:
                problem = compare_expectations(op, replay_line.observed)
                if problem is not None:
                    mismatches.append(f"{op.source}:{op.line}: {problem}")
    if mismatches:
        for mismatch in mismatches:
            print(f"check failed: {mismatch}", file=sys.stderr)
        raise typer.Exit(1)


@cache_app.command("replay")
def cache_replay(
    ops_file: Path = typer.Argument(..., help="JSON-lines op script (replay_formats.md §1)."),
    out: Path | None = _OUT_OPTION,
    check: bool = _CHECK_OPTION,
) -> None:
    """Replay KV-manager ops (arrive, schedule, output, run, ...); print every decision."""
    write_replay(replay_cache(ops_file), out, check)


@engine_app.command("replay")
def engine_replay(
    workload_file: Path = typer.Argument(
        ..., help="JSON-lines step script (replay_formats.md §2)."
    ),
    out: Path | None = _OUT_OPTION,
    check: bool = _CHECK_OPTION,
) -> None:
    """Replay scheduler ops (add, step, run_until_idle, abort) and print every engine step."""
    write_replay(replay_engine(workload_file), out, check)


@cache_app.command("offload-replay")
def cache_offload_replay(
    ops_files: list[Path] = typer.Argument(
        ..., help="JSON-lines op streams for the CPU offload tier (docs/offload.md)."
    ),
    outdir: Path | None = typer.Option(
        None, "--outdir", help="Write <name>.jsonl per stream here instead of stdout."
    ),
) -> None:
    """Replay CPU offload tier ops (lookup, prepare/complete store and load, finish, reset)."""
    for ops_file in ops_files:
        out = outdir / ops_file.name if outdir is not None else None
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
        write_replay(replay_offload(ops_file), out, False)
