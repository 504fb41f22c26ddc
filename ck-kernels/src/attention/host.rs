//! Host side of attention: the problem's shape and its checks, the launch, and the fp64
//! reference (a plain softmax per row, not the online one).

use super::*;
use ck_core::host::{Device, DeviceBuffer, LaunchConfig, LaunchError, LaunchStats, TensorMap};
use ck_core::rules;
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

/// `x` as the producers' rank-4 tensor map `[D, seq, heads, batch]` (innermost first) at
/// element strides `(row, head, batch)` — any layout whose rows are contiguous and 16-byte
/// aligned — copied in 64-column panels of `rows` rows in the 128-byte swizzle. A tensor of
/// no rows is described as one (a map has at least one; the kernels never read it).
pub fn heads_map(
    x: &DeviceBuffer<Bf16>,
    [d, seq, heads, batch]: [u32; 4],
    (row, head, batch_stride): (u64, u64, u64),
    rows: u32,
) -> Result<TensorMap<'_, Bf16, 4>, LaunchError> {
    let dims = [d, seq.max(1), heads, batch].map(u64::from);
    let strides = [2, 2 * row, 2 * head, 2 * batch_stride];
    TensorMap::new(x, dims, strides, [64, rows, 1, 1], SwizzleMode::B128)
}

/// Element strides (row, head, batch) of `[batch, heads, seq, D]` (`seq_first`: `[batch, seq,
/// heads, D]`).
pub fn strides_of(seq_first: bool, (seq, heads, d): (u32, u32, u32)) -> (u64, u64, u64) {
    let (seq, heads, d) = (seq as u64, heads as u64, d as u64);
    let (row, head) = if seq_first {
        (heads * d, d)
    } else {
        (d, seq * d)
    };
    (row, head, seq * heads * d)
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
    if check_outputs((o, lse), &shape, &options)? {
        return Ok(LaunchStats::default());
    }
    let Shape {
        batch,
        heads,
        kv_heads,
        sq,
        sk,
        head_dim: d,
    } = shape;
    let qm = heads_map(
        q,
        [d, sq, heads, batch],
        strides_of(false, (sq, heads, d)),
        BM,
    )?;
    // With no keys the kernel reads neither K nor V (there is no key tile): describe Q then.
    let kv_map = |x| match sk {
        0 => heads_map(
            q,
            [d, sq, heads, batch],
            strides_of(false, (sq, heads, d)),
            BN,
        ),
        _ => heads_map(
            x,
            [d, sk, kv_heads, batch],
            strides_of(false, (sk, kv_heads, d)),
            BN,
        ),
    };
    launch_maps(
        device,
        (&qm, &kv_map(k)?, &kv_map(v)?),
        (0, 0),
        (o, lse),
        shape,
        options,
    )
}

