//! Checking results: the seeded input generator ([`Rng`]), a run's [`Outcome`], and the error
//! measures against an fp64 reference.

use ck_core::host::LaunchStats;

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

    /// `len` values `offset + scale · [−1, 1]`.
    pub fn values(&mut self, len: usize, scale: f32, offset: f32) -> Vec<f32> {
        (0..len).map(|_| offset + scale * self.f32()).collect()
    }
}

/// `‖got − want‖ / ‖want‖` (Frobenius): the error measure for reductions over long sums, where
/// single elements can cancel to near zero.
pub fn norm_relative_error(got: &[f32], want: &[f64]) -> f64 {
    if got.len() != want.len() {
        return f64::NAN; // an output missing or of another length
    }
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
/// floor of 1e-3 of the largest magnitude); NaN if `got` has a NaN (an element never written).
pub fn max_relative_error(got: &[f32], want: &[f64]) -> f64 {
    if got.len() != want.len() {
        return f64::NAN; // an output missing or of another length
    }
    let scale = want.iter().fold(0f64, |m, v| m.max(v.abs())).max(1e-30);
    got.iter()
        .zip(want)
        .map(|(&g, &w)| (g as f64 - w).abs() / w.abs().max(scale * 1e-3))
        .fold(0.0, worst)
}

/// `‖got − want‖ / ‖size‖`: the error of a difference of terms (a gradient such as
/// `r·g·dy − x·r³·dot/N`) relative to the size of its terms, `size` element by element, where
/// the difference itself may cancel to near zero; NaN if `got` has a NaN or another length.
pub fn norm_error_relative_to(got: &[f32], want: &[f64], size: &[f64]) -> f64 {
    if got.len() != want.len() || got.iter().any(|g| g.is_nan()) {
        return f64::NAN;
    }
    let num: f64 = got
        .iter()
        .zip(want)
        .map(|(&g, &w)| (g as f64 - w).powi(2))
        .sum();
    let den: f64 = size.iter().map(|s| s * s).sum();
    (num / den.max(1e-300)).sqrt()
}

/// The larger of two errors, NaN if either is (`f64::max` would drop it).
pub fn worst(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
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
    pub fn within(output: &[f32], stats: LaunchStats, err: f64, tol: f64) -> Outcome {
        let mismatch = (err > tol || err.is_nan())
            .then(|| format!("relative error {err:.3e} > {tol:e} against fp64"));
        Outcome {
            output: output.iter().map(|v| v.to_bits()).collect(),
            stats,
            mismatch,
        }
    }
}
