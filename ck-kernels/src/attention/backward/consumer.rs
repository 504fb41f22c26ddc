//! A consumer warpgroup: 64 of the block's keys, against every step's 64 query rows.
//!
//! Each step recomputes the probabilities from the saved log-sum-exp, transposed — keys as the
//! MMAs' rows, so `Pᵀ` and `dSᵀ` are accumulator tiles that feed the next MMAs from registers:
//!
//! ```text
//! Sᵀ  = K·Qᵀ                      Pᵀ  = exp2(scale·log₂e · Sᵀ − LSE·log₂e)   (per query column)
//! dPᵀ = V·dOᵀ                     dSᵀ = Pᵀ ∘ (dPᵀ − Δ)                        (Δ = rowsum(dO ∘ O))
//! dV += Pᵀ·dO                     dK += dSᵀ·Q                                 (scaled at the end)
//! dQ  = dS·K   (dSᵀ stored transposed in shared memory; each warpgroup half of dQ's columns)
//! ```
//!
//! Pᵀ is kept only as the bf16 A operand of `dV += Pᵀ·dO`, and dSᵀ is computed from it: one
//! tile of f32 accumulators (Sᵀ, then dPᵀ) is live at a time beside dK and dV. Both warpgroups
//! meet twice per step around the dS tile they share (free, then written).
//!
//! dQ's MMAs are a group of their own, issued before dV's and dK's: its partial sum is staged
//! ([`dq_chunk`]) while they run, and added to the f32 workspace by the thread of
//! [`dq_sums`](super::dq_sums).

use super::schedule::*;
use super::{BwdHeadDim, ColStats};
use crate::attention::consumer::{k_major, k_step_in, release};
use crate::attention::Out64;
use ck_core::device::*;
use ck_core::tile::{broadcast_x, make_tile_window, unroll, DistributedTensor, View2};
use ck_core::wgmma::{swizzle_128b, SmemMatrix};

/// `Sᵀ` and `dPᵀ`: 128 keys (64 per warpgroup) × 64 query rows.
type Transposed = DistributedTensor<Out64, f32>;

/// A tile of 64-column panels `panel` bytes apart as an N-major B operand (N along the
/// columns); its rows `16·kk..` are 2048 bytes further on.
#[inline(always)]
fn n_major(tile: u32, panel: u32) -> u64 {
    SmemMatrix::mn_major_128b(tile, panel).descriptor()
}

/// Issues `acc = A·Bᵀ` over `d` columns: A (64 rows of a 128-row key tile, panels
/// [`KEY_PANEL`] apart) and B (a 64-row step tile, panels [`STEP_PANEL`] apart), both K-major.
#[inline(always)]
fn issue_transposed(acc: &mut Transposed, (a, b): (u64, u64), d: u32) {
    unroll::<8>(|kk| {
        let kk = kk as u32;
        if kk < d / 16 {
            let a = SmemMatrix::advance(a, k_step_in(kk, KEY_PANEL));
            let b = SmemMatrix::advance(b, k_step_in(kk, STEP_PANEL));
            wgmma_bf16_b_kmajor(&mut acc.data, a, b, kk > 0);
        }
    });
}

/// Issues `acc += Xᵀ·B` with `Xᵀ` (keys × 64 query rows) packed in registers and B a step tile
/// (query rows × head dim) in shared memory.
#[inline(always)]
fn issue_from_registers<H: BwdHeadDim>(
    acc: &mut DistributedTensor<H::Out, f32>,
    x: &[u32; 16],
    b: u64,
) {
    unroll::<4>(|kk| {
        let a = [0, 1, 2, 3].map(|i| x[4 * kk + i]);
        let b = SmemMatrix::advance(b, 2048 * kk as u32);
        wgmma_bf16_a_regs(&mut acc.data, a, b, true);
    });
}