/// [`launch`] on a fused QKV projection's output `qkv` `[batch, seq, (heads + 2·kv_heads)·D]`
/// (each token's query heads, then its key heads, then its value heads: what
/// [`crate::gemm::linear::launch_rope`] writes), read in place — one tensor map over its
/// `heads + 2·kv_heads` heads serves Q, K and V. `shape.sq` and `shape.sk` are the sequence
/// length.
///
/// ```
/// use ck_core::device::Bf16;
/// use ck_core::host::{Device, DeviceBuffer};
/// use ck_kernels::attention::host::{launch_fused, Options, Shape};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let device = Device::emulator();
/// let shape = Shape { batch: 1, heads: 2, kv_heads: 1, sq: 3, sk: 3, head_dim: 64 };
/// // Token t's value head is all t + 1; its query and key heads are zero, so every score is
/// // equal and row i (causal) averages the values of tokens 0..=i: 1, 1.5, 2.
/// let qkv: Vec<Bf16> = (0..3 * 4 * 64)
///     .map(|i| Bf16::from_f32(if i / 64 % 4 == 3 { (i / 256 + 1) as f32 } else { 0.0 }))
///     .collect();
/// let qkv = DeviceBuffer::from_slice(&device, &qkv)?;
/// let mut o = DeviceBuffer::<Bf16>::zeros(&device, 2 * 3 * 64)?;
/// let mut lse = DeviceBuffer::<f32>::zeros(&device, 2 * 3)?;
/// let options = Options { causal: true, o_seq_first: true, ..Default::default() };
/// launch_fused(&device, &qkv, &mut o, &mut lse, shape, options)?;
/// let o: Vec<f32> = o.to_vec()?.iter().map(|v| v.to_f32()).collect();
/// // O [batch, seq, heads, D]: token 0's first element 1; token 2's heads (elements 256 and
/// // 320) both 2.
/// assert_eq!((o[0], o[256], o[320]), (1.0, 2.0, 2.0));
/// # Ok(()) }
/// ```
pub fn launch_fused(
    device: &Device,
    qkv: &DeviceBuffer<Bf16>,
    o: &mut DeviceBuffer<Bf16>,
    lse: &mut DeviceBuffer<f32>,
    shape: Shape,
    options: Options,
) -> Result<LaunchStats, LaunchError> {
    shape.check()?;
    let Shape {
        batch,
        heads,
        kv_heads,
        sq,
        sk,
        head_dim: d,
    } = shape;
    if sq != sk {
        return Err(LaunchError::invalid(
            rules::SHAPE_MISMATCH,
            format!("a fused QKV projection has one sequence length; got sq = {sq}, sk = {sk}"),
        ));
    }
    let all = heads + 2 * kv_heads;
    let len = batch as usize * sq as usize * all as usize * d as usize;
    check_len("QKV", qkv.len(), len, &shape)?;
    if check_outputs((o, lse), &shape, &options)? {
        return Ok(LaunchStats::default());
    }
    let strides = strides_of(true, (sq, all, d));
    let (qm, kvm) = (
        heads_map(qkv, [d, sq, all, batch], strides, BM)?,
        heads_map(qkv, [d, sq, all, batch], strides, BN)?,
    );
    launch_maps(
        device,
        (&qm, &kvm, &kvm),
        (heads, heads + kv_heads),
        (o, lse),
        shape,
        options,
    )
}

/// `Ok(false)` where O and the LSE have `shape`'s lengths and the scale is usable, `Ok(true)`
/// where there is nothing to compute (no query row).
fn check_outputs(
    (o, lse): (&DeviceBuffer<Bf16>, &DeviceBuffer<f32>),
    shape: &Shape,
    options: &Options,
) -> Result<bool, LaunchError> {
    check_len("O", o.len(), shape.q_len(), shape)?;
    check_len("LSE", lse.len(), shape.lse_len(), shape)?;
    check_scale(options.scale_for(shape.head_dim))?;
    Ok(shape.lse_len() == 0)
}

/// The launch on Q's, K's and V's maps (K's and V's heads from `kv_first`).
fn launch_maps(
    device: &Device,
    (qm, km, vm): (
        &TensorMap<'_, Bf16, 4>,
        &TensorMap<'_, Bf16, 4>,
        &TensorMap<'_, Bf16, 4>,
    ),
    kv_first: (u32, u32),
    (o, lse): (&mut DeviceBuffer<Bf16>, &mut DeviceBuffer<f32>),
    shape: Shape,
    options: Options,
) -> Result<LaunchStats, LaunchError> {
    let scale = options.scale_for(shape.head_dim);
    let Shape { sq, sk, heads, .. } = shape;
    let group = shape.heads / shape.kv_heads;
    let items = sq.div_ceil(BM) * shape.batch * heads;
    let blocks = grid_blocks(items, options.causal, device.multiprocessors());
    let cfg = LaunchConfig::new(blocks, THREADS);
    let sl = scale * LOG2_E;
    let causal = options.causal;
    let (o_row, o_head, _) = strides_of(options.o_seq_first, (sq, heads, shape.head_dim));
    // The two kernels take the same arguments.
    macro_rules! launch_as {
        ($kernel:ident) => {
            $kernel::launch(
                device,
                cfg,
                qm,
                km,
                vm,
                o,
                lse,
                sq,
                sk,
                shape.batch,
                heads,
                group,
                sl,
                causal,
                o_row as u32,
                o_head as u32,
                kv_first.0,
                kv_first.1,
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
