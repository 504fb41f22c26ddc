//! `ck bench` option checking: every malformed `--shapes`, `--iters` or `--warmup` is an
//! `error[usage]` naming the option and the accepted form (exit status 1), never a panic or a
//! silently shortened shape. No timing is asserted.

use std::process::Command;

fn ck_bench(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ck"))
        .arg("bench")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn malformed_options_are_usage_errors() {
    for (args, expected) in [
        (
            &["gemm", "--shapes", "8xax8x8"][..],
            "`8xax8x8` is not MxNxK",
        ),
        (&["gemm", "--shapes", "8x0x8"], "`8x0x8` is not MxNxK"),
        (&["gemm", "--shapes", "8x8"], "`8x8` is not MxNxK"),
        (&["rmsnorm", "--shapes", "8x8x8"], "`8x8x8` is not MxN"),
        (&["rmsnorm", "--shapes", "8x"], "`8x` is not MxN"),
        (
            &["copy", "--iters", "0"],
            "--iters: 0 is out of range; give 1 to 4294967295",
        ),
        (
            &["copy", "--warmup", "-1"],
            "--warmup: `-1` is not a whole number; give 0 to 4294967295",
        ),
        // Past u32: refused before a run that would not end.
        (
            &["copy", "--warmup", "99999999999"],
            "--warmup: 99999999999 is out of range; give 0 to 4294967295",
        ),
        (
            &["matmul"],
            "unknown benchmark `matmul`; available: rmsnorm, ",
        ),
    ] {
        let (code, stderr) = ck_bench(args);
        assert_eq!(code, 1, "{args:?}: {stderr}");
        assert!(
            stderr.contains("error[usage]") && stderr.contains(expected),
            "{args:?}: expected `{expected}` in {stderr}"
        );
    }
    // The list names every operator of the registry and the other benchmarks.
    let (_, stderr) = ck_bench(&["matmul"]);
    let ops = ck_kernels::registry::operators().map(|op| op.command());
    for name in ops.chain(["copy", "gemm"].map(String::from)) {
        assert!(
            stderr.contains(&format!(" {name}")),
            "{name} missing: {stderr}"
        );
    }
}

#[test]
fn a_small_gemm_benchmark_runs_on_the_emulator() {
    let out = Command::new(env!("CARGO_BIN_EXE_ck"))
        .args([
            "bench", "gemm", "--shapes", "16x24x8", "--iters", "1", "--warmup", "0", "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("\"case\":\"f32 16x24x8\"") && text.contains("\"case\":\"bf16 16x24x8\""),
        "{text}"
    );
    // One 128 × 128 tile: `ck run gemm` runs the cp.async kernel, and the rows say so.
    assert!(
        text.contains("\"kernel\":\"gemm_bf16_wgmma_n128_bf16 (auto)\""),
        "{text}"
    );
}

#[test]
fn gemm_cases_are_chosen_by_name() {
    let (code, stderr) = ck_bench(&["gemm", "--dtypes", "bf16,bf17"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("error[dtype]") && stderr.contains("`bf17` is not a GEMM case; use f32,"),
        "{stderr}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_ck"))
        .args([
            "bench", "gemm", "--shapes", "16x24x16", "--dtypes", "fp8_e4m3", "--iters", "1",
            "--warmup", "0", "--json",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The one case asked for, alone.
    assert!(text.contains("\"case\":\"fp8_e4m3 16x24x16\""), "{text}");
    assert!(
        !text.contains("\"case\":\"bf16 ") && !text.contains("\"case\":\"f32 "),
        "{text}"
    );
}

/// `ck bench OP` runs every operator of the registry: one over rows on `--shapes MxN`, any
/// other on its seeded problem of size `--shapes N` (a scratch's length derived as in a call).
#[test]
fn every_operator_benches_on_the_emulator() {
    use ck_kernels::op::{Dim, Role};
    // gemm and attention have benchmarks of their own (MxNxK, BxHxSxD), tested above.
    let generic = |name: &&str| !["gemm", "attention"].contains(name);
    for op in ck_kernels::registry::operators().filter(|op| generic(&op.name)) {
        let rows_of_n = |d: &Dim| matches!(d, Dim::Rows | Dim::Sym("N"));
        let tensors = op.params.iter().filter(|p| p.role != Role::Scratch);
        let shape = match tensors.clone().all(|p| p.dims.iter().all(rows_of_n)) {
            true => "3x16",
            false => "8",
        };
        let name = op.command();
        let args = [
            "bench", &name, "--shapes", shape, "--iters", "1", "--warmup", "0",
        ];
        let out = Command::new(env!("CARGO_BIN_EXE_ck"))
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "ck bench {name}: {stderr}");
        let rows = String::from_utf8_lossy(&out.stdout).lines().count();
        assert_eq!(
            rows,
            2 + op.dtypes.len(),
            "ck bench {name}: one row per element type"
        );
    }
}
