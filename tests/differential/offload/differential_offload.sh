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
N="${1:-1000}"
if ! [[ "$N" =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: $(basename "$0") [N]   (N >= 1, default 1000)" >&2
    exit 2
fi
VENV="${VLLM_ORACLE_VENV:-/tmp/vllm-oracle-venv}"
if [ ! -x "$VENV/bin/python" ]; then
    echo "differential_offload: no vLLM oracle venv at $VENV (see the oracle SETUP.md)" >&2
    exit 2
fi
SIM="${PREFIXSIM:-.venv/bin/prefixsim}"
if [ ! -x "$SIM" ]; then
    echo "differential_offload: prefixsim not installed at $SIM" >&2
    exit 2
fi
SEED="${SEED:-$(date +%Y%m%d%H%M%S)}"
WORK="/tmp/prefixsim-differential/offload-$SEED"
rm -rf "$WORK" && mkdir -p "$WORK" || exit 2
echo "differential_offload: seed $SEED, $N streams, workdir $WORK"
echo "differential_offload: rerun with: SEED=$SEED $0 $N"
"$VENV/bin/python" "$HERE/vllm_offload_oracle.py" --generate --seed "$SEED" --count "$N" \
    --outdir "$WORK/inputs" 2>"$WORK/generate.log" || { echo "generation failed, see $WORK/generate.log" >&2; exit 2; }
"$VENV/bin/python" "$HERE/vllm_offload_oracle.py" "$WORK"/inputs/*.jsonl --outdir "$WORK/oracle" \
    2>"$WORK/oracle.log" || { echo "oracle failed, see $WORK/oracle.log" >&2; exit 2; }
"$SIM" cache offload-replay "$WORK"/inputs/*.jsonl --outdir "$WORK/sim" 2>"$WORK/sim.log" \
    || echo "prefixsim failed, see $WORK/sim.log" >&2
python3 "$HERE/compare_offload.py" "$WORK/oracle" "$WORK/sim" | tee "$WORK/compare.log" | tail -20
status=${PIPESTATUS[0]}
matched=$(tail -1 "$WORK/compare.log" | sed -E 's/.*: ([0-9]+)\/.*/\1/')
echo "differential_offload: $matched/$N streams match (seed $SEED)"
if [ "$status" -eq 0 ] && [ "${KEEP:-0}" != 1 ]; then
    rm -rf "$WORK"
fi
exit "$status"
