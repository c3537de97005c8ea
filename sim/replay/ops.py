"""Reading and validating JSON-lines op scripts; every problem names the file and line."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.errors import InputError
from sim.kvcache import HASH_ALGOS, MAX_NUM_GPU_BLOCKS, pool_size_problem
from sim.sched import defaults
from workloads.api import WorkloadError, bounded_lines, json_object


@dataclass(slots=True)
class ReplayLine:
    """One output line (None when the op printed nothing, e.g. run_until_idle on an idle
    engine), the op that produced it (None for header/summary lines) and what `--check`
    compares that op's `expect` with (the line plus its nested counters)."""

    op: Op | None
    line: dict[str, Any] | None
    observed: dict[str, Any]


@dataclass(slots=True)
class Op:
    """One input line: its 1-based line number, op name and fields."""

    line: int
    name: str
    fields: dict[str, Any]
    source: str

    def error(self, message: str) -> InputError:
        """An InputError located at this op's line."""
        return InputError(f"op {self.name!r}: {message}", source=self.source, line=self.line)

    def check_keys(self, allowed: frozenset[str]) -> None:
        """Reject keys this op does not define."""
        unknown = sorted(set(self.fields) - allowed - {"op", "expect"})
        if unknown:
            raise self.error(f"unknown key {unknown[0]!r}; allowed: {', '.join(sorted(allowed))}")

    def get_int(
        self,
        key: str,
        default: int | None = None,
        *,
        minimum: int = 0,
        maximum: int | None = None,
    ) -> int:
        """An integer field >= minimum and, where given, <= maximum (bools and floats
        rejected)."""
        value = self.fields.get(key, default)
        if value is None and default is None and key not in self.fields:
            raise self.error(f"missing {key!r}")
        allowed = f">= {minimum}" if maximum is None else f"from {minimum} to {maximum:,}"
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(f"{key!r} must be an integer {allowed}, got {value!r}")
        if value < minimum or (maximum is not None and value > maximum):
            raise self.error(f"{key!r} must be an integer {allowed}, got {value:,}")
        return value

    def get_num_blocks(self) -> int:
        """The pool size `num_blocks` (null block included), within what can be simulated."""
        num_blocks = self.get_int("num_blocks", defaults.REPLAY_NUM_GPU_BLOCKS, minimum=2)
        if num_blocks > MAX_NUM_GPU_BLOCKS:
            raise self.error(pool_size_problem(num_blocks))
        return num_blocks

    def get_optional_int(self, key: str, *, minimum: int = 0) -> int | None:
        """An optional integer field (absent or null gives None)."""
        if self.fields.get(key) is None:
            return None
        return self.get_int(key, minimum=minimum)

    def get_float(self, key: str, default: float, *, minimum: float, maximum: float) -> float:
        """A finite number in [minimum, maximum]."""
        value = self.fields.get(key, default)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise self.error(f"{key!r} must be a number in [{minimum}, {maximum}], got {value!r}")
        if not minimum <= value <= maximum:
            raise self.error(f"{key!r} must be in [{minimum}, {maximum}], got {value}")
        return float(value)

    def get_bool(self, key: str, default: bool) -> bool:
        """A true/false field."""
        value = self.fields.get(key, default)
        if not isinstance(value, bool):
            raise self.error(f"{key!r} must be true or false, got {value!r}")
        return value

    def get_str(
        self, key: str, default: str | None = None, *, choices: tuple[str, ...] = ()
    ) -> str:
        """A string field, optionally one of `choices`."""
        value = self.fields.get(key, default)
        if not isinstance(value, str) or (choices and value not in choices):
            allowed = f"one of {', '.join(choices)}" if choices else "a string"
            raise self.error(f"{key!r} must be {allowed}, got {value!r}")
        return value

    def get_id(self) -> str:
        """The request id this op refers to."""
        value = self.fields.get("id")
        if not isinstance(value, str) or not value:
            raise self.error(f"'id' must be a non-empty string, got {value!r}")
        return value

    def get_tokens(
        self, key: str, *, required: bool = True, allow_empty: bool = False
    ) -> list[int]:
        """A list of non-negative integer token ids."""
        value = self.fields.get(key)
        if value is None and not required:
            return []
        if not isinstance(value, list):
            raise self.error(
                f"{key!r} must be a list of non-negative integer token ids, got {value!r}"
            )
        for position, token in enumerate(value):
            if isinstance(token, bool) or not isinstance(token, int) or token < 0:
                raise self.error(
                    f"{key}[{position}] must be a non-negative integer token id, got {token!r}"
                )
        if not value and not allow_empty:
            raise self.error(f"{key!r} must not be empty")
        return value


def read_ops(path: Path, known_ops: frozenset[str]) -> Iterator[Op]:
    """Yield the ops of a JSON-lines script; blank and '#' lines are skipped."""
    source = str(path)
    if path.is_dir():
        raise InputError("is a directory; expected a JSON-lines file", source=source)
    try:
        handle = path.open("rb")
    except OSError as error:
        raise InputError(f"cannot open: {error.strerror}", source=source) from None
    with handle:
        try:
            for line_number, raw in bounded_lines(handle, source):
                try:
                    text = raw.decode("utf-8").strip()
                except UnicodeDecodeError:
                    raise InputError(
                        "not UTF-8 text; expected a JSON object", source=source, line=line_number
                    ) from None
                if not text or text.startswith("#"):
                    continue
                yield _parse_line(text, source, line_number, known_ops)
        except WorkloadError as error:
            raise InputError.from_workload_error(error) from None


def _parse_line(text: str, source: str, line_number: int, known_ops: frozenset[str]) -> Op:
    fields = json_object(text, source, line_number)
    name = fields.get("op")
    if not isinstance(name, str) or name not in known_ops:
        raise InputError(
            f"unknown op {name!r}; allowed: {', '.join(sorted(known_ops))}",
            source=source,
            line=line_number,
        )
    expect = fields.get("expect")
    if expect is not None and not isinstance(expect, dict):
        raise InputError("'expect' must be an object", source=source, line=line_number)
    return Op(line_number, name, fields, source)


def check_hash_algo(op: Op) -> str:
    """The config's hash algorithm name."""
    return op.get_str("hash_algo", defaults.HASH_ALGO, choices=HASH_ALGOS)


def compare_expectations(op: Op, observed: dict[str, Any]) -> str | None:
    """The first expected field that differs from what was observed ("field: expected X, got Y")."""
    for field, expected in (op.fields.get("expect") or {}).items():
        if field not in observed:
            return f"{field}: expected {expected!r}, but the result has no such field"
        if observed[field] != expected:
            return f"{field}: expected {expected!r}, got {observed[field]!r}"
    return None
