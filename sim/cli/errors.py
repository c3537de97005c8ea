"""How every command ends on error: one `error:` line and status 2, whoever calls the app (the
`prefixsim` entry point or a test runner); SIGINT and SIGTERM as a failure, 128 + signal. A
warning while a command runs is one `warning:` line, not Python's two-line report."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import typer

# Typer vendors click (>= 0.29): its usage errors are these classes, not click's.
from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError
from typer.core import TyperGroup

from sim.errors import InputError, one_line_warnings
from sim.interrupts import Interrupted, signals_raise_interrupted
from workloads.errors import WorkloadError

if TYPE_CHECKING:
    from rich.console import Console


def print_loud(console: Console, text: str) -> None:
    """`text` in bold red on `console`, as written (brackets are not markup) and unwrapped: a
    result that is not what it looks like."""
    console.print(text, style="bold red", soft_wrap=True, markup=False)


def print_error(message: str) -> None:
    """`error: MESSAGE` on stderr, always one line: a message never spills into a second."""
    print("error: " + " ".join(message.split()), file=sys.stderr)


def _usage_message(error: UsageError) -> str:
    command = error.ctx.command_path if error.ctx is not None else "prefixsim"
    return f"{command}: {error.format_message()} (see {command} --help)"


def exit_status_of(command: Callable[[], Any]) -> int:
    """Run `command`; every error a user can cause becomes one `error:` line and status 2.

    SIGINT and SIGTERM stop it through the same cleanup as a failure, with status 128 + signal.
    """
    try:
        with signals_raise_interrupted(), one_line_warnings():
            status = command()
    except (InputError, WorkloadError) as error:
        print_error(str(error))
        return 2
    except NoArgsIsHelpError as error:
        error.show()  # the help text, as asked for: not an error line
        return error.exit_code
    except UsageError as error:
        print_error(_usage_message(error))
        return 2
    except ClickException as error:
        print_error(error.format_message())
        return 2
    except typer.Abort:
        print_error("aborted")
        return 1
    except Interrupted as interrupted:
        print_error(f"{interrupted}; stopped, nothing half-written was kept")
        return interrupted.exit_status
    except BrokenPipeError:
        # The reader (e.g. `head`) went away: stop quietly, as Unix tools do on SIGPIPE.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    return status if isinstance(status, int) else 0


class OneLineErrorsGroup(TyperGroup):
    """The root command: errors end as one line, whoever calls it (`main`, a test runner)."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        status = exit_status_of(
            lambda: super(OneLineErrorsGroup, self).main(
                args=args,
                prog_name=prog_name,
                complete_var=complete_var,
                standalone_mode=False,
                **extra,
            )
        )
        if standalone_mode:
            sys.exit(status)
        return status
