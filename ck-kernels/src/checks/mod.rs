//! Runs the exercise kernels on any device with seeded random inputs, checks them against their
//! CPU references, and compares two devices bit for bit (`ck run`, `ck cross-check`, the tests).

mod attention;
mod gemm;

pub use attention::attention_case;
pub use gemm::{
    gemm_bf16_case, gemm_case, gemm_grouped_case, gemm_tma_case, grouped_problems, moe_problems,
};

use crate::attention::host::{Options, Shape};
use crate::elementwise::{AddF32, CopyF32, TILE_F32};
use crate::gemm::choice::Bf16Kernel;
use crate::probes::bank_probe::{self, BankProbe};
use crate::probes::exercise::*;
use crate::rows::rmsnorm::host::{reference, rmsnorm, Dtype};
use ck_core::device::Bf16;
use ck_core::host::{Device, DeviceBuffer, LaunchConfig, LaunchError, LaunchStats, TensorMap};
use ck_core::wgmma::SwizzleMode;

/// Kernels `ck run` and `ck cross-check` know (bank-probe takes its own parameters). The
/// RMSNorm ones run a 257 × n matrix, gemm-f32 a 257 × 129 × n product.
pub const EXERCISES: &[&str] = &[
    "reverse",
    "block-sum",
    "histogram",
    "copy",
    "add",
    "multicast",
    "rmsnorm-f32",
    "rmsnorm-bf16",
    "layernorm-f32",
    "layernorm-bf16",
    "add-rmsnorm-f32",
    "add-rmsnorm-bf16",
    "softmax-f32",
    "softmax-bf16",
    "gemm-f32",
    "gemm-bf16",
    "gemm-wgmma",
    "gemm-wgmma-n128",
    "gemm-grouped",
    "gemm-grouped-moe",
    "attention-check",
];

/// `‖got − want‖ / ‖want‖` (Frobenius): the error measure for reductions over long sums, where
/// single elements can cancel to near zero.
pub fn norm_relative_error(got: &[f32], want: &[f64]) -> f64 {
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for (&g, &w) in got.iter().zip(want) {
        num += (g as f64 - w) * (g as f64 - w);
        den += w * w;
    }
    if got.iter().any(|g| g.is_nan()) {
        return f64::NAN;
    }
    (num / den.max(1e-300)).sqrt()
}

/// Largest relative error of `got` against an fp64 reference (relative to each element, with a
/// floor of 1e-3 of the largest magnitude).
pub fn max_relative_error(got: &[f32], want: &[f64]) -> f64 {
    let scale = want.iter().fold(0f64, |m, v| m.max(v.abs())).max(1e-30);
    got.iter()
        .zip(want)
        .map(|(&g, &w)| (g as f64 - w).abs() / w.abs().max(scale * 1e-3))
        .fold(0.0, f64::max)
}

/// One run: the raw output bits, the launch statistics, and whether the output matched the CPU
/// reference.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Output buffer, as bits.
    pub output: Vec<u32>,
    /// Launch statistics.
    pub stats: LaunchStats,
    /// `None` if the output equals the reference, else what differs.
    pub mismatch: Option<String>,
}

impl Outcome {
    /// A float result judged by its relative error `err` against fp64 (NaN fails).
    fn within(output: &[f32], stats: LaunchStats, err: f64, tol: f64) -> Outcome {
        let mismatch = (err > tol || err.is_nan())
            .then(|| format!("relative error {err:.3e} > {tol:e} against fp64"));
        Outcome {
            output: output.iter().map(|v| v.to_bits()).collect(),
            stats,
            mismatch,
        }
    }
}

/// The reproducible input generator of the checks, benchmarks and tests (xorshift64; the
/// seed must not be 0).
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn bits(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A value in [−1, 1] on a grid of 10⁻⁶.
    pub fn f32(&mut self) -> f32 {
        (self.bits() % 2_000_001) as f32 / 1e6 - 1.0
    }
}

fn first_difference<T: PartialEq + std::fmt::Debug>(got: &[T], want: &[T]) -> Option<String> {
    if got.len() != want.len() {
        return Some(format!("{} elements, expected {}", got.len(), want.len()));
    }
    got.iter()
        .zip(want)
        .position(|(a, b)| a != b)
        .map(|i| format!("element {i}: {:?}, expected {:?}", got[i], want[i]))
}

