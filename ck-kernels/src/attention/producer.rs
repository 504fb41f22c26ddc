//! The producer: one thread — for packed sequences a warp, whose lanes walk the bounds 32 at a
//! time — that walks the block's items and copies every tile the consumers read, with TMA, as
//! soon as its buffer is free (see [`super::schedule`] for the order and the barriers). Lane 0
//! copies, and publishes packed items.

use super::schedule::*;
use super::HeadDim;
use ck_core::device::*;
use ck_core::tile::unroll;

/// Q, K and V as rows of heads (rank 4, innermost first: head dim, row, head, batch — `[D, seq,
/// heads, batch]` at the strides of any layout, or `[D, total, heads, 1]` when packed), copied
/// in 64-column panels of 128 rows.
pub type Heads = Tma<Bf16, 4>;

/// Copies rows `row0..row0 + 128` of head `head` of batch `batch` of `src` (rows past its end
/// as zeros) into the tile at element `at`, panel by panel, announcing the bytes on barrier
/// `bar`.
#[inline(always)]
fn copy_tile<H: HeadDim, const SMEM: usize>(
    smem: &Smem<SMEM>,
    (src, [row0, head, batch]): (&Heads, [u32; 3]),
    at: u32,
    bar: u32,
) {
    smem.bars.arrive_expect_tx(bar, tile_bytes(H::D));
    unroll::<2>(|p| {
        let p = p as u32;
        if p < H::D / 64 {
            let to = at + p * PANEL_BYTES / 2;
            let coords = [(64 * p) as i32, row0 as i32, head as i32, batch as i32];
            src.copy_to_shared(coords, &smem.tiles, to, &smem.bars, bar);
        }
    });
}

/// Every item's Q, and every key and value tile, into their buffers; each buffer refilled once
/// its consumers have released it (and, published, the end marker).
#[inline(always)]
pub fn produce<H: HeadDim, S: Sequences, const SMEM: usize>(
    (q, k, v): (&Heads, &Heads, &Heads),
    smem: &Smem<SMEM>,
    lay: Layout,
    pb: &Problem<S>,
) {
    let leader = lane_id() == 0;
    if leader {
        q.prefetch();
        k.prefetch();
        v.prefetch();
    }
    let mut t = 0;
    let mut i = 0;
    for w in pb.my_items() {
        let (qb, _) = q_buffer(i);
        if i >= 2 {
            smem.bars.wait(q_empty(qb), q_buffer(i - 2).1);
        }
        if leader {
            if S::PUBLISHED {
                w.item.publish(&smem.items, qb);
            }
            copy_tile::<H, SMEM>(smem, (q, w.q_at), lay.q(qb), q_full(qb));
        }
        for j in 0..w.item.key_tiles {
            let (s, _) = lay.stage(t);
            let refill = t >= lay.stages;
            if refill {
                smem.bars.wait(k_empty(s), lay.stage(t - lay.stages).1);
            }
            if leader {
                let [key0, head, batch] = w.k_at;
                let at = [key0 + j * BN, head, batch];
                copy_tile::<H, SMEM>(smem, (k, at), lay.k(s), k_full(s));
            }
            if refill {
                smem.bars.wait(v_empty(s), lay.stage(t - lay.stages).1);
            }
            if leader {
                let [key0, head, batch] = w.v_at;
                let at = [key0 + j * BN, head, batch];
                copy_tile::<H, SMEM>(smem, (v, at), lay.v(s), v_full(s));
            }
            t += 1;
        }
        i += 1;
    }
    // Published items end with a marker in the next slot, announced by a plain arrival.
    if S::PUBLISHED {
        let (qb, _) = q_buffer(i);
        if i >= 2 {
            smem.bars.wait(q_empty(qb), q_buffer(i - 2).1);
        }
        if leader {
            Item::publish_end(&smem.items, qb);
            smem.bars.arrive(q_full(qb));
        }
    }
}
