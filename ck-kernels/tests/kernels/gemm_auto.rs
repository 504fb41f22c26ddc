//! `gemm::auto`: which kernel each problem gets, and the result of the one it picks for plain
//! bf16 C (the TMA kernel) against an fp64 reference on the emulator.

use ck_core::device::Bf16;
use ck_core::host::{Device, DeviceBuffer};
use ck_kernels::checks::Rng;
use ck_kernels::gemm::auto::{choose, gemm, launch, Choice};
use ck_kernels::gemm::choice::Bf16Kernel;
use ck_kernels::gemm::epilogue::Activation;
use ck_kernels::gemm::fused::{upload, EpilogueArgs, HostEpilogue};
use ck_kernels::gemm::mma_sync::host::reference as product;

fn picked<O: ck_kernels::gemm::auto::AutoOutput>(
    device: &Device,
    batch: u32,
    mnk: (u32, u32, u32),
    args: &EpilogueArgs<'_, O>,
) -> String {
    match choose(device, batch, mnk, args) {
        Choice::Tma => "tma".into(),
        Choice::TmaN192 => "tma_n192".into(),
        Choice::Wgmma(k) => k.name().into(),
    }
}

#[test]
fn each_problem_gets_the_kernel_of_the_measured_rule() {
    let device = Device::emulator();
    // More 128 × 128 tiles than multiprocessors: the 128 × 256 tiles' size class.
    let big = (128 * (device.multiprocessors() + 1), 256, 64);
    let plain = EpilogueArgs::<Bf16>::default();
    assert_eq!(picked(&device, 1, big, &plain), "tma");
    let scaled = EpilogueArgs::<Bf16> {
        alpha: 0.5,
        ..Default::default()
    };
    assert_eq!(picked(&device, 1, big, &scaled), "tma");
    let bias = DeviceBuffer::<Bf16>::zeros(&device, 256).unwrap();
    let fused = EpilogueArgs::<Bf16> {
        bias: Some(&bias),
        ..Default::default()
    };
    assert_eq!(picked(&device, 1, big, &fused), "tma");
    let bias_gelu = EpilogueArgs::<Bf16> {
        bias: Some(&bias),
        activation: Activation::Gelu,
        ..Default::default()
    };
    assert_eq!(picked(&device, 1, big, &bias_gelu), "tma");
    // A residual alone with bf16 C: the TMA kernel that copies D through its ring.
    let residual = DeviceBuffer::<Bf16>::zeros(&device, 1).unwrap();
    let d_alone = EpilogueArgs::<Bf16> {
        d: Some(&residual),
        beta: 0.5,
        ..Default::default()
    };
    assert_eq!(picked(&device, 1, big, &d_alone), "tma");
    // Epilogues no TMA kernel runs at full speed: an activation without bias, a residual with
    // f32 C.
    let relu = EpilogueArgs::<Bf16> {
        activation: Activation::Relu,
        ..Default::default()
    };
    assert_eq!(picked(&device, 1, big, &relu), "gemm_bf16_wgmma");
    // A residual with a bias (bf16 C): the run-time-flags kernel with D through the ring.
    let with_d = EpilogueArgs::<Bf16> {
        d: Some(&residual),
        bias: Some(&bias),
        ..Default::default()
    };
    assert_eq!(picked(&device, 1, big, &with_d), "tma");
    // A batch of products, and f32 C with alpha alone: TMA; f32 C with a bias: cp.async.
    assert_eq!(picked(&device, 2, big, &plain), "tma");
    assert_eq!(
        picked(&device, 1, big, &EpilogueArgs::<f32>::default()),
        "tma"
    );
    let bias32 = DeviceBuffer::<f32>::zeros(&device, 256).unwrap();
    let f32_bias = EpilogueArgs::<f32> {
        bias: Some(&bias32),
        ..Default::default()
    };
    assert_eq!(picked(&device, 1, big, &f32_bias), "gemm_bf16_wgmma");
    let residual32 = DeviceBuffer::<f32>::zeros(&device, 1).unwrap();
    let f32_d = EpilogueArgs::<f32> {
        d: Some(&residual32),
        ..Default::default()
    };
    assert_eq!(picked(&device, 1, big, &f32_d), "gemm_bf16_wgmma");
    // Any K and tile count past one wave.
    let deep = (128 * (device.multiprocessors() + 1), 256, 4096);
    assert_eq!(picked(&device, 1, deep, &plain), "tma");
    assert_eq!(picked(&device, 1, deep, &bias_gelu), "tma");
    assert_eq!(picked(&device, 1, (8192, 8192, 8192), &plain), "tma");
    assert_eq!(picked(&device, 1, (8192, 4096, 4096), &plain), "tma");
    // One row of tiles 192 · SMs wide: 128 × 256 tiles leave a quarter of the one wave idle,
    // 128 × 192 ones fill it — for the epilogues compiled for them: alpha alone (bf16 or f32
    // C), a bias with an activation, D alone (bf16 C).
    let narrow = (128, 192 * device.multiprocessors(), 64);
    assert_eq!(picked(&device, 1, narrow, &plain), "tma_n192");
    assert_eq!(
        picked(&device, 1, narrow, &EpilogueArgs::<f32>::default()),
        "tma_n192"
    );
    assert_eq!(picked(&device, 1, narrow, &bias_gelu), "tma_n192");
    assert_eq!(picked(&device, 1, narrow, &d_alone), "tma_n192");
    assert_eq!(picked(&device, 1, narrow, &with_d), "tma");
    assert_eq!(picked(&device, 1, narrow, &f32_bias), "gemm_bf16_wgmma");
    // One wave of 128 × 128 tiles, and rows the wgmma kernels cannot copy.
    assert_eq!(
        picked(&device, 1, (128, 128, 64), &plain),
        "gemm_bf16_wgmma_n128"
    );
    assert_eq!(
        picked(&device, 1, (128, 130, 64), &plain),
        Bf16Kernel::MmaSync.name()
    );
}