/// Runs exercise `kernel` on `n` seeded random inputs.
pub fn run_exercise(
    device: &Device,
    kernel: &str,
    n: u32,
    seed: u64,
) -> Result<Outcome, LaunchError> {
    let mut rng = Rng(seed.max(1));
    match kernel {
        "reverse" => {
            let n = n.div_ceil(BLOCK).max(1) * BLOCK;
            let x: Vec<f32> = (0..n).map(|_| rng.f32()).collect();
            let input = DeviceBuffer::from_slice(device, &x)?;
            let mut out = DeviceBuffer::from_slice(device, &vec![f32::NAN; n as usize])?;
            let stats = Reverse::launch(
                device,
                LaunchConfig::new(n / BLOCK, BLOCK),
                &input,
                &mut out,
            )?;
            let got = out.to_vec()?;
            let mismatch = first_difference(&got, &reverse_reference(&x));
            Ok(Outcome {
                output: got.iter().map(|v| v.to_bits()).collect(),
                stats,
                mismatch,
            })
        }
        "block-sum" => {
            let x: Vec<f32> = (0..n.max(1)).map(|_| rng.f32()).collect();
            let blocks = (x.len() as u32).div_ceil(BLOCK);
            let input = DeviceBuffer::from_slice(device, &x)?;
            let mut out = DeviceBuffer::from_slice(device, &vec![f32::NAN; blocks as usize])?;
            let stats = BlockSum::launch(
                device,
                LaunchConfig::new(blocks, BLOCK),
                &input,
                &mut out,
                x.len() as u32,
            )?;
            let got = out.to_vec()?;
            let mismatch = got
                .iter()
                .zip(block_sum_reference(&x))
                .enumerate()
                .find_map(|(i, (g, w))| {
                    ((*g as f64 - w).abs() > 1e-5 * (1.0 + w.abs()))
                        .then(|| format!("block {i}: {g}, expected {w}"))
                });
            Ok(Outcome {
                output: got.iter().map(|v| v.to_bits()).collect(),
                stats,
                mismatch,
            })
        }
        "histogram" => {
            let v: Vec<u32> = (0..n.max(1))
                .map(|_| (rng.bits() % 100_000) as u32)
                .collect();
            let values = DeviceBuffer::from_slice(device, &v)?;
            let mut bins = DeviceBuffer::zeros(device, BINS as usize)?;
            let blocks = (v.len() as u32).div_ceil(4 * BLOCK).max(1);
            let stats =
                Histogram::launch(device, LaunchConfig::new(blocks, BLOCK), &values, &mut bins)?;
            let got = bins.to_vec()?;
            let mismatch = first_difference(&got, &histogram_reference(&v));
            Ok(Outcome {
                output: got,
                stats,
                mismatch,
            })
        }
        "copy" | "add" => {
            let a: Vec<f32> = (0..n.max(1)).map(|_| rng.f32()).collect();
            let b: Vec<f32> = (0..n.max(1)).map(|_| rng.f32()).collect();
            let (ad, bd) = (
                DeviceBuffer::from_slice(device, &a)?,
                DeviceBuffer::from_slice(device, &b)?,
            );
            let mut out = DeviceBuffer::from_slice(device, &vec![f32::NAN; a.len()])?;
            let cfg = LaunchConfig::new((a.len() as u32).div_ceil(TILE_F32), 256);
            let (stats, want) = if kernel == "copy" {
                (
                    CopyF32::launch(device, cfg, &ad, &mut out, a.len() as u32)?,
                    a.clone(),
                )
            } else {
                (
                    AddF32::launch(device, cfg, &ad, &bd, &mut out, a.len() as u32)?,
                    a.iter().zip(&b).map(|(x, y)| x + y).collect(),
                )
            };
            let got = out.to_vec()?;
            let mismatch = first_difference(&got, &want);
            Ok(Outcome {
                output: got.iter().map(|v| v.to_bits()).collect(),
                stats,
                mismatch,
            })
        }
        "multicast" => {
            // n rows of 32 (at most 4096) to the blocks of two clusters.
            let rows = n.clamp(1, 4096);
            let x: Vec<u32> = (0..rows * 32).map(|_| rng.bits() as u32).collect();
            let input = DeviceBuffer::from_slice(device, &x)?;
            let dims = [32, rows as u64];
            let map = TensorMap::dense(&input, dims, [32, MULTICAST_ROWS], SwizzleMode::None)?;
            let (tiles, blocks) = (rows.div_ceil(MULTICAST_ROWS), 2 * MULTICAST_CLUSTER);
            let want = multicast_reference(&x, blocks);
            let mut out = DeviceBuffer::from_slice(device, &vec![u32::MAX; want.len()])?;
            let cfg = LaunchConfig::new(blocks, 64);
            let stats = Multicast::launch(device, cfg, &map, &mut out, tiles)?;
            let got = out.to_vec()?;
            let mismatch = first_difference(&got, &want);
            Ok(Outcome {
                output: got,
                stats,
                mismatch,
            })
        }
        "gemm-f32" => gemm_case(device, (257, 129, n.clamp(1, 4096)), seed),
        "gemm-bf16" => gemm_bf16_case(
            device,
            Bf16Kernel::MmaSync,
            (257, 129, n.clamp(1, 4096)),
            seed,
        ),
        // N and K multiples of 8, for the wgmma kernels.
        "gemm-wgmma" | "gemm-wgmma-n128" => {
            let kernel = if kernel == "gemm-wgmma" {
                Bf16Kernel::Wgmma128x256
            } else {
                Bf16Kernel::Wgmma128x128
            };
            let k = n.clamp(1, 4096).next_multiple_of(8);
            gemm_bf16_case(device, kernel, (257, 264, k), seed)
        }
        "gemm-grouped" => {
            gemm_grouped_case::<f32>(device, &grouped_problems(n.clamp(1, 4096)), true, seed)
        }
        "gemm-grouped-moe" => {
            let k = n.clamp(1, 4096).next_multiple_of(8);
            gemm_grouped_case::<Bf16>(device, &moe_problems(k), false, seed)
        }
        "attention-check" => {
            let shape = Shape {
                batch: 1,
                heads: 4,
                kv_heads: 2,
                sq: 257,
                sk: n.clamp(1, 16384),
                head_dim: 128,
            };
            attention_case(
                device,
                shape,
                Options {
                    causal: true,
                    scale: None,
                },
                seed,
            )
        }
        "layernorm-f32" => layernorm_case(device, Dtype::F32, (257, n.max(1)), seed),
        "layernorm-bf16" => layernorm_case(device, Dtype::Bf16, (257, n.max(1)), seed),
        "add-rmsnorm-f32" => add_rmsnorm_case(device, Dtype::F32, (257, n.max(1)), seed),
        "add-rmsnorm-bf16" => add_rmsnorm_case(device, Dtype::Bf16, (257, n.max(1)), seed),
        "softmax-f32" => softmax_case(device, Dtype::F32, (257, n.max(1)), seed),
        "softmax-bf16" => softmax_case(device, Dtype::Bf16, (257, n.max(1)), seed),
        "rmsnorm-f32" | "rmsnorm-bf16" => {
            let dtype = if kernel == "rmsnorm-f32" {
                Dtype::F32
            } else {
                Dtype::Bf16
            };
            rmsnorm_case(device, dtype, (257, n.max(1)), seed)
        }
        other => Err(LaunchError::invalid(
            ck_core::rules::UNKNOWN_KERNEL,
            format!(
                "unknown kernel `{other}`; available: {}, bank-probe",
                EXERCISES.join(", ")
            ),
        )),
    }
}

