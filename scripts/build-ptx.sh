#!/usr/bin/env bash
# Builds every ck-kernels kernel into one PTX module, target/ptx/ck-kernels.ptx, and assembles
# it with `ptxas -arch=sm_90a -v` (no GPU needed). Fails on any ptxas error, register spill or
# stack frame (an outlined closure or a dynamically indexed register array lands in local memory),
# or wgmma serialisation.
# Installs what is missing first (scripts/ptx-toolchain.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
eval "$("$ROOT/scripts/ptx-toolchain.sh")"
OUT="$ROOT/target/ptx"
mkdir -p "$OUT"
export CARGO_TARGET_DIR="$ROOT/target/ptx-build"
export CARGO_TARGET_NVPTX64_NVIDIA_CUDA_LINKER="$CK_LLVM_BITCODE_LINKER"
export CARGO_TARGET_NVPTX64_NVIDIA_CUDA_RUSTFLAGS="-C target-cpu=sm_90a -C target-feature=+ptx80"
echo "[build-ptx] cargo build (nvptx64-nvidia-cuda, sm_90a)"
( cd "$ROOT/ck-kernels/ptx" && cargo build --release --target nvptx64-nvidia-cuda -Z build-std=core )
cp "$CARGO_TARGET_DIR/nvptx64-nvidia-cuda/release/ck_kernels_ptx.ptx" "$OUT/ck-kernels.ptx"
# Launch bounds (`kernel:threads:min_blocks_per_sm`), which Rust cannot spell: without them the
# driver gives gemm_bf16 130 registers, one block per SM, and 57 TFLOP/s at 4096³; with two blocks
# per SM ptxas spills 36 bytes and it runs at 128 TFLOP/s (notes/README.md). gemm_f32 fits two
# blocks in 128 registers without spilling (143 without bounds; +1-2 %). Kernels listed here may
# spill; every other kernel must not.
LAUNCH_BOUNDS="gemm_bf16:256:2 gemm_bf16_plain:256:2 gemm_f32:256:2"
for bound in $LAUNCH_BOUNDS; do
  IFS=: read -r kernel threads blocks <<< "$bound"
  perl -0pi -e "s/(\.visible \.entry $kernel\((?:[^)]*)\)[^\n]*\n)\{/\1.maxntid $threads, 1, 1\n.minnctapersm $blocks\n{/ or die 'no entry $kernel'" "$OUT/ck-kernels.ptx"
done
echo "[build-ptx] ptxas -arch=sm_90a -v"
"$PTXAS" -arch=sm_90a -v "$OUT/ck-kernels.ptx" -o "$OUT/ck-kernels.cubin" 2> "$OUT/ptxas.log" || { cat "$OUT/ptxas.log"; exit 1; }
grep -E "Compiling entry|Used|spill" "$OUT/ptxas.log" | sed 's/^ptxas info    : //'
bounded=" $(for b in $LAUNCH_BOUNDS; do printf '%s ' "${b%%:*}"; done)"
if awk -v bounded="$bounded" '
  /Function properties for/ { fn = $NF }
  /bytes (stack frame|spill)/ && /[1-9][0-9]* bytes/ {
    if (index(bounded, " " fn " ")) print "[build-ptx] accepted (launch bounds): " fn ": " $0
    else { print "[build-ptx] " fn ": " $0; bad = 1 }
  }
  END { exit !bad }' "$OUT/ptxas.log"; then
  echo "[build-ptx] error: register spills or local-memory stack frames (above)" >&2
  exit 1
fi
# ptxas keeps wgmma correct when accumulators are touched between an MMA and its wait by
# serialising the MMAs (advisories C7510/C7517): correct but several times slower, so an error.
if grep -E "wgmma.mma_async instructions are serialized|warpgroup.wait is injected" "$OUT/ptxas.log"; then
  echo "[build-ptx] error: ptxas serialised wgmma (above): accumulators are read or copied before their wgmma_wait" >&2
  exit 1
fi
echo "[build-ptx] OK: $OUT/ck-kernels.ptx ($(wc -c < "$OUT/ck-kernels.ptx") bytes), $(grep -c '^.visible .entry' "$OUT/ck-kernels.ptx") kernels"