#[test]
fn plain_bf16_c_on_the_tma_kernel_is_the_fp64_product_rounded_once() {
    // Two multiprocessors, where 128 × 256 tiles beat 128 × 192 ones on this shape.
    let device = Device::Emulator { workers: 2 };
    let mut rng = Rng(41);
    // Edge tiles in M and N; K of two and a half stages.
    let (m, n, k) = (259, 504, 160);
    let bf16 =
        |v: Vec<f32>| -> Vec<f32> { v.iter().map(|&x| Bf16::from_f32(x).to_f32()).collect() };
    let a = bf16((0..m * k).map(|_| rng.f32()).collect());
    let b = bf16((0..k * n).map(|_| rng.f32()).collect());
    let epilogue = HostEpilogue {
        alpha: 0.75,
        ..Default::default()
    };
    let args = EpilogueArgs::<Bf16> {
        alpha: 0.75,
        ..Default::default()
    };
    assert!(matches!(choose(&device, 1, (m, n, k), &args), Choice::Tma));
    let (c, _) = gemm::<Bf16>(&device, (&a, &b), 1, (m, n, k), epilogue).unwrap();
    let want = product(&a, &b, (m, n, k));
    let scale = want.iter().fold(0.0f64, |s, w| s.max(w.abs()));
    for (i, (&g, &w)) in c.iter().zip(&want).enumerate() {
        let w = 0.75 * w;
        // One bf16 rounding (2⁻⁸ relative) over the f32 accumulation's own error.
        assert!(
            (g as f64 - w).abs() <= w.abs() * 2f64.powi(-8) + 1e-5 * scale,
            "C[{}, {}] = {g}, want {w}",
            i / n as usize,
            i % n as usize
        );
    }
    // The launcher names the kernel it ran.
    let (ad, bd) = (upload(&device, &a).unwrap(), upload(&device, &b).unwrap());
    let mut cd = DeviceBuffer::<Bf16>::zeros(&device, (m * n) as usize).unwrap();
    let (_, name) = launch(&device, (&ad, &bd), &mut cd, 1, (m, n, k), &args).unwrap();
    assert_eq!(name, "gemm_tma_bf16");
}