/// Relative error a row-wise operator may have against fp64 on the inputs it sees: f32
/// arithmetic over a row (1e-5), or the bf16 rounding of the output (2⁻⁸ ≈ 4e-3, so 1e-2).
fn row_tolerance(dtype: Dtype) -> f64 {
    match dtype {
        Dtype::F32 => 1e-5,
        Dtype::Bf16 => 1e-2,
    }
}

/// RMSNorm of a seeded random `m × n` matrix, checked against fp64 (1e-5 relative for f32,
/// 1e-2 for bf16, whose reference sees the same rounded inputs).
pub fn rmsnorm_case(
    device: &Device,
    dtype: Dtype,
    (m, n): (u32, u32),
    seed: u64,
) -> Result<Outcome, LaunchError> {
    let mut rng = Rng(seed.max(1));
    let x: Vec<f32> = (0..m * n).map(|_| rng.f32()).collect();
    let g: Vec<f32> = (0..n).map(|_| rng.f32() + 1.5).collect();
    let (y, stats) = rmsnorm(device, &x, &g, (m, n), 1e-6, dtype)?;
    // The reference sees what the kernel sees.
    let seen = |v: &[f32]| v.iter().map(|&a| dtype.round(a)).collect::<Vec<_>>();
    let want = reference(&seen(&x), &seen(&g), (m, n), 1e-6);
    let tol = row_tolerance(dtype);
    Ok(Outcome::within(
        &y,
        stats,
        max_relative_error(&y, &want),
        tol,
    ))
}

