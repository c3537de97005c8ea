"""Comparing replay output with what real vLLM 0.33.0 printed (tests/fixtures/fidelity/golden)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FIDELITY_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "fidelity"
IGNORED_FIELDS = frozenset({"line", "expect_ok"})


def trace_paths() -> list[Path]:
    """The KV-manager op scripts (tests/fixtures/fidelity/traces/*.jsonl), sorted by name."""
    return sorted((FIDELITY_DIR / "traces").glob("*.jsonl"))


def _golden_lines(name: str) -> list[dict[str, Any]]:
    path = FIDELITY_DIR / "golden" / f"{name}.out.jsonl"
    return [json.loads(text) for text in path.read_text().splitlines() if text.strip()]


def load_golden(name: str) -> list[dict[str, Any]]:
    """The golden output lines of one script, header excluded."""
    return [line for line in _golden_lines(name) if line.get("op") != "header"]


def load_golden_header(name: str) -> dict[str, Any]:
    """The golden header line of one script (vLLM version, config, NONE_HASH)."""
    header = _golden_lines(name)[0]
    if header.get("op") != "header":
        raise ValueError(f"{name}: golden output does not start with a header line")
    return header


def differences(expected: list[dict[str, Any]], actual: list[dict[str, Any]]) -> list[str]:
    """Every field where `actual` differs from `expected` (fields only we print are ignored)."""
    problems = []
    if len(expected) != len(actual):
        problems.append(f"{len(expected)} golden lines, {len(actual)} replayed")
    for index, (want, got) in enumerate(zip(expected, actual, strict=False)):
        for field, value in want.items():
            if field in IGNORED_FIELDS:
                continue
            replayed = got.get(field, "<missing>")
            if replayed != value:
                problems.append(
                    f"line {index} op {want.get('op')} {field}: {value!r} != {replayed!r}"
                )
    return problems
