"""The one Typer app every command module registers on; importing it loads no command."""

from __future__ import annotations

import typer

from sim import __version__
from sim.cli.errors import OneLineErrorsGroup

app = typer.Typer(
    name="prefixsim",
    help="Discrete-event simulator of vLLM v1 prefix caching under load.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=OneLineErrorsGroup,
)


def _print_version(requested: bool) -> None:
    if requested:
        typer.echo(f"prefixsim {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    show_version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print prefixsim's version and exit.",
    ),
) -> None:
    """Discrete-event simulator of vLLM v1 prefix caching under load."""
