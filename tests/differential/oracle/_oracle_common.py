"""Config and result-file helpers shared by vllm_oracle.py and vllm_sched_oracle.py (stdlib)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO


@contextmanager
def result_file(path: str, out: str | None, outdir: str | None) -> Iterator[TextIO]:
    """`<outdir>/<input name>.out.jsonl`, else the `out` file, else stdout (left open)."""
    if outdir:
        name = os.path.basename(path)
        name = name[: -len(".jsonl")] if name.endswith(".jsonl") else name
        target = os.path.join(outdir, f"{name}.out.jsonl")
    elif out:
        target = out
    else:
        yield sys.stdout
        return
    with open(target, "w") as f:
        yield f


def config_with_defaults(cfg: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """A config op's settings over `defaults`; a key neither knows (nor op/expect) is an error."""
    unknown = set(cfg) - set(defaults) - {"op", "expect"}
    if unknown:
        raise ValueError(f"config: unknown keys {sorted(unknown)}")
    return {**defaults, **{k: v for k, v in cfg.items() if k in defaults}}
