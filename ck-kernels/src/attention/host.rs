//! Host side of attention: the problem's shape and its checks, the launch, and the fp64
//! reference (a plain softmax per row, not the online one).

use super::*;
use ck_core::host::{Device, DeviceBuffer, LaunchConfig, LaunchError, LaunchStats, TensorMap};
use ck_core::wgmma::SwizzleMode;

/// An attention problem: Q `[batch, heads, sq, head_dim]`, K and V
/// `[batch, kv_heads, sk, head_dim]`, O like Q, the log-sum-exp `[batch, heads, sq]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Batch size.
    pub batch: u32,
    /// Query heads.
    pub heads: u32,
    /// Key/value heads (dividing `heads`; query head `h` reads key/value head
    /// `h / (heads / kv_heads)`).
    pub kv_heads: u32,
    /// Query length.
    pub sq: u32,
    /// Key length.
    pub sk: u32,
    /// Head dim (64 or 128).
    pub head_dim: u32,
}

/// Masking, scale, and O's layout.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Options {
    /// Query row `i` sees keys `j ≤ i + Sk − Sq` (bottom-right aligned).
    pub causal: bool,
    /// The scores' scale; `1 / √head_dim` when `None`.
    pub scale: Option<f32>,
    /// O as `[batch, sq, heads, head_dim]` (the layout an output projection reads as
    /// `[batch · sq, heads · head_dim]`, no transpose) instead of Q's `[batch, heads, sq,
    /// head_dim]`.
    pub o_seq_first: bool,
}

impl Options {
    /// The scale used for head dim `d`.
    pub fn scale_for(&self, d: u32) -> f32 {
        scale_or_default(self.scale, d)
    }
}

impl Shape {
    /// Elements of Q (and O).
    pub fn q_len(&self) -> usize {
        self.batch as usize * self.heads as usize * self.sq as usize * self.head_dim as usize
    }

    /// Elements of K (and V).
    pub fn kv_len(&self) -> usize {
        self.batch as usize * self.kv_heads as usize * self.sk as usize * self.head_dim as usize
    }

    /// Elements of the log-sum-exp.
    pub fn lse_len(&self) -> usize {
        self.batch as usize * self.heads as usize * self.sq as usize
    }

    /// Multiply-adds × 2 of the two products, `4·B·H·Sq·Sk·D`, halved when causal (the
    /// convention of FlashAttention's and torch's benchmarks).
    pub fn flops(&self, causal: bool) -> f64 {
        let f = 4.0
            * self.batch as f64
            * self.heads as f64
            * self.sq as f64
            * self.sk as f64
            * self.head_dim as f64;
        if causal {
            f / 2.0
        } else {
            f
        }
    }

    /// The checks every launch makes: a supported head dim, key/value heads that divide the
    /// query heads, tensors the kernels' 32-bit indices reach.
    pub fn check(&self) -> Result<(), LaunchError> {
        check_heads(self.head_dim, self.heads, self.kv_heads)?;
        if self.q_len().max(self.kv_len()) >= 1 << 32 {
            return Err(LaunchError::invalid(
                ck_core::rules::TOO_LARGE,
                format!(
                    "Q has {} elements and K {}; the kernels index with 32 bits (split the batch)",
                    self.q_len(),
                    self.kv_len()
                ),
            ));
        }
        Ok(())
    }
}

/// The scores' scale every attention entry point uses: the one given, or `1 / √head_dim`.
pub fn scale_or_default(scale: Option<f32>, head_dim: u32) -> f32 {
    scale.unwrap_or(1.0 / (head_dim as f32).sqrt())
}

/// The head checks of every attention kernel (prefill and decode): a head dim of 64 or 128,
/// key/value heads that divide the query heads.
pub fn check_heads(head_dim: u32, heads: u32, kv_heads: u32) -> Result<(), LaunchError> {
    if head_dim != 64 && head_dim != 128 {
        return Err(LaunchError::invalid(
            ck_core::rules::HEAD_DIM_UNSUPPORTED,
            format!(
                "head_dim is {head_dim}; the attention kernels take 64 or 128 (pad the head dim with zeros to the next one)"
            ),
        ));
    }
    if kv_heads == 0 || !heads.is_multiple_of(kv_heads) {
        return Err(LaunchError::invalid(
            ck_core::rules::GQA_HEADS,
            format!(
                "{heads} query heads cannot share {kv_heads} key/value heads: the key/value heads must divide the query heads"
            ),
        ));
    }
    Ok(())
}

