#!/usr/bin/env bash
# A/B of kernel builds in one job, on the GPU machine: the peers of OP once (bench_peers.py),
# then `ck bench OP` for each PTX module given (CK_PTX points the same host binary at it), so
# every variant is compared with the same peers and the same GPU state.
# Usage: scripts/gpu-variants.sh OP[,OP..] NAME=PATH/ck_kernels.ptx [NAME=PATH ...]
# (OP: attention, gemm, rmsnorm, layernorm, softmax, add-rmsnorm; bench_peers.py groups:
# attention for attention, gemm for gemm, rows for the row-wise operators.)
set -uo pipefail
cd "$(dirname "$0")/.."
CK=${CK:-target/release/ck}
OUT=${OUT:-/tmp/ck-gpu-variants}
mkdir -p "$OUT"
ops=$1
shift
groups=$(echo "$ops" | tr ',' '\n' | sed -e 's/^attention$/attention/' -e 's/^gemm$/gemm/' \
  -e 's/^\(rmsnorm\|layernorm\|softmax\|add-rmsnorm\)$/rows/' | sort -u | tr '\n' ' ')
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
echo "### peers ($groups)"
PYTHONUNBUFFERED=1 timeout 300 python3 scripts/bench_peers.py "$OUT/peers.json" $groups || exit 1
status=0
for variant in "$@"; do
  name=${variant%%=*}
  ptx=${variant#*=}
  for op in $(echo "$ops" | tr ',' ' '); do
    echo "=== $name: ck bench $op"
    CK_PTX=$ptx "$CK" bench "$op" --backend cuda --peers "$OUT/peers.json" --iters 10 \
      | tee "$OUT/bench-$op-$name.txt" || status=1
  done
done
exit $status
