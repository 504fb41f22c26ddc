#!/usr/bin/env bash
# Builds every ck-kernels kernel into one PTX module, target/ptx/ck-kernels.ptx, and assembles
# it with `ptxas -arch=sm_90 -v` (no GPU needed). Fails on any ptxas error or register spill.
# Installs what is missing first (scripts/ptx-toolchain.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
eval "$("$ROOT/scripts/ptx-toolchain.sh")"
OUT="$ROOT/target/ptx"
mkdir -p "$OUT"
export CARGO_TARGET_DIR="$ROOT/target/ptx-build"
export CARGO_TARGET_NVPTX64_NVIDIA_CUDA_LINKER="$CK_LLVM_BITCODE_LINKER"
export CARGO_TARGET_NVPTX64_NVIDIA_CUDA_RUSTFLAGS="-C target-cpu=sm_90 -C target-feature=+ptx80"
echo "[build-ptx] cargo build (nvptx64-nvidia-cuda, sm_90)"
( cd "$ROOT/ck-kernels/ptx" && cargo build --release --target nvptx64-nvidia-cuda -Z build-std=core )
cp "$CARGO_TARGET_DIR/nvptx64-nvidia-cuda/release/ck_kernels_ptx.ptx" "$OUT/ck-kernels.ptx"
echo "[build-ptx] ptxas -arch=sm_90 -v"
"$PTXAS" -arch=sm_90 -v "$OUT/ck-kernels.ptx" -o "$OUT/ck-kernels.cubin" 2> "$OUT/ptxas.log" || { cat "$OUT/ptxas.log"; exit 1; }
grep -E "Compiling entry|Used|spill" "$OUT/ptxas.log" | sed 's/^ptxas info    : //'
if grep -E "[1-9][0-9]* bytes spill (stores|loads)" "$OUT/ptxas.log"; then
  echo "[build-ptx] error: register spills (above)" >&2
  exit 1
fi
echo "[build-ptx] OK: $OUT/ck-kernels.ptx ($(wc -c < "$OUT/ck-kernels.ptx") bytes), $(grep -c '^.visible .entry' "$OUT/ck-kernels.ptx") kernels"
