//! Host side of the backward: its options and workspace, the three launches, and the fp64
//! reference (the gradient of a plain softmax per row, derived independently of the kernels'
//! recomputation from the log-sum-exp).

use super::rows::{AttentionBwdDqD128, AttentionBwdDqD64, AttentionBwdRows, ROWS};
use super::*;
use crate::attention::host::{
    check_len, check_scale, heads_map, scale_or_default, softmax_row, strides_of, upload_bf16,
    visible_keys, Shape,
};
use ck_core::host::{Device, DeviceBuffer, LaunchConfig, LaunchError, LaunchStats, TensorMap};
use ck_core::wgmma::SwizzleMode;

/// Masking, scale, and the order of dQ's sums.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Options {
    /// The forward's mask: query row `i` sees keys `j ≤ i + Sk − Sq` (bottom-right aligned).
    pub causal: bool,
    /// The forward's scale; `1 / √head_dim` when `None`.
    pub scale: Option<f32>,
    /// dQ's partial sums added in key-tile order: the same bits on every run, at some cost in
    /// speed (blocks wait for the key tiles below theirs).
    pub deterministic: bool,
    /// O and dO are `[batch, sq, heads, head_dim]`, as the forward writes O with its own
    /// `o_seq_first` (and an output projection's gradient arrives), not `[batch, heads, sq,
    /// head_dim]`.
    pub o_seq_first: bool,
}

/// Query rows of a head in the row workspaces: `sq` rounded up to the 64-row step.
fn sq_pad(shape: &Shape) -> usize {
    shape.sq.div_ceil(BM) as usize * BM as usize
}

/// The backward's scratch: per query row `LSE · log₂ e` then Δ (`2 · batch · heads · sq_pad`
/// f32, at least 64), dQ's f32 sums (`batch · heads · sq_pad · head_dim`, in the consumers'
/// order: [`dq_chunk`]), one counter per 64-row query tile. Any contents: the first
/// launch clears what the others read.
pub struct Workspace {
    pub rows: DeviceBuffer<f32>,
    pub sums: DeviceBuffer<f32>,
    pub counters: DeviceBuffer<u32>,
}

impl Workspace {
    /// Elements of (`rows`, `sums`, `counters`) for `shape`.
    pub fn lens(shape: &Shape) -> (usize, usize, usize) {
        let bh = shape.batch as usize * shape.heads as usize;
        (
            // At least one box of the blocks' map over it.
            (2 * bh * sq_pad(shape)).max(BM as usize),
            bh * sq_pad(shape) * shape.head_dim as usize,
            bh * shape.sq.div_ceil(BM) as usize,
        )
    }

    /// A workspace for `shape` on `device`.
    pub fn new(device: &Device, shape: &Shape) -> Result<Workspace, LaunchError> {
        let (rows, sums, counters) = Workspace::lens(shape);
        Ok(Workspace {
            rows: DeviceBuffer::zeros(device, rows)?,
            sums: DeviceBuffer::zeros(device, sums)?,
            counters: DeviceBuffer::zeros(device, counters)?,
        })
    }

    fn check(&self, shape: &Shape) -> Result<(), LaunchError> {
        let (rows, sums, counters) = Workspace::lens(shape);
        check_len("the row workspace", self.rows.len(), rows, shape)?;
        check_len("dQ's workspace", self.sums.len(), sums, shape)?;
        check_len("the counters", self.counters.len(), counters, shape)
    }
}

/// The forward's tensors and dO, as the backward reads them: Q, K, V, O, dO (bf16) and the
/// log-sum-exp (f32 `[batch, heads, sq]`).
pub struct Saved<'a> {
    pub q: &'a DeviceBuffer<Bf16>,
    pub k: &'a DeviceBuffer<Bf16>,
    pub v: &'a DeviceBuffer<Bf16>,
    pub o: &'a DeviceBuffer<Bf16>,
    pub dout: &'a DeviceBuffer<Bf16>,
    pub lse: &'a DeviceBuffer<f32>,
}

/// The gradients: dQ like Q, dK and dV like K (bf16).
pub struct Grads<'a> {
    pub dq: &'a mut DeviceBuffer<Bf16>,
    pub dk: &'a mut DeviceBuffer<Bf16>,
    pub dv: &'a mut DeviceBuffer<Bf16>,
}

