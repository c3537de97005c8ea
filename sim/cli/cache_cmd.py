"""`prefixsim cache replay`: the KV-cache op replay."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import typer

from sim.cli import app
from sim.fileio import atomic_writer
from sim.replay.cache_replay import replay_cache
from sim.replay.ops import compare_expectations

cache_app = typer.Typer(help="Drive the KV cache directly.", no_args_is_help=True)
app.add_typer(cache_app, name="cache")


def write_replay(lines, out: Path | None, check: bool, nested: str) -> None:
    """Print or save replay output lines; with `check`, exit 1 at the first failed expectation."""
    mismatches: list[str] = []
    sink = atomic_writer(out) if out is not None else contextlib.nullcontext(sys.stdout)
    with sink as handle:
        for op, result in lines:
            handle.write(json.dumps(result) + "\n")
            if check and op is not None:
                problem = compare_expectations(op, result, nested)
                if problem is not None:
                    mismatches.append(f"{op.source}:{op.line}: {problem}")
    if mismatches:
        for mismatch in mismatches:
            print(f"check failed: {mismatch}", file=sys.stderr)
        raise typer.Exit(1)


@cache_app.command("replay")
def cache_replay(
    ops_file: Path = typer.Argument(..., help="JSON-lines op script (replay_formats.md §1)."),
    out: Path | None = typer.Option(None, "--out", help="Write output lines here instead of stdout."),
    check: bool = typer.Option(False, "--check", help="Compare each op's 'expect' with its result."),
) -> None:
    """Replay KV-manager ops (arrive, schedule, output, run, preempt, finish, ...) and print every decision."""
    write_replay(replay_cache(ops_file), out, check, "stats")
