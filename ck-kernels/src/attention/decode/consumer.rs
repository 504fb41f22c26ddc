//! A consumer warpgroup: the online softmax of an item's query rows against every other key
//! tile of the item's split (warpgroup `wg` takes tiles `wg, wg + 2, …`), then its partial O
//! (normalised) and log-sum-exp: one *slot* of the split scratch, or, when the keys are not
//! split, merged with the other warpgroup's in the block and written as O and the LSE.

use super::combine::{arrive_and_merge, inverse, lse_index, merged_lse, split_counts, weight};
use super::schedule::*;
use crate::attention::consumer::{
    issue_scores_in, issue_values, k_major, online_softmax, release, values, Rows,
};
use crate::attention::{HeadDim, RowStats, Scores};
use ck_core::device::*;
use ck_core::tile::{broadcast_x, DistributedTensor};
use ck_core::TileDistribution;

/// What a consumer thread needs of its query rows for one item (two rows per thread, in
/// [`RowStats`]'s layout), worked out once per item rather than per score: the keys each row
/// sees (`key < keys`: the sequence's, or under the causal mask those up to its token's
/// diagonal), and where its partial result goes (`[slots, batch, sq, heads]` row, or
/// `u32::MAX` for a padding row of the tile).
struct ItemRows {
    keys: DistributedTensor<RowStats, u32>,
    out: DistributedTensor<RowStats, u32>,
}

impl ItemRows {
    #[inline(always)]
    fn of(w: &Work, pb: &Problem, slot: u32) -> ItemRows {
        let mut rows = ItemRows {
            keys: DistributedTensor::splat(w.sk),
            out: DistributedTensor::splat(u32::MAX),
        };
        let p = RowStats::partition_index(thread_idx());
        RowStats::for_each_y(|y, d| {
            let [r] = RowStats::x_index(p, y);
            if let Some((t, h)) = w.row(r as u32 % ROWS, pb) {
                if pb.causal {
                    let diagonal = t as i64 + w.sk as i64 - pb.sq as i64 + 1;
                    rows.keys.set(d, diagonal.clamp(0, w.sk as i64) as u32);
                }
                rows.out.set(d, partial_row(slot, (t, h), w, pb));
            }
        });
        rows
    }
}

/// Sets the scores of keys a row does not see to −∞ (`key0`: the tile's first key).
#[inline(always)]
fn mask(s: &mut DistributedTensor<Scores, f32>, key0: u32, rows: &ItemRows) {
    let keys = broadcast_x::<Scores, RowStats, u32, 1>(&rows.keys);
    let p = Scores::partition_index(thread_idx());
    Scores::for_each_y(|y, d| {
        let [_, c] = Scores::x_index(p, y);
        if key0 + c as u32 >= keys.get(d) {
            s.set(d, f32::NEG_INFINITY);
        }
    });
}

/// Zeros rows `valid..` of the value tile at `at`. They hold whatever the cache held past the
/// sequence's end (a stale page, uninitialised memory): their probabilities are 0, but
/// `0 · NaN` is NaN. Written through the generic proxy, so fenced before the warpgroup's MMAs
/// (the async proxy) read the tile.
#[inline(always)]
fn clear_stale_values<H: HeadDim, const SMEM: usize>(
    smem: &Smem<SMEM>,
    (at, valid): (u32, u32),
    wg: u32,
) {
    let chunks = (BN - valid) * 8;
    for p in 0..H::D / 64 {
        let first = at + (p * K_PANEL_BYTES + valid * 128) / 2;
        let mut c = thread_idx() % 128;
        while c < chunks {
            smem.tiles
                .store_vec::<8>(first + 8 * c, [Bf16::default(); 8]);
            c += 128;
        }
    }
    fence_proxy_async();
    named_barrier_sync(1 + wg, 128);
}

/// The named barrier of an unsplit item's merge (both consumer warpgroups); 1 and 2 are each
/// warpgroup's.
const MERGE: u32 = 4;