/// LayerNorm of a seeded random `m × n` matrix with an offset of 10 (so the mean matters),
/// checked against fp64: y relative to the size of what it is computed from, `(|x| + |mean|) ·
/// rstd · |g| + |b|` (1e-5 for f32, 1e-2 for bf16, whose reference sees the same rounded
/// inputs). `x − mean` cancels: its f32 error is of the size of x, not of the difference, so
/// an element whose `(x − mean) · rstd · g` and `b` are both near 0 is no more accurate than
/// its neighbours (measured against `|y − b| + |b|` alone, 257 rows of 4096 around 10 put
/// some elements' error over 1e-5 with an absolute error of 1e-6, as good as any f32 kernel's).
pub fn layernorm_case(
    device: &Device,
    dtype: Dtype,
    (m, n): (u32, u32),
    seed: u64,
) -> Result<Outcome, LaunchError> {
    use crate::rows::layernorm::host as ln;
    let mut rng = Rng(seed.max(1));
    let round = |v: f32| dtype.round(v);
    let x: Vec<f32> = (0..m * n).map(|_| round(10.0 + rng.f32())).collect();
    let g: Vec<f32> = (0..n).map(|_| round(rng.f32() + 1.5)).collect();
    let b: Vec<f32> = (0..n).map(|_| round(rng.f32())).collect();
    let (out, stats) = ln::layernorm(device, (&x, &g, &b), (m, n), 1e-5, dtype)?;
    let (want, mean, rstd) = ln::reference((&x, &g, &b), (m, n), 1e-5);
    let nn = n as usize;
    let err = (0..want.len())
        .map(|i| {
            let (row, j) = (i / nn, i % nn);
            let size = (x[i].abs() as f64 + mean[row].abs()) * rstd[row] * (g[j].abs() as f64)
                + (b[j].abs() as f64);
            (out.y[i] as f64 - want[i]).abs() / size.max(1e-30)
        })
        .fold(0.0, f64::max);
    let tol = row_tolerance(dtype);
    Ok(Outcome::within(&out.y, stats, err, tol))
}

/// Residual add + RMSNorm of seeded random `m × n` matrices: `y` checked against the fp64
/// RMSNorm of the `r` the kernel wrote (1e-5 relative for f32, 1e-2 for bf16), `r` against the
/// sum rounded once (within one bf16 ulp).
pub fn add_rmsnorm_case(
    device: &Device,
    dtype: Dtype,
    (m, n): (u32, u32),
    seed: u64,
) -> Result<Outcome, LaunchError> {
    let mut rng = Rng(seed.max(1));
    let round = |v: f32| dtype.round(v);
    let x: Vec<f32> = (0..m * n).map(|_| round(rng.f32())).collect();
    let res: Vec<f32> = (0..m * n).map(|_| round(rng.f32())).collect();
    let g: Vec<f32> = (0..n).map(|_| round(rng.f32() + 1.5)).collect();
    let ((r, y), stats) =
        crate::rows::add_rmsnorm::host::add_rmsnorm(device, (&x, &res, &g), (m, n), 1e-6, dtype)?;
    let want_r: Vec<f64> = x
        .iter()
        .zip(&res)
        .map(|(&a, &b)| round((a as f64 + b as f64) as f32) as f64)
        .collect();
    let r_err = max_relative_error(&r, &want_r);
    let want_y = reference(&r, &g, (m, n), 1e-6);
    let y_err = max_relative_error(&y, &want_y);
    let tol = row_tolerance(dtype);
    let mut out = r;
    out.extend_from_slice(&y);
    Ok(Outcome::within(&out, stats, r_err.max(y_err), tol))
}