#[test]
fn batches_and_f32_c_on_the_tma_kernel_are_the_fp64_products() {
    let device = Device::Emulator { workers: 2 };
    let mut rng = Rng(43);
    // Two products with edge tiles in M and N and K of one and a half stages (on two
    // multiprocessors: 128 × 256 tiles, not 128 × 192).
    let (batch, m, n, k) = (2u32, 261, 504, 96);
    let (mk, kn, mn) = ((m * k) as usize, (k * n) as usize, (m * n) as usize);
    let bf16 =
        |v: Vec<f32>| -> Vec<f32> { v.iter().map(|&x| Bf16::from_f32(x).to_f32()).collect() };
    let a = bf16((0..batch as usize * mk).map(|_| rng.f32()).collect());
    let b = bf16((0..batch as usize * kn).map(|_| rng.f32()).collect());
    let plain = EpilogueArgs::<Bf16>::default();
    assert!(matches!(
        choose(&device, batch, (m, n, k), &plain),
        Choice::Tma
    ));
    let (c16, _) =
        gemm::<Bf16>(&device, (&a, &b), batch, (m, n, k), HostEpilogue::default()).unwrap();
    // f32 C: the first product alone.
    let f32_plain = EpilogueArgs::<f32>::default();
    assert!(matches!(
        choose(&device, 1, (m, n, k), &f32_plain),
        Choice::Tma
    ));
    let (c32, _) = gemm::<f32>(
        &device,
        (&a[..mk], &b[..kn]),
        1,
        (m, n, k),
        HostEpilogue::default(),
    )
    .unwrap();
    for p in 0..batch as usize {
        let want = product(&a[p * mk..][..mk], &b[p * kn..][..kn], (m, n, k));
        let scale = want.iter().fold(0.0f64, |s, w| s.max(w.abs()));
        for (i, &w) in want.iter().enumerate() {
            let got = c16[p * mn + i] as f64;
            // One bf16 rounding (2⁻⁸ relative) over the f32 accumulation's own error.
            assert!(
                (got - w).abs() <= w.abs() * 2f64.powi(-8) + 1e-5 * scale,
                "product {p}: C[{}, {}] = {got}, want {w}",
                i / n as usize,
                i % n as usize
            );
            if p == 0 {
                let got = c32[i] as f64;
                assert!(
                    (got - w).abs() <= 1e-5 * scale,
                    "f32 C[{}, {}] = {got}, want {w}",
                    i / n as usize,
                    i % n as usize
                );
            }
        }
    }
}

#[test]
fn the_192_wide_tiles_it_picks_compute_the_fp64_product() {
    let device = Device::emulator();
    let mut rng = Rng(47);
    let (m, n, k) = (131, 192 * device.multiprocessors() - 8, 80);
    let bf16 =
        |v: Vec<f32>| -> Vec<f32> { v.iter().map(|&x| Bf16::from_f32(x).to_f32()).collect() };
    let a = bf16((0..m * k).map(|_| rng.f32()).collect());
    let b = bf16((0..k * n).map(|_| rng.f32()).collect());
    let args = EpilogueArgs::<Bf16>::default();
    assert_eq!(choose(&device, 1, (m, n, k), &args), Choice::TmaN192);
    let (ad, bd) = (upload(&device, &a).unwrap(), upload(&device, &b).unwrap());
    let mut cd = DeviceBuffer::<Bf16>::zeros(&device, (m * n) as usize).unwrap();
    let (_, name) = launch(&device, (&ad, &bd), &mut cd, 1, (m, n, k), &args).unwrap();
    assert_eq!(name, "gemm_tma_bf16_n192");
    let c = cd.to_vec().unwrap();
    let want = product(&a, &b, (m, n, k));
    let scale = want.iter().fold(0.0f64, |s, w| s.max(w.abs()));
    for (i, (g, &w)) in c.iter().zip(&want).enumerate() {
        let g = g.to_f32() as f64;
        assert!(
            (g - w).abs() <= w.abs() * 2f64.powi(-8) + 1e-5 * scale,
            "C[{}, {}] = {g}, want {w}",
            i / n as usize,
            i % n as usize
        );
    }
}

#[test]
fn few_tiles_of_a_long_k_go_to_the_tma_kernel_that_shares_them_out() {
    // An H100's 132 multiprocessors (only the choice is made here, nothing is launched). The
    // shapes measured there: 32 tiles of 128 stages on 128 × 256 tiles, 44 tiles of 256 stages
    // on 128 × 192 ones, the stages shared out over idle multiprocessors (stream-K).
    let h100 = Device::Emulator { workers: 132 };
    let plain = EpilogueArgs::<Bf16>::default();
    assert_eq!(picked(&h100, 1, (1024, 1024, 8192), &plain), "tma");
    assert_eq!(picked(&h100, 1, (512, 2048, 16384), &plain), "tma_n192");
    let f32_plain = EpilogueArgs::<f32>::default();
    assert_eq!(picked(&h100, 1, (1024, 1024, 8192), &f32_plain), "tma");
    // A short K: nothing to share, the one wave of 128 × 128 tiles.
    assert_eq!(
        picked(&h100, 1, (1024, 1024, 512), &plain),
        "gemm_bf16_wgmma_n128"
    );
    // An epilogue no TMA kernel takes (an activation without a bias).
    let relu = EpilogueArgs::<Bf16> {
        activation: Activation::Relu,
        ..Default::default()
    };
    assert_eq!(
        picked(&h100, 1, (1024, 1024, 8192), &relu),
        "gemm_bf16_wgmma_n128"
    );
}
