//! LayerNorm on the emulator against the fp64 two-pass reference written in the library's host
//! module (a plain loop over each row), on odd shapes, rows longer than one tile, bf16, and
//! rows with a large offset.

use ck_core::device::Bf16;
use ck_core::host::{Device, DeviceBuffer};
use ck_kernels::op::{Dtype, HostCall, Rng};
use ck_kernels::rows::layernorm::host::{launch, reference, Buffers};
use ck_kernels::rows::layernorm::OP;

/// The largest `|got − want| / scale` over elements.
fn max_err(got: &[f32], want: &[f64], scale: impl Fn(usize) -> f64) -> f64 {
    assert_eq!(got.len(), want.len());
    (0..got.len())
        .map(|i| (got[i] as f64 - want[i]).abs() / scale(i))
        .fold(0.0, f64::max)
}

fn inputs(m: u32, n: u32, offset: f32, seed: u64) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut rng = Rng(seed);
    let x = (0..m * n).map(|_| offset + 2.0 * rng.f32()).collect();
    let g = (0..n).map(|_| rng.f32() + 1.5).collect();
    let b = (0..n).map(|_| rng.f32()).collect();
    (x, g, b)
}

fn check(m: u32, n: u32, offset: f32, dtype: Dtype, tol: (f64, f64)) {
    let device = Device::emulator();
    let (mut x, mut g, mut b) = inputs(m, n, offset, 17 + m as u64 * 31 + n as u64);
    if dtype == Dtype::Bf16 {
        // The reference sees what the kernel sees.
        for v in x.iter_mut().chain(&mut g).chain(&mut b) {
            *v = Bf16::from_f32(*v).to_f32();
        }
    }
    let shape = [m as usize, n as usize];
    let out = HostCall::new(&OP)
        .dtype(dtype)
        .input("x", &x, &shape)
        .input("gamma", &g, &shape[1..])
        .input("beta", &b, &shape[1..])
        .all_outputs()
        .run(&device)
        .unwrap();
    let (out_y, out_mean, out_rstd) = (
        out.output("y").unwrap(),
        out.output("mean").unwrap(),
        out.output("rstd").unwrap(),
    );
    let (y, mean, rstd) = reference((&x, &g, &b), (m, n), 1e-5);
    let what = format!("{m}×{n} offset {offset} {dtype:?}");
    // y = t·g + b: its error is relative to the terms (|t·g| + |b|), as y may cancel to ~0.
    let nn = n as usize;
    let terms = |i: usize| ((y[i] - b[i % nn] as f64).abs() + (b[i % nn] as f64).abs()).max(1e-30);
    let e = max_err(out_y, &y, terms);
    assert!(e <= tol.0, "{what}: y error {e:e} relative to its terms");
    // The mean to 1e-6 of the row's size (|mean| + its standard deviation).
    let e = max_err(out_mean, &mean, |i| mean[i].abs() + 1.0 / rstd[i]);
    assert!(e <= 1e-6, "{what}: mean error {e:e}");
    let e = max_err(out_rstd, &rstd, |i| rstd[i]);
    assert!(e <= tol.1, "{what}: rstd relative error {e:e}");
}

#[test]
fn f32_matches_fp64_on_odd_shapes_and_long_rows() {
    for (m, n) in [
        (1, 1),
        (3, 5000),
        (130, 257),
        (65, 4099),
        (2, 8192),
        (3, 20000),
    ] {
        check(m, n, 0.0, Dtype::F32, (1e-5, 1e-5));
    }
}

#[test]
fn bf16_matches_fp64_of_the_rounded_inputs() {
    for (m, n) in [(1, 1), (3, 5000), (130, 257), (5, 4099)] {
        check(m, n, 0.0, Dtype::Bf16, (1e-2, 1e-5));
    }
}

/// Rows exactly a tile wide run the unpadded kernels (no validity mask; one reduction of
/// per-thread Welford accumulators); 11 rows of 1024 leave the last 8-row block with padding
/// rows.
#[test]
fn rows_that_fill_their_tile() {
    for (m, n) in [(11, 1024), (3, 4096), (2, 8192)] {
        check(m, n, 0.0, Dtype::Bf16, (1e-2, 1e-5));
        check(m, n, 0.0, Dtype::F32, (1e-5, 1e-5));
    }
}

#[test]
fn large_offsets_keep_their_variance() {
    // x = 1e4 + U(-1, 1): E[x²] − E[x]² in f32 would leave nothing of the variance (the ulp of
    // 1e8 is 8); the shifted sums (and, in rows a tile wide, the shifted Welford accumulators)
    // keep y and rstd to f32 precision.
    for (m, n) in [(9, 1000), (11, 1024), (2, 4096), (2, 8192), (2, 9000)] {
        check(m, n, 1e4, Dtype::F32, (1e-4, 1e-4));
    }
}

#[test]
fn statistics_are_optional_and_shapes_are_checked() {
    let device = Device::emulator();
    let call = |x: &'static [f32], xs: &[usize], n: usize| {
        HostCall::new(&OP)
            .input("x", x, xs)
            .input("gamma", &[1.0; 3][..n], &[n])
            .input("beta", &[0.0; 3][..n], &[n])
            .all_outputs()
            .run(&device)
    };
    // A beta one shorter than x's rows.
    let e = call(&[0.0; 6], &[2, 3], 2).err().unwrap();
    assert_eq!(e.rule(), "shape-mismatch");
    // No rows: nothing to launch, empty outputs.
    let out = call(&[], &[0, 3], 3).unwrap();
    assert!(out.output("y").unwrap().is_empty() && out.output("mean").unwrap().is_empty());
    // Without the statistics asked for, none are computed.
    let plain = HostCall::new(&OP)
        .input("x", &[1.0, 2.0, 3.0], &[1, 3])
        .input("gamma", &[1.0; 3], &[3])
        .input("beta", &[0.0; 3], &[3]);
    assert!(plain.run(&device).unwrap().output("mean").is_none());
    // Statistics buffers are empty (skipped) or hold one value per row, nothing in between.
    let buf = |len: usize| DeviceBuffer::from_slice(&device, &vec![0.0f32; len]).unwrap();
    let (x, g, b) = (buf(6), buf(3), buf(3));
    let (mut y, mut mean, mut rstd) = (buf(6), buf(1), buf(2));
    let bufs = Buffers {
        x: &x,
        gamma: &g,
        beta: &b,
        y: &mut y,
        mean: &mut mean,
        rstd: &mut rstd,
    };
    let e = launch(&device, bufs, (2, 3, 1e-5)).unwrap_err();
    assert_eq!(e.rule(), "shape-mismatch");
    let (mut none_a, mut none_b) = (buf(0), buf(0));
    let bufs = Buffers {
        x: &x,
        gamma: &g,
        beta: &b,
        y: &mut y,
        mean: &mut none_a,
        rstd: &mut none_b,
    };
    launch(&device, bufs, (2, 3, 1e-5)).unwrap();
}
