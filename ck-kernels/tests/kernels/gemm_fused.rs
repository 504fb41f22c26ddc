//! The fused GEMM (`act(alpha · A·B + beta · D + bias)`, f32 or bf16 C) on the emulator, against
//! an fp64 reference: every epilogue option, both output types, both wgmma tiles, odd M and
//! edges in N.

use ck_core::device::{Bf16, Real};
use ck_core::host::{Device, DeviceBuffer};
use ck_kernels::checks::Rng;
use ck_kernels::gemm::choice::Bf16Kernel;
use ck_kernels::gemm::epilogue::Activation;
use ck_kernels::gemm::fused::{launch, reference, upload, EpilogueArgs, GemmOutput};
use ck_kernels::gemm::mma_sync::host::reference as product;

/// One epilogue: alpha, beta, with D, with bias, activation.
type Case = (f32, f32, bool, bool, Activation);

const CASES: [Case; 8] = [
    (1.0, 1.0, false, false, Activation::None),
    (0.5, 1.0, false, false, Activation::None),
    (1.0, -2.0, true, false, Activation::None),
    (1.0, 1.0, false, true, Activation::None),
    (1.0, 1.0, false, false, Activation::Relu),
    (1.0, 1.0, false, false, Activation::Gelu),
    (1.0, 1.0, false, false, Activation::Silu),
    (1.5, 0.25, true, true, Activation::Gelu),
];

fn round<O: Real>(v: &[f32]) -> Vec<f32> {
    v.iter().map(|&x| O::from_f32(x).to_f32()).collect()
}

/// Runs every case on `kernel` with C of type `O`; `tol(want, scale)` bounds each element's
/// error.
fn check<O: GemmOutput>(kernel: Bf16Kernel, tol: impl Fn(f64, f64) -> f64) {
    let device = Device::emulator();
    let mut rng = Rng(29);
    for (m, n, k) in [(1u32, 8u32, 8u32), (130, 136, 72), (67, 264, 24)] {
        let a: Vec<f32> = (0..m * k).map(|_| rng.f32()).collect();
        let b: Vec<f32> = (0..k * n).map(|_| rng.f32()).collect();
        let d: Vec<f32> = round::<O>(&(0..m * n).map(|_| rng.f32()).collect::<Vec<_>>());
        let bias: Vec<f32> = round::<O>(&(0..n).map(|_| rng.f32()).collect::<Vec<_>>());
        let (a, b) = (round::<Bf16>(&a), round::<Bf16>(&b));
        let ab = product(&a, &b, (m, n, k));
        let bf16 = |v: &[f32]| upload::<Bf16>(&device, v).unwrap();
        let (ad, bd) = (bf16(&a), bf16(&b));
        let as_o = |v: &[f32]| upload::<O>(&device, v).unwrap();
        let (dd, biasd) = (as_o(&d), as_o(&bias));
        for (alpha, beta, with_d, with_bias, activation) in CASES {
            let args = EpilogueArgs {
                alpha,
                beta,
                d: with_d.then_some(&dd),
                bias: with_bias.then_some(&biasd),
                activation,
            };
            let mut cd = as_o(&vec![f32::NAN; (m * n) as usize]);
            launch(&device, kernel, (&ad, &bd), &mut cd, (m, n, k), &args).unwrap();
            let got: Vec<f32> = cd.to_vec().unwrap().iter().map(|v| v.to_f32()).collect();
            let want = reference(
                &ab,
                (m, n),
                (alpha, beta),
                (with_d.then_some(&d[..]), with_bias.then_some(&bias[..])),
                activation,
            );
            let scale = want.iter().fold(0.0f64, |s, w| s.max(w.abs()));
            for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g as f64 - w).abs() <= tol(w, scale),
                    "{}x{n}x{k} {:?} case {:?}: C[{}, {}] = {g}, want {w}",
                    m,
                    kernel,
                    (alpha, beta, with_d, with_bias, activation),
                    i / n as usize,
                    i % n as usize
                );
            }
        }
    }
}

#[test]
fn fused_gemm_f32_output_matches_fp64() {
    // f32 accumulation of ≤ 72 bf16 products: ~1e-6 of the largest value.
    for kernel in [Bf16Kernel::Wgmma128x256, Bf16Kernel::Wgmma128x128] {
        check::<f32>(kernel, |_, scale| 1e-5 * scale);
    }
}

#[test]
fn fused_gemm_bf16_output_is_the_reference_rounded_once() {
    // One bf16 rounding (half an ulp: at most 2⁻⁸ relative) over the f32 result's own error.
    for kernel in [Bf16Kernel::Wgmma128x256, Bf16Kernel::Wgmma128x128] {
        check::<Bf16>(kernel, |w, scale| w.abs() * 2f64.powi(-8) + 1e-5 * scale);
    }
}

