"""prefixsim against real vLLM 0.33.0 on fresh random inputs (`make differential`).

Generates random KV-manager op streams and scheduler workloads (sync and async) with the
generators in oracle/, which build every input op by op against live vLLM objects, replays them
through vLLM (oracle/vllm_oracle.py, oracle/vllm_sched_oracle.py, run with the oracle venv's
python) and through prefixsim's `cache replay` / `engine replay` (in this process), and compares
every field of every line. Prints the seed first; each mismatch names the oracle output file,
its line and the field. Exit status 0 only when everything matches.

    python tests/differential/run_differential.py --oracle-python VENV/bin/python \\
        [--seed S] [--cache 2000] [--sync 500] [--async 200] [--workdir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from compare import first_mismatch

from sim.replay.cache_replay import replay_cache
from sim.replay.engine_replay import replay_engine
from sim.replay.ops import ReplayLine

ORACLE_DIR = Path(__file__).resolve().parent / "oracle"
MAX_SHOWN = 20


def run_oracle_script(python: str, script: str, *args: str, log: Path) -> None:
    """Run one oracle-side script; its stderr (vLLM's import noise) goes to `log`."""
    with log.open("a") as stderr:
        completed = subprocess.run(
            [python, str(ORACLE_DIR / script), *args],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            check=False,
        )
    if completed.returncode != 0:
        tail = log.read_text().splitlines()[-5:]
        raise SystemExit(
            f"differential: {script} failed (status {completed.returncode}):\n" + "\n".join(tail)
        )


def replay_to_file(
    replay: Callable[[Path], Iterable[ReplayLine]], source: Path, out: Path
) -> str | None:
    """Replay one input through prefixsim into `out`; the error text if it raised."""
    try:
        lines = [json.dumps(line.line) for line in replay(source) if line.line is not None]
    except Exception as error:  # a crash is a finding, reported like a mismatch
        return f"{source}: prefixsim raised {type(error).__name__}: {error}"
    out.write_text("".join(line + "\n" for line in lines))
    return None


def run_level(
    name: str,
    count: int,
    seed: int,
    workdir: Path,
    python: str,
    generator_args: list[str],
) -> tuple[int, list[str]]:
    """Generate, replay on both sides and compare one level; (inputs, problems)."""
    level_dir = workdir / name
    shutil.rmtree(level_dir, ignore_errors=True)
    inputs, oracle_out, sim_out = (level_dir / part for part in ("inputs", "oracle", "sim"))
    for folder in (inputs, oracle_out, sim_out):
        folder.mkdir(parents=True)
    log = level_dir / "oracle.log"
    started = time.monotonic()
    if name == "cache":
        generator, oracle, replay = "random_streams.py", "vllm_oracle.py", replay_cache
    else:
        generator, oracle, replay = "random_workloads.py", "vllm_sched_oracle.py", replay_engine
    run_oracle_script(
        python,
        generator,
        "--seed",
        str(seed),
        "--count",
        str(count),
        "--outdir",
        str(inputs),
        "--quiet",
        *generator_args,
        log=log,
    )
    paths = sorted(inputs.glob("*.jsonl"))
    generated = time.monotonic()
    run_oracle_script(python, oracle, *map(str, paths), "--outdir", str(oracle_out), log=log)
    replayed = time.monotonic()
    problems = []
    for path in paths:
        sim_file = sim_out / f"{path.stem}.out.jsonl"
        problem = replay_to_file(replay, path, sim_file) or first_mismatch(
            oracle_out / f"{path.stem}.out.jsonl", sim_file
        )
        if problem is not None:
            problems.append(f"{problem} (input {path})")
    finished = time.monotonic()
    print(
        f"differential: {name}: {len(paths) - len(problems)}/{len(paths)} match "
        f"(generate {generated - started:.0f} s, vLLM {replayed - generated:.0f} s, "
        f"prefixsim + compare {finished - replayed:.0f} s)",
        flush=True,
    )
    return len(paths), problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--oracle-python", required=True, help="python of the vLLM 0.33.0 venv")
    parser.add_argument("--seed", type=int, default=None, help="default: from the date and time")
    parser.add_argument("--cache", type=int, default=2000, help="random KV op streams")
    parser.add_argument("--sync", type=int, default=500, help="random sync scheduler workloads")
    parser.add_argument("--async", dest="async_", type=int, default=200, help="async workloads")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the files after a full match")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else int(time.strftime("%Y%m%d%H%M%S"))
    workdir = args.workdir or Path("/tmp/prefixsim-differential") / str(seed)
    print(f"differential: seed {seed}, workdir {workdir}", flush=True)
    print(
        f"differential: rerun with: make differential DIFF_SEED={seed} DIFF_CACHE={args.cache} "
        f"DIFF_SYNC={args.sync} DIFF_ASYNC={args.async_}",
        flush=True,
    )
    # The async workloads take the next seed, so they are not the sync ones replayed async.
    levels = [
        ("cache", args.cache, seed, []),
        ("sync", args.sync, seed, []),
        ("async", args.async_, seed + 1, ["--async-scheduling"]),
    ]
    total = 0
    problems: list[str] = []
    for name, count, level_seed, generator_args in levels:
        if count > 0:
            num_inputs, found = run_level(
                name, count, level_seed, workdir, args.oracle_python, generator_args
            )
            total += num_inputs
            problems += found
    for problem in problems[:MAX_SHOWN]:
        print(f"MISMATCH {problem}")
    if len(problems) > MAX_SHOWN:
        print(f"... and {len(problems) - MAX_SHOWN} more")
    print(f"differential: seed {seed}: {total - len(problems)}/{total} inputs match")
    if not problems and not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