/// Every item of the block: wait for its Q rows, run this warpgroup's key tiles, release the Q
/// buffer, write the partial result.
#[inline(always)]
pub fn consume<H: HeadDim, const SMEM: usize>(
    out: Outputs,
    smem: &Smem<SMEM>,
    lay: Layout,
    pb: &Problem,
) {
    let wg = warp_id() / 4;
    let tile = |at: u32| smem.tiles.shared_address(at);
    let mut t = 0;
    for (i, w) in (0u32..).zip(items(smem, pb)) {
        let buf = q_buffer(i);
        smem.bars.wait(q_full(buf), (i / Q_BUFFERS) % 2);
        let q = (k_major(tile(lay.q(buf)), 0), Q_PANEL_BYTES);
        let slot = w.split * CONSUMERS + wg;
        let item_rows = ItemRows::of(&w, pb, slot);
        let mut rows = Rows::<H>::new();
        let mut j = wg;
        while j < w.tiles {
            // Q's k-steps made here: hoisted, their descriptors would be held across the loop.
            let q = (opaque(q.0), q.1);
            let (s, parity) = lay.stage(t + j);
            let released = |empty: u32| {
                // With an odd stage count a stage's uses alternate between the warpgroups, so
                // this one may come to use `n` while use `n − 1` (the other's) is not even
                // filled: its "full" phase `n − 1` pending, the wait for phase `n` (the same
                // parity as the completed `n − 2`) would pass at once. Wait first until use
                // `n − 1` was released — exact: phase `n` of "empty" needs this warpgroup.
                if t + j >= lay.stages {
                    smem.bars.wait(empty, parity ^ 1);
                }
            };
            released(k_empty(s));
            smem.bars.wait(k_full(s), parity);
            let mut scores = DistributedTensor::<Scores, f32>::splat(0.0);
            issue_scores_in::<H>(&mut scores, q, k_major(tile(lay.k(s)), 0));
            wgmma_wait::<0>(&mut scores.data);
            release(&smem.bars, k_empty(s));
            let key0 = (w.first_tile + j) * BN;
            let crosses_diagonal =
                pb.causal && (key0 + BN) as i64 - 1 > w.t0 as i64 + w.sk as i64 - pb.sq as i64;
            let past_end = key0 + BN > w.sk;
            if past_end || crosses_diagonal {
                mask(&mut scores, key0, &item_rows);
            }
            let mut p = online_softmax(&scores, &mut rows, pb.scale_log2);
            released(v_empty(s));
            smem.bars.wait(v_full(s), parity);
            if past_end {
                clear_stale_values::<H, SMEM>(smem, (lay.v(s), w.sk - key0), wg);
            }
            issue_values::<H>(&mut rows.acc, &mut p, values(tile(lay.v(s))));
            wgmma_wait::<0>(&mut rows.acc.data);
            release(&smem.bars, v_empty(s));
            j += CONSUMERS;
        }
        t += w.tiles;
        // The balanced cut's split count of the sequence, for the combine launch (which would
        // work it out again from every length): by the first item of the sequence.
        let first_of_sequence = w.split == 0 && w.kv_head == 0 && w.h0 == 0 && w.t0 == 0;
        if !pb.merges && pb.chunks.target > 0 && first_of_sequence && thread_idx() == 0 {
            let rows = pb.chunks.batch * pb.sq * pb.heads;
            let at = split_counts(pb.chunks.splits.get(), rows) + w.b;
            out.lse_part.store(at, w.splits as f32);
        }
        if w.splits == 1 {
            let item = (buf, &item_rows, w.bad_length);
            store_merged::<H, SMEM>(rows, out, smem, lay, item, pb);
        } else {
            smem.bars.arrive(q_empty(buf));
            store_partial(rows, (out.o_part, out.lse_part), &item_rows, w.bad_length);
            if pb.merges {
                arrive_and_merge::<H, SMEM>(&w, pb, out, smem, MERGE);
            }
        }
    }
}

/// Row `(t, h)` of slot `slot` in the split scratch `[slots, batch, sq, heads]`.
#[inline(always)]
fn partial_row(slot: u32, (t, h): (u32, u32), w: &Work, pb: &Problem) -> u32 {
    ((slot * pb.chunks.batch + w.b) * pb.sq + t) * pb.heads + w.kv_head * pb.group.get() + h
}

/// This warpgroup's O, normalised by its sums (a slot with no key gives 0), and log-sum-exp
/// (both NaN for a sequence whose length is out of range).
#[inline(always)]
fn normalised<H: HeadDim>(
    rows: &Rows<H>,
    bad_length: bool,
) -> (
    DistributedTensor<H::Out, f32>,
    DistributedTensor<RowStats, f32>,
) {
    let (inv, lse) = rows.finish();
    let out = rows
        .acc
        .zip_map(&broadcast_x::<H::Out, RowStats, f32, 1>(&inv), |o, i| o * i);
    if bad_length {
        return (out.map(|_| f32::NAN), lse.map(|_| f32::NAN));
    }
    (out, lse)
}

/// This warpgroup's O and log-sum-exp of the item's rows, into their slot's rows.
#[inline(always)]
fn store_partial<H: HeadDim>(
    rows: Rows<H>,
    (o_part, lse_part): (GlobalMut<f32>, GlobalMut<f32>),
    item_rows: &ItemRows,
    bad_length: bool,
) {
    let (out, lse) = normalised(&rows, bad_length);
    let at = broadcast_x::<H::Out, RowStats, u32, 1>(&item_rows.out);
    let p = H::Out::partition_index(thread_idx());
    H::Out::for_each_y(|y, d| {
        let [_, c] = H::Out::x_index(p, y);
        if at.get(d) != u32::MAX {
            o_part.store(at.get(d) * H::D + c as u32, out.get(d));
        }
    });
    // The quad's four lanes hold the same rows: one of them writes.
    if lane_id().is_multiple_of(4) {
        RowStats::for_each_y(|_, d| {
            if item_rows.out.get(d) != u32::MAX {
                lse_part.store(item_rows.out.get(d), lse.get(d));
            }
        });
    }
}

