//! Runs the exercise kernels on any device with seeded random inputs, checks them against their
//! CPU references, and compares two devices bit for bit (`ck run`, `ck cross-check`, the tests).

mod attention;
mod decode;
mod gemm;

pub use attention::{varlen_case, VarlenCase};
pub use decode::{decode_case, DecodeCase};
pub use gemm::{gemm_bf16_case, gemm_grouped_case, gemm_tma_case, grouped_problems, moe_problems};

use crate::elementwise::{AddF32, CopyF32, TILE_F32};
use crate::gemm::choice::Bf16Kernel;
pub use crate::op::{max_relative_error, norm_relative_error, Outcome, Rng};
use crate::probes::bank_probe::{self, BankProbe};
use crate::probes::exercise::*;
use ck_core::device::Bf16;
use ck_core::host::{Device, DeviceBuffer, LaunchConfig, LaunchError, LaunchStats, TensorMap};
use ck_core::wgmma::SwizzleMode;

/// The decode exercise: GQA 32/8 heads of 128, a ragged batch of cached lengths `n`, `n / 2`,
/// 1 and 0, `sq` new tokens appended with half-split RoPE on the whole head.
fn decode_exercise(n: u32, page_size: Option<u32>, sq: u32, splits: Option<u32>) -> DecodeCase {
    use crate::attention::decode::host::{Options, Shape};
    DecodeCase {
        shape: Shape {
            batch: 4,
            heads: 32,
            kv_heads: 8,
            sq,
            head_dim: 128,
        },
        page_size,
        seqlens: vec![n as i32, n as i32 / 2, 1, 0],
        append: true,
        rope: Some((128, false)),
        options: Options {
            splits,
            ..Options::default()
        },
    }
}

/// Exercise kernels `ck run` and `ck cross-check` know besides the registry's operators
/// (bank-probe takes its own parameters); gemm-mma-sync runs a 257 × 129 × n product.
pub const EXERCISES: &[&str] = &[
    "reverse",
    "block-sum",
    "histogram",
    "copy",
    "add",
    "multicast",
    "gemm-mma-sync",
    "gemm-wgmma",
    "gemm-wgmma-n128",
    "gemm-grouped",
    "gemm-grouped-moe",
    "attention-decode",
    "lane-groups",
];

fn first_difference<T: PartialEq + std::fmt::Debug>(got: &[T], want: &[T]) -> Option<String> {
    if got.len() != want.len() {
        return Some(format!("{} elements, expected {}", got.len(), want.len()));
    }
    got.iter()
        .zip(want)
        .position(|(a, b)| a != b)
        .map(|i| format!("element {i}: {:?}, expected {:?}", got[i], want[i]))
}

