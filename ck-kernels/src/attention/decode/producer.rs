//! The producers: two warps, one copying each item's key tiles and one its value tiles, with
//! TMA, as soon as their ring stages are free; a third loading each item's Q rows an item
//! ahead. A tile of small pages is many copies (pages of 16: 8 pages × 2 panels), each after a
//! page-table read: the warp's lanes look up and issue them side by side.

use super::schedule::*;
use crate::attention::HeadDim;
use ck_core::device::*;

/// A cache as the copy engine sees it, rank 5, innermost first: `[64 columns, kv_heads, rows,
/// D / 64 panels, pages]` (a contiguous cache's "pages" are its sequences). The panel dim's
/// stride (128 bytes) is smaller than the rows', so a box of 128 rows × every panel lands as
/// the tile's 64-column panels one after the other — a whole key tile in one copy.
pub type Map = Tma<Bf16, 5>;

/// Copies key tile `tile` of the item's sequence from `src` into the tile at `at` (the whole
/// warp; lane `i` issues copies `i, i + 32, …`): the boxes that hold keys below `sk` — one box
/// for 128 keys of a contiguous cache (or of pages of 128 and more), a box per page and panel
/// for smaller pages. The rows past `sk` are left as they are, and the consumers never let them
/// count.
#[inline(always)]
fn copy_keys<H: HeadDim, const SMEM: usize>(
    smem: &Smem<SMEM>,
    src: &Map,
    (w, tile): (&Work, u32),
    cache: &Cache,
    (at, bar): (u32, u32),
) {
    let key0 = tile * BN;
    let valid = (w.sk - key0).min(BN);
    let boxes = valid.div_ceil(cache.box_rows);
    if lane_id() == 0 {
        smem.bars
            .arrive_expect_tx(bar, boxes * cache.box_rows * 128 * H::D / 64);
    }
    // Panels per copy: all of them when a box is the whole tile's rows.
    let (step, panels) = if cache.box_rows == BN {
        (H::D / 64, 1)
    } else {
        (1, H::D / 64)
    };
    let mut i = lane_id();
    while i < boxes * panels {
        let (c, p) = (i / panels, i % panels * step);
        let (page, row) = cache.locate(w.b, key0 + c * cache.box_rows);
        let coords = [0, w.kv_head as i32, row as i32, p as i32, page as i32];
        let to = at + (p * K_PANEL_BYTES + c * cache.box_rows * 128) / 2;
        src.copy_to_shared(coords, &smem.tiles, to, &smem.bars, bar);
        i += 32;
    }
}

/// Which half of the ring a producer warp fills.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Keys,
    Values,
}

/// Every item's key (or value) tiles into their ring stages, each refilled once its consumer
/// warpgroup has released it (the whole warp, in step).
#[inline(always)]
pub fn produce<H: HeadDim, const SMEM: usize>(
    (src, side): (&Map, Side),
    smem: &Smem<SMEM>,
    lay: Layout,
    pb: &Problem,
) {
    src.prefetch();
    // Stage `s`'s tile, and its "full" and "empty" barriers.
    let stage = |s: u32| match side {
        Side::Keys => (lay.k(s), k_full(s), k_empty(s)),
        Side::Values => (lay.v(s), v_full(s), v_empty(s)),
    };
    // Stage `s` of the ring, for the `round`-th time (counted, not divided out of the tile count).
    let (mut s, mut round) = (0, 0u32);
    for w in items(smem, pb) {
        for j in 0..w.tiles {
            let (to, full, empty) = stage(s);
            if round > 0 {
                smem.bars.wait(empty, (round - 1) % 2);
            }
            copy_keys::<H, SMEM>(smem, src, (&w, w.first_tile + j), &pb.cache, (to, full));
            s += 1;
            if s == lay.stages {
                (s, round) = (0, round + 1);
            }
        }
    }
}

/// Every item's query rows into its Q buffer, in the layout the MMA reads: row `r` of a
/// 64-column panel at byte `128·r`, its 16-byte chunk `c` at chunk `c XOR (r mod 8)` (the
/// 128-byte swizzle, on a 1024-byte aligned panel) — once the consumers have released the
/// buffer's previous item (the whole warp; lane `i` copies chunks `i, i + 32, …` with
/// `cp.async`). The rows past the item's are left as they are: each MMA row only makes its own
/// scores. Each lane arrives on the buffer's "full" barrier once its copies have landed, fenced
/// for the MMAs' (async) proxy.
#[inline(always)]
pub fn produce_queries<H: HeadDim, const SMEM: usize>(
    smem: &Smem<SMEM>,
    lay: Layout,
    pb: &Problem,
) {
    let chunks = H::D / 8;
    for (i, w) in (0u32..).zip(items(smem, pb)) {
        let (buf, round) = (q_buffer(i), i / Q_BUFFERS);
        if round > 0 {
            smem.bars.wait(q_empty(buf), (round - 1) % 2);
        }
        let at = lay.q(buf);
        let mut c = lane_id();
        while c < w.hc.get() * w.tc * chunks {
            let (r, k) = (c / chunks, c % chunks);
            if let Some((t, h)) = w.row(r, pb) {
                let head = w.kv_head * pb.group.get() + h;
                let from = (w.b * pb.sq + t) * pb.q_token_stride + head * H::D + 8 * k;
                let (panel, chunk) = (k / 8, k % 8);
                let to = at + (panel * Q_PANEL_BYTES + 128 * r + 16 * (chunk ^ (r % 8))) / 2;
                cp_async_16(&smem.tiles, to, &pb.q, from, true);
            }
            c += 32;
        }
        cp_async_commit();
        cp_async_wait::<0>();
        fence_proxy_async();
        smem.bars.arrive(q_full(buf));
    }
}
