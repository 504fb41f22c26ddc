//! `gemm::linear` on the emulator: X·Wᵀ with W `[n, k]` as `nn.Linear` keeps it, against an
//! fp64 reference written here, on the any-shape kernel (odd N and K) and the TMA kernels
//! (which the choice table sends aligned shapes to), every epilogue, both C types; the choice
//! and the errors; the weight's gradient dYᵀ·X read from dY `[tokens, n]` as it lies.

use ck_core::device::{Bf16, Real};
use ck_core::host::{Device, DeviceBuffer};
use ck_kernels::checks::Rng;
use ck_kernels::gemm::epilogue::Activation;
use ck_kernels::gemm::fused::{upload, EpilogueArgs, HostEpilogue};
use ck_kernels::gemm::linear::{
    choose, gated, launch, launch_weight_grad, linear, weight_grad, Kernel, LinearOutput,
};

/// `v` rounded to `T` and back.
fn round<T: Real>(v: &[f32]) -> Vec<f32> {
    v.iter().map(|&x| T::from_f32(x).to_f32()).collect()
}

/// `act(alpha · x·wᵀ + beta · d + bias)` in f64, from the definitions (GELU in its tanh form).
fn want(
    (x, w): (&[f32], &[f32]),
    (m, n, k): (usize, usize, usize),
    e: &HostEpilogue<'_>,
) -> Vec<f64> {
    let act = |v: f64| match e.activation {
        Activation::None => v,
        Activation::Relu => v.max(0.0),
        Activation::Gelu => {
            0.5 * v
                * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (v + 0.044715 * v.powi(3))).tanh())
        }
        Activation::Silu => v / (1.0 + (-v).exp()),
    };
    (0..m * n)
        .map(|i| {
            let (r, c) = (i / n, i % n);
            let dot: f64 = (0..k)
                .map(|p| x[r * k + p] as f64 * w[c * k + p] as f64)
                .sum();
            let mut v = e.alpha as f64 * dot;
            if let Some(d) = e.d {
                v += e.beta as f64 * d[i] as f64;
            }
            if let Some(b) = e.bias {
                v += b[c] as f64;
            }
            act(v)
        })
        .collect()
}

/// Every epilogue: none, alpha, a bias with each activation, D alone, D with a bias and an
/// activation, an activation alone.
fn epilogues<'a>(d: &'a [f32], bias: &'a [f32]) -> Vec<HostEpilogue<'a>> {
    let base = HostEpilogue::default();
    let mut all = vec![
        base,
        HostEpilogue {
            alpha: -0.5,
            ..base
        },
    ];
    for activation in [
        Activation::None,
        Activation::Relu,
        Activation::Gelu,
        Activation::Silu,
    ] {
        all.push(HostEpilogue {
            bias: Some(bias),
            activation,
            ..base
        });
    }
    all.push(HostEpilogue {
        d: Some(d),
        beta: -1.5,
        ..base
    });
    all.push(HostEpilogue {
        alpha: 0.75,
        d: Some(d),
        bias: Some(bias),
        activation: Activation::Gelu,
        ..base
    });
    all.push(HostEpilogue {
        activation: Activation::Silu,
        ..base
    });
    all
}

/// Runs every epilogue on `(m, n, k)` with C of `O` and checks each element of C against fp64
/// from the bf16-rounded operands (D and bias rounded to `O`): within `tol` relative (+ `tol`).
fn check<O: LinearOutput>((m, n, k): (u32, u32, u32), tol: f64) {
    let device = Device::Emulator { workers: 2 };
    let mut rng = Rng(0x11ea ^ (m * 7 + n * 131 + k) as u64);
    let mut values =
        |len: u32, scale: f32| -> Vec<f32> { (0..len).map(|_| scale * rng.f32()).collect() };
    let (x, w) = (
        round::<Bf16>(&values(m * k, 2.0)),
        round::<Bf16>(&values(n * k, 2.0)),
    );
    let (d, bias) = (round::<O>(&values(m * n, 1.0)), round::<O>(&values(n, 1.0)));
    let (mu, nu, ku) = (m as usize, n as usize, k as usize);
    for e in epilogues(&d, &bias) {
        let (c, _) = linear::<O>(&device, (&x, &w), (m, n, k), e).unwrap();
        for (i, want) in want((&x, &w), (mu, nu, ku), &e).iter().enumerate() {
            let got = c[i] as f64;
            assert!(
                (got - want).abs() <= tol * (want.abs() + 1.0),
                "({m}, {n}, {k}) {e:?}: C[{}, {}] = {got}, want {want}",
                i / nu,
                i % nu
            );
        }
    }
}