/// CK's short-row RMSNorm configurations (`probes::lane_groups`, each declared for 64- and
/// 32-lane warps) on about `n` elements each: `y`, the rows' mean of squares and the tiles'
/// column sums, against fp64.
fn lane_groups_case(device: &Device, n: u32, rng: &mut Rng) -> Result<Outcome, LaunchError> {
    use crate::probes::lane_groups::host::{reference, CONFIGS};
    let (mut output, mut stats, mut mismatch) = (Vec::new(), LaunchStats::default(), None);
    for c in &CONFIGS {
        let (rows, cols) = c.tile;
        let m = n.div_ceil(rows * cols).max(1) * rows;
        let x: Vec<f32> = (0..m * cols).map(|_| rng.f32()).collect();
        let gamma: Vec<f32> = (0..cols).map(|_| 0.5 + rng.f32().abs()).collect();
        let (got, st) = c.run(device, &x, &gamma, m, 1e-6)?;
        let tile = (rows as usize, cols as usize);
        let want = reference(&x, &gamma, tile, 1e-6);
        // A column sum can cancel to near 0: its error is measured against the sum of the
        // magnitudes it adds (the sums of |x|), not against itself.
        let magnitudes: Vec<f32> = x.iter().map(|v| v.abs()).collect();
        let scale = reference(&magnitudes, &gamma, tile, 1e-6).column_sums;
        let sum_err = got
            .column_sums
            .iter()
            .zip(&want.column_sums)
            .zip(&scale)
            .map(|((&g, &w), &s)| (g as f64 - w).abs() / s.max(1e-30))
            .fold(0.0, crate::op::verify::worst);
        let worst = crate::op::verify::worst;
        let err = worst(
            worst(
                max_relative_error(&got.y, &want.y),
                max_relative_error(&got.mean_square, &want.mean_square),
            ),
            sum_err,
        );
        if (err.is_nan() || err > 1e-5) && mismatch.is_none() {
            mismatch = Some(format!("{}: relative error {err:.2e}", c.name));
        }
        let all = got.y.iter().chain(&got.mean_square).chain(&got.column_sums);
        output.extend(all.map(|v| v.to_bits()));
        stats = st;
    }
    Ok(Outcome {
        output,
        stats,
        mismatch,
    })
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
        "gemm-mma-sync" => gemm_bf16_case(
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
        "lane-groups" => lane_groups_case(device, n, &mut rng),
        "attention-decode" => decode_case(
            device,
            &decode_exercise(n.clamp(1, 1 << 17), Some(64), 1, None),
            seed,
        ),
        other => Err(LaunchError::invalid(
            ck_core::rules::UNKNOWN_KERNEL,
            format!(
                "unknown kernel `{other}`; available: {}, bank-probe, and every operator \
                 (`ck run --help`)",
                EXERCISES.join(", ")
            ),
        )),
    }
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

/// How far apart two outputs are (`max_relative_error`, `norm_relative_error`).
type Measure = fn(&[f32], &[f64]) -> f64;

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

/// Runs every exercise (several sizes), every operator of the registry on its cases and every
/// bank-probe case on both devices. Integer and copy kernels must agree bit for bit; float kernels within their
/// tolerance (and both must match the reference).
pub fn cross_check(a: &Device, b: &Device) -> Result<Vec<CrossCheck>, LaunchError> {
    let out = std::cell::RefCell::new(Vec::new());
    // Two devices' outputs agree within `tolerance` by `measure`.
    let record_by = |case: String, ra: Outcome, rb: Outcome, tolerance: f64, measure: Measure| {
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
            let d = measure(&fa, &fb);
            if d > tolerance {
                problems.push(format!(
                    "devices differ by {d:.3e} (tolerance {tolerance:e})"
                ));
            }
        } else if !identical {
            problems.push("outputs differ".into());
        }
        out.borrow_mut().push(CrossCheck {
            case,
            identical,
            problems,
            first: ra.stats,
            second: rb.stats,
        });
    };
    // Every case but the registry's: element by element.
    let mut record =
        |case, ra, rb, tolerance| record_by(case, ra, rb, tolerance, max_relative_error);
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
    for op in crate::registry::operators() {
        for &dtype in op.dtypes {
            for sizes in (op.cases)(None) {
                let case = format!(
                    "{} {} {}",
                    op.command(),
                    dtype.name(),
                    sizes.describe(&op.params[0])
                );
                // In the measure of the operator's own tolerance.
                record_by(
                    case,
                    crate::op::check(a, op, dtype, &sizes, 7)?,
                    crate::op::check(b, op, dtype, &sizes, 7)?,
                    (op.tolerance)(dtype),
                    op.agreement,
                );
            }
        }
    }
    gemm::cross_check_cases(a, b, &mut record)?;
    // CK's lane-group RMSNorm configurations: f32 arithmetic with rsqrt, as the row operators.
    for n in [1u32, 4096] {
        let seed = 0x5eed + n as u64;
        record(
            format!("lane-groups n={n}"),
            run_exercise(a, "lane-groups", n, seed)?,
            run_exercise(b, "lane-groups", n, seed)?,
            1e-6,
        );
    }
    // Decode: contiguous and paged, one and four new tokens appended, the keys split among 2
    // and 3 items — a count fixed for both devices: the heuristic's depends on the device's
    // multiprocessors, and another count is another order of summation (bf16 O rounded a step
    // apart, job 39).
    for (page_size, sq, splits) in [(None, 1u32, Some(2)), (Some(16), 4, Some(3))] {
        let case = decode_exercise(700, page_size, sq, splits);
        record(
            format!("attention-decode page={page_size:?} sq={sq} splits={splits:?}"),
            decode_case(a, &case, 23)?,
            decode_case(b, &case, 23)?,
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
    Ok(out.into_inner())
}
