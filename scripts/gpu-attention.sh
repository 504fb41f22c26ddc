#!/usr/bin/env bash
# Attention only, on the GPU machine: SDPA peers (flash, cuDNN), `ck bench attention` against
# them in the same job, the benchmark-size check against torch, compute-sanitizer, and the
# emulator-vs-GPU cross-check of the attention cases.
# Usage: scripts/gpu-attention.sh [OUTDIR]
set -uo pipefail
cd "$(dirname "$0")/.."
CK=${CK:-target/release/ck}
OUT=${1:-${OUT:-/tmp/ck-gpu-attention}}
mkdir -p "$OUT"
status=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
echo "### peers (torch SDPA flash and cuDNN)"
PYTHONUNBUFFERED=1 timeout 240 python3 scripts/bench_peers.py "$OUT/peers.json" attention || status=1
echo "### ck bench attention"
"$CK" bench attention --backend cuda --peers "$OUT/peers.json" --iters 10 | tee "$OUT/bench-attention.txt" || status=1
echo "### attention at benchmark sizes vs torch"
timeout 180 python3 scripts/check_attention.py "$CK" | tee "$OUT/attention-check.txt" || status=1
echo "### compute-sanitizer"
for tool in memcheck racecheck; do
  if timeout 120 compute-sanitizer --tool $tool --error-exitcode 3 "$CK" run attention-bf16 --n 300 --backend cuda > "$OUT/san-attention-$tool.txt" 2>&1; then
    echo "attention $tool: clean ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san-attention-$tool.txt" | head -1))"
  else
    echo "attention $tool: FAILED"; tail -15 "$OUT/san-attention-$tool.txt"; status=1
  fi
done
echo "### emulator vs GPU"
"$CK" cross-check | grep -E "attention|agree on" | tee "$OUT/cross-check-attention.txt" || status=1
exit $status
