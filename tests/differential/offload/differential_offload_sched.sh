#!/usr/bin/env bash
# differential_offload_sched.sh [N]
#   N random scheduler-level workloads with CPU offloading on (offload_random_workloads.py,
#   built against vLLM 0.33.0's real Scheduler and OffloadingConnector), replayed by the
#   oracle (vllm_offload_sched_oracle.py) and by prefixsim's engine replay, compared line by
#   line. Last line: "differential_offload_sched: K/N workloads match"; exit 0 only if all
#   match, 1 on mismatches, 2 on setup errors.
# Environment: SEED (default: date and time, printed), VLLM_ORACLE_VENV (default
#   /tmp/vllm-oracle-venv), PYTHON (prefixsim's, default .venv/bin/python), KEEP=1 keeps
#   /tmp/prefixsim-differential/offload-sched-<seed> after a full match.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
N="${1:-200}"
if ! [[ "$N" =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: $(basename "$0") [N]   (N >= 1, default 200)" >&2
    exit 2
fi
VENV="${VLLM_ORACLE_VENV:-/tmp/vllm-oracle-venv}"
if [ ! -x "$VENV/bin/python" ]; then
    echo "differential_offload_sched: no vLLM oracle venv at $VENV (see the oracle SETUP.md)" >&2
    exit 2
fi
SIM_PY="${PYTHON:-.venv/bin/python}"
if [ ! -x "$SIM_PY" ]; then
    echo "differential_offload_sched: no prefixsim python at $SIM_PY" >&2
    exit 2
fi
SEED="${SEED:-$(date +%Y%m%d%H%M%S)}"
WORK="/tmp/prefixsim-differential/offload-sched-$SEED"
rm -rf "$WORK" && mkdir -p "$WORK" || exit 2
echo "differential_offload_sched: seed $SEED, $N workloads, workdir $WORK"
echo "differential_offload_sched: rerun with: SEED=$SEED $0 $N"
"$VENV/bin/python" "$HERE/offload_random_workloads.py" --seed "$SEED" --count "$N" \
    --outdir "$WORK/inputs" >/dev/null 2>"$WORK/generate.log" \
    || { echo "generation failed, see $WORK/generate.log" >&2; exit 2; }
"$VENV/bin/python" "$HERE/vllm_offload_sched_oracle.py" "$WORK"/inputs/*.jsonl \
    --outdir "$WORK/oracle" 2>"$WORK/oracle.log" \
    || { echo "oracle failed, see $WORK/oracle.log" >&2; exit 2; }
"$SIM_PY" "$HERE/sim_engine_replay_batch.py" "$WORK/sim" "$WORK"/inputs/*.jsonl \
    2>"$WORK/sim.log" || echo "prefixsim rejected some workloads, see $WORK/sim/*.failed" >&2
python3 "$HERE/compare_offload.py" "$WORK/oracle" "$WORK/sim" | tee "$WORK/compare.log" | tail -20
status=${PIPESTATUS[0]}
matched=$(tail -1 "$WORK/compare.log" | sed -E 's/.*: ([0-9]+)\/.*/\1/')
echo "differential_offload_sched: $matched/$N workloads match (seed $SEED)"
if [ "$status" -eq 0 ] && [ "${KEEP:-0}" != 1 ]; then
    rm -rf "$WORK"
fi
exit "$status"
