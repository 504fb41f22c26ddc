//! A consumer warpgroup: the online softmax of its 64 query rows of each item against the
//! item's key tiles, then O and the log-sum-exp.

use super::schedule::*;
use super::{HeadDim, RowStats, Scores};
use ck_core::device::*;
use ck_core::tile::{
    broadcast_x, make_tile_window, reduce_x_in_warp, unroll, DistributedTensor, View1, View2,
};
use ck_core::wgmma::SmemMatrix;

/// The K-major operand (Q's rows or a key tile, head dim along the 128-byte swizzled rows of
/// 64-column panels) whose first row is row `row` of the tile at shared byte `tile`; its
/// `kk`-th 16-column slice is [`SmemMatrix::advance`]d by [`k_step`]`(kk)`.
#[inline(always)]
pub(super) fn k_major(tile: u32, row: u32) -> u64 {
    SmemMatrix::k_major_128b(tile + row * 128).descriptor()
}

/// Bytes from a K-major operand to its `kk`-th 16-column slice: 32 bytes per slice within a
/// panel of four, a panel further on after that.
const fn k_step(kk: u32) -> u32 {
    k_step_in(kk, PANEL_BYTES)
}

/// [`k_step`] for an operand whose 64-column panels lie `panel` bytes apart.
pub(super) const fn k_step_in(kk: u32, panel: u32) -> u32 {
    kk / 4 * panel + kk % 4 * 32
}

/// The value tile at shared byte `tile` as an N-major B operand (N = the head dim, across the
/// 64-column panels); keys `16·kk..` are 16 rows (2048 bytes) further on.
#[inline(always)]
pub(super) fn values(tile: u32) -> u64 {
    SmemMatrix::mn_major_128b(tile, PANEL_BYTES).descriptor()
}

/// Sets the scores of keys past the sequence's end, and of keys above the causal diagonal, to
/// −∞ (the tile starts at query row `q0` and key `key0` of item `w`'s sequence).
#[inline(always)]
fn mask(s: &mut DistributedTensor<Scores, f32>, (q0, key0): (u32, u32), w: &Item, causal: bool) {
    let diag = w.sk as i64 - w.sq as i64;
    let p = Scores::partition_index(thread_idx());
    Scores::for_each_y(|y, d| {
        let [r, c] = Scores::x_index(p, y);
        let (row, key) = (q0 + r as u32, key0 + c as u32);
        let visible = key < w.sk && (!causal || key as i64 <= row as i64 + diag);
        if !visible {
            s.set(d, f32::NEG_INFINITY);
        }
    });
}

/// Zeros rows `valid..` of the value tile at `at`: another sequence's values (packed
/// sequences), whose probabilities are 0 but `0 · ∞` is NaN. Both consumer warpgroups share the
/// tile, so both write and both wait (named barrier 1); written through the generic proxy, so
/// fenced before the MMAs (the async proxy) read it.
#[inline(always)]
fn clear_foreign_values<H: HeadDim, const SMEM: usize>(smem: &Smem<SMEM>, (at, valid): (u32, u32)) {
    let chunks = (BN - valid) * 8;
    for p in 0..H::D / 64 {
        let first = at + (p * PANEL_BYTES + valid * 128) / 2;
        let mut c = thread_idx();
        while c < chunks {
            smem.tiles
                .store_vec::<8>(first + 8 * c, [Bf16::default(); 8]);
            c += 32 * CONSUMER_WARPS;
        }
    }
    fence_proxy_async();
    named_barrier_sync(1, 32 * CONSUMER_WARPS);
}

/// Issues `S = Q·Kᵀ` for this warpgroup's rows (`q`, a [`k_major`] descriptor) against the
/// key tile `k`.
#[inline(always)]
fn issue_scores<H: HeadDim>(scores: &mut DistributedTensor<Scores, f32>, q: u64, k: u64) {
    issue_scores_in::<H>(scores, (q, PANEL_BYTES), k);
}

