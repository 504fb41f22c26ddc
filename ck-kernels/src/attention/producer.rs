//! The producer: one thread that copies every tile the consumers read, with TMA, as soon as
//! its buffer is free (see [`super::schedule`] for the order and the barriers).

use super::schedule::*;
use super::HeadDim;
use ck_core::device::*;
use ck_core::tile::unroll;

/// Q, K and V as `[seq, D]` rows of `batch · heads` heads (rank 3, innermost first: head dim,
/// row, head), copied in 64-column panels of 128 rows.
pub type Heads = Tma<Bf16, 3>;

/// Copies rows `row0..row0 + 128` of head `head` of `src` (rows past its end as zeros) into
/// the tile at element `at`, panel by panel, announcing the bytes on barrier `bar`.
#[inline(always)]
fn copy_tile<H: HeadDim, const SMEM: usize>(
    smem: &Smem<SMEM>,
    (src, head, row0): (&Heads, u32, u32),
    at: u32,
    bar: u32,
) {
    smem.bars.arrive_expect_tx(bar, tile_bytes(H::D));
    unroll::<2>(|p| {
        let p = p as u32;
        if p < H::D / 64 {
            let to = at + p * PANEL_BYTES / 2;
            let coords = [(64 * p) as i32, row0 as i32, head as i32];
            src.copy_to_shared(coords, &smem.tiles, to, &smem.bars, bar);
        }
    });
}

/// Every item's Q, and every key and value tile, into their buffers; each buffer refilled once
/// its consumers have released it.
#[inline(always)]
pub fn produce<H: HeadDim, const SMEM: usize>(
    (q, k, v): (&Heads, &Heads, &Heads),
    smem: &Smem<SMEM>,
    lay: Layout,
    pb: &Problem,
) {
    q.prefetch();
    k.prefetch();
    v.prefetch();
    let mut t = 0;
    for (i, w) in (0u32..).zip(pb.my_items()) {
        let (qb, _) = q_buffer(i);
        if i >= 2 {
            smem.bars.wait(q_empty(qb), q_buffer(i - 2).1);
        }
        copy_tile::<H, SMEM>(smem, (q, w.bh, w.q0), lay.q(qb), q_full(qb));
        for j in 0..w.key_tiles {
            let (s, _) = lay.stage(t);
            let refill = t >= lay.stages;
            if refill {
                smem.bars.wait(k_empty(s), lay.stage(t - lay.stages).1);
            }
            copy_tile::<H, SMEM>(smem, (k, w.kv_head, j * BN), lay.k(s), k_full(s));
            if refill {
                smem.bars.wait(v_empty(s), lay.stage(t - lay.stages).1);
            }
            copy_tile::<H, SMEM>(smem, (v, w.kv_head, j * BN), lay.v(s), v_full(s));
            t += 1;
        }
    }
}
