//! The combine: the rows of a row tile whose sequence was cut into several splits, merged from
//! the splits' slots (a sequence of one split has its two slots merged in its decode block,
//! with the same weights).
//!
//! A slot `s` holds `O_s` (normalised over the keys it saw) and `LSE_s = ln Σ exp(score)` over
//! them. Over all keys, with `M = max_s LSE_s` and weights `w_s = exp(LSE_s − M)`:
//!
//! ```text
//! O = Σ w_s · O_s / Σ w_s        LSE = M + ln Σ w_s
//! ```
//!
//! Worked example: two slots with `LSE = (ln 1, ln 3)` and `O = (1, 5)` (one column) — the
//! first saw keys whose `exp(score)` sum to 1, the second 3 — give `M = ln 3`, `w = (1/3, 1)`,
//! `O = (1/3 + 5) / (4/3) = 4`, `LSE = ln 3 + ln(4/3) = ln 4`. A slot that saw no key has
//! `LSE = −∞`, weight 0; a row with no key at all gives `O = 0`, `LSE = −∞`.
//!
//! Two places merge, the host choosing by the row tile's size ([`super::host::merges_in_kernel`]):
//!
//! * **in the decode kernel** (`arrive_and_merge`), for row tiles of at most
//!   [`MERGED_ROWS`] rows (one new token against GQA groups of up to 8): each split's block,
//!   once its warpgroups have stored their slots, takes a ticket of the row tile
//!   ([`last_arrival`]), and the one whose ticket completes the count merges, while its
//!   producers load its next item. No second launch: B1 × 2k 17.0 → 15.9 µs, B1 × 32k 60.4 →
//!   57.9, B16 × 2k 57.2 → 54.3 (H100 job 138). The tickets follow the slots and the split
//!   counts in the scratch, zeroed before the launch (the kernel leaves them zero).
//! * **in a launch of its own** ([`AttentionDecodeCombine`]) for larger tiles, whose merge on
//!   one multiprocessor is a chain of loads too long for the kernel's tail: the mixed batch's
//!   16-row tiles of 24 splits took 118 µs merged in the kernel against 97 µs this way (job 138).
//!   Each sequence's first item hands the combine its split count (the balanced cut's).

use super::schedule::{Outputs, Problem, Smem, Work, ROWS};
use crate::attention::HeadDim;
use ck_core::device::*;
use ck_core::tile::{make_tile_window, unroll, DistributedTensor, View2};
use ck_macros::{tile_distribution, tile_kernel};
use core::num::NonZeroU32;

tile_distribution! {
    /// Two output rows of up to 128 columns: warps 0–3 take row 0 and warps 4–7 row 1, lane `l`
    /// of warp `w` column `32·(w mod 4) + l` — a thread's column of every slot loaded at once.
    pub struct CombineRows {
        warp_size: 32, block_size: 256,
        h: { row: [warp: 2], d: [warp: 4, lane: 32, vec: 1] },
        p: [[row.warp, d.warp], [d.lane]],
        y: [d.vec],
    }
}

/// Rows per block: few, so that a small batch's rows still spread over many multiprocessors
/// (the combine is a chain of two dependent loads per row, bound by their latency).
pub const ROWS_PER_BLOCK: u32 = 2;

/// Slots whose values a thread loads before adding any: a row of the mixed batch's long
/// sequence under the balanced cut has 48 (24 splits).
const SLOTS_IN_FLIGHT: usize = 32;

