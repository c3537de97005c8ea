"""Field-by-field comparison of a prefixsim replay output with the vLLM oracle's (stdlib only).

Every field of every oracle line must be present in the matching prefixsim line with an equal
value; header lines are skipped and fields only prefixsim prints are ignored. The one
exception is the free-queue dump, whose third column (a block's human-readable label) names
the first request that produced the hash and is compared too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The result lines of one output file, header excluded."""
    lines = []
    for text in path.read_text().splitlines():
        if text.strip():
            line = json.loads(text)
            if line.get("op") != "header":
                lines.append(line)
    return lines


def first_mismatch(oracle: Path, sim: Path) -> str | None:
    """'<oracle file>:<line>: field F: oracle X, prefixsim Y' for the first difference."""
    want, got = read_lines(oracle), read_lines(sim)
    for index, expected in enumerate(want):
        line_number = index + 2  # the header is line 1
        if index >= len(got):
            return f"{oracle}:{line_number}: prefixsim output ends here ({len(got)} lines)"
        actual = got[index]
        for field, value in expected.items():
            if field not in actual:
                return f"{oracle}:{line_number}: field {field}: oracle {value!r}, prefixsim none"
            if actual[field] != value:
                return (
                    f"{oracle}:{line_number}: field {field}: oracle {value!r}, "
                    f"prefixsim {actual[field]!r}"
                )
    if len(got) > len(want):
        return f"{oracle}: prefixsim printed {len(got) - len(want)} more line(s)"
    return None
