"""Running `prefixsim ARGS...` inside the test process, as a user's shell would see it.

One interpreter start costs more than most commands, so tests call `sim.cli.main` in-process
with Click's I/O isolation; tests/cli/test_cli_app.py keeps the true-subprocess checks of the
entry point and exit codes.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from sim.cli import main


@dataclass(slots=True, frozen=True)
class CliResult:
    """What the shell sees: exit status, stdout and stderr (the names of subprocess's result)."""

    returncode: int
    stdout: str
    stderr: str


def run_prefixsim(*args: str | Path) -> CliResult:
    """`prefixsim ARGS...` in this process: its exit status and captured output."""
    with CliRunner().isolation() as (stdout, stderr, _):
        try:
            main([str(arg) for arg in args])
            status = 0
        except SystemExit as exit_:
            code = exit_.code
            status = code if isinstance(code, int) else (0 if code is None else 1)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
    return CliResult(status, stdout.getvalue().decode(), stderr.getvalue().decode())