/// Softmax of a seeded random `m × n` matrix of logits in [−8, 8], checked against fp64
/// (1e-5 relative for f32, 1e-2 for bf16, whose reference sees the same rounded inputs).
pub fn softmax_case(
    device: &Device,
    dtype: Dtype,
    (m, n): (u32, u32),
    seed: u64,
) -> Result<Outcome, LaunchError> {
    let mut rng = Rng(seed.max(1));
    let round = |v: f32| dtype.round(v);
    let x: Vec<f32> = (0..m * n).map(|_| round(8.0 * rng.f32())).collect();
    let (y, stats) = crate::rows::softmax::host::softmax(device, &x, (m, n), dtype)?;
    let want = crate::rows::softmax::host::reference(&x, (m, n));
    let tol = row_tolerance(dtype);
    Ok(Outcome::within(
        &y,
        stats,
        max_relative_error(&y, &want),
        tol,
    ))
}

/// Runs the LDS probe over the XOR (`swizzled`) or the plain layout.
pub fn run_lds_probe(device: &Device, swizzled: bool) -> Result<Outcome, LaunchError> {
    use crate::probes::lds_probe::{reference, LdsProbePlain, LdsProbeXor};
    let mut out = DeviceBuffer::<u16>::zeros(device, 128 * 8)?;
    let cfg = LaunchConfig::new(1, 32);
    let stats = if swizzled {
        LdsProbeXor::launch(device, cfg, &mut out)?
    } else {
        LdsProbePlain::launch(device, cfg, &mut out)?
    };
    let got = out.to_vec()?;
    let mismatch = first_difference(&got, &reference());
    Ok(Outcome {
        output: got.iter().map(|&v| v as u32).collect(),
        stats,
        mismatch,
    })
}

/// Runs bank-probe with stride `stride` and width `width`.
pub fn run_bank_probe(device: &Device, stride: u32, width: u32) -> Result<Outcome, LaunchError> {
    bank_probe::check_parameters(stride, width)
        .map_err(|m| LaunchError::invalid(ck_core::rules::PROBE_PARAMETERS, m))?;
    let mut out = DeviceBuffer::<u32>::zeros(device, (bank_probe::THREADS * width / 4) as usize)?;
    let stats = BankProbe::launch(
        device,
        LaunchConfig::new(1, bank_probe::THREADS),
        &mut out,
        stride,
        width,
    )?;
    let got = out.to_vec()?;
    let mismatch = first_difference(&got, &bank_probe::reference(stride, width));
    Ok(Outcome {
        output: got,
        stats,
        mismatch,
    })
}

/// One kernel run on two devices.
#[derive(Debug, Clone)]
pub struct CrossCheck {
    /// Kernel and parameters.
    pub case: String,
    /// Both outputs have the same bits.
    pub identical: bool,
    /// Reference mismatches on either device, or a difference between them beyond the case's
    /// tolerance (bitwise for integer and copy kernels).
    pub problems: Vec<String>,
    /// Statistics on the first device (the emulator's counters).
    pub first: LaunchStats,
    /// Statistics on the second device (GPU time).
    pub second: LaunchStats,
}

