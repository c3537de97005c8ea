"""The `prefixsim` command line: one Typer app; each area registers its commands in a module
that is imported only when one of its commands runs (or help lists them all)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

import typer

from sim.cli.app import app

__all__ = ["COMMAND_MODULES", "app", "load_commands", "main"]

# Top-level command (or command group) -> the sim.cli module that registers it.
COMMAND_MODULES: dict[str, str] = {
    "run": "run_cmd",
    "validate": "run_cmd",
    "schema": "run_cmd",
    "demo": "run_cmd",
    "sweep": "sweep_cmd",
    "report": "report_cmd",
    "replay": "trace_cmd",
    "cache": "replay_cmd",
    "engine": "replay_cmd",
    "calibrate": "costmodel_cmd",
    "costmodel": "costmodel_cmd",
    "plan": "plan_cmd",
    "layout": "study_cmd",
    "side-channel": "study_cmd",
    "eviction": "eviction_cmd",
    "export-metrics": "export_cmd",
    "offload": "offload_cmd",
}


def load_commands(argv: Sequence[str] = ()) -> typer.Typer:
    """Register the command `argv` runs (every command when it names none: help, a typo) on
    `app`, and return it."""
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    if command in COMMAND_MODULES:
        modules = {COMMAND_MODULES[command]}
    elif "--version" in argv:
        modules = set()
    else:
        modules = set(COMMAND_MODULES.values())
    for module in sorted(modules):
        importlib.import_module(f"sim.cli.{module}")
    return app


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; bad input prints one line on stderr and exits with status 2
    (sim.cli.errors)."""
    args = sys.argv[1:] if argv is None else argv
    load_commands(args)
    app(args=args, prog_name="prefixsim")
