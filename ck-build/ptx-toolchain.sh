#!/usr/bin/env bash
# Installs, idempotently, the Rust -> PTX toolchain of `ck build-ptx` (which embeds and runs this
# script; see ck-build/src/builder/toolchain.rs) into $CK_PTX_TOOLS, without touching the
# system's compilers:
#   - Debian bookworm-security rustc-web 1.96 (LLVM 22) with its matching core sources, unpacked;
#   - Debian llvm-22 (llvm-link, opt, llc), unpacked;
#   - llvm-bitcode-linker, built from the packaged Rust sources;
#   - ptxas from the nvidia-cuda-nvcc wheel (offline PTX assembly, no GPU needed).
# Prints the environment to `source` (RUSTC, RUSTC_BOOTSTRAP, PATH, LD_LIBRARY_PATH, PTXAS, ...).
set -euo pipefail
TOOLS=${CK_PTX_TOOLS:?set CK_PTX_TOOLS to the folder to install into}
RUST_VERSION=1.96
LLVM=22
NVCC_WHEEL="nvidia-cuda-nvcc==13.0.88"
mkdir -p "$TOOLS"
log() { echo "[ptx-toolchain] $*" >&2; }

# 1. Debian packages, unpacked into $TOOLS/root.
if [ ! -x "$TOOLS/root/usr/bin/rustc" ] || [ ! -x "$TOOLS/root/usr/lib/llvm-$LLVM/bin/llc" ]; then
  log "downloading Debian rustc-web $RUST_VERSION and llvm-$LLVM"
  if ! apt-cache madison rustc-web 2>/dev/null | grep -q "$RUST_VERSION"; then
    apt-get update -q >&2
  fi
  mkdir -p "$TOOLS/debs" "$TOOLS/root"
  ( cd "$TOOLS/debs" && apt-get download -q \
      "rustc-web=$RUST_VERSION.*" "rust-web-src=$RUST_VERSION.*" \
      "libstd-rust-web-$RUST_VERSION" "libstd-rust-web-dev=$RUST_VERSION.*" \
      "libllvm$LLVM" "llvm-$LLVM" >&2 )
  for d in "$TOOLS"/debs/*.deb; do dpkg -x "$d" "$TOOLS/root"; done
fi
export LD_LIBRARY_PATH="$TOOLS/root/usr/lib/x86_64-linux-gnu:$TOOLS/root/usr/lib/llvm-$LLVM/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$TOOLS/root/usr/lib/llvm-$LLVM/bin:$PATH"
"$TOOLS/root/usr/bin/rustc" --version >&2

# 2. llvm-bitcode-linker from the packaged sources (crates.io dependencies only).
if [ ! -x "$TOOLS/bin/llvm-bitcode-linker" ]; then
  log "building llvm-bitcode-linker"
  SRC=$(find "$TOOLS/root/usr/src" -type d -path '*src/tools/llvm-bitcode-linker' | head -1)
  rm -rf "$TOOLS/linker-src" && cp -r "$SRC" "$TOOLS/linker-src"
  grep -q '^\[workspace\]' "$TOOLS/linker-src/Cargo.toml" || printf '\n[workspace]\n' >> "$TOOLS/linker-src/Cargo.toml"
  ( cd "$TOOLS/linker-src" && CARGO_TARGET_DIR="$TOOLS/linker-target" cargo build --release -q >&2 )
  mkdir -p "$TOOLS/bin" && cp "$TOOLS/linker-target/release/llvm-bitcode-linker" "$TOOLS/bin/"
fi

# 3. ptxas from the CUDA wheel.
PTXAS=$(find "$TOOLS/py" -name ptxas -type f 2>/dev/null | head -1 || true)
if [ -z "$PTXAS" ]; then
  log "installing ptxas ($NVCC_WHEEL)"
  python3 -m pip install -q --target "$TOOLS/py" "$NVCC_WHEEL" >&2
  PTXAS=$(find "$TOOLS/py" -name ptxas -type f | head -1)
fi
chmod +x "$PTXAS"

cat <<ENV
export RUSTC=$TOOLS/root/usr/bin/rustc
export RUSTC_BOOTSTRAP=1
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH
export PATH=$PATH
export CK_LLVM_BITCODE_LINKER=$TOOLS/bin/llvm-bitcode-linker
export PTXAS=$PTXAS
ENV
