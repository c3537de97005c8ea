"""Replay many engine workloads through prefixsim in one process (`prefixsim engine replay`
per file costs a start-up each); run with the project venv.

Usage: python sim_engine_replay_batch.py OUTDIR WORKLOAD.jsonl [...]
Writes OUTDIR/<name>.out.jsonl per workload, the name the scheduler oracles use; a workload
prefixsim rejects gets OUTDIR/<name>.failed with the error.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from sim.errors import InputError
from sim.replay.engine_replay import replay_engine


def main(argv: list[str]) -> int:
    outdir, *paths = argv
    Path(outdir).mkdir(parents=True, exist_ok=True)
    failures = 0
    for path in map(Path, paths):
        name = path.name.removesuffix(".jsonl")
        try:
            lines = replay_engine(path)
            text = "".join(json.dumps(line.line) + "\n" for line in lines if line.line is not None)
        except InputError as error:
            failures += 1
            (Path(outdir) / f"{name}.failed").write_text(f"{error}\n")
            continue
        (Path(outdir) / f"{name}.out.jsonl").write_text(text)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
