//! The attention check: a seeded problem on a device against the fp64 reference.

use super::{norm_relative_error, Outcome, Rng};
use crate::attention::host::{attention, reference, Options, Shape};
use ck_core::device::Bf16;
use ck_core::host::{Device, LaunchError};

/// O within 1e-2 norm-wise of fp64 on the bf16-rounded inputs (bf16 O and P), the LSE within
/// 1e-3 (relative to max(1, |LSE|)).
pub const O_TOLERANCE: f64 = 1e-2;
/// See [`O_TOLERANCE`].
pub const LSE_TOLERANCE: f64 = 1e-3;

/// Attention of seeded random Q, K, V in [−1, 1] (Q in [−2, 2], for peaked rows), rounded to
/// bf16; the output is O's bits then the LSE's.
pub fn attention_case(
    device: &Device,
    shape: Shape,
    options: Options,
    seed: u64,
) -> Result<Outcome, LaunchError> {
    let mut rng = Rng(seed.max(1));
    let mut random = |len: usize, amp: f32| -> Vec<f32> {
        (0..len)
            .map(|_| Bf16::from_f32(amp * rng.f32()).to_f32())
            .collect()
    };
    let (q, k, v) = (
        random(shape.q_len(), 2.0),
        random(shape.kv_len(), 1.0),
        random(shape.kv_len(), 1.0),
    );
    let (o, lse, stats) = attention(device, (&q, &k, &v), shape, options)?;
    let (want_o, want_lse) = reference((&q, &k, &v), shape, options);
    let o_err = norm_relative_error(&o, &want_o);
    let lse_bad = lse.iter().zip(&want_lse).position(|(&g, &w)| {
        if w == f64::NEG_INFINITY {
            g != f32::NEG_INFINITY
        } else {
            let within = (g as f64 - w).abs() <= LSE_TOLERANCE * w.abs().max(1.0);
            !within
        }
    });
    let mismatch = if o_err > O_TOLERANCE || o_err.is_nan() {
        Some(format!(
            "O: relative error {o_err:.3e} > {O_TOLERANCE:e} against fp64"
        ))
    } else {
        lse_bad.map(|i| format!("LSE of row {i}: {} against fp64 {}", lse[i], want_lse[i]))
    };
    Ok(Outcome {
        output: o.iter().chain(&lse).map(|v| v.to_bits()).collect(),
        stats,
        mismatch,
    })
}
