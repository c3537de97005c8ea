"""Comparing replay output with what real vLLM 0.33.0 printed (shared/fidelity/golden)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FIDELITY_DIR = Path(__file__).resolve().parents[3] / "shared" / "fidelity"
IGNORED_FIELDS = frozenset({"line", "expect_ok"})


def load_golden(name: str) -> list[dict[str, Any]]:
    """The golden output lines of one script, header excluded."""
    path = FIDELITY_DIR / "golden" / f"{name}.out.jsonl"
    lines = [json.loads(text) for text in path.read_text().splitlines() if text.strip()]
    return [line for line in lines if line.get("op") != "header"]


def differences(expected: list[dict[str, Any]], actual: list[dict[str, Any]]) -> list[str]:
    """Every field where `actual` differs from `expected` (fields only we print are ignored)."""
    problems = []
    if len(expected) != len(actual):
        problems.append(f"{len(expected)} golden lines, {len(actual)} replayed")
    for index, (want, got) in enumerate(zip(expected, actual, strict=False)):
        for field, value in want.items():
            if field in IGNORED_FIELDS:
                continue
            if got.get(field, "<missing>") != value:
                problems.append(f"line {index} op {want.get('op')} {field}: {value!r} != {got.get(field, '<missing>')!r}")
    return problems
