#!/usr/bin/env bash
# Builds the PTX modules of ck-kernels and of the tutorial crate (target/ptx/ck_kernels.ptx,
# target/ptx/ck_examples.ptx) with `ck build-ptx`, which assembles each with ptxas and fails on
# spills, stack frames or serialised wgmma; installs the PTX toolchain into target/ptx-tools on
# first use. No GPU needed. Extra arguments go to both builds (e.g. --arch sm_80).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export CK_PTX_TOOLS=${CK_PTX_TOOLS:-$ROOT/target/ptx-tools}
cd "$ROOT"
cargo run -q -p ck-cli -- build-ptx --manifest-path ck-kernels/Cargo.toml --install-toolchain "$@"
# The tutorial crate is built the way a user's crate is: its own module, target/ptx/ck_examples.ptx.
cargo run -q -p ck-cli -- build-ptx --manifest-path examples/Cargo.toml "$@"
