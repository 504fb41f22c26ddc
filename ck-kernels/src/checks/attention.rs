//! The attention check: a seeded problem on a device against the fp64 reference.

use super::{norm_relative_error, Outcome, Rng};
use crate::attention::varlen;
use ck_core::device::Bf16;
use ck_core::host::{Device, LaunchError};

pub use crate::attention::describe::{LSE_TOLERANCE, O_TOLERANCE};

/// O's error, if past [`O_TOLERANCE`] (or NaN).
fn o_mismatch(o_err: f64) -> Option<String> {
    (o_err > O_TOLERANCE || o_err.is_nan())
        .then(|| format!("O: relative error {o_err:.3e} > {O_TOLERANCE:e} against fp64"))
}

/// A log-sum-exp off the fp64 one by more than [`LSE_TOLERANCE`] (relative to max(1, |LSE|)),
/// NaN, or not −∞ where a row sees no key.
fn lse_differs(got: f32, want: f64) -> bool {
    if want == f64::NEG_INFINITY {
        got != f32::NEG_INFINITY
    } else {
        got.is_nan() || (got as f64 - want).abs() > LSE_TOLERANCE * want.abs().max(1.0)
    }
}

/// One packed (varlen) problem: the heads, each sequence's (query, key) lengths, and `tail`
/// rows past the last sequence in Q, K and V (what a caller's padded buffer holds there: NaN
/// queries, infinite keys and values, which no sequence may see).
#[derive(Clone, Debug)]
pub struct VarlenCase {
    pub heads: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
    pub seqs: Vec<(u32, u32)>,
    pub tail: u32,
    pub options: varlen::Options,
}

impl VarlenCase {
    /// The bounds `cu_seqlens_q`, `cu_seqlens_k`: each sequence's first row, then the end.
    pub fn bounds(&self) -> (Vec<i32>, Vec<i32>) {
        let prefix = |len: fn(&(u32, u32)) -> u32| {
            let mut at = 0i32;
            let mut cu = vec![0];
            for s in &self.seqs {
                at += len(s) as i32;
                cu.push(at);
            }
            cu
        };
        (prefix(|s| s.0), prefix(|s| s.1))
    }

    pub fn shape(&self) -> varlen::Shape {
        let sum = |len: fn(&(u32, u32)) -> u32| self.seqs.iter().map(len).sum::<u32>() + self.tail;
        varlen::Shape {
            batch: self.seqs.len() as u32,
            heads: self.heads,
            kv_heads: self.kv_heads,
            total_q: sum(|s| s.0),
            total_k: sum(|s| s.1),
            max_sq: self.seqs.iter().map(|s| s.0).max().unwrap_or(0),
            head_dim: self.head_dim,
        }
    }
}

/// A packed problem of seeded random Q, K, V (q in [−2, 2], k and v in [−1, 1]) against the per-sequence
/// fp64 reference, over the sequences' rows; the tail's O rows must stay unwritten (NaN). The
/// output is O's bits then the LSE's.
pub fn varlen_case(device: &Device, case: &VarlenCase, seed: u64) -> Result<Outcome, LaunchError> {
    let shape = case.shape();
    let (cu_q, cu_k) = case.bounds();
    let mut rng = Rng(seed.max(1));
    let (hd, used_q, used_k) = (
        shape.head_dim as usize,
        cu_q[shape.batch as usize] as usize,
        cu_k[shape.batch as usize] as usize,
    );
    // `rows` rows of `heads` heads, the first `used` random (in [−amp, amp], bf16), the rest
    // `tail`.
    let mut random = |(rows, heads, used): (u32, u32, usize), amp: f32, tail: f32| -> Vec<f32> {
        let row = heads as usize * hd;
        (0..rows as usize * row)
            .map(|i| {
                if i / row < used {
                    Bf16::from_f32(amp * rng.f32()).to_f32()
                } else {
                    tail
                }
            })
            .collect()
    };
    let queries = (shape.total_q, shape.heads, used_q);
    let keys = (shape.total_k, shape.kv_heads, used_k);
    let (q, k, v) = (
        random(queries, 2.0, f32::NAN),
        random(keys, 1.0, f32::INFINITY),
        random(keys, 1.0, f32::INFINITY),
    );
    let (o, lse, stats) =
        varlen::attention(device, (&q, &k, &v), (&cu_q, &cu_k), shape, case.options)?;
    let (want_o, want_lse) = varlen::reference((&q, &k, &v), (&cu_q, &cu_k), shape, case.options);
    let row_len = shape.heads as usize * hd;
    let (seq_o, tail_o) = (&o[..used_q * row_len], &o[used_q * row_len..]);
    let o_err = norm_relative_error(seq_o, &want_o[..used_q * row_len]);
    // The LSE is [heads, total_q]: entry i is row i mod total_q.
    let in_sequence = |i: usize| i % (shape.total_q as usize) < used_q;
    let lse_bad = (0..lse.len()).find(|&i| in_sequence(i) && lse_differs(lse[i], want_lse[i]));
    let written = tail_o.iter().position(|x| !x.is_nan()).map(|i| {
        format!(
            "O element {} lies past the last sequence but was written ({})",
            used_q * row_len + i,
            tail_o[i]
        )
    });
    let mismatch = o_mismatch(o_err)
        .or(written)
        .or_else(|| lse_bad.map(|i| format!("LSE {i}: {} against fp64 {}", lse[i], want_lse[i])));
    Ok(Outcome {
        output: o.iter().chain(&lse).map(|v| v.to_bits()).collect(),
        stats,
        mismatch,
    })
}
