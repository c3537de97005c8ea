#!/usr/bin/env bash
# differential_offload_sched.sh [N]
#   N random scheduler-level workloads with CPU offloading on (offload_random_workloads.py,
#   built against vLLM 0.33.0's real Scheduler and OffloadingConnector), replayed by the
#   oracle (vllm_offload_sched_oracle.py) and by prefixsim's engine replay, compared line by
#   line. Last line: "differential_offload_sched: K/N workloads match"; exit 0 only if all
#   match, 1 on mismatches, 2 on setup errors.
# Environment: SEED (default: date and time, printed), VLLM_ORACLE_VENV (default
#   /tmp/vllm-oracle-venv), PYTHON (prefixsim's, default .venv/bin/python), ASYNC=1 drives
#   vLLM's AsyncScheduler (deferred block frees, spec §13.9) instead of the sync Scheduler and
#   names itself differential_offload_async, KEEP=1 keeps
#   /tmp/prefixsim-differential/offload-sched[-async]-<seed> after a full match.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NAME=differential_offload_sched UNIT=workloads DEFAULT_N=200 WORK_PREFIX=offload-sched
GENERATOR_ARGS=()
if [ "${ASYNC:-0}" = 1 ]; then
    NAME=differential_offload_async WORK_PREFIX=offload-sched-async
    GENERATOR_ARGS=(--async-scheduling)
fi
# shellcheck source=_differential_common.sh
source "$HERE/_differential_common.sh"
SIM_PY="${PYTHON:-.venv/bin/python}"
if [ ! -x "$SIM_PY" ]; then
    echo "$NAME: no prefixsim python at $SIM_PY" >&2
    exit 2
fi
differential_setup "$@"
"$VENV/bin/python" "$HERE/offload_random_workloads.py" --seed "$SEED" --count "$N" \
    "${GENERATOR_ARGS[@]}" --outdir "$WORK/inputs" >/dev/null 2>"$WORK/generate.log" \
    || { echo "generation failed, see $WORK/generate.log" >&2; exit 2; }
"$VENV/bin/python" "$HERE/vllm_offload_sched_oracle.py" "$WORK"/inputs/*.jsonl \
    --outdir "$WORK/oracle" 2>"$WORK/oracle.log" \
    || { echo "oracle failed, see $WORK/oracle.log" >&2; exit 2; }
"$SIM_PY" "$HERE/sim_engine_replay_batch.py" "$WORK/sim" "$WORK"/inputs/*.jsonl \
    2>"$WORK/sim.log" || echo "prefixsim rejected some workloads, see $WORK/sim/*.failed" >&2
differential_report
