#!/usr/bin/env bash
# make_oracle_venv.sh VENV
#   Creates the vLLM 0.33.0 (CPU) venv the differential oracle imports, outside the repository,
#   unless VENV already imports vLLM 0.33.0 (then nothing is touched). The recipe of
#   oracle/README.md: CPU torch, then vLLM and xgrammar WITHOUT their dependencies (vLLM's
#   full dependency list is CUDA torch and ~7 GB), then the pinned rest. About 2 minutes.
set -eu
VENV="${1:?usage: make_oracle_venv.sh VENV}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" - <<'PY' 2>/dev/null
import importlib.metadata, sys
sys.exit(importlib.metadata.version("vllm") != "0.33.0")
PY
then
    exit 0
fi
REPO="$(cd "$HERE/../.." && pwd)"
mkdir -p "$VENV"
case "$(cd "$VENV" && pwd)/" in
    "$REPO"/*) echo "make_oracle_venv: $VENV is inside the repository; keep it outside" >&2; exit 2 ;;
esac
echo "make_oracle_venv: creating $VENV (vLLM 0.33.0 for the CPU, about 2 minutes)"
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q torch==2.13.0
"$VENV/bin/pip" install -q --no-deps vllm==0.33.0 xgrammar==0.2.8
"$VENV/bin/pip" install -q -r "$HERE/oracle/requirements-oracle.txt"
"$VENV/bin/python" -c "import vllm; print('make_oracle_venv: vLLM', vllm.__version__, 'ready')"
