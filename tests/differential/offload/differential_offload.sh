#!/usr/bin/env bash
# differential_offload.sh [N]
#   N random op streams for the CPU offload tier (LRU and ARC), each built op by op against
#   vLLM 0.33.0's own CPUOffloadingManager (vllm_offload_oracle.py --generate), replayed by
#   the oracle and by `prefixsim cache offload-replay`, compared line by line.
#   Last line: "differential_offload: K/N streams match"; exit 0 only if all match,
#   1 on mismatches, 2 on setup errors.
# Environment: SEED (default: date and time, printed), VLLM_ORACLE_VENV (default
#   /tmp/vllm-oracle-venv), PREFIXSIM (default .venv/bin/prefixsim), KEEP=1 keeps the work dir
#   /tmp/prefixsim-differential/offload-<seed> after a full match.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NAME=differential_offload UNIT=streams DEFAULT_N=1000 WORK_PREFIX=offload
# shellcheck source=_differential_common.sh
source "$HERE/_differential_common.sh"
SIM="${PREFIXSIM:-.venv/bin/prefixsim}"
if [ ! -x "$SIM" ]; then
    echo "$NAME: prefixsim not installed at $SIM" >&2
    exit 2
fi
differential_setup "$@"
"$VENV/bin/python" "$HERE/vllm_offload_oracle.py" --generate --seed "$SEED" --count "$N" \
    --outdir "$WORK/inputs" 2>"$WORK/generate.log" || { echo "generation failed, see $WORK/generate.log" >&2; exit 2; }
"$VENV/bin/python" "$HERE/vllm_offload_oracle.py" "$WORK"/inputs/*.jsonl --outdir "$WORK/oracle" \
    2>"$WORK/oracle.log" || { echo "oracle failed, see $WORK/oracle.log" >&2; exit 2; }
"$SIM" cache offload-replay "$WORK"/inputs/*.jsonl --outdir "$WORK/sim" 2>"$WORK/sim.log" \
    || echo "prefixsim failed, see $WORK/sim.log" >&2
differential_report