/// `o` `[rows, head_dim]` (rows `(b, t, h)` of `[batch, sq, heads]`) and `lse` `[batch, heads,
/// sq]` from the partial results `o_part` `[2 · splits, rows, head_dim]`, `lse_part` `[2 ·
/// splits, rows]` of the splits each sequence was cut into: `splits` each (`balanced` false),
/// or as many as the decode kernel wrote for sequence `b` at `lse_part[2 · splits · rows + b]`
/// (the balanced cut; [`super::schedule::Chunking`]). Two slots per split; a slot past them
/// holds nothing of the call's.
#[tile_kernel(block = 256, distributions(CombineRows))]
#[allow(clippy::too_many_arguments)]
pub fn attention_decode_combine(
    o_part: Global<f32>,
    lse_part: Global<f32>,
    o: GlobalMut<Bf16>,
    lse: GlobalMut<f32>,
    splits: u32,
    balanced: bool,
    rows: u32,
    head_dim: u32,
    sq: u32,
    heads: u32,
) {
    let r0 = block_idx() * ROWS_PER_BLOCK;
    let p = CombineRows::partition_index(thread_idx());
    let [r, c] = CombineRows::x_index(p, [0]);
    let row = r0 + r as u32;
    // Nothing below synchronises the block: a thread past the last row or column leaves.
    if row >= rows || c as u32 >= head_dim {
        return;
    }
    let splits = if balanced {
        let b = row / (sq * heads).max(1);
        // Clamped: a count is never past the scratch's slots.
        (lse_part.load(split_counts(splits, rows) + b) as u32).clamp(1, splits)
    } else {
        splits
    };
    // An unsplit sequence's rows were written by its decode block.
    if splits == 1 {
        return;
    }
    let slots = 2 * splits;
    let len = rows * head_dim;
    let row_of = |s: u32| {
        let view = View2::<_, f32, 1>::new(o_part.slice(s * len, len), rows, head_dim, head_dim);
        make_tile_window::<CombineRows, _>(view, [r0 as i32, 0]).load::<f32>()
    };
    // SLOTS_IN_FLIGHT slots' values loaded at once, from `first` (slots past the last read the
    // last one's value, to be weighted 0: no NaN of their own, a NaN in the last slot makes the
    // row NaN through its own weight).
    let group = |first: u32| {
        let mut values = [DistributedTensor::<CombineRows, f32>::splat(0.0); SLOTS_IN_FLIGHT];
        unroll::<SLOTS_IN_FLIGHT>(|i| values[i] = row_of((first + i as u32).min(slots - 1)));
        values
    };
    // The first group's values are in flight while the weights are worked out: they do not
    // depend on them.
    let mut values = group(0);
    // The slots' weights, the warp's lanes side by side.
    let lse_of = |s: u32| lse_part.load(s * rows + row);
    let (max, sum) = row_weights(slots, lse_of);
    // O: every slot's value weighted (an empty slot's is 0, weight 0).
    let mut acc = DistributedTensor::<CombineRows, f32>::splat(0.0);
    let mut first = 0;
    loop {
        unroll::<SLOTS_IN_FLIGHT>(|i| {
            let slot = first + i as u32;
            let w = if slot < slots {
                weight(lse_of(slot), max)
            } else {
                0.0
            };
            acc = acc.zip_map(&values[i], |a, x| math::fma(w, x, a));
        });
        first += SLOTS_IN_FLIGHT as u32;
        if first >= slots {
            break;
        }
        values = group(first);
    }
    let out = acc.map(|a| a * inverse(sum)).round_to::<Bf16>();
    let view = View2::<_, Bf16, 1>::new(o, rows, head_dim, head_dim);
    make_tile_window::<CombineRows, _>(view, [r0 as i32, 0]).store(&out);
    if c == 0 {
        lse.store(lse_index(row, sq, heads), merged_lse(max, sum));
    }
}

/// The most rows of a row tile merged in the decode kernel.
pub const MERGED_ROWS: u32 = 8;

/// Slots a thread of the in-kernel merge loads before adding any (bound by their latency).
const MERGE_SLOTS_IN_FLIGHT: usize = 16;

/// Where the row tiles' tickets are in the log-sum-exp scratch: after its `2 · splits` slots
/// of `rows` rows and the sequences' split counts (u32 counters in f32 words).
#[inline(always)]
pub(crate) fn tickets_at(splits: u32, rows: u32, batch: u32) -> u32 {
    split_counts(splits, rows) + batch
}

