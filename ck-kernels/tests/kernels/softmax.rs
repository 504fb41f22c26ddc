//! Row softmax on the emulator against the fp64 reference, on odd shapes, rows longer than a
//! tile (the online path), bf16, and logits whose exponentials overflow f32 without the max.

use ck_core::device::Bf16;
use ck_core::host::Device;
use ck_kernels::op::{Dtype, HostCall, Rng};
use ck_kernels::rows::softmax::{host::reference, OP};

fn check(m: u32, n: u32, scale: f32, offset: f32, dtype: Dtype, tol: f64) {
    let device = Device::emulator();
    let mut rng = Rng(5 + m as u64 * 13 + n as u64);
    let round = |v: f32| match dtype {
        Dtype::F32 => v,
        Dtype::Bf16 => Bf16::from_f32(v).to_f32(),
    };
    let x: Vec<f32> = (0..m * n)
        .map(|_| round(offset + scale * rng.f32()))
        .collect();
    let shape = [m as usize, n as usize];
    let out = HostCall::new(&OP)
        .dtype(dtype)
        .input("x", &x, &shape)
        .run(&device)
        .unwrap();
    let y = out.output("y").unwrap();
    let want = reference(&x, (m, n));
    for (k, (&g, &w)) in y.iter().zip(&want).enumerate() {
        // Relative to the value, with a floor for values too small to matter in a row.
        assert!(
            (g as f64 - w).abs() <= tol * w.max(1e-6 / n as f64),
            "{m}×{n} {dtype:?} at ({}, {}): {g} vs {w}",
            k / n as usize,
            k % n as usize
        );
    }
}

#[test]
fn f32_on_odd_shapes_and_long_rows() {
    for (m, n) in [
        (1, 1),
        (3, 5000),
        (130, 257),
        (65, 4099),
        (2, 8192),
        (3, 20000),
    ] {
        check(m, n, 8.0, 0.0, Dtype::F32, 1e-5);
    }
}

#[test]
fn bf16_on_odd_shapes_and_long_rows() {
    for (m, n) in [(1, 1), (3, 5000), (33, 257), (2, 20000)] {
        check(m, n, 8.0, 0.0, Dtype::Bf16, 1e-2);
    }
}

#[test]
fn huge_logits_do_not_overflow() {
    // exp(1000) is inf in f32 (and f64): only subtracting the row max keeps the result finite.
    for (m, n) in [(4, 1000), (2, 20000)] {
        check(m, n, 50.0, 1000.0, Dtype::F32, 1e-5);
    }
}

#[test]
fn shapes_are_checked() {
    let call = HostCall::new(&OP).input("x", &[0.0; 5], &[2, 3]);
    let e = call.run(&Device::emulator()).err().unwrap();
    assert_eq!(e.rule(), "shape-mismatch");
}
