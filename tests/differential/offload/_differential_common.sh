# Shared by differential_offload.sh and differential_offload_sched.sh (sourced, not run):
# argument and oracle-venv checks, the seeded work directory, and the compare-and-report tail.
# The caller sets NAME (the log prefix), UNIT (what is counted), DEFAULT_N and WORK_PREFIX.

# differential_setup ARGS...: sets N, VENV, SEED and WORK (created empty), or exits 2.
differential_setup() {
    N="${1:-$DEFAULT_N}"
    if ! [[ "$N" =~ ^[1-9][0-9]*$ ]]; then
        echo "usage: $(basename "$0") [N]   (N >= 1, default $DEFAULT_N)" >&2
        exit 2
    fi
    VENV="${VLLM_ORACLE_VENV:-/tmp/vllm-oracle-venv}"
    if [ ! -x "$VENV/bin/python" ]; then
        echo "$NAME: no vLLM oracle venv at $VENV (see the oracle SETUP.md)" >&2
        exit 2
    fi
    SEED="${SEED:-$(date +%Y%m%d%H%M%S)}"
    WORK="/tmp/prefixsim-differential/$WORK_PREFIX-$SEED"
    rm -rf "$WORK" && mkdir -p "$WORK" || exit 2
    echo "$NAME: seed $SEED, $N $UNIT, workdir $WORK"
    echo "$NAME: rerun with: SEED=$SEED $0 $N"
}

# differential_report: compares $WORK/oracle with $WORK/sim, prints the verdict, exits with it.
differential_report() {
    python3 "$HERE/compare_offload.py" "$WORK/oracle" "$WORK/sim" | tee "$WORK/compare.log" | tail -20
    local status=${PIPESTATUS[0]}
    local matched
    matched=$(tail -1 "$WORK/compare.log" | sed -E 's/.*: ([0-9]+)\/.*/\1/')
    echo "$NAME: $matched/$N $UNIT match (seed $SEED)"
    if [ "$status" -eq 0 ] && [ "${KEEP:-0}" != 1 ]; then
        rm -rf "$WORK"
    fi
    exit "$status"
}
