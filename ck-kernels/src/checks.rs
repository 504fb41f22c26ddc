//! Runs the exercise kernels on any device with seeded random inputs, checks them against their
//! CPU references, and compares two devices bit for bit (`ck run`, `ck cross-check`, the tests).

use crate::bank_probe::{self, BankProbe};
use crate::exercise::*;
use ck_core::host::{Device, DeviceBuffer, LaunchConfig, LaunchError, LaunchStats};

/// Kernels `ck run` and `ck cross-check` know (bank-probe takes its own parameters).
pub const EXERCISES: &[&str] = &["reverse", "block-sum", "histogram"];

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

/// A reproducible input generator.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn f32(&mut self) -> f32 {
        (self.next() % 2_000_001) as f32 / 1e6 - 1.0
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
                .map(|_| (rng.next() % 100_000) as u32)
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
        other => Err(LaunchError::invalid(
            "unknown-kernel",
            format!(
                "unknown kernel `{other}`; available: {}, bank-probe",
                EXERCISES.join(", ")
            ),
        )),
    }
}

/// Runs bank-probe with stride `stride` and width `width`.
pub fn run_bank_probe(device: &Device, stride: u32, width: u32) -> Result<Outcome, LaunchError> {
    bank_probe::check_parameters(stride, width)
        .map_err(|m| LaunchError::invalid("probe-parameters", m))?;
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
    /// Reference mismatches on either device.
    pub problems: Vec<String>,
    /// Statistics on the first device (the emulator's counters).
    pub first: LaunchStats,
    /// Statistics on the second device (GPU time).
    pub second: LaunchStats,
}

/// Runs every exercise (several sizes) and every bank-probe case on both devices.
pub fn cross_check(a: &Device, b: &Device) -> Result<Vec<CrossCheck>, LaunchError> {
    let mut out = Vec::new();
    let mut record = |case: String, ra: Outcome, rb: Outcome| {
        let mut problems = Vec::new();
        if let Some(m) = &ra.mismatch {
            problems.push(format!("{}: {m}", a.name()));
        }
        if let Some(m) = &rb.mismatch {
            problems.push(format!("{}: {m}", b.name()));
        }
        out.push(CrossCheck {
            case,
            identical: ra.output == rb.output,
            problems,
            first: ra.stats,
            second: rb.stats,
        });
    };
    for kernel in EXERCISES {
        for n in [1u32, 1000, 4096] {
            let seed = 0x5eed + n as u64;
            record(
                format!("{kernel} n={n}"),
                run_exercise(a, kernel, n, seed)?,
                run_exercise(b, kernel, n, seed)?,
            );
        }
    }
    for width in [4u32, 8, 16] {
        for stride in [1u32, 2, 4, 8, 16, 32, 33] {
            record(
                format!("bank-probe W={width} S={stride}"),
                run_bank_probe(a, stride, width)?,
                run_bank_probe(b, stride, width)?,
            );
        }
    }
    Ok(out)
}
