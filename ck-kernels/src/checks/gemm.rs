//! The GEMM checks: seeded problems on a device against fp64, and their cross-device cases.

use super::{norm_relative_error, Outcome, Rng};
use crate::gemm::choice::Bf16Kernel;
use ck_core::device::Bf16;
use ck_core::host::{Device, DeviceBuffer, LaunchError};

/// The tensor-core GEMM `kernel` on seeded random matrices (rounded to bf16), checked against
/// fp64 on the same rounded operands (norm-wise relative error ≤ 1e-5: only the f32 accumulation
/// differs).
pub fn gemm_bf16_case(
    device: &Device,
    kernel: Bf16Kernel,
    (m, n, k): (u32, u32, u32),
    seed: u64,
) -> Result<Outcome, LaunchError> {
    use crate::gemm::auto::gemm_bf16_with;
    use crate::gemm::mma_sync::host::reference;
    let mut rng = Rng(seed.max(1));
    let round = |v: f32| ck_core::device::Bf16::from_f32(v).to_f32();
    let a: Vec<f32> = (0..m * k).map(|_| round(rng.f32())).collect();
    let b: Vec<f32> = (0..k * n).map(|_| round(rng.f32())).collect();
    let (c, stats) = gemm_bf16_with(device, kernel, &a, &b, (m, n, k))?;
    let err = norm_relative_error(&c, &reference(&a, &b, (m, n, k)));
    Ok(Outcome::within(&c, stats, err, 1e-5))
}

/// The TMA GEMM on seeded random operands, f32 C: bf16 operands (`fp8` false) or e4m3 ones
/// (B as `[n, k]`), `batch` products, against fp64 on the operands' values (norm-wise relative
/// error ≤ 1e-5 for bf16; 1e-3 for e4m3, whose tensor cores accumulate with fewer bits).
pub fn gemm_tma_case(
    device: &Device,
    fp8: bool,
    (batch, m, n, k): (u32, u32, u32, u32),
    seed: u64,
) -> Result<Outcome, LaunchError> {
    use crate::gemm::fused::{upload, EpilogueArgs};
    use crate::gemm::mma_sync::host::reference;
    use crate::gemm::tma::host::{launch, transpose_batched};
    use crate::gemm::tma::{Bf16Operands, Fp8Operands};
    use ck_core::device::{Bf16, E4m3};
    let mut rng = Rng(seed.max(1));
    // Values of the operand type, as f32 (exact): A [batch, m, k], B [batch, k, n].
    let mut operand = |len: u32| -> Vec<f32> {
        (0..len)
            .map(|_| {
                let v = 4.0 * rng.f32();
                if fp8 {
                    E4m3::from_f32(v).to_f32()
                } else {
                    Bf16::from_f32(v).to_f32()
                }
            })
            .collect()
    };
    let (a, b) = (operand(batch * m * k), operand(batch * k * n));
    let mut c = DeviceBuffer::<f32>::zeros(device, (batch * m * n) as usize)?;
    let (args, shape) = (EpilogueArgs::default(), (m, n, k));
    let stats = if fp8 {
        let bt = transpose_batched(&b, batch, (k, n));
        let (ad, bd) = (upload::<E4m3>(device, &a)?, upload::<E4m3>(device, &bt)?);
        launch::<Fp8Operands<E4m3, E4m3>, f32>(device, (&ad, &bd), &mut c, batch, shape, &args)?
    } else {
        let (ad, bd) = (upload::<Bf16>(device, &a)?, upload::<Bf16>(device, &b)?);
        launch::<Bf16Operands, f32>(device, (&ad, &bd), &mut c, batch, shape, &args)?
    };
    let c = c.to_vec()?;
    let (mk, kn) = ((m * k) as usize, (k * n) as usize);
    let want: Vec<f64> = (0..batch as usize)
        .flat_map(|p| reference(&a[p * mk..(p + 1) * mk], &b[p * kn..(p + 1) * kn], shape))
        .collect();
    let err = norm_relative_error(&c, &want);
    Ok(Outcome::within(
        &c,
        stats,
        err,
        if fp8 { 1e-3 } else { 1e-5 },
    ))
}