/// Sets the probabilities of keys past the sequence's end, and above the causal diagonal, to
/// 0 (the tile's first key is `key0`, its first query row `q0`).
#[inline(always)]
fn mask(p: &mut Transposed, (key0, q0): (u32, u32), pb: &Problem) {
    let diag = pb.sk as i64 - pb.sq as i64;
    let part = Out64::partition_index(thread_idx());
    Out64::for_each_y(|y, d| {
        let [r, c] = Out64::x_index(part, y);
        let (key, row) = (key0 + r as u32, q0 + c as u32);
        if key >= pb.sk || (pb.causal && key as i64 > row as i64 + diag) {
            p.set(d, 0.0);
        }
    });
}

/// Packs a transposed tile to bf16 pairs: the A operand of an MMA whose K is its columns.
#[inline(always)]
fn pack(t: &Transposed) -> [u32; 16] {
    core::array::from_fn(|i| Bf16::pack2(t.get(2 * i), t.get(2 * i + 1)))
}

/// A packed tile's values (register `d` is half `d % 2` of word `d / 2`).
#[inline(always)]
fn unpack(x: &[u32; 16]) -> Transposed {
    let mut t = Transposed::splat(0.0);
    Out64::for_each_y(|_, d| t.set(d, Bf16((x[d / 2] >> (16 * (d % 2))) as u16).to_f32()));
    t
}

/// Writes `dSᵀ` (packed as for the MMAs: word `2j + h` of warp `w`'s lane holds the m16n8 C
/// fragment of keys `16w + 8h ..+ 8` × query rows `8j ..+ 8`) into the dS tile as dS (query rows
/// × 128 keys, K-major: two 64-key panels in the 128-byte swizzle) with four
/// `stmatrix.x4.trans`, which store each 8 × 8 fragment transposed: 8 query rows of 8
/// consecutive keys, one 16-byte chunk each. Instruction `i` takes words `4i ..+ 4` (query rows
/// `16i ..+ 16`); lane `l` names the row of matrix `l / 8`: query row `16i + 8·(l / 16) + l % 8`,
/// keys from `16w + 8·(l / 8 % 2)`. The swizzle moves a chunk by its row's bits 7..9, which the
/// instructions' 2048-byte steps leave alone, so one address serves all four.
#[inline(always)]
fn store_ds<const SMEM: usize, const STATS: usize>(
    smem: &Smem<SMEM, STATS>,
    at: u32,
    ds: &[u32; 16],
) {
    let (wg, w, lane) = (warp_id() / 4, warp_id() % 4, lane_id());
    let (key, row) = (16 * w + 8 * (lane / 8 % 2), 8 * (lane / 16) + lane % 8);
    let first = at + swizzle_128b(wg * STEP_PANEL + row * 128 + key * 2) / 2;
    unroll::<4>(|i| {
        let words = [0, 1, 2, 3].map(|k| ds[4 * i + k]);
        stmatrix_x4_trans(&smem.tiles, first + 1024 * i as u32, words);
    });
}

/// A step's values of its 64 query rows (`LSE · log₂ e` or Δ) from stage memory at `at`, one
/// per column of this thread's part of a transposed tile.
#[inline(always)]
fn columns<const SMEM: usize, const STATS: usize>(
    smem: &Smem<SMEM, STATS>,
    at: u32,
) -> DistributedTensor<ColStats, f32> {
    let part = ColStats::partition_index(thread_idx());
    let mut t = DistributedTensor::<ColStats, f32>::splat(0.0);
    ColStats::for_each_y(|y, d| {
        let [c] = ColStats::x_index(part, y);
        t.set(d, smem.stats.load(at + c as u32));
    });
    t
}

/// The block's outputs and workspaces as the consumers see them.
pub struct Outputs {
    /// dQ's f32 sums (unscaled, laid out as [`dq_chunk`] says), and the deterministic mode's
    /// counters `[batch · heads, ⌈sq / 64⌉]`.
    pub dq: GlobalMut<f32>,
    pub counters: GlobalMut<u32>,
    /// dK and dV, `[batch · kv_heads, sk, D]`.
    pub dk: GlobalMut<Bf16>,
    pub dv: GlobalMut<Bf16>,
    /// The scores' scale (dK and dQ are scaled by it).
    pub scale: f32,
}