/// An unsplit item's result: the two warpgroups' halves merged as the combine merges two slots
/// ([`super::combine`]: the same weights, in the same order), written as O and the LSE by
/// warpgroup 0. Thread `t` of either warpgroup holds the same rows and columns, so warpgroup 1
/// leaves its values in shared memory at `[register][t]` (conflict-free): O through the item's
/// Q buffer `buf`, which both warpgroups are done reading once they meet, half of the registers
/// at a time (the buffer holds half), the LSE beside it. The buffer is released to the Q warp
/// once warpgroup 0 has read it: by every thread's arrival, each ordering its own accesses
/// before the Q warp's next copy (one lane's for the warp would order the others' through the
/// warp barrier, which compute-sanitizer's racecheck does not follow).
#[inline(always)]
fn store_merged<H: HeadDim, const SMEM: usize>(
    rows: Rows<H>,
    out: Outputs,
    smem: &Smem<SMEM>,
    lay: Layout,
    (buf, item_rows, bad_length): (u32, &ItemRows, bool),
    pb: &Problem,
) {
    let (mine, lse) = normalised(&rows, bad_length);
    let exchange = smem.tiles.reinterpret::<f32, EXCHANGE_SPAN>();
    let (at, t) = (lay.exchange(buf), thread_idx() % 128);
    let half = (H::Out::THREAD_BUFFER_SIZE / 2) as u32;
    let mut theirs = DistributedTensor::<H::Out, f32>::splat(0.0);
    let mut their_lse = DistributedTensor::<RowStats, f32>::splat(0.0);
    // A loop, not a closure called twice: one left un-inlined held both O tiles in local memory.
    for round in 0..2 {
        named_barrier_sync(MERGE, CONSUMERS * 128);
        if warp_id() >= 4 {
            H::Out::for_each_y(|_, d| {
                if d as u32 / half == round {
                    exchange.store(at + (d as u32 % half) * 128 + t, mine.get(d));
                }
            });
            if round == 0 {
                RowStats::for_each_y(|_, d| smem.lse.store(d as u32 * 128 + t, lse.get(d)));
            }
        }
        named_barrier_sync(MERGE, CONSUMERS * 128);
        if warp_id() < 4 {
            H::Out::for_each_y(|_, d| {
                if d as u32 / half == round {
                    theirs.set(d, exchange.load(at + (d as u32 % half) * 128 + t));
                }
            });
            if round == 0 {
                RowStats::for_each_y(|_, d| their_lse.set(d, smem.lse.load(d as u32 * 128 + t)));
            }
        }
    }
    // Warpgroup 1 is done writing, warpgroup 0 reading; the next item's merge rewrites the LSEs
    // only after both meet again.
    smem.bars.arrive(q_empty(buf));
    if warp_id() < 4 {
        let max = lse.zip_map(&their_lse, f32::max);
        let (w0, w1) = (lse.zip_map(&max, weight), their_lse.zip_map(&max, weight));
        let sum = w0.zip_map(&w1, |a, b| a + b);
        let per_row =
            |x: &DistributedTensor<RowStats, f32>| broadcast_x::<H::Out, RowStats, f32, 1>(x);
        let acc = mine.zip_map(&per_row(&w0), |o, w| math::fma(w, o, 0.0));
        let acc = acc.zip_map(
            &theirs.zip_map(&per_row(&w1), |o, w| (o, w)),
            |a, (o, w)| math::fma(w, o, a),
        );
        let merged = acc
            .zip_map(&per_row(&sum.map(inverse)), |a, i| a * i)
            .round_to::<Bf16>();
        let to = broadcast_x::<H::Out, RowStats, u32, 1>(&item_rows.out);
        let p = H::Out::partition_index(thread_idx());
        H::Out::for_each_y(|y, d| {
            let [_, c] = H::Out::x_index(p, y);
            if to.get(d) != u32::MAX {
                out.o.store(to.get(d) * H::D + c as u32, merged.get(d));
            }
        });
        if lane_id().is_multiple_of(4) {
            RowStats::for_each_y(|_, d| {
                let row = item_rows.out.get(d);
                if row != u32::MAX {
                    let at = lse_index(row, pb.sq, pb.heads);
                    out.lse.store(at, merged_lse(max.get(d), sum.get(d)));
                }
            });
        }
    }
}