/// The TMA GEMM's residual epilogue on seeded random bf16 operands and D: bf16 C =
/// 0.5 · A·B − 1.5 · D for `batch` products (`gemm_tma_bf16_residual`, D copied by the copy
/// engine), against fp64 (norm-wise relative error ≤ 4e-3: one rounding to bf16).
pub fn gemm_tma_residual_case(
    device: &Device,
    (batch, m, n, k): (u32, u32, u32, u32),
    seed: u64,
) -> Result<Outcome, LaunchError> {
    use crate::gemm::fused::{upload, EpilogueArgs};
    use crate::gemm::mma_sync::host::reference;
    use crate::gemm::tma::{host::launch, Bf16Operands};
    use ck_core::device::Bf16;
    let mut rng = Rng(seed.max(1));
    let mut values = |len: u32, scale: f32| -> Vec<f32> {
        (0..len)
            .map(|_| Bf16::from_f32(scale * rng.f32()).to_f32())
            .collect()
    };
    let (a, b, d) = (
        values(batch * m * k, 4.0),
        values(batch * k * n, 4.0),
        values(batch * m * n, 8.0),
    );
    let (ad, bd, dd) = (
        upload::<Bf16>(device, &a)?,
        upload::<Bf16>(device, &b)?,
        upload::<Bf16>(device, &d)?,
    );
    let mut c = DeviceBuffer::<Bf16>::zeros(device, (batch * m * n) as usize)?;
    let (alpha, beta) = (0.5, -1.5);
    let args = EpilogueArgs {
        alpha,
        beta,
        d: Some(&dd),
        ..Default::default()
    };
    let stats = launch::<Bf16Operands, Bf16>(device, (&ad, &bd), &mut c, batch, (m, n, k), &args)?;
    let c: Vec<f32> = c.to_vec()?.iter().map(|v| v.to_f32()).collect();
    let (mk, kn, mn) = ((m * k) as usize, (k * n) as usize, (m * n) as usize);
    let want: Vec<f64> = (0..batch as usize)
        .flat_map(|p| {
            let ab = reference(
                &a[p * mk..(p + 1) * mk],
                &b[p * kn..(p + 1) * kn],
                (m, n, k),
            );
            let d = &d[p * mn..(p + 1) * mn];
            ab.into_iter()
                .zip(d)
                .map(|(ab, &d)| alpha as f64 * ab + beta as f64 * d as f64)
                .collect::<Vec<_>>()
        })
        .collect();
    let err = norm_relative_error(&c, &want);
    Ok(Outcome::within(&c, stats, err, 4e-3))
}

/// The GEMM cases of `ck cross-check`, each run on `a` and `b` and handed to `record` (case,
/// outcomes, tolerance between the devices).
pub(super) fn cross_check_cases(
    a: &Device,
    b: &Device,
    record: &mut impl FnMut(String, Outcome, Outcome, f64),
) -> Result<(), LaunchError> {
    // bf16: the mma.sync kernel on any shape, the wgmma kernels where N and K are multiples of 8.
    let wgmma = [Bf16Kernel::Wgmma128x256, Bf16Kernel::Wgmma128x128];
    for (m, n, k) in [
        (1u32, 1u32, 1u32),
        (17, 33, 65),
        (257, 129, 73),
        (1, 8, 8),
        (136, 264, 328),
    ] {
        let aligned = crate::gemm::wgmma::whole_vector_rows(n, k);
        for kernel in [Bf16Kernel::MmaSync]
            .into_iter()
            .chain(wgmma.into_iter().filter(|_| aligned))
        {
            // The tensor cores' internal accumulation order and precision are not specified
            // (the emulator rounds each MMA's exact sum once): the devices may differ by a few
            // f32 ulps per k16 step, while both stay within 1e-5 of fp64.
            record(
                format!("gemm bf16 {m}x{n}x{k} {}", kernel.name()),
                gemm_bf16_case(a, kernel, (m, n, k), 13)?,
                gemm_bf16_case(b, kernel, (m, n, k), 13)?,
                1e-4,
            );
        }
    }
    // The TMA GEMMs: one tile, edge tiles, batches with more tiles than the emulator's blocks.
    for (batch, m, n, k) in [
        (1u32, 1u32, 8u32, 16u32),
        (1, 257, 264, 336),
        (3, 130, 136, 144),
    ] {
        for fp8 in [false, true] {
            // The emulator rounds each MMA's exact sum once; the GPU's bf16 MMAs differ by a
            // few f32 ulps per step, and its fp8 MMAs accumulate with fewer bits (measured on
            // an H100: 2e-4 norm-wise from fp64 at K = 336, up to 8 % on elements that nearly
            // cancel, against the operands' own rounding of 2⁻⁴).
            let (what, tolerance) = if fp8 {
                ("gemm_fp8_e4m3_f32", 0.25)
            } else {
                ("gemm_tma_bf16_f32", 5e-4)
            };
            record(
                format!("gemm tma {batch}x{m}x{n}x{k} {what}"),
                gemm_tma_case(a, fp8, (batch, m, n, k), 19)?,
                gemm_tma_case(b, fp8, (batch, m, n, k), 19)?,
                tolerance,
            );
        }
    }
    // The residual kernel: edge tiles with boxes wholly past N, and a batch.
    for (batch, m, n, k) in [(1u32, 257u32, 520u32, 200u32), (3, 130, 136, 64)] {
        // bf16 C: the devices' f32 sums may round to neighbouring bf16 values (2⁻⁸).
        record(
            format!("gemm tma {batch}x{m}x{n}x{k} gemm_tma_bf16_residual"),
            gemm_tma_residual_case(a, (batch, m, n, k), 31)?,
            gemm_tma_residual_case(b, (batch, m, n, k), 31)?,
            1e-2,
        );
    }
    let problems = grouped_problems(72);
    record(
        "gemm grouped 5 problems gemm_grouped_any_bf16_f32".into(),
        gemm_grouped_case::<f32>(a, &problems, true, 23)?,
        gemm_grouped_case::<f32>(b, &problems, true, 23)?,
        1e-4,
    );
    let problems = moe_problems(136);
    record(
        "gemm grouped moe 5 experts gemm_grouped_bf16_f32".into(),
        gemm_grouped_case::<f32>(a, &problems, true, 29)?,
        gemm_grouped_case::<f32>(b, &problems, true, 29)?,
        1e-4,
    );
    // Alpha alone: the TMA kernels, C stored row by row where each problem's rows end.
    record(
        "gemm grouped moe 5 experts gemm_tma_grouped_bf16_f32".into(),
        gemm_grouped_case::<f32>(a, &problems, false, 37)?,
        gemm_grouped_case::<f32>(b, &problems, false, 37)?,
        1e-4,
    );
    // bf16 C: the devices' f32 sums may round to neighbouring bf16 values (2⁻⁸).
    record(
        "gemm grouped moe 5 experts gemm_tma_grouped_bf16".into(),
        gemm_grouped_case::<Bf16>(a, &problems, false, 37)?,
        gemm_grouped_case::<Bf16>(b, &problems, false, 37)?,
        1e-2,
    );
    Ok(())
}