/// The block's split of `w`'s row tile has stored its two slots: counts it, and where it is the
/// last of the tile's splits, merges every split's slots into the tile's O and LSE rows. Called
/// by both consumer warpgroups (256 threads, the named barrier `merge`).
#[inline(always)]
pub(crate) fn arrive_and_merge<H: HeadDim, const SMEM: usize>(
    w: &Work,
    pb: &Problem,
    out: Outputs,
    smem: &Smem<SMEM>,
    merge: u32,
) {
    let rows = pb.chunks.batch * pb.sq * pb.heads;
    fence_acq_rel_gpu();
    let tickets = out.lse_part.cast::<u32>();
    let at = tickets_at(pb.chunks.splits.get(), rows, pb.chunks.batch) + w.ticket;
    let sync = || named_barrier_sync(merge, 256);
    if !last_arrival((tickets, at), w.splits, &smem.said, sync) {
        return;
    }
    let (slots, d) = (2 * w.splits, H::D);
    let out_row =
        |(t, h): (u32, u32)| (w.b * pb.sq + t) * pb.heads + w.kv_head * pb.group.get() + h;
    let tile_rows = (w.hc.get() * w.tc).min(ROWS);
    // Each row's max LSE and sum of weights (warp `k` takes rows `k, k + 8, …`, its lanes the
    // slots), kept in shared memory for the O pass, and the row's LSE written.
    let (warp, lane) = (thread_idx() / 32, lane_id());
    let mut r = warp;
    while r < tile_rows {
        if let Some(th) = w.row(r, pb) {
            let row = out_row(th);
            let lse_of = |s: u32| out.lse_part.load(s * rows + row);
            let (max, sum) = row_weights(slots, lse_of);
            if lane == 0 {
                smem.lse.store(r, max);
                smem.lse.store(ROWS + r, sum);
                out.lse
                    .store(lse_index(row, pb.sq, pb.heads), merged_lse(max, sum));
            }
        }
        r += 8;
    }
    sync();
    // O: thread `t` takes columns `4q ..+ 4` (`q = t mod D/4`) of rows `t / (D/4)`, then every
    // `256 / (D/4)`-th (a warp a row at D 128); per row MERGE_SLOTS_IN_FLIGHT slots' values and
    // log-sum-exps loaded before any is added (a slot past the last reads the last, weight 0).
    let quads = d / 4;
    let (q, mut r) = (thread_idx() % quads, thread_idx() / quads);
    while r < tile_rows {
        if let Some(th) = w.row(r, pb) {
            let row = out_row(th);
            let (max, sum) = (smem.lse.load(r), smem.lse.load(ROWS + r));
            let mut acc = [0.0f32; 4];
            let mut first = 0;
            while first < slots {
                let mut values = [[0.0f32; 4]; MERGE_SLOTS_IN_FLIGHT];
                let mut lses = [0.0f32; MERGE_SLOTS_IN_FLIGHT];
                unroll::<MERGE_SLOTS_IN_FLIGHT>(|k| {
                    let s = (first + k as u32).min(slots - 1);
                    values[k] = out.o_part.load_vec::<4>((s * rows + row) * d + 4 * q);
                    lses[k] = out.lse_part.load(s * rows + row);
                });
                unroll::<MERGE_SLOTS_IN_FLIGHT>(|k| {
                    let wt = if first + (k as u32) < slots {
                        weight(lses[k], max)
                    } else {
                        0.0
                    };
                    unroll::<4>(|j| acc[j] = math::fma(wt, values[k][j], acc[j]));
                });
                first += MERGE_SLOTS_IN_FLIGHT as u32;
            }
            let inv = inverse(sum);
            out.o
                .store_vec::<4>(row * d + 4 * q, acc.map(|a| Bf16::from_f32(a * inv)));
        }
        r += 256 / quads;
    }
}

/// A row's `M = max_s LSE_s` and `Σ w_s` over its `slots` slots (`lse_of(s)`: slot `s`'s
/// log-sum-exp), the calling warp's lanes reading slots `l, l + 32, …` and agreeing on both
/// (a NaN slot — a sequence whose length is out of range — has weight NaN, and makes the row
/// NaN).
#[inline(always)]
fn row_weights(slots: u32, lse_of: impl Fn(u32) -> f32) -> (f32, f32) {
    let mut max = f32::NEG_INFINITY;
    let mut s = lane_id();
    while s < slots {
        max = max.max(lse_of(s));
        s += 32;
    }
    let max = warp_reduce(max, f32::max);
    let mut sum = 0.0;
    let mut s = lane_id();
    while s < slots {
        sum += weight(lse_of(s), max);
        s += 32;
    }
    (max, warp_reduce(sum, |a, b| a + b))
}

/// A slot's weight `exp(LSE_s − M)` (0 for a slot that saw no key).
#[inline(always)]
pub(crate) fn weight(lse: f32, max: f32) -> f32 {
    if lse == f32::NEG_INFINITY {
        0.0
    } else {
        math::exp2((lse - max) * core::f32::consts::LOG2_E)
    }
}

/// `1 / Σ w_s` (0 for a row with no key: its O is 0).
#[inline(always)]
pub(crate) fn inverse(sum: f32) -> f32 {
    if sum == 0.0 {
        0.0
    } else {
        1.0 / sum
    }
}

/// The row's log-sum-exp over every slot, `M + ln Σ w_s` (−∞ for a row with no key).
#[inline(always)]
pub(crate) fn merged_lse(max: f32, sum: f32) -> f32 {
    if sum == 0.0 {
        f32::NEG_INFINITY
    } else {
        max + math::log2(sum) * core::f32::consts::LN_2
    }
}

/// Where the balanced cut's split count of each sequence is in the log-sum-exp scratch, after
/// the `2 · splits` slots of `rows` rows (as f32: exact below 2²⁴).
#[inline(always)]
pub(crate) fn split_counts(splits: u32, rows: u32) -> u32 {
    2 * splits * rows
}

/// Where output row `row` (`(b, t, h)` of `[batch, sq, heads]`) has its log-sum-exp in
/// `[batch, heads, sq]`.
#[inline(always)]
pub(crate) fn lse_index(row: u32, sq: u32, heads: u32) -> u32 {
    // The host passes non-zero sizes; a division that cannot panic keeps panic code out.
    let nz = |x: u32| NonZeroU32::new(x).unwrap_or(NonZeroU32::MIN);
    let (bt, h) = (row / nz(heads), row % nz(heads));
    let (b, t) = (bt / nz(sq), bt % nz(sq));
    (b * heads + h) * sq + t
}