/// Launches the backward on device buffers: the rows pass, the blocks, dQ's conversion.
pub fn launch(
    device: &Device,
    saved: &Saved<'_>,
    grads: Grads<'_>,
    ws: &mut Workspace,
    shape: Shape,
    options: Options,
) -> Result<LaunchStats, LaunchError> {
    shape.check()?;
    for (what, len, expected) in [
        ("Q", saved.q.len(), shape.q_len()),
        ("O", saved.o.len(), shape.q_len()),
        ("dO", saved.dout.len(), shape.q_len()),
        ("dQ", grads.dq.len(), shape.q_len()),
        ("K", saved.k.len(), shape.kv_len()),
        ("V", saved.v.len(), shape.kv_len()),
        ("dK", grads.dk.len(), shape.kv_len()),
        ("dV", grads.dv.len(), shape.kv_len()),
        ("LSE", saved.lse.len(), shape.lse_len()),
    ] {
        check_len(what, len, expected, &shape)?;
    }
    ws.check(&shape)?;
    let scale = scale_or_default(options.scale, shape.head_dim);
    check_scale(scale)?;
    let Shape {
        batch,
        heads,
        kv_heads,
        sq,
        sk,
        head_dim: d,
    } = shape;
    let mut stats = LaunchStats::default();
    let bh = batch * heads;
    if sq > 0 {
        let blocks = bh * sq.div_ceil(BM) * BM / ROWS;
        stats.add(&AttentionBwdRows::launch(
            device,
            LaunchConfig::new(blocks, 256),
            saved.o,
            saved.dout,
            saved.lse,
            &mut ws.rows,
            &mut ws.sums,
            &mut ws.counters,
            sq,
            d,
            bh,
            heads,
            options.o_seq_first,
        )?);
    }
    if sk > 0 {
        // [head dim, seq, heads, batch] in 64-column panels of `rows` rows, the heads one after
        // another or (`seq_first`) interleaved row by row.
        let heads_of = |x, seq: u32, n: u32, rows: u32, seq_first: bool| {
            let strides = strides_of(seq_first, (seq.max(1), n, d));
            heads_map(x, [d, seq, n, batch], strides, rows)
        };
        // With no queries the blocks read neither Q nor dO, but a tensor map has a row: K's.
        let (qm, dom) = if sq == 0 {
            (
                heads_of(saved.k, sk, kv_heads, BM, false)?,
                heads_of(saved.k, sk, kv_heads, BM, false)?,
            )
        } else {
            (
                heads_of(saved.q, sq, heads, BM, false)?,
                heads_of(saved.dout, sq, heads, BM, options.o_seq_first)?,
            )
        };
        let rows = TensorMap::dense(&ws.rows, [ws.rows.len() as u64], [BM], SwizzleMode::None)?;
        let km = heads_of(saved.k, sk, kv_heads, BN, false)?;
        let vm = heads_of(saved.v, sk, kv_heads, BN, false)?;
        let cfg = LaunchConfig::new(sk.div_ceil(BN) * batch * kv_heads, THREADS);
        macro_rules! launch_as {
            ($kernel:ident) => {
                $kernel::launch(
                    device,
                    cfg,
                    &qm,
                    &dom,
                    &km,
                    &vm,
                    &rows,
                    &mut ws.sums,
                    &mut ws.counters,
                    grads.dk,
                    grads.dv,
                    sq,
                    sk,
                    batch,
                    heads,
                    heads / kv_heads,
                    scale,
                    options.causal,
                    options.deterministic,
                )
            };
        }
        stats.add(&match d {
            64 => launch_as!(AttentionBwdD64),
            _ => launch_as!(AttentionBwdD128),
        }?);
    }
    if bh * sq > 0 {
        let cfg = LaunchConfig::new(bh * sq.div_ceil(BM), 256);
        let (sums, dq) = (&ws.sums, grads.dq);
        stats.add(&match d {
            64 => AttentionBwdDqD64::launch(device, cfg, sums, dq, sq, scale),
            _ => AttentionBwdDqD128::launch(device, cfg, sums, dq, sq, scale),
        }?);
    }
    Ok(stats)
}

/// The gradients as host values: dQ, dK, dV of the loss `Σ dO ∘ O` (every input rounded to
/// bf16 before the kernels, as the forward's own inputs and outputs are).
pub struct HostGrads {
    pub dq: Vec<f32>,
    pub dk: Vec<f32>,
    pub dv: Vec<f32>,
    pub stats: LaunchStats,
}