#[test]
fn bad_epilogues_are_errors() {
    let device = Device::emulator();
    let z = |len: usize| DeviceBuffer::<Bf16>::zeros(&device, len).unwrap();
    let (a, b) = (z(8 * 8), z(8 * 8));
    let mut c = DeviceBuffer::<f32>::zeros(&device, 64).unwrap();
    let short = DeviceBuffer::<f32>::zeros(&device, 7).unwrap();
    let rule = |args: EpilogueArgs<'_, f32>, kernel, c: &mut DeviceBuffer<f32>, n| {
        launch(&device, kernel, (&a, &b), c, (8, n, 8), &args)
            .unwrap_err()
            .rule()
    };
    let bias = EpilogueArgs {
        bias: Some(&short),
        ..Default::default()
    };
    assert_eq!(
        rule(bias, Bf16Kernel::Wgmma128x256, &mut c, 8),
        "shape-mismatch"
    );
    let d = EpilogueArgs {
        d: Some(&short),
        ..Default::default()
    };
    assert_eq!(
        rule(d, Bf16Kernel::Wgmma128x128, &mut c, 8),
        "shape-mismatch"
    );
    let nan = EpilogueArgs {
        alpha: f32::NAN,
        ..Default::default()
    };
    assert_eq!(rule(nan, Bf16Kernel::Wgmma128x256, &mut c, 8), "bad-scale");
    let plain = EpilogueArgs::default();
    assert_eq!(
        rule(plain, Bf16Kernel::MmaSync, &mut c, 8),
        "shape-unsupported"
    );
}

/// `batch` products in one launch: each against its own fp64 reference, with D per product
/// and one bias, both tiles and both output types.
fn check_batched<O: GemmOutput>(kernel: Bf16Kernel, tol: impl Fn(f64, f64) -> f64) {
    use ck_kernels::gemm::fused::launch_batched;
    let device = Device::emulator();
    let mut rng = Rng(53);
    let (batch, m, n, k) = (3u32, 67u32, 136u32, 24u32);
    let randv = |rng: &mut Rng, len: u32| (0..len).map(|_| rng.f32()).collect::<Vec<f32>>();
    let a = round::<Bf16>(&randv(&mut rng, batch * m * k));
    let b = round::<Bf16>(&randv(&mut rng, batch * k * n));
    let d = round::<O>(&randv(&mut rng, batch * m * n));
    let bias = round::<O>(&randv(&mut rng, n));
    let bf = |v: &[f32]| {
        let v: Vec<Bf16> = v.iter().map(|&x| Bf16::from_f32(x)).collect();
        DeviceBuffer::from_slice(&device, &v).unwrap()
    };
    let of = |v: &[f32]| {
        let v: Vec<O> = v.iter().map(|&x| O::from_f32(x)).collect();
        DeviceBuffer::from_slice(&device, &v).unwrap()
    };
    let (ad, bd, dd, biasd) = (bf(&a), bf(&b), of(&d), of(&bias));
    let mut cd = of(&vec![f32::NAN; (batch * m * n) as usize]);
    let args = EpilogueArgs {
        alpha: 0.75,
        beta: -1.0,
        d: Some(&dd),
        bias: Some(&biasd),
        activation: Activation::Silu,
    };
    launch_batched(
        &device,
        kernel,
        (&ad, &bd),
        &mut cd,
        batch,
        (m, n, k),
        &args,
    )
    .unwrap();
    let got: Vec<f32> = cd.to_vec().unwrap().iter().map(|v| v.to_f32()).collect();
    let (mk, kn, mn) = ((m * k) as usize, (k * n) as usize, (m * n) as usize);
    for p in 0..batch as usize {
        let ab = product(&a[p * mk..][..mk], &b[p * kn..][..kn], (m, n, k));
        let dp = &d[p * mn..][..mn];
        let want = reference(
            &ab,
            (m, n),
            (0.75, -1.0),
            (Some(dp), Some(&bias)),
            Activation::Silu,
        );
        let scale = want.iter().fold(0.0f64, |s, w| s.max(w.abs()));
        for (i, (&g, &w)) in got[p * mn..][..mn].iter().zip(&want).enumerate() {
            assert!(
                (g as f64 - w).abs() <= tol(w, scale),
                "{kernel:?} product {p}: C[{}, {}] = {g}, want {w}",
                i / n as usize,
                i % n as usize
            );
        }
    }
}

#[test]
fn batched_products_each_match_their_reference() {
    for kernel in [Bf16Kernel::Wgmma128x256, Bf16Kernel::Wgmma128x128] {
        check_batched::<f32>(kernel, |_, scale| 1e-5 * scale);
        check_batched::<Bf16>(kernel, |w, scale| w.abs() * 2f64.powi(-8) + 1e-5 * scale);
    }
}
