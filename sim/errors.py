"""The one error type that reaches users: a clean, one-line message about bad input."""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator
from typing import Any

from workloads.errors import LocatedError


class InputError(LocatedError):
    """Bad user input: the message names the file, line or field, the bad value and what is allowed.

    The CLI prints it as one line and exits with status 2; nothing else should escape to users.
    """

    def at(self, source: object) -> InputError:
        """This error located in `source` (a file), unless it already names one."""
        if self.source is not None:
            return self
        return InputError(str(self), source=str(source))

    @classmethod
    def from_workload_error(cls, error: Exception) -> InputError:
        """The same problem as an InputError; its message already names the file and line."""
        converted = cls(str(error))
        converted.source = getattr(error, "source", None)
        converted.line = getattr(error, "line", None)
        return converted


def print_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """`warning: MESSAGE` on stderr in one line (`warnings.showwarning`'s signature)."""
    print("warning: " + " ".join(str(message).split()), file=sys.stderr)


@contextlib.contextmanager
def one_line_warnings() -> Iterator[None]:
    """Inside, a warning is one `warning:` line, not Python's report with its source line; the
    warning filters (`-W error` and the like) still apply."""
    with warnings.catch_warnings():
        warnings.showwarning = print_warning
        yield