/// [`launch`] on host values: `q`, `k`, `v`, the forward's `o` and `lse`, and `dout` (`o` and
/// `dout` in the layout [`Options::o_seq_first`] names).
pub fn gradients(
    device: &Device,
    (q, k, v): (&[f32], &[f32], &[f32]),
    (o, lse, dout): (&[f32], &[f32], &[f32]),
    shape: Shape,
    options: Options,
) -> Result<HostGrads, LaunchError> {
    shape.check()?;
    for (what, len, expected) in [
        ("Q", q.len(), shape.q_len()),
        ("O", o.len(), shape.q_len()),
        ("dO", dout.len(), shape.q_len()),
        ("K", k.len(), shape.kv_len()),
        ("V", v.len(), shape.kv_len()),
        ("LSE", lse.len(), shape.lse_len()),
    ] {
        check_len(what, len, expected, &shape)?;
    }
    let up = |x| upload_bf16(device, x);
    let (qd, kd, vd, od, gd) = (up(q)?, up(k)?, up(v)?, up(o)?, up(dout)?);
    let ld = DeviceBuffer::from_slice(device, lse)?;
    let nan = |len| DeviceBuffer::from_slice(device, &vec![Bf16(0x7fc0); len]);
    let (mut dq, mut dk, mut dv) = (
        nan(shape.q_len())?,
        nan(shape.kv_len())?,
        nan(shape.kv_len())?,
    );
    let saved = Saved {
        q: &qd,
        k: &kd,
        v: &vd,
        o: &od,
        dout: &gd,
        lse: &ld,
    };
    let mut ws = Workspace::new(device, &shape)?;
    let grads = Grads {
        dq: &mut dq,
        dk: &mut dk,
        dv: &mut dv,
    };
    let stats = launch(device, &saved, grads, &mut ws, shape, options)?;
    let widen = |b: &DeviceBuffer<Bf16>| -> Result<Vec<f32>, LaunchError> {
        Ok(b.to_vec()?.iter().map(|x| x.to_f32()).collect())
    };
    Ok(HostGrads {
        dq: widen(&dq)?,
        dk: widen(&dk)?,
        dv: widen(&dv)?,
        stats,
    })
}

/// The fp64 reference: for every query row, the probabilities `p` of a plain softmax over the
/// keys it sees, then `dp_j = dO·v_j`, `ds_j = p_j (dp_j − Σ_j' p_j' dp_j')`, and
/// `dQ += scale · ds_j k_j`, `dK_j += scale · ds_j q`, `dV_j += p_j dO` (dK and dV summed over
/// the query heads of a group). Returns (dQ, dK, dV).
pub fn reference(
    (q, k, v): (&[f32], &[f32], &[f32]),
    dout: &[f32],
    shape: Shape,
    options: Options,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let Shape {
        batch,
        heads,
        kv_heads,
        sq,
        sk,
        head_dim,
    } = shape;
    let (sq, sk, d) = (sq as usize, sk as usize, head_dim as usize);
    let scale = scale_or_default(options.scale, head_dim) as f64;
    let group = (heads / kv_heads) as usize;
    let (mut dq, mut dk, mut dv) = (
        vec![0.0; shape.q_len()],
        vec![0.0; shape.kv_len()],
        vec![0.0; shape.kv_len()],
    );
    let dot =
        |a: &[f32], b: &[f32]| -> f64 { a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum() };
    for bh in 0..(batch * heads) as usize {
        let (b, h) = (bh / heads as usize, bh % heads as usize);
        let kv = (b * kv_heads as usize + h / group) * sk * d;
        for i in 0..sq {
            let row = (bh * sq + i) * d;
            let (qi, gi) = (&q[row..][..d], &dout[row..][..d]);
            let seen = visible_keys(i, (sq, sk), options.causal);
            let Some((p, _)) = softmax_row(qi, &k[kv..], seen, scale) else {
                continue;
            };
            let dp: Vec<f64> = (0..seen).map(|j| dot(gi, &v[kv + j * d..][..d])).collect();
            let mean: f64 = p.iter().zip(&dp).map(|(a, b)| a * b).sum();
            for j in 0..seen {
                let ds = p[j] * (dp[j] - mean);
                let kj = kv + j * d;
                for c in 0..d {
                    dq[row + c] += scale * ds * k[kj + c] as f64;
                    dk[kj + c] += scale * ds * qi[c] as f64;
                    dv[kj + c] += p[j] * gi[c] as f64;
                }
            }
        }
    }
    (dq, dk, dv)
}
