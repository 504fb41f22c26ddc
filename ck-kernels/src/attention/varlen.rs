//! Host side of attention over packed sequences of different lengths (FlashAttention's varlen
//! contract, `attention_varlen_d64` / `_d128`): the shape and its checks, the launch, the
//! bounds check a host copy allows, and the fp64 reference as a loop over the sequences.
//!
//! Sequence `b` holds query rows `cu_q[b]..cu_q[b + 1]` of Q `[total_q, heads, D]` and key rows
//! `cu_k[b]..cu_k[b + 1]` of K and V `[total_k, kv_heads, D]`; its O rows are the same rows of
//! O `[total_q, heads, D]`, its log-sum-exps `lse[h, cu_q[b]..]` of `[heads, total_q]`. A causal
//! mask is aligned to each sequence's bottom-right corner, as the fixed-length kernel's. The
//! grid walks only the sequences' own 128-row tiles: no padding work.
//!
//! The bounds live on the device and are read by the kernel, so a launch cannot refuse bad
//! ones: a sequence whose bounds decrease or pass a tensor's end gets NaN rows (those of its
//! rows that lie in O), never a plausible result. [`attention`], which has the bounds on the
//! host, refuses them (`bad-seqlens`).

use super::host::{
    check_heads, check_len, check_scale, heads_map, reference as dense_reference, scale_or_default,
    upload_bf16,
};
use super::*;
use ck_core::host::{Device, DeviceBuffer, LaunchConfig, LaunchError, LaunchStats};

/// A packed problem's sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Sequences (`cu_q` and `cu_k` have `batch + 1` entries).
    pub batch: u32,
    /// Query heads, and key/value heads (dividing them).
    pub heads: u32,
    pub kv_heads: u32,
    /// Rows of Q (and O), and of K and V.
    pub total_q: u32,
    pub total_k: u32,
    /// The longest sequence's queries: it sizes the grid only (a smaller value is not wrong,
    /// just slower).
    pub max_sq: u32,
    /// Head dim (64 or 128).
    pub head_dim: u32,
}

/// Masking and scale.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Options {
    /// Query row `i` of a sequence sees its keys `j ≤ i + sk − sq` (bottom-right aligned).
    pub causal: bool,
    /// The scores' scale; `1 / √head_dim` when `None`.
    pub scale: Option<f32>,
}

impl Shape {
    /// Elements of Q (and O).
    pub fn q_len(&self) -> usize {
        self.total_q as usize * self.heads as usize * self.head_dim as usize
    }

    /// Elements of K (and V).
    pub fn kv_len(&self) -> usize {
        self.total_k as usize * self.kv_heads as usize * self.head_dim as usize
    }

    /// Elements of the log-sum-exp, `[heads, total_q]`.
    pub fn lse_len(&self) -> usize {
        self.heads as usize * self.total_q as usize
    }

    /// The checks every launch makes: a supported head dim, key/value heads that divide the
    /// query heads, tensors the kernels' 32-bit indices reach.
    pub fn check(&self) -> Result<(), LaunchError> {
        check_heads(self.head_dim, self.heads, self.kv_heads)?;
        if self.q_len().max(self.kv_len()) >= 1 << 32 || self.batch >= 1 << 31 {
            return Err(LaunchError::invalid(
                ck_core::rules::TOO_LARGE,
                format!(
                    "Q has {} elements and K {} over {} sequences; the kernels index with 32 bits (split the batch)",
                    self.q_len(),
                    self.kv_len(),
                    self.batch
                ),
            ));
        }
        Ok(())
    }

    /// The scale used.
    fn scale(&self, options: &Options) -> f32 {
        scale_or_default(options.scale, self.head_dim)
    }
}