/// Runs every exercise (several sizes), RMSNorm on odd shapes and every bank-probe case on both
/// devices. Integer and copy kernels must agree bit for bit; float kernels within their
/// tolerance (and both must match the reference).
pub fn cross_check(a: &Device, b: &Device) -> Result<Vec<CrossCheck>, LaunchError> {
    let mut out = Vec::new();
    let mut record = |case: String, ra: Outcome, rb: Outcome, tolerance: f64| {
        let mut problems = Vec::new();
        if let Some(m) = &ra.mismatch {
            problems.push(format!("{}: {m}", a.name()));
        }
        if let Some(m) = &rb.mismatch {
            problems.push(format!("{}: {m}", b.name()));
        }
        let identical = ra.output == rb.output;
        if !identical && tolerance > 0.0 {
            let fa: Vec<f32> = ra.output.iter().map(|&v| f32::from_bits(v)).collect();
            let fb: Vec<f64> = rb
                .output
                .iter()
                .map(|&v| f32::from_bits(v) as f64)
                .collect();
            let d = max_relative_error(&fa, &fb);
            if d > tolerance {
                problems.push(format!(
                    "devices differ by {d:.3e} (tolerance {tolerance:e})"
                ));
            }
        } else if !identical {
            problems.push("outputs differ".into());
        }
        out.push(CrossCheck {
            case,
            identical,
            problems,
            first: ra.stats,
            second: rb.stats,
        });
    };
    for kernel in [
        "reverse",
        "block-sum",
        "histogram",
        "copy",
        "add",
        "multicast",
    ] {
        for n in [1u32, 1000, 4096] {
            let seed = 0x5eed + n as u64;
            record(
                format!("{kernel} n={n}"),
                run_exercise(a, kernel, n, seed)?,
                run_exercise(b, kernel, n, seed)?,
                0.0,
            );
        }
    }
    for dtype in [Dtype::F32, Dtype::Bf16] {
        let (name, tol) = (dtype.name(), row_tolerance(dtype));
        // 11×1024 and 2×8192 fill their tiles: bf16 takes the unpadded kernels there.
        for (m, n) in [
            (1u32, 1u32),
            (3, 1000),
            (257, 4099),
            (2, 9000),
            (11, 1024),
            (2, 8192),
        ] {
            let case = format!("rmsnorm {name} {m}x{n}");
            record(
                case,
                rmsnorm_case(a, dtype, (m, n), 7)?,
                rmsnorm_case(b, dtype, (m, n), 7)?,
                tol,
            );
            record(
                format!("layernorm {name} {m}x{n}"),
                layernorm_case(a, dtype, (m, n), 7)?,
                layernorm_case(b, dtype, (m, n), 7)?,
                tol,
            );
            record(
                format!("softmax {name} {m}x{n}"),
                softmax_case(a, dtype, (m, n), 7)?,
                softmax_case(b, dtype, (m, n), 7)?,
                tol,
            );
            record(
                format!("add-rmsnorm {name} {m}x{n}"),
                add_rmsnorm_case(a, dtype, (m, n), 7)?,
                add_rmsnorm_case(b, dtype, (m, n), 7)?,
                tol,
            );
        }
    }
    gemm::cross_check_cases(a, b, &mut record)?;
    // Both head dims, causal with Sq ≠ Sk (rows above the corner see no key), grouped heads.
    for (sq, sk, head_dim, causal) in [
        (1u32, 1u32, 64u32, false),
        (130, 257, 64, true),
        (257, 130, 128, true),
        (17, 300, 128, false),
    ] {
        let shape = Shape {
            batch: 2,
            heads: 2,
            kv_heads: 1,
            sq,
            sk,
            head_dim,
        };
        let options = Options {
            causal,
            scale: None,
        };
        let mask = if causal { " causal" } else { "" };
        record(
            format!("attention {sq}x{sk} d{head_dim}{mask}"),
            attention_case(a, shape, options, 17)?,
            attention_case(b, shape, options, 17)?,
            // exp2 is approximate on the GPU: P, rounded to bf16, may differ by an ulp.
            attention::O_TOLERANCE,
        );
    }
    for swizzled in [true, false] {
        let case = format!("lds-probe {}", if swizzled { "xor" } else { "plain" });
        record(
            case,
            run_lds_probe(a, swizzled)?,
            run_lds_probe(b, swizzled)?,
            0.0,
        );
    }
    for width in [4u32, 8, 16] {
        for stride in [1u32, 2, 4, 8, 16, 32, 33] {
            let case = format!("bank-probe W={width} S={stride}");
            record(
                case,
                run_bank_probe(a, stride, width)?,
                run_bank_probe(b, stride, width)?,
                0.0,
            );
        }
    }
    Ok(out)
}
