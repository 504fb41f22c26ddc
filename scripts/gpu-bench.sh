#!/usr/bin/env bash
# Runs on the GPU machine (like gpu-check.sh): peers first (torch, triton, copy), then ck's
# benchmarks against them in the same job; then the RMSNorm/elementwise correctness and
# compute-sanitizer checks on the GPU.
# Usage: scripts/gpu-bench.sh [OUTDIR]
set -uo pipefail
cd "$(dirname "$0")/.."
CK=${CK:-target/release/ck}
OUT=${1:-${OUT:-/tmp/ck-gpu-bench}}
mkdir -p "$OUT"
status=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
echo "### peers (torch, triton)"
PYTHONUNBUFFERED=1 timeout 420 python3 scripts/bench_peers.py "$OUT/peers.json" || status=1
echo "### ck bench copy"
"$CK" bench copy --backend cuda --peers "$OUT/peers.json" | tee "$OUT/bench-copy.txt" || status=1
echo "### ck bench rmsnorm"
"$CK" bench rmsnorm --backend cuda --peers "$OUT/peers.json" | tee "$OUT/bench-rmsnorm.txt" || status=1
"$CK" bench rmsnorm --backend cuda --peers "$OUT/peers.json" --json > "$OUT/bench-rmsnorm.json" || status=1
for op in layernorm add-rmsnorm softmax; do
  echo "### ck bench $op"
  "$CK" bench $op --backend cuda --peers "$OUT/peers.json" | tee "$OUT/bench-$op.txt" || status=1
done
echo "### ck bench gemm"
# cuBLASLt for the in-process peer: PyTorch's copy, where none is on the library path already.
LT=$(python3 -c 'import glob, nvidia; print(next((p.rsplit("/", 1)[0] for d in nvidia.__path__ for p in glob.glob(d + "/**/libcublasLt.so*", recursive=True)), ""))' 2>/dev/null)
export LD_LIBRARY_PATH=${LT:+$LT:}${LD_LIBRARY_PATH:-}
"$CK" bench gemm --backend cuda --peers "$OUT/peers.json" --iters 20 | tee "$OUT/bench-gemm.txt" || status=1
echo "### ck bench attention"
"$CK" bench attention --backend cuda --peers "$OUT/peers.json" --iters 10 | tee "$OUT/bench-attention.txt" || status=1
echo "### attention at benchmark sizes vs torch"
python3 scripts/check_attention.py "$CK" | tee "$OUT/attention-check.txt" || status=1
echo "### bf16 GEMM at the benchmark sizes vs torch fp64"
python3 scripts/check_gemm_large.py "$CK" 4096x4096x4096 8192x8192x1024 8192x8192x8192 | tee "$OUT/gemm-large.txt" || status=1
echo "### correctness on the GPU (odd shapes vs fp64, emulator vs GPU)"
"$CK" cross-check | tail -25 | tee "$OUT/cross-check.txt" || status=1
echo "### compute-sanitizer"
for k in rmsnorm-f32 rmsnorm-bf16 layernorm-f32 layernorm-bf16 add-rmsnorm-f32 add-rmsnorm-bf16 softmax-f32 softmax-bf16 copy add sgemm-f32 gemm-f32 gemm-bf16 gemm-mma-sync gemm-wgmma gemm-wgmma-n128 attention-bf16; do
  for tool in memcheck racecheck; do
    if timeout 120 compute-sanitizer --tool $tool --error-exitcode 3 "$CK" run $k --backend cuda > "$OUT/san-$k-$tool.txt" 2>&1; then
      echo "$k $tool: clean ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san-$k-$tool.txt" | head -1))"
    else
      echo "$k $tool: FAILED"; tail -15 "$OUT/san-$k-$tool.txt"; status=1
    fi
  done
done
exit $status
