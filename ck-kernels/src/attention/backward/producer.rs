//! The producer: one thread that copies the block's keys and values once, then every step's
//! Q and dO tiles (and its rows' statistics) into the ring as soon as a stage is free, with TMA (64-column panels in the
//! 128-byte swizzle, the layout the MMAs read; rows past a head's end arrive as zeros).

use super::schedule::*;
use ck_core::device::*;
use ck_core::tile::unroll;
use core::num::NonZeroU32;

/// Q, dO, K and V as rows of heads (rank 4, innermost first: `[D, seq, heads, batch]`, with
/// the strides of either layout: `[batch, heads, seq, D]`, or O's and dO's `[batch, seq,
/// heads, D]`).
pub type Heads = Tma<Bf16, 4>;

/// Copies rows `row0..row0 + rows` of head `bh` (`batch · heads + head`, `heads` a batch's) of
/// `src` (whose box is `rows` rows) into the tile at element `at`, panel by panel; the copies
/// complete on barrier `bar`.
#[inline(always)]
fn copy_rows<const SMEM: usize, const STATS: usize>(
    smem: &Smem<SMEM, STATS>,
    (src, (bh, heads), row0): (&Heads, (u32, NonZeroU32), u32),
    (rows, d): (u32, u32),
    (at, bar): (u32, u32),
) {
    unroll::<2>(|p| {
        let p = p as u32;
        if p < d / 64 {
            let (b, h) = (bh / heads, bh % heads);
            let coords = [(64 * p) as i32, row0 as i32, h as i32, b as i32];
            src.copy_to_shared(coords, &smem.tiles, at + p * rows * 64, &smem.bars, bar);
        }
    });
}

/// The keys and values, then each step's Q, dO and row statistics (from `stats`, the row
/// workspace `[2, batch · heads, sq_pad]` as a rank-1 map in boxes of 64; `half` its first
/// half's length).
#[inline(always)]
pub fn produce<const SMEM: usize, const STATS: usize>(
    (q, dout, k, v): (&Heads, &Heads, &Heads, &Heads),
    (stats, half): (&Tma<f32, 1>, u32),
    smem: &Smem<SMEM, STATS>,
    lay: Layout,
    pb: &Problem,
    d: u32,
) {
    q.prefetch();
    dout.prefetch();
    let (n, bkv) = pb.block();
    let kv_heads = nz(pb.heads.get() / pb.group);
    smem.bars.arrive_expect_tx(KV_FULL, 2 * BN * d * 2);
    copy_rows(
        smem,
        (k, (bkv, kv_heads), n * BN),
        (BN, d),
        (lay.k(), KV_FULL),
    );
    copy_rows(
        smem,
        (v, (bkv, kv_heads), n * BN),
        (BN, d),
        (lay.v(), KV_FULL),
    );
    for (t, step) in (0u32..).zip(pb.steps()) {
        let (s, _) = stage(t);
        if t >= STAGES {
            smem.bars.wait(empty(s), stage(t - STAGES).1);
        }
        smem.bars
            .arrive_expect_tx(full(s), 2 * BM * d * 2 + 2 * BM * 4);
        copy_rows(
            smem,
            (q, (step.bh, pb.heads), step.q0),
            (BM, d),
            (lay.q(s), full(s)),
        );
        copy_rows(
            smem,
            (dout, (step.bh, pb.heads), step.q0),
            (BM, d),
            (lay.dout(s), full(s)),
        );
        let row = (step.bh * pb.sq_pad + step.q0) as i32;
        stats.copy_to_shared([row], &smem.stats, lay.lse2(s), &smem.bars, full(s));
        let delta = [row + half as i32];
        stats.copy_to_shared(delta, &smem.stats, lay.delta(s), &smem.bars, full(s));
    }
}