/// The scores' scale must be a positive finite number (the kernels take the max of scaled
/// scores as the scaled max).
pub fn check_scale(scale: f32) -> Result<(), LaunchError> {
    if scale.is_finite() && scale > 0.0 {
        return Ok(());
    }
    Err(LaunchError::invalid(
        ck_core::rules::BAD_SCALE,
        format!("the scale is {scale}; it must be a positive finite number"),
    ))
}

/// `len` elements where `shape` needs `expected` (`shape-mismatch` otherwise).
pub(super) fn check_len(
    what: &str,
    len: usize,
    expected: usize,
    shape: &impl core::fmt::Debug,
) -> Result<(), LaunchError> {
    if len == expected {
        return Ok(());
    }
    Err(LaunchError::invalid(
        ck_core::rules::SHAPE_MISMATCH,
        format!("{what} has {len} elements, but {shape:?} needs {expected}"),
    ))
}

/// Blocks of the grid for `items` items on `multiprocessors` SMs. Without a mask every item
/// costs the same, so one block per SM takes every SM-th item (persistent: the next item's
/// tiles are copied while the last one's output is written — H100, 16 × 16 heads of 1024:
/// 0.291 against 0.311 ms). Under a causal mask items cost from one key tile to all of them,
/// and a static split leaves some blocks with half again the mean (16 heads of 16384: 2.71
/// against 1.91 ms), so every item gets a block of its own and the hardware deals them out.
pub fn grid_blocks(items: u32, causal: bool, multiprocessors: u32) -> u32 {
    if causal {
        items
    } else {
        items.min(multiprocessors.max(1))
    }
}

/// Launches the kernel for `shape.head_dim` on device buffers: `o` and `lse` receive O and the
/// row log-sum-exp.
#[allow(clippy::too_many_arguments)]
pub fn launch(
    device: &Device,
    (q, k, v): (
        &DeviceBuffer<Bf16>,
        &DeviceBuffer<Bf16>,
        &DeviceBuffer<Bf16>,
    ),
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
    let scale = options.scale_for(shape.head_dim);
    check_scale(scale)?;
    if shape.lse_len() == 0 {
        return Ok(LaunchStats::default());
    }
    let Shape { sq, sk, heads, .. } = shape;
    let group = shape.heads / shape.kv_heads;
    let items = sq.div_ceil(BM) * shape.batch * heads;
    let blocks = grid_blocks(items, options.causal, device.multiprocessors());
    let cfg = LaunchConfig::new(blocks, THREADS);
    let sl = scale * LOG2_E;
    let causal = options.causal;
    let o_strides = if options.o_seq_first {
        (heads * shape.head_dim, shape.head_dim)
    } else {
        (shape.head_dim, sq * shape.head_dim)
    };
    let d = shape.head_dim as u64;
    // [head dim, seq, batch · heads] in 64-column panels of 128 rows.
    let heads_of = |x, seq: u32, n: u32| {
        TensorMap::dense(x, [d, seq as u64, n as u64], [64, BN, 1], SwizzleMode::B128)
    };
    let qm = heads_of(q, sq, shape.batch * heads)?;
    // With no keys the kernel reads neither K nor V (there is no key tile), but a tensor map
    // has at least one row: describe Q then.
    let (km, vm) = if sk == 0 {
        (
            heads_of(q, sq, shape.batch * heads)?,
            heads_of(q, sq, shape.batch * heads)?,
        )
    } else {
        let n = shape.batch * shape.kv_heads;
        (heads_of(k, sk, n)?, heads_of(v, sk, n)?)
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
                sq,
                sk,
                shape.batch,
                heads,
                group,
                sl,
                causal,
                o_strides.0,
                o_strides.1,
            )
        };
    }
    match shape.head_dim {
        64 => launch_as!(AttentionD64),
        _ => launch_as!(AttentionD128),
    }
}

/// `x` rounded to bf16 on `device` (the host-value entry points of the attention kernels).
pub(super) fn upload_bf16(device: &Device, x: &[f32]) -> Result<DeviceBuffer<Bf16>, LaunchError> {
    let rounded: Vec<Bf16> = x.iter().map(|&v| Bf16::from_f32(v)).collect();
    DeviceBuffer::from_slice(device, &rounded)
}

