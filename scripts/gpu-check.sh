#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with the host binary and the PTX module
# built elsewhere (scripts/build-ptx.sh, then cargo build --release -p ck-cli):
#   1. every exercise kernel on the emulator and the GPU, compared bit for bit (ck cross-check);
#   2. bank-probe for W in {4,8,16} and S in {1,2,4,8,16,32,33}: the emulator's shared-memory
#      wavefronts and conflicts next to ncu's l1tex counters for the same launches;
#   2b-2d. the same for the TV8 LDS tile, the mma.sync GEMM and the wgmma GEMM;
#   3. compute-sanitizer memcheck and racecheck on the exercise kernels.
# Usage: scripts/gpu-check.sh [OUTDIR]   (env: CK = the ck binary; a release build embeds the
# PTX module that scripts/build-ptx.sh built before it)
set -uo pipefail
cd "$(dirname "$0")/.."
CK=${CK:-target/release/ck}
OUT=${1:-${OUT:-/tmp/ck-gpu-check}}
mkdir -p "$OUT"
status=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader

echo "### 1. cross-backend: emulator vs GPU"
"$CK" cross-check | tee "$OUT/cross-check.txt" || status=1

echo "### 2. bank conflicts: emulator vs ncu"
"$CK" run bank-probe --sweep --json --backend emu > "$OUT/bank-emu.json" || status=1
M=l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum
M=$M,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum
timeout 300 ncu --csv --log-file "$OUT/bank-ncu.csv" --metrics "$M" "$CK" run bank-probe --sweep --json --backend cuda > "$OUT/bank-gpu.json" || status=1
python3 scripts/compare_banks.py "$OUT/bank-emu.json" "$OUT/bank-ncu.csv" | tee "$OUT/bank-table.txt" || status=1

echo "### 2b. LDS layouts (spec TV8): emulator vs ncu, XOR then plain"
"$CK" run lds-probe --layout both --json --backend emu > "$OUT/lds-emu.json" || status=1
timeout 120 ncu --csv --log-file "$OUT/lds-ncu.csv" --metrics "$M" "$CK" run lds-probe --layout both --backend cuda > /dev/null || status=1
python3 scripts/compare_banks.py "$OUT/lds-emu.json" "$OUT/lds-ncu.csv" | tee "$OUT/lds-table.txt" || status=1

echo "### 2c. bf16 GEMM (256^3): swizzled vs plain shared layouts, emulator vs ncu"
"$CK" run gemm-lds --layout both --json --backend emu > "$OUT/gemm-lds-emu.json" || status=1
timeout 120 ncu --csv --log-file "$OUT/gemm-lds-ncu.csv" --metrics "$M" "$CK" run gemm-lds --layout both --backend cuda > /dev/null || status=1
# Many warps in flight: ncu counts up to ~1.5 % extra wavefronts, varying per run
# (notes/emulator-and-tools.md, notes/h100-gemm-lds-emulator-vs-ncu.txt).
python3 scripts/compare_banks.py "$OUT/gemm-lds-emu.json" "$OUT/gemm-lds-ncu.csv" --excess 2 | tee "$OUT/gemm-lds-table.txt" || status=1

echo "### 2d. wgmma GEMM (257x264x64): cp.async stores, emulator vs ncu; wgmma reads (ncu)"
"$CK" run gemm-wgmma --n 64 --json --backend emu > "$OUT/wgmma-lds-emu.json" || status=1
W=smsp__inst_executed_op_ldgsts.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldgsts.sum
W=$W,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_gmma.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_gmma.sum
timeout 120 ncu --csv --log-file "$OUT/wgmma-lds-ncu.csv" --metrics "$W" "$CK" run gemm-wgmma --n 64 --backend cuda > /dev/null || status=1
python3 scripts/compare_wgmma_lds.py "$OUT/wgmma-lds-emu.json" "$OUT/wgmma-lds-ncu.csv" | tee "$OUT/wgmma-lds-table.txt" || status=1

echo "### 3. compute-sanitizer"
for k in reverse block-sum histogram gemm-mma-sync gemm-wgmma gemm-wgmma-n128; do
  for tool in memcheck racecheck; do
    if timeout 120 compute-sanitizer --tool $tool --error-exitcode 3 "$CK" run $k --n 5000 --backend cuda > "$OUT/sanitizer-$k-$tool.txt" 2>&1; then
      echo "$k $tool: clean ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer-$k-$tool.txt" | head -1))"
    else
      echo "$k $tool: FAILED"; tail -20 "$OUT/sanitizer-$k-$tool.txt"; status=1
    fi
  done
done
exit $status
