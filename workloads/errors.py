"""The error workloads/ raises for bad configuration or trace input (the CLI shows one line)."""

from __future__ import annotations


class LocatedError(Exception):
    """An input problem whose message starts with where it is: `source:line: `, or `source: `.

    The base of workloads' WorkloadError and sim's InputError, so both locate a message alike.
    """

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None) -> None:
        location = ""
        if source is not None:
            location = f"{source}:{line}: " if line is not None else f"{source}: "
        super().__init__(f"{location}{message}")
        self.message = message
        self.source = source
        self.line = line


class WorkloadError(LocatedError, ValueError):
    """Bad workload input: the message names the field or line, the bad value and what is allowed.

    A ValueError, so the CLI layer can turn it into its InputError with the same location.
    """