/// Every step of the block, then dK and dV.
#[inline(always)]
pub fn consume<H: BwdHeadDim, const SMEM: usize, const STATS: usize>(
    out: &Outputs,
    smem: &Smem<SMEM, STATS>,
    lay: Layout,
    pb: &Problem,
) {
    let wg = warp_id() / 4;
    let tile = |at: u32| smem.tiles.shared_address(at);
    let keys = k_major(tile(lay.k()), 64 * wg);
    let values = k_major(tile(lay.v()), 64 * wg);
    // This warpgroup's half of dQ's columns: B = K's columns from D/2 · wg.
    let half = H::D / 2 * wg;
    let k_half = n_major(
        tile(lay.k()) + half / 64 * KEY_PANEL + half % 64 * 2,
        KEY_PANEL,
    );
    let (n, _) = pb.block();
    let key0 = n * BN;
    let mut dk = DistributedTensor::<H::Out, f32>::splat(0.0);
    let mut dv = DistributedTensor::<H::Out, f32>::splat(0.0);
    smem.bars.wait(KV_FULL, 0);
    for (t, step) in (0u32..).zip(pb.steps()) {
        let (s, parity) = stage(t);
        smem.bars.wait(full(s), parity);
        let (q, dout) = (tile(lay.q(s)), tile(lay.dout(s)));
        // The key and value operands' k-steps made here each step: hoisted, their 24
        // descriptors would be held across the loop beside dK and dV, and spilled.
        let (keys, values, k_half) = (opaque(keys), opaque(values), opaque(k_half));
        let mut st = Transposed::splat(0.0);
        wgmma_fence();
        issue_transposed(&mut st, (keys, k_major(q, 0)), H::D);
        wgmma_commit();
        // Also the last step's dV and dK (their group was issued first): their stage's Q and
        // dO are read, so the producer may refill it.
        wgmma_wait::<0>(&mut st.data);
        wgmma_wait::<0>(&mut dv.data);
        wgmma_wait::<0>(&mut dk.data);
        if t > 0 {
            release(&smem.bars, empty(stage(t - 1).0));
        }
        let lse2 = columns(smem, lay.lse2(s));
        let mut p = st.zip_map(&broadcast_x::<Out64, ColStats, f32, 0>(&lse2), |s, l| {
            math::exp2(math::fma(s, pb.scale_log2, -l))
        });
        let crosses_diagonal =
            pb.causal && (key0 + BN - 1) as i64 > step.q0 as i64 + pb.sk as i64 - pb.sq as i64;
        if key0 + BN > pb.sk || crosses_diagonal {
            mask(&mut p, (key0, step.q0), pb);
        }
        let mut pp = pack(&p);
        let mut dpt = Transposed::splat(0.0);
        wgmma_fence();
        issue_transposed(&mut dpt, (values, k_major(dout, 0)), H::D);
        wgmma_commit();
        wgmma_wait::<0>(&mut dpt.data);
        let delta = columns(smem, lay.delta(s));
        let dsp = dpt
            .zip_map(&broadcast_x::<Out64, ColStats, f32, 0>(&delta), |dp, d| {
                dp - d
            })
            .zip_map(&unpack(&pp), |x, p| p * x);
        let mut dsp = pack(&dsp);
        // dS is shared by both warpgroups: free once both have run the last step's dQ.
        named_barrier_sync(DS_FREE, 32 * CONSUMER_WARPS);
        store_ds(smem, lay.ds(), &dsp);
        fence_proxy_async();
        named_barrier_sync(DS_WRITTEN, 32 * CONSUMER_WARPS);
        // dQ = dS·K from shared memory in a group of its own, then dV += Pᵀ·dO and dK += dSᵀ·Q
        // from registers in a second: dQ's partial sum is staged and sent while dV and dK are
        // still computed (the next step's first wait covers them).
        let mut dq = DistributedTensor::<H::Dq, f32>::splat(0.0);
        let ds_a = k_major(tile(lay.ds()), 0);
        wgmma_fence_operands(&mut pp);
        wgmma_fence_operands(&mut dsp);
        wgmma_fence();
        unroll::<8>(|kk| {
            let a = SmemMatrix::advance(ds_a, k_step_in(kk as u32, STEP_PANEL));
            let b = SmemMatrix::advance(k_half, 2048 * kk as u32);
            wgmma_bf16(&mut dq.data, a, b, kk > 0);
        });
        wgmma_commit();
        issue_from_registers::<H>(&mut dv, &pp, n_major(dout, STEP_PANEL));
        issue_from_registers::<H>(&mut dk, &dsp, n_major(q, STEP_PANEL));
        wgmma_commit();
        wgmma_wait::<1>(&mut dq.data);
        stage_dq::<H, SMEM, STATS>(&dq, t, (smem, lay));
    }
    wgmma_wait::<0>(&mut dv.data);
    wgmma_wait::<0>(&mut dk.data);
    let (_, bkv) = pb.block();
    let keys_of = |x: GlobalMut<Bf16>| {
        let len = pb.sk * H::D;
        View2::<_, Bf16, 2>::new(x.slice(bkv * len, len), pb.sk, H::D, H::D)
    };
    let dk = dk.map(|x| x * out.scale).round_to::<Bf16>();
    make_tile_window::<H::Out, _>(keys_of(out.dk), [key0 as i32, 0]).store(&dk);
    make_tile_window::<H::Out, _>(keys_of(out.dv), [key0 as i32, 0]).store(&dv.round_to());
}