/// The grouped GEMM's check problems, two of them of depth `k`: mixed shapes, an empty problem,
/// N and K off the 16-byte vectors, and more tiles than the emulator has blocks.
pub fn grouped_problems(k: u32) -> [crate::gemm::grouped::host::Problem; 5] {
    use crate::gemm::grouped::host::Problem;
    [
        Problem::new(257, 264, k),
        Problem::new(0, 256, 64),
        Problem::new(1, 1, 1),
        Problem::new(33, 21, 13),
        Problem::new(130, 520, k),
    ]
}

/// A mixture-of-experts group: experts of 0, 300, 390, 1 and 337 tokens, N = 264, depth `k`
/// (a multiple of 8). Every problem has the same N and K and those with rows 257 on average
/// ([`crate::gemm::grouped::host::TMA_MIN_ROWS`]): alpha alone runs on the TMA kernel, any
/// other epilogue on the `cp.async` kernel without element copies. Rows end inside a tile and
/// inside a 16-row box.
pub fn moe_problems(k: u32) -> Vec<crate::gemm::grouped::host::Problem> {
    use crate::gemm::grouped::host::Problem;
    [0, 300, 390, 1, 337]
        .into_iter()
        .map(|m| Problem::new(m, 264, k))
        .collect()
}

/// The grouped GEMM with C of `O` on `problems` of seeded random bf16 operands in one launch,
/// `C_g = A_g·B_g` or, with `bias_silu`, `silu(A_g·B_g + bias_g)`; against fp64 per problem
/// (norm-wise relative error over all of them ≤ 1e-5 for f32 C, ≤ 4e-3 for bf16 C, whose
/// rounding alone is up to 2⁻⁹ per element); the output is every problem's C in turn.
pub fn gemm_grouped_case<O: crate::gemm::grouped::host::GroupedOutput>(
    device: &Device,
    problems: &[crate::gemm::grouped::host::Problem],
    bias_silu: bool,
    seed: u64,
) -> Result<Outcome, LaunchError> {
    use crate::gemm::epilogue::Activation;
    use crate::gemm::fused::{reference as epilogue_reference, HostEpilogue};
    use crate::gemm::grouped::host::{GroupedGemm, Operand};
    use crate::gemm::mma_sync::host::reference;
    let grouped = GroupedGemm::new(device, problems)?;
    let mut rng = Rng(seed.max(1));
    let round = |v: f32| ck_core::device::Bf16::from_f32(v).to_f32();
    let mut values = |op: Operand| -> Vec<Vec<f32>> {
        problems
            .iter()
            .map(|p| (0..p.len(op)).map(|_| round(rng.f32())).collect())
            .collect()
    };
    let (a, b, bias) = (
        values(Operand::A),
        values(Operand::B),
        values(Operand::Bias),
    );
    let packed_bias = grouped.pack(Operand::Bias, &bias)?;
    let activation = if bias_silu {
        Activation::Silu
    } else {
        Activation::None
    };
    let epilogue = HostEpilogue {
        bias: bias_silu.then_some(&packed_bias[..]),
        activation,
        ..Default::default()
    };
    let (ap, bp) = (grouped.pack(Operand::A, &a)?, grouped.pack(Operand::B, &b)?);
    let (c, stats) = grouped.gemm_on_host_values::<O>(device, (&ap, &bp), epilogue)?;
    let c: Vec<f32> = grouped.unpack(Operand::C, &c)?.concat();
    let want: Vec<f64> = problems
        .iter()
        .enumerate()
        .flat_map(|(g, p)| {
            let ab = reference(&a[g], &b[g], (p.m, p.n, p.k));
            let bias = bias_silu.then_some(&bias[g][..]);
            epilogue_reference(&ab, (p.m, p.n), (1.0, 1.0), (None, bias), activation)
        })
        .collect();
    let err = norm_relative_error(&c, &want);
    let tol = if O::BYTES == 2 { 4e-3 } else { 1e-5 };
    Ok(Outcome::within(&c, stats, err, tol))
}