const F32_TOL: f64 = 2e-5;
const BF16_TOL: f64 = 1.0 / 128.0;

#[test]
fn any_shape_kernel_takes_odd_n_and_k() {
    // Odd M, N and K: edge tiles everywhere, rows no vector load can take, K in one slice and
    // a half and in several; two row tiles on two blocks.
    check::<f32>((131, 37, 23), F32_TOL);
    check::<Bf16>((5, 129, 51), BF16_TOL);
    check::<f32>((3, 5, 1), F32_TOL);
}

#[test]
fn aligned_shapes_run_on_the_tma_kernels() {
    // Odd M, N and K multiples of 8: the TMA kernels, edge tiles in M and N.
    check::<f32>((67, 264, 72), F32_TOL);
    check::<Bf16>((131, 40, 136), BF16_TOL);
}

#[test]
fn the_choice_follows_the_table() {
    let device = Device::Emulator { workers: 132 };
    let plain = EpilogueArgs::<Bf16>::default();
    assert_eq!(choose(&device, (4, 37, 64), &plain), Kernel::AnyShape);
    assert_eq!(choose(&device, (4, 64, 36), &plain), Kernel::AnyShape);
    assert_eq!(choose(&device, (8192, 4096, 4096), &plain), Kernel::Tma);
    // 3072 × 3072 on 132 multiprocessors: 24 × 12 = 288 wide tiles (3 waves, 73 % busy)
    // against 24 × 16 = 384 narrow ones (3 waves, 97 %).
    assert_eq!(choose(&device, (3072, 3072, 3072), &plain), Kernel::TmaN192);
    // No 192-wide kernel has an activation without a bias.
    let silu = EpilogueArgs::<Bf16> {
        activation: Activation::Silu,
        ..Default::default()
    };
    assert_eq!(choose(&device, (3072, 3072, 3072), &silu), Kernel::Tma);
}

#[test]
fn errors_name_the_tensor_and_the_shape() {
    let device = Device::emulator();
    let buf = |len: usize| upload::<Bf16>(&device, &vec![0.0; len]).unwrap();
    let (x, w) = (buf(4 * 16), buf(8 * 16));
    let mut c = DeviceBuffer::<Bf16>::zeros(&device, 4 * 8).unwrap();
    let plain = EpilogueArgs::default();
    // A weight of one element too many; then C of a row too wide.
    let e = launch(&device, (&x, &buf(8 * 16 + 1)), &mut c, (4, 8, 16), &plain).unwrap_err();
    assert_eq!(e.rule(), "shape-mismatch");
    assert!(e.to_string().contains("`weight` has 129 elements"), "{e}");
    let mut c_wide = DeviceBuffer::<Bf16>::zeros(&device, 4 * 9).unwrap();
    let e = launch(&device, (&x, &w), &mut c_wide, (4, 8, 16), &plain).unwrap_err();
    assert!(e.to_string().contains("`c` has 36 elements"), "{e}");
    let bias = buf(7);
    let with_bias = EpilogueArgs {
        bias: Some(&bias),
        ..Default::default()
    };
    let e = launch(&device, (&x, &w), &mut c, (4, 8, 16), &with_bias).unwrap_err();
    assert_eq!(e.rule(), "shape-mismatch", "{e}");
    let nan = EpilogueArgs::<Bf16> {
        alpha: f32::NAN,
        ..Default::default()
    };
    let e = launch(&device, (&x, &w), &mut c, (4, 8, 16), &nan).unwrap_err();
    assert_eq!(e.rule(), "bad-scale", "{e}");
}

