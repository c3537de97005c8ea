"""Run NVIDIA Dynamo's mocker offline trace replay once and print its CPU time as JSON.

Executed by the Dynamo venv's Python (ai-dynamo and ai-dynamo-runtime installed with --no-deps),
so it imports nothing from prefixsim: `python dynamo_child.py TRACE NUM_WORKERS ENGINE_JSON`.
"""

from __future__ import annotations

import json
import sys
import time


def main(trace: str, num_workers: int, engine: dict[str, object]) -> dict[str, float]:
    """Replay `trace` on `num_workers` round-robin mockers; CPU seconds of the replay itself."""
    from dynamo._core import run_mocker_trace_replay  # type: ignore[import-not-found]

    cpu_before, wall_before = time.process_time(), time.perf_counter()
    result = run_mocker_trace_replay(
        [trace],
        extra_engine_args={"engine": engine},
        num_workers=num_workers,
        router_mode="round_robin",
        replay_mode="offline",
        trace_block_size=512,
    )
    cpu_s, wall_s = time.process_time() - cpu_before, time.perf_counter() - wall_before
    summary = dict(result.summary)
    return {
        "cpu_s": cpu_s,
        "wall_s": wall_s,
        "num_requests": summary["completed_requests"],
        "prefill_tokens": summary["committed_prefill_tokens"],
        "input_tokens": summary["total_input_tokens"],
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]))))
