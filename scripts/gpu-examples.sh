#!/usr/bin/env bash
# Runs on the GPU machine: the user-crate path. ck-examples (a kernel crate built like a user's:
# `ck build-ptx --manifest-path examples/Cargo.toml`, then `cargo build --release -p ck-examples`,
# its module embedded) checks its kernels against CPU references and the emulator, times the
# 8192² transpose next to two copies of the same bytes, and runs under compute-sanitizer; the
# examples test binary launches kernels of ck-kernels and ck-examples from one process.
# Usage: scripts/gpu-examples.sh [OUTDIR]   (env: EX = the ck-examples binary, EXAMPLES_TEST =
# the examples test binary, from `cargo test --release -p ck-examples --no-run`)
set -uo pipefail
cd "$(dirname "$0")/.."
EX=${EX:-target/release/ck-examples}
OUT=${1:-${OUT:-/tmp/ck-gpu-examples}}
mkdir -p "$OUT"
status=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
echo "### ck-examples --backend cuda --bench"
"$EX" --backend cuda --bench | tee "$OUT/examples.txt" || status=1
if [ -n "${EXAMPLES_TEST:-}" ]; then
  echo "### kernels of two crates in one process (examples test binary)"
  "$EXAMPLES_TEST" --test-threads 1 --nocapture 2>&1 | tee "$OUT/examples-test.txt" | grep -E "^test |skipped|test result" || status=1
fi
echo "### compute-sanitizer"
for tool in memcheck racecheck; do
  if timeout 300 compute-sanitizer --tool $tool --error-exitcode 3 "$EX" --backend cuda --small > "$OUT/san-examples-$tool.txt" 2>&1; then
    echo "ck-examples $tool: clean ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san-examples-$tool.txt" | head -1))"
  else
    echo "ck-examples $tool: FAILED"; tail -15 "$OUT/san-examples-$tool.txt"; status=1
  fi
done
exit $status