/// `act(alpha · x·w_gateᵀ) · (alpha · x·w_upᵀ)` in f64, `w` the stacked `[2f, k]` weight.
fn want_gated(
    (x, w): (&[f32], &[f32]),
    (m, f, k): (usize, usize, usize),
    (alpha, activation): (f32, Activation),
) -> Vec<f64> {
    let dot = |r: usize, row: usize| -> f64 {
        alpha as f64
            * (0..k)
                .map(|p| x[r * k + p] as f64 * w[row * k + p] as f64)
                .sum::<f64>()
    };
    (0..m * f)
        .map(|i| {
            let (r, c) = (i / f, i % f);
            let g = dot(r, c);
            let gate = match activation {
                Activation::Silu => g / (1.0 + (-g).exp()),
                _ => {
                    0.5 * g
                        * (1.0
                            + ((2.0 / std::f64::consts::PI).sqrt() * (g + 0.044715 * g.powi(3)))
                                .tanh())
                }
            };
            gate * dot(r, f + c)
        })
        .collect()
}

#[test]
fn gated_units_combine_the_gate_and_the_up_projection_in_one_launch() {
    let device = Device::Emulator { workers: 2 };
    // Odd M; F of one and a half and of two tiles of 128 and a bit (edge tiles); K of one and
    // several stages; silu and gelu; alpha; one tile of ten stages shared by the two blocks
    // (stream-K: `gemm_tma.rs` checks the plan shares it).
    for (m, f, k, alpha, activation) in [
        (131u32, 136u32, 136u32, 1.0f32, Activation::Silu),
        (67, 264, 72, 0.5, Activation::Gelu),
        (100, 128, 640, 1.0, Activation::Silu),
    ] {
        let mut rng = Rng(0x61u64 ^ (m * f + k) as u64);
        let mut values = |len: u32| -> Vec<f32> { (0..len).map(|_| 2.0 * rng.f32()).collect() };
        let (x, w) = (
            round::<Bf16>(&values(m * k)),
            round::<Bf16>(&values(2 * f * k)),
        );
        let (c, _) = gated(&device, (&x, &w), (m, f, k), (alpha, activation)).unwrap();
        let shape = (m as usize, f as usize, k as usize);
        for (i, want) in want_gated((&x, &w), shape, (alpha, activation))
            .iter()
            .enumerate()
        {
            let got = c[i] as f64;
            assert!(
                (got - want).abs() <= BF16_TOL * (want.abs() + 1.0),
                "({m}, {f}, {k}) {activation:?}: C[{}, {}] = {got}, want {want}",
                i / f as usize,
                i % f as usize
            );
        }
    }
}

#[test]
fn gated_units_refuse_what_they_cannot_run() {
    let device = Device::emulator();
    let (x, w) = (vec![0.0f32; 4 * 16], vec![0.0f32; 2 * 8 * 16]);
    let e = gated(&device, (&x, &w), (4, 8, 16), (1.0, Activation::Relu)).unwrap_err();
    assert_eq!(e.rule(), "bad-activation", "{e}");
    let e = gated(
        &device,
        (&x, &w[..8 * 16]),
        (4, 8, 16),
        (1.0, Activation::Silu),
    )
    .unwrap_err();
    assert!(e.to_string().contains("`weight` has 128 elements"), "{e}");
    let w12 = vec![0.0f32; 2 * 12 * 16];
    let e = gated(&device, (&x, &w12), (4, 12, 16), (1.0, Activation::Silu)).unwrap_err();
    assert_eq!(e.rule(), "shape-unsupported", "{e}");
}

/// `alpha · dyᵀ·x + beta · d` in f64: dy `[t, n]`, x `[t, k]`, d `[n, k]`.
fn want_weight_grad(
    (dy, x): (&[f32], &[f32]),
    (t, n, k): (usize, usize, usize),
    e: &HostEpilogue<'_>,
) -> Vec<f64> {
    (0..n * k)
        .map(|i| {
            let (r, c) = (i / k, i % k);
            let dot: f64 = (0..t)
                .map(|p| dy[p * n + r] as f64 * x[p * k + c] as f64)
                .sum();
            e.alpha as f64 * dot + e.d.map_or(0.0, |d| e.beta as f64 * d[i] as f64)
        })
        .collect()
}