/// O and the log-sum-exp of `q`, `k`, `v` (f32 values rounded to bf16 before the kernel; O
/// widened back to f32).
pub fn attention(
    device: &Device,
    (q, k, v): (&[f32], &[f32], &[f32]),
    shape: Shape,
    options: Options,
) -> Result<(Vec<f32>, Vec<f32>, LaunchStats), LaunchError> {
    shape.check()?;
    check_len("Q", q.len(), shape.q_len(), &shape)?;
    check_len("K", k.len(), shape.kv_len(), &shape)?;
    check_len("V", v.len(), shape.kv_len(), &shape)?;
    let upload = |x| upload_bf16(device, x);
    let (qd, kd, vd) = (upload(q)?, upload(k)?, upload(v)?);
    let mut od = DeviceBuffer::from_slice(device, &vec![Bf16(0x7fc0); shape.q_len()])?;
    let mut ld = DeviceBuffer::from_slice(device, &vec![f32::NAN; shape.lse_len()])?;
    let st = launch(device, (&qd, &kd, &vd), &mut od, &mut ld, shape, options)?;
    let o = od.to_vec()?.iter().map(|x| x.to_f32()).collect();
    Ok((o, ld.to_vec()?, st))
}

/// The fp64 reference: for every query row, the scores `scale · q·k` of the keys it sees, a
/// plain softmax over them, and `Σ p·v`; the log-sum-exp `ln Σ exp(score)`. A row that sees
/// no key gives O = 0 and LSE = −∞.
pub fn reference(
    (q, k, v): (&[f32], &[f32], &[f32]),
    shape: Shape,
    options: Options,
) -> (Vec<f64>, Vec<f64>) {
    let Shape {
        batch,
        heads,
        kv_heads,
        sq,
        sk,
        head_dim,
    } = shape;
    let (sq, sk, d) = (sq as usize, sk as usize, head_dim as usize);
    let scale = options.scale_for(head_dim) as f64;
    let group = (heads / kv_heads) as usize;
    let mut o = vec![0.0; shape.q_len()];
    let mut lse = vec![f64::NEG_INFINITY; shape.lse_len()];
    for bh in 0..(batch * heads) as usize {
        let (b, h) = (bh / heads as usize, bh % heads as usize);
        let kv = (b * kv_heads as usize + h / group) * sk * d;
        for i in 0..sq {
            let qi = &q[(bh * sq + i) * d..][..d];
            let Some((p, row_lse)) = softmax_row(
                qi,
                &k[kv..],
                visible_keys(i, (sq, sk), options.causal),
                scale,
            ) else {
                continue;
            };
            lse[bh * sq + i] = row_lse;
            let oi = &mut o[(bh * sq + i) * d..][..d];
            for (j, p) in p.iter().enumerate() {
                for (x, &vv) in oi.iter_mut().zip(&v[kv + j * d..][..d]) {
                    *x += p * vv as f64;
                }
            }
        }
    }
    (o, lse)
}

/// Keys query row `i` sees (the first ones): all `sk`, or under the causal mask those up to
/// the row's bottom-right-aligned diagonal.
pub(super) fn visible_keys(i: usize, (sq, sk): (usize, usize), causal: bool) -> usize {
    if causal {
        (i as i64 + sk as i64 - sq as i64 + 1).clamp(0, sk as i64) as usize
    } else {
        sk
    }
}

/// The fp64 softmax of query row `qi` over the first `seen` keys of `k` (rows of `qi.len()`)
/// with the scores scaled by `scale`: the probabilities and the log-sum-exp, `None` for no key.
pub(super) fn softmax_row(
    qi: &[f32],
    k: &[f32],
    seen: usize,
    scale: f64,
) -> Option<(Vec<f64>, f64)> {
    if seen == 0 {
        return None;
    }
    let d = qi.len();
    let scores: Vec<f64> = (0..seen)
        .map(|j| {
            let dot: f64 = qi
                .iter()
                .zip(&k[j * d..][..d])
                .map(|(&a, &b)| a as f64 * b as f64)
                .sum();
            scale * dot
        })
        .collect();
    let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
    let sum: f64 = e.iter().sum();
    Some((e.iter().map(|x| x / sum).collect(), max + sum.ln()))
}
