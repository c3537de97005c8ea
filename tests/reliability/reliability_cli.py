"""Running `prefixsim` in this process and checking its clean-error contract."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from sim.cli import main


@dataclass(slots=True, frozen=True)
class CliOutcome:
    status: int
    out: str
    err: str


def prefixsim(capsys: pytest.CaptureFixture[str], *args: str | Path) -> CliOutcome:
    """Run the CLI as `prefixsim ARGS...`; returns its exit status, stdout and stderr."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main([str(arg) for arg in args])
    captured = capsys.readouterr()
    return CliOutcome(exited.value.code, captured.out, captured.err)


def assert_input_error(
    outcome: CliOutcome, source: str | Path | None, line: int | None, fragments: tuple[str, ...]
) -> str:
    """Exit 2, nothing on stdout, exactly one stderr line `error: SOURCE[:LINE]: ...` holding
    every fragment, and no traceback; returns the line."""
    assert "Traceback" not in outcome.err, outcome.err
    assert (outcome.status, outcome.out) == (2, ""), outcome.err
    lines = outcome.err.splitlines()
    assert len(lines) == 1, outcome.err
    if source is None:
        prefix = "error: "
    else:
        prefix = f"error: {source}:{line}: " if line is not None else f"error: {source}: "
    assert lines[0].startswith(prefix), f"{lines[0]!r} does not start with {prefix!r}"
    for fragment in fragments:
        assert fragment in lines[0], f"{fragment!r} not in {lines[0]!r}"
    return lines[0]


def assert_usage_error(outcome: CliOutcome, command: str, fragment: str) -> str:
    """A command-line usage error: exit 2, nothing on stdout, one line
    `error: prefixsim COMMAND: ... (see prefixsim COMMAND --help)` naming the problem."""
    assert "Traceback" not in outcome.err, outcome.err
    assert (outcome.status, outcome.out) == (2, ""), outcome.err
    lines = outcome.err.splitlines()
    assert len(lines) == 1, outcome.err
    assert lines[0].startswith(f"error: {command}: "), lines[0]
    assert lines[0].endswith(f"(see {command} --help)"), lines[0]
    assert fragment in lines[0], f"{fragment!r} not in {lines[0]!r}"
    return lines[0]


def written_entries(root: Path) -> list[str]:
    """Every path under `root` (hidden ones included), relative and sorted."""
    return sorted(str(path.relative_to(root)) for path in root.rglob("*"))


def files_and_partials(root: Path) -> list[str]:
    """Files and hidden (partial or temporary) entries under `root`: what a failure must not
    leave."""
    return sorted(
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.is_file() or path.name.startswith(".")
    )