/// [`issue_scores`] for a Q whose 64-column panels lie `q_panel` bytes apart (a 64-row Q
/// buffer's are half a key tile's).
#[inline(always)]
pub(super) fn issue_scores_in<H: HeadDim>(
    scores: &mut DistributedTensor<Scores, f32>,
    (q, q_panel): (u64, u32),
    k: u64,
) {
    wgmma_fence();
    unroll::<8>(|kk| {
        let kk = kk as u32;
        if kk < H::D / 16 {
            let (a, b) = (
                SmemMatrix::advance(q, k_step_in(kk, q_panel)),
                SmemMatrix::advance(k, k_step(kk)),
            );
            wgmma_bf16_b_kmajor(&mut scores.data, a, b, kk > 0);
        }
    });
    wgmma_commit();
}

/// The A operand of `O += P·V`: P rounded to bf16 pairs in the score tile's accumulator order
/// (the A fragment of keys `16·kk..` is words `4·kk..4·kk + 4`).
pub(super) type Packed = [u32; 32];

/// Issues `O += P·V` with P packed in registers.
#[inline(always)]
pub(super) fn issue_values<H: HeadDim>(
    acc: &mut DistributedTensor<H::Out, f32>,
    p: &mut Packed,
    v: u64,
) {
    // Every word of P is written before the fence, so the eight MMAs issue back to back.
    wgmma_fence_operands(p);
    wgmma_fence();
    unroll::<8>(|kk| {
        let a = [0, 1, 2, 3].map(|i| p[4 * kk + i]);
        let b = SmemMatrix::advance(v, 16 * 128 * kk as u32);
        wgmma_bf16_a_regs(&mut acc.data, a, b, true);
    });
    wgmma_commit();
}

/// The online softmax of one tile's scores (key tile `j`): masks, then [`online_softmax`].
#[inline(always)]
fn softmax_tile<H: HeadDim, S>(
    scores: &mut DistributedTensor<Scores, f32>,
    rows: &mut Rows<H>,
    (j, w, pb): (u32, &Item, &Problem<S>),
) -> Packed {
    let key0 = j * BN;
    let crosses_diagonal =
        pb.causal && (key0 + BN) as i64 - 1 > w.q0 as i64 + w.sk as i64 - w.sq as i64;
    if key0 + BN > w.sk || crosses_diagonal {
        mask(scores, (w.q0, key0), w, pb.causal);
    }
    online_softmax(scores, rows, pb.scale_log2)
}

/// The online softmax of one tile's (masked) scores: moves the running max, sum and `O` onto
/// the new max, and returns `P = exp2(S − max)` packed for the next MMA.
#[inline(always)]
pub(super) fn online_softmax<H: HeadDim>(
    scores: &DistributedTensor<Scores, f32>,
    rows: &mut Rows<H>,
    scale_log2: f32,
) -> Packed {
    // The scale is positive (the host checks), so the max of the scaled scores is the scaled
    // max, and each probability is one fused multiply-add and one exp2 of the raw score.
    let tile_max = reduce_x_in_warp::<Scores, RowStats, f32, 1>(scores, f32::max);
    let new_max = rows.max.zip_map(&tile_max, |m, t| m.max(t * scale_log2));
    // A row that has seen no key keeps −∞; exponentiate against 0 so it stays 0, not NaN.
    let base = new_max.map(|m| if m == f32::NEG_INFINITY { 0.0 } else { m });
    let rescale = rows.max.zip_map(&base, |old, b| math::exp2(old - b));
    let p = scores.zip_map(&broadcast_x::<Scores, RowStats, f32, 1>(&base), |x, b| {
        math::exp2(math::fma(x, scale_log2, -b))
    });
    let tile_sum = reduce_x_in_warp::<Scores, RowStats, f32, 1>(&p, |a, b| a + b);
    rows.sum = rows
        .sum
        .zip_map(&rescale, |l, r| l * r)
        .zip_map(&tile_sum, |l, t| l + t);
    rows.max = new_max;
    rows.acc = rows.acc.zip_map(
        &broadcast_x::<H::Out, RowStats, f32, 1>(&rescale),
        |o, r| o * r,
    );
    core::array::from_fn(|i| Bf16::pack2(p.get(2 * i), p.get(2 * i + 1)))
}

