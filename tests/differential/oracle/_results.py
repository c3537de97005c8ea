"""Where vllm_oracle.py and vllm_sched_oracle.py write the results of each input.  Stdlib only."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO


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
