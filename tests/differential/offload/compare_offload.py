#!/usr/bin/env python3
"""Compare offload results of the vLLM oracle and prefixsim line by line (stdlib only).

Usage: python compare_offload.py ORACLE_DIR SIM_DIR
Every *.jsonl in ORACLE_DIR must have a file of the same name in SIM_DIR with as many lines;
header lines are skipped, and every field of an oracle line must be in the sim line with an
equal JSON value (extra sim fields are ignored): the manager level's results, state, pinned
chunks, gauges and histogram samples; the scheduler level's steps, transfers, counters and
CPU tier order. Prints the first mismatch of each file and ends with
`offload compare: K/N files match`; exit status 0 only if all match.
"""

from __future__ import annotations

import json
import os
import sys

_MISSING = object()


def first_mismatch(oracle_path: str, sim_path: str) -> str | None:
    if not os.path.exists(sim_path):
        return "no prefixsim output"
    with open(oracle_path) as oracle_file, open(sim_path) as sim_file:
        oracle_lines = [json.loads(line) for line in oracle_file if line.strip()]
        sim_lines = [json.loads(line) for line in sim_file if line.strip()]
    for index, (expected, actual) in enumerate(zip(oracle_lines, sim_lines, strict=False), start=1):
        if expected.get("op") == "header":
            continue
        fields = sorted(f for f in expected if expected[f] != actual.get(f, _MISSING))
        if fields:
            field = fields[0]
            return (
                f"output line {index} (op {expected.get('op')}, input line "
                f"{expected.get('line')}): field {field}: oracle {expected.get(field)!r}, "
                f"sim {actual.get(field)!r}"
            )
    if len(oracle_lines) != len(sim_lines):
        return f"{len(oracle_lines)} oracle lines, {len(sim_lines)} sim lines"
    return None


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    oracle_dir, sim_dir = argv
    names = sorted(n for n in os.listdir(oracle_dir) if n.endswith(".jsonl"))
    matched = 0
    for name in names:
        problem = first_mismatch(os.path.join(oracle_dir, name), os.path.join(sim_dir, name))
        if problem is None:
            matched += 1
        else:
            print(f"MISMATCH {name}: {problem}")
    print(f"offload compare: {matched}/{len(names)} files match")
    return 0 if names and matched == len(names) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
