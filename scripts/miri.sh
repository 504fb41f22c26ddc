#!/usr/bin/env bash
# Runs the host-side code miri can interpret — ck-core's algebra (unit tests) and the public
# API's no-panic property tests (encodings, tables, adaptors, descriptors, space-filling curves,
# LDS layouts, the bank model, Dims, emulator buffers) — under miri, which reports undefined
# behaviour. Kernels cannot run there (the emulator switches stacks with inline assembly, the
# GPU path calls the driver). Installs a nightly toolchain with miri through rustup on first
# use; where that cannot be done it says so and skips.
set -euo pipefail
cd "$(dirname "$0")/.."
toolchain=${CK_MIRI_TOOLCHAIN:-nightly}
if ! command -v rustup >/dev/null; then
    echo "miri: skipped (no rustup to install a nightly toolchain with miri)"
    exit 0
fi
if ! rustup run "$toolchain" cargo miri --version >/dev/null 2>&1; then
    if ! rustup toolchain install "$toolchain" --profile minimal --component miri; then
        echo "miri: skipped (could not install $toolchain with miri)"
        exit 0
    fi
fi
# Isolation off: proptest reads the regression file beside the test.
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-disable-isolation}"
rustup run "$toolchain" cargo miri test -q -p ck-core --lib --test no_panic