/// This warp is done with a buffer: its lanes' MMAs have read it (they waited for them); one
/// lane arrives for the warp.
#[inline(always)]
pub(super) fn release<const N: usize>(bars: &SharedArray<Mbarrier, N>, bar: u32) {
    warp_sync();
    if lane_id() == 0 {
        bars.arrive(bar);
    }
}

/// The running state of one item's rows: `O`, and per row the running max (scaled, log₂
/// domain) and sum.
pub(super) struct Rows<H: HeadDim> {
    pub acc: DistributedTensor<H::Out, f32>,
    pub max: DistributedTensor<RowStats, f32>,
    pub sum: DistributedTensor<RowStats, f32>,
}

impl<H: HeadDim> Rows<H> {
    /// No key seen yet.
    #[inline(always)]
    pub fn new() -> Rows<H> {
        Rows {
            acc: DistributedTensor::splat(0.0),
            max: DistributedTensor::splat(f32::NEG_INFINITY),
            sum: DistributedTensor::splat(0.0),
        }
    }

    /// `1 / sum` per row (0 for a row that saw no key), and the log-sum-exp `ln Σ exp(scale·s)
    /// = (max + log₂ sum) · ln 2` (−∞ for such a row).
    #[inline(always)]
    pub fn finish(
        &self,
    ) -> (
        DistributedTensor<RowStats, f32>,
        DistributedTensor<RowStats, f32>,
    ) {
        // rcp.approx (1 ulp of f32) is far below the bf16 rounding of O.
        let inv = self.sum.map(|l| if l > 0.0 { math::rcp(l) } else { 0.0 });
        let lse = self.max.zip_map(&self.sum, |m, l| {
            if l > 0.0 {
                (m + math::log2(l)) * core::f32::consts::LN_2
            } else {
                f32::NEG_INFINITY
            }
        });
        (inv, lse)
    }
}