/// Stages this warpgroup's half of step `t`'s dQ: the registers into the warpgroup's staging
/// tile in shared memory ([`dq_chunk`] gives the layout), for [`dq_sums`](super::dq_sums) to
/// add once both halves are there ([`DQ_STAGED`]).
#[inline(always)]
fn stage_dq<H: BwdHeadDim, const SMEM: usize, const STATS: usize>(
    dq: &DistributedTensor<H::Dq, f32>,
    t: u32,
    (smem, lay): (&Smem<SMEM, STATS>, Layout),
) {
    let wg = warp_id() / 4;
    let wg_barrier = 3 + wg;
    let leader = thread_idx().is_multiple_of(128);
    let staging = lay.dq(wg, H::D);
    // The last step's addition has read the staging tile.
    if leader && t > 0 {
        smem.bars.wait(DQ_READ, (t - 1) % 2);
    }
    named_barrier_sync(wg_barrier, 128);
    let t = thread_idx() % 128;
    unroll::<8>(|g| {
        let g = g as u32;
        if g < H::D / 16 {
            let v = [0, 1, 2, 3].map(|i| dq.get((4 * g + i) as usize));
            smem.stats.store_vec::<4>(staging + g * 512 + 4 * t, v);
        }
    });
    fence_proxy_async();
    named_barrier_sync(wg_barrier, 128);
    if leader {
        smem.bars.arrive(DQ_STAGED);
    }
}

/// Floats of one warpgroup's half of a 64-row dQ tile (`64 · D / 2`). In the workspace the
/// halves lie tile by tile (`[batch · heads, ⌈sq / 64⌉, 2, chunk]`), each in the order the
/// warpgroup holds it: register `r` of thread `t` at `(r / 4) · 512 + 4t + r % 4` — four
/// registers a 16-byte store, a warp's stores 512 contiguous bytes (no bank conflict in the
/// staging tile). `attention_bwd_dq_*` reads it back through the same [`BwdHeadDim::Dq`]
/// distribution.
pub const fn dq_chunk(d: u32) -> u32 {
    BM * d / 2
}