/// The bounds `cu_q` and `cu_k` on the host: `batch + 1` entries each, from 0 up, never
/// decreasing, ending within their tensors.
pub fn check_bounds(cu_q: &[i32], cu_k: &[i32], shape: &Shape) -> Result<(), LaunchError> {
    for (name, cu, total) in [
        ("cu_seqlens_q", cu_q, shape.total_q),
        ("cu_seqlens_k", cu_k, shape.total_k),
    ] {
        if cu.len() != shape.batch as usize + 1 {
            return Err(LaunchError::invalid(
                ck_core::rules::SHAPE_MISMATCH,
                format!(
                    "{name} has {} entries; {} sequences need {} (the first row of each, then the end)",
                    cu.len(),
                    shape.batch,
                    shape.batch + 1
                ),
            ));
        }
        let bad = |why: String| {
            Err(LaunchError::invalid(
                ck_core::rules::BAD_SEQLENS,
                format!("{name} {why}; give each sequence's first row, in order, then the end"),
            ))
        };
        if cu[0] < 0 {
            return bad(format!("starts at {}", cu[0]));
        }
        if let Some(b) = (0..cu.len() - 1).find(|&b| cu[b + 1] < cu[b]) {
            return bad(format!(
                "decreases at sequence {b} ({} then {})",
                cu[b],
                cu[b + 1]
            ));
        }
        if cu[cu.len() - 1] as i64 > total as i64 {
            return bad(format!(
                "ends at row {} of a tensor of {total} rows",
                cu[cu.len() - 1]
            ));
        }
    }
    Ok(())
}

/// Words of the scheduler's counter ([`launch`]).
pub const COUNTER_WORDS: usize = 2;

/// Launches the kernel for `shape.head_dim` on device buffers: `o` `[total_q, heads, D]` and
/// `lse` `[heads, total_q]` receive O and the row log-sum-exp of every sequence's rows (rows
/// of no sequence are not written). `counter` ([`COUNTER_WORDS`] zeros) hands the items to the
/// blocks; the kernel leaves it zero again, so launches queued one after another (on one
/// stream) may share it — concurrent ones may not.
#[allow(clippy::too_many_arguments)]
pub fn launch(
    device: &Device,
    (q, k, v): (
        &DeviceBuffer<Bf16>,
        &DeviceBuffer<Bf16>,
        &DeviceBuffer<Bf16>,
    ),
    (cu_q, cu_k): (&DeviceBuffer<i32>, &DeviceBuffer<i32>),
    counter: &mut DeviceBuffer<i32>,
    o: &mut DeviceBuffer<Bf16>,
    lse: &mut DeviceBuffer<f32>,
    shape: Shape,
    options: Options,
) -> Result<LaunchStats, LaunchError> {
    shape.check()?;
    check_len("Q", q.len(), shape.q_len(), &shape)?;
    check_len("K", k.len(), shape.kv_len(), &shape)?;
    check_len("V", v.len(), shape.kv_len(), &shape)?;
    check_len("O", o.len(), shape.q_len(), &shape)?;
    check_len("LSE", lse.len(), shape.lse_len(), &shape)?;
    let bounds = shape.batch as usize + 1;
    check_len("cu_seqlens_q", cu_q.len(), bounds, &shape)?;
    check_len("cu_seqlens_k", cu_k.len(), bounds, &shape)?;
    check_len("the counter", counter.len(), COUNTER_WORDS, &shape)?;
    let scale = shape.scale(&options);
    check_scale(scale)?;
    if shape.batch == 0 || shape.total_q == 0 {
        return Ok(LaunchStats::default());
    }
    let Shape { heads, .. } = shape;
    let group = heads / shape.kv_heads;
    // The items if every sequence were the longest: at most one block per SM, each asking
    // the counter for its next item (blocks that find none leave).
    let bound = (shape.batch * shape.max_sq.div_ceil(BM)).saturating_mul(heads);
    let blocks = bound.clamp(1, device.multiprocessors().max(1));
    let cfg = LaunchConfig::new(blocks, THREADS);
    let d = shape.head_dim;
    // [head dim, total, heads, 1]: a row's heads side by side.
    let rows_of = |x, total: u32, n: u32| {
        let (row, head) = (n as u64 * d as u64, d as u64);
        heads_map(x, [d, total, n, 1], (row, head, total as u64 * row), BN)
    };
    let qm = rows_of(q, shape.total_q, heads)?;
    // With no keys the kernel reads neither K nor V, but a tensor map has at least one row:
    // describe Q then.
    let (km, vm) = if shape.total_k == 0 {
        (
            rows_of(q, shape.total_q, heads)?,
            rows_of(q, shape.total_q, heads)?,
        )
    } else {
        let n = shape.kv_heads;
        (rows_of(k, shape.total_k, n)?, rows_of(v, shape.total_k, n)?)
    };
    // The two kernels take the same arguments.
    macro_rules! launch_as {
        ($kernel:ident) => {
            $kernel::launch(
                device,
                cfg,
                &qm,
                &km,
                &vm,
                o,
                lse,
                cu_q,
                cu_k,
                counter,
                shape.total_q,
                shape.total_k,
                shape.batch,
                heads,
                group,
                scale * LOG2_E,
                options.causal,
            )
        };
    }
    match shape.head_dim {
        64 => launch_as!(AttentionVarlenD64),
        _ => launch_as!(AttentionVarlenD128),
    }
}

