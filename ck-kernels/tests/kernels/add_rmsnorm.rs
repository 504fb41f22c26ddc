//! Residual add + RMSNorm on the emulator: r must be the sum rounded once to the element type,
//! y the RMSNorm of that r (fp64 reference written here), on odd shapes and rows longer than a
//! tile.

use ck_core::device::Bf16;
use ck_core::host::Device;
use ck_kernels::op::{Dtype, HostCall, Rng};
use ck_kernels::rows::add_rmsnorm::OP;

fn check(m: u32, n: u32, dtype: Dtype) {
    let device = Device::emulator();
    let mut rng = Rng(3 + m as u64 * 7 + n as u64);
    let round = |v: f32| match dtype {
        Dtype::F32 => v,
        Dtype::Bf16 => Bf16::from_f32(v).to_f32(),
    };
    let x: Vec<f32> = (0..m * n).map(|_| round(rng.f32())).collect();
    let res: Vec<f32> = (0..m * n).map(|_| round(rng.f32())).collect();
    let g: Vec<f32> = (0..n).map(|_| round(rng.f32() + 1.5)).collect();
    let shape = [m as usize, n as usize];
    let out = HostCall::new(&OP)
        .dtype(dtype)
        .input("x", &x, &shape)
        .input("residual", &res, &shape)
        .input("gamma", &g, &shape[1..])
        .run(&device)
        .unwrap();
    let (r, y) = (
        out.output("residual_out").unwrap(),
        out.output("y").unwrap(),
    );
    let what = format!("{m}×{n} {dtype:?}");
    let n = n as usize;
    for i in 0..m as usize {
        // r: the exact sum, rounded once to the element type (within one bf16 ulp for bf16,
        // whose kernel rounds the f32 sum).
        let want_r: Vec<f64> = (0..n)
            .map(|j| round((x[i * n + j] as f64 + res[i * n + j] as f64) as f32) as f64)
            .collect();
        for j in 0..n {
            let got = r[i * n + j] as f64;
            let tol = if dtype == Dtype::F32 {
                0.0
            } else {
                want_r[j].abs() / 256.0
            };
            assert!(
                (got - want_r[j]).abs() <= tol,
                "{what}: r({i},{j}) {got} vs {}",
                want_r[j]
            );
        }
        // y from the r the kernel wrote.
        let row: Vec<f64> = (0..n).map(|j| r[i * n + j] as f64).collect();
        let scale = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / n as f64 + 1e-6).sqrt();
        let tol = if dtype == Dtype::F32 { 1e-5 } else { 1e-2 };
        for j in 0..n {
            let want = row[j] * scale * g[j] as f64;
            let got = y[i * n + j] as f64;
            assert!(
                (got - want).abs() <= tol * want.abs().max(1e-3),
                "{what}: y({i},{j}) {got} vs {want}"
            );
        }
    }
}

#[test]
fn f32_on_odd_shapes_and_long_rows() {
    for (m, n) in [(1, 1), (3, 5000), (130, 257), (65, 4099), (2, 9000)] {
        check(m, n, Dtype::F32);
    }
}

#[test]
fn bf16_on_odd_shapes_and_long_rows() {
    for (m, n) in [(1, 1), (3, 5000), (33, 257), (2, 9000)] {
        check(m, n, Dtype::Bf16);
    }
}

/// Rows exactly a tile wide run the unpadded bf16 kernels; 11 rows of 1024 leave the last
/// 8-row block with padding rows.
#[test]
fn bf16_rows_that_fill_their_tile() {
    for (m, n) in [(11, 1024), (3, 4096), (2, 8192)] {
        check(m, n, Dtype::Bf16);
    }
}

#[test]
fn shapes_are_checked() {
    let device = Device::emulator();
    // A residual of another shape than x.
    let call = HostCall::new(&OP)
        .input("x", &[0.0; 6], &[2, 3])
        .input("residual", &[0.0; 6], &[3, 2])
        .input("gamma", &[1.0; 3], &[3]);
    let e = call.run(&device).err().unwrap();
    assert_eq!(e.rule(), "shape-mismatch");
    assert!(e.message().contains("`residual`"), "{e}");
}