#[test]
fn the_weight_gradient_reads_dy_as_it_lies() {
    let device = Device::Emulator { workers: 2 };
    let mut rng = Rng(0x9ad);
    let mut values = |len: u32| -> Vec<f32> { (0..len).map(|_| 2.0 * rng.f32()).collect() };
    // Tokens not a multiple of a stage (the copy engine's zeros past them), n and k edge tiles
    // in both directions; then a long K shared out by stream-K over few tiles.
    for (t, n, k) in [(77u32, 136u32, 200u32), (200, 8, 264), (2048, 128, 256)] {
        let (dy, x) = (round::<Bf16>(&values(t * n)), round::<Bf16>(&values(t * k)));
        let d = values(n * k);
        let (tu, nu, ku) = (t as usize, n as usize, k as usize);
        let plain = HostEpilogue::default();
        let (c, _) = weight_grad::<Bf16>(&device, (&dy, &x), (t, n, k), plain).unwrap();
        let want = want_weight_grad((&dy, &x), (tu, nu, ku), &plain);
        // bf16 C: one rounding of an exact-ish sum.
        for (i, (&g, &w)) in c.iter().zip(&want).enumerate() {
            let tol = BF16_TOL * (w.abs() + 1.0);
            assert!(
                (g as f64 - w).abs() <= tol,
                "({t}, {n}, {k}) bf16 dW[{i}] = {g}, want {w}"
            );
        }
        // f32 C added to a gradient kept in f32: beta = 1, D the gradient so far.
        let accumulate = HostEpilogue {
            d: Some(&d),
            beta: 1.0,
            ..Default::default()
        };
        let (c, _) = weight_grad::<f32>(&device, (&dy, &x), (t, n, k), accumulate).unwrap();
        let want = want_weight_grad((&dy, &x), (tu, nu, ku), &accumulate);
        for (i, (&g, &w)) in c.iter().zip(&want).enumerate() {
            let tol = F32_TOL * (w.abs() + t as f64 / 64.0);
            assert!(
                (g as f64 - w).abs() <= tol,
                "({t}, {n}, {k}) f32 dW[{i}] = {g}, want {w}"
            );
        }
    }
}

#[test]
fn the_weight_gradient_refuses_what_it_cannot_run() {
    let device = Device::emulator();
    let buf = |len: usize| upload::<Bf16>(&device, &vec![0.0; len]).unwrap();
    let plain = EpilogueArgs::<Bf16>::default();
    let mut c = DeviceBuffer::<Bf16>::zeros(&device, 12 * 16).unwrap();
    // n = 12: dY's rows are not whole 16-byte vectors.
    let e = launch_weight_grad(
        &device,
        (&buf(5 * 12), &buf(5 * 16)),
        &mut c,
        (5, 12, 16),
        &plain,
    )
    .unwrap_err();
    assert_eq!(e.rule(), "shape-unsupported", "{e}");
    assert!(
        e.to_string().contains("M and N must be multiples of 8"),
        "{e}"
    );
    let e = launch_weight_grad(
        &device,
        (&buf(5 * 12), &buf(4 * 16)),
        &mut c,
        (5, 12, 16),
        &plain,
    )
    .unwrap_err();
    assert!(e.to_string().contains("`x` has 64 elements"), "{e}");
    // bf16 C takes alpha alone; f32 C takes the rest.
    let mut c = DeviceBuffer::<Bf16>::zeros(&device, 16 * 16).unwrap();
    let bias = buf(16);
    let with_bias = EpilogueArgs {
        bias: Some(&bias),
        ..Default::default()
    };
    let e = launch_weight_grad(
        &device,
        (&buf(5 * 16), &buf(5 * 16)),
        &mut c,
        (5, 16, 16),
        &with_bias,
    )
    .unwrap_err();
    assert_eq!(e.rule(), "epilogue-unsupported", "{e}");
}