/// O and the log-sum-exp of packed `q`, `k`, `v` (f32 values rounded to bf16 before the kernel;
/// O widened back to f32) with the bounds checked first ([`check_bounds`]). Rows of no sequence
/// come back as NaN.
pub fn attention(
    device: &Device,
    (q, k, v): (&[f32], &[f32], &[f32]),
    (cu_q, cu_k): (&[i32], &[i32]),
    shape: Shape,
    options: Options,
) -> Result<(Vec<f32>, Vec<f32>, LaunchStats), LaunchError> {
    shape.check()?;
    check_len("Q", q.len(), shape.q_len(), &shape)?;
    check_len("K", k.len(), shape.kv_len(), &shape)?;
    check_len("V", v.len(), shape.kv_len(), &shape)?;
    check_bounds(cu_q, cu_k, &shape)?;
    let upload = |x| upload_bf16(device, x);
    let (qd, kd, vd) = (upload(q)?, upload(k)?, upload(v)?);
    let (cqd, ckd) = (
        DeviceBuffer::from_slice(device, cu_q)?,
        DeviceBuffer::from_slice(device, cu_k)?,
    );
    let mut od = DeviceBuffer::from_slice(device, &vec![Bf16(0x7fc0); shape.q_len()])?;
    let mut ld = DeviceBuffer::from_slice(device, &vec![f32::NAN; shape.lse_len()])?;
    let mut counter = DeviceBuffer::zeros(device, COUNTER_WORDS)?;
    let st = launch(
        device,
        (&qd, &kd, &vd),
        (&cqd, &ckd),
        &mut counter,
        &mut od,
        &mut ld,
        shape,
        options,
    )?;
    let o = od.to_vec()?.iter().map(|x| x.to_f32()).collect();
    Ok((o, ld.to_vec()?, st))
}

/// The fp64 reference: each sequence cut out of the packed tensors and given to the
/// fixed-length reference ([`super::host::reference`]) as a batch of one, its O and LSE put
/// back. Rows of no sequence are NaN. The bounds must be ones [`check_bounds`] accepts.
pub fn reference(
    (q, k, v): (&[f32], &[f32], &[f32]),
    (cu_q, cu_k): (&[i32], &[i32]),
    shape: Shape,
    options: Options,
) -> (Vec<f64>, Vec<f64>) {
    let (h, hk, d) = (
        shape.heads as usize,
        shape.kv_heads as usize,
        shape.head_dim as usize,
    );
    let total_q = shape.total_q as usize;
    let mut o = vec![f64::NAN; shape.q_len()];
    let mut lse = vec![f64::NAN; shape.lse_len()];
    // Rows `start..start + len` of a `[total, n, d]` tensor as `[n, len, d]`.
    let heads_first = |x: &[f32], n: usize, start: usize, len: usize| -> Vec<f32> {
        let mut out = Vec::with_capacity(n * len * d);
        for head in 0..n {
            for row in start..start + len {
                out.extend_from_slice(&x[(row * n + head) * d..][..d]);
            }
        }
        out
    };
    for b in 0..shape.batch as usize {
        let (q0, sq) = (cu_q[b] as usize, (cu_q[b + 1] - cu_q[b]) as usize);
        let (k0, sk) = (cu_k[b] as usize, (cu_k[b + 1] - cu_k[b]) as usize);
        let one = super::host::Shape {
            batch: 1,
            heads: shape.heads,
            kv_heads: shape.kv_heads,
            sq: sq as u32,
            sk: sk as u32,
            head_dim: shape.head_dim,
        };
        let dense = super::host::Options {
            causal: options.causal,
            scale: options.scale,
            o_seq_first: false,
        };
        let (so, slse) = dense_reference(
            (
                &heads_first(q, h, q0, sq),
                &heads_first(k, hk, k0, sk),
                &heads_first(v, hk, k0, sk),
            ),
            one,
            dense,
        );
        for head in 0..h {
            for i in 0..sq {
                let row = q0 + i;
                o[(row * h + head) * d..][..d].copy_from_slice(&so[(head * sq + i) * d..][..d]);
                lse[head * total_q + row] = slse[head * sq + i];
            }
        }
    }
    (o, lse)
}
