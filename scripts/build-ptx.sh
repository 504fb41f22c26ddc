#!/usr/bin/env bash
# Builds ck-kernels' PTX module, target/ptx/ck_kernels.ptx, with `ck build-ptx` (which assembles
# it with ptxas and fails on spills, stack frames or serialised wgmma), installing the PTX
# toolchain into target/ptx-tools on first use. No GPU needed.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export CK_PTX_TOOLS=${CK_PTX_TOOLS:-$ROOT/target/ptx-tools}
cd "$ROOT"
cargo run -q -p ck-kernels --bin ck -- build-ptx --manifest-path ck-kernels/Cargo.toml --install-toolchain "$@"
