"""The `prefixsim` command line: one Typer app; areas register commands in own modules."""

from __future__ import annotations

import os
import sys

import typer

from sim.errors import InputError
from workloads.errors import WorkloadError

app = typer.Typer(
    name="prefixsim",
    help="Discrete-event simulator of vLLM v1 prefix caching under load.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; bad input prints one line on stderr and exits with status 2."""
    try:
        app(args=argv, prog_name="prefixsim", standalone_mode=True)
    except (InputError, WorkloadError) as error:
        # One line, always: a message must never spill into a second line.
        print("error: " + " ".join(str(error).split()), file=sys.stderr)
        raise SystemExit(2) from None
    except BrokenPipeError:
        # The reader (e.g. `head`) went away: stop quietly, as Unix tools do on SIGPIPE.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(141) from None


# Area modules attach their commands to `app` on import.
from sim.cli import (  # noqa: E402
    costmodel_cmd,  # noqa: F401
    eviction_cmd,  # noqa: F401
    offload_cmd,  # noqa: F401
    plan_cmd,  # noqa: F401
    replay_cmd,  # noqa: F401
    report_cmd,  # noqa: F401
    run_cmd,  # noqa: F401
    study_cmd,  # noqa: F401
    sweep_cmd,  # noqa: F401
    trace_cmd,  # noqa: F401
)