/// Every item of the block: wait for its Q, run its key tiles through the ring, write O and
/// the LSE. The MMAs of tile `j`'s values and tile `j + 1`'s keys are issued together.
#[inline(always)]
pub fn consume<H: HeadDim, S: Sequences, const SMEM: usize>(
    (o, lse): (GlobalMut<Bf16>, GlobalMut<f32>),
    smem: &Smem<SMEM>,
    lay: Layout,
    pb: &Problem<S>,
) {
    let wg = warp_id() / 4;
    let tile = |at: u32| smem.tiles.shared_address(at);
    let (keys, vals) = (
        |s: u32| k_major(tile(lay.k(s)), 0),
        |s: u32| values(tile(lay.v(s))),
    );
    // Waits for item `i`'s Q and, if it has keys, for key tile `t` of the block: the
    // descriptors of its first scores.
    let prepare = |(i, w): (u32, Item), t: u32| {
        let (qb, q_parity) = q_buffer(i);
        smem.bars.wait(q_full(qb), q_parity);
        (w.key_tiles > 0).then(|| {
            let (s, parity) = lay.stage(t);
            smem.bars.wait(k_full(s), parity);
            (k_major(tile(lay.q(qb)), 64 * wg), keys(s))
        })
    };
    // The items: walked by each warp as the producer walks them, or read where it published
    // them (waiting for each one's Q buffer, which `prepare` then finds full).
    let mut walk = pb.my_items();
    let mut published = 0;
    let source = core::iter::from_fn(|| {
        if S::PUBLISHED {
            let (qb, q_parity) = q_buffer(published);
            published += 1;
            smem.bars.wait(q_full(qb), q_parity);
            Item::read(&smem.items, qb)
        } else {
            walk.next().map(|w| w.item)
        }
    });
    let mut items = (0u32..).zip(source).peekable();
    let mut t = 0;
    let mut scores = DistributedTensor::<Scores, f32>::splat(0.0);
    if let Some((q, k)) = items.peek().and_then(|&first| prepare(first, t)) {
        issue_scores::<H>(&mut scores, q, k);
        wgmma_wait::<0>(&mut scores.data);
        release(&smem.bars, k_empty(lay.stage(t).0));
    }
    while let Some((i, w)) = items.next() {
        let (qb, _) = q_buffer(i);
        let q = k_major(tile(lay.q(qb)), 64 * wg);
        let mut rows = Rows::<H>::new();
        for j in 0..w.key_tiles {
            // Q's k-steps made here: hoisted, their descriptors would be held across the loop.
            let q = opaque(q);
            let mut p = softmax_tile::<H, S>(&mut scores, &mut rows, (j, &w, pb));
            let (s, parity) = lay.stage(t + j);
            smem.bars.wait(v_full(s), parity);
            if S::FOREIGN_ROWS && (j + 1) * BN > w.sk {
                clear_foreign_values::<H, SMEM>(smem, (lay.v(s), w.sk - j * BN));
            }
            issue_values::<H>(&mut rows.acc, &mut p, vals(s));
            if j + 1 < w.key_tiles {
                let (s1, parity1) = lay.stage(t + j + 1);
                smem.bars.wait(k_full(s1), parity1);
                issue_scores::<H>(&mut scores, q, keys(s1));
                wgmma_wait::<1>(&mut rows.acc.data);
                release(&smem.bars, v_empty(s));
                wgmma_wait::<0>(&mut scores.data);
                release(&smem.bars, k_empty(s1));
            } else {
                wgmma_wait::<0>(&mut rows.acc.data);
                release(&smem.bars, v_empty(s));
            }
        }
        release(&smem.bars, q_empty(qb));
        t += w.key_tiles;
        // The next item's first scores run on the tensor cores while this one's output is
        // written (issue and wait in one branch: ptxas serialises MMAs whose wait it cannot
        // pair with them, C7518).
        match items.peek().and_then(|&next| prepare(next, t)) {
            Some((q, k)) => {
                issue_scores::<H>(&mut scores, q, k);
                store::<H, S>(rows, (o, lse), &w, pb);
                wgmma_wait::<0>(&mut scores.data);
                release(&smem.bars, k_empty(lay.stage(t).0));
            }
            None => store::<H, S>(rows, (o, lse), &w, pb),
        }
    }
}

/// O (normalised by the row sums) and the LSE of one item's rows (NaN where the item's
/// sequence is not valid).
#[inline(always)]
fn store<H: HeadDim, S: Sequences>(
    rows: Rows<H>,
    (o, lse): (GlobalMut<Bf16>, GlobalMut<f32>),
    w: &Item,
    pb: &Problem<S>,
) {
    let (mut inv, mut row_lse) = rows.finish();
    if !w.valid {
        inv = DistributedTensor::splat(f32::NAN);
        row_lse = DistributedTensor::splat(f32::NAN);
    }
    let out = rows
        .acc
        .zip_map(&broadcast_x::<H::Out, RowStats, f32, 1>(&inv), |o, i| o * i)
        .round_to::<Bf16>();
    // This head's rows of O, wherever the strides put them; the view ends at the sequence's
    // last row, so the padding rows of the tile are not written.
    let row_stride = S::o_row_stride(pb);
    let span = (w.sq - 1) * row_stride + H::D;
    let ov = View2::<_, Bf16, 2>::new(o.slice(w.o_base, span), w.sq, H::D, row_stride);
    make_tile_window::<H::Out, _>(ov, [w.q0 as i32, 0]).store(&out);
    // The quad's four lanes hold the same rows: one of them writes.
    if lane_id().is_multiple_of(4) {
        let lv = View1::<_, f32, 1>::new(lse, w.lse_base + w.sq);
        make_tile_window::<RowStats, _>(lv, [(w.lse_base + w.q0) as i32]).store(&row_lse);
    }
}
