//! Append-KV: the new tokens' keys and values written into the cache at each sequence's end,
//! keys rotated on the way in, and the queries rotated into a buffer of their own — RoPE where
//! the rows pass anyway.
//!
//! New token `t` of sequence `b` sits at position `pos = cache_seqlens[b] + t`: its key and value
//! go to that row of the cache (`[batch, capacity, kv_heads, D]`, or row `pos mod page_size` of
//! page `page_table[b][pos / page_size]`), and its rotation angles are row `pos` of the cos/sin
//! tables (see [`crate::rope`] for the two styles, `rotary_dim`, and a worked example).
//!
//! A block takes 64 head rows ([`HeadRows`]) of one source: the queries (only when they are
//! rotated), the keys, or the values. A position the cache cannot hold, or any of a sequence
//! whose length is negative, is not written (the attention that follows sees a length out of
//! range, and gives NaN); a query or key whose angle the tables do not reach is rotated to NaN
//! and written so — skipping the key would leave a stale one for the attention to use. Wrong
//! input never gives a plausible result.

use super::schedule::Cache;
use crate::rope::{load8, store8, HeadRows, Rotary, ROWS};
use ck_core::device::*;
use ck_core::tile::{make_tile_window, unroll, View2};
use ck_macros::tile_kernel;
use core::num::NonZeroU32;

/// Which source a block reads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Queries,
    Keys,
    Values,
}

/// The new tokens: `q` `[batch, sq, heads, D]`, `k`, `v` `[batch, sq, kv_heads, D]`.
#[derive(Clone, Copy)]
pub struct NewTokens {
    pub q: Global<Bf16>,
    pub k: Global<Bf16>,
    pub v: Global<Bf16>,
    pub batch: u32,
    pub sq: u32,
    pub heads: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
}

/// Appends the new tokens (see the module documentation): blocks `0 .. q_blocks` rotate the
/// queries into `q_out`, the next `kv_blocks` write the keys, the last `kv_blocks` the values.
#[tile_kernel(block = 256, distributions(HeadRows))]
#[allow(clippy::too_many_arguments)]
pub fn attention_append_kv(
    q: Global<Bf16>,
    k: Global<Bf16>,
    v: Global<Bf16>,
    cos: Global<f32>,
    sin: Global<f32>,
    q_out: GlobalMut<Bf16>,
    k_cache: GlobalMut<Bf16>,
    v_cache: GlobalMut<Bf16>,
    seqlens: Global<i32>,
    page_table: Global<i32>,
    batch: u32,
    sq: u32,
    heads: u32,
    kv_heads: u32,
    head_dim: u32,
    rotary_dim: u32,
    interleaved: bool,
    table_rows: u32,
    page_size: u32,
    max_pages: u32,
    pages: u32,
    capacity: u32,
    q_blocks: u32,
    kv_blocks: u32,
) {
    let new = NewTokens {
        q,
        k,
        v,
        batch,
        sq,
        heads,
        kv_heads,
        head_dim,
    };
    let cache = Cache {
        page_table,
        page_size,
        max_pages,
        pages,
        capacity,
        box_rows: 0,
    };
    let rotary = Rotary {
        dim: rotary_dim,
        interleaved,
        cos,
        sin,
        inverse: false,
    };
    let block = block_idx();
    let (part, block) = if block < q_blocks {
        (Part::Queries, block)
    } else if block < q_blocks + kv_blocks {
        (Part::Keys, block - q_blocks)
    } else {
        (Part::Values, block - q_blocks - kv_blocks)
    };
    append(
        (part, block),
        &new,
        (rotary, table_rows),
        &cache,
        (seqlens, q_out, k_cache, v_cache),
    );
}

#[inline(always)]
fn append(
    (part, block): (Part, u32),
    new: &NewTokens,
    (rotary, table_rows): (Rotary, u32),
    cache: &Cache,
    (seqlens, q_out, k_cache, v_cache): (
        Global<i32>,
        GlobalMut<Bf16>,
        GlobalMut<Bf16>,
        GlobalMut<Bf16>,
    ),
) {
    let (src, heads) = match part {
        Part::Queries => (new.q, new.heads),
        Part::Keys => (new.k, new.kv_heads),
        Part::Values => (new.v, new.kv_heads),
    };
    let d = new.head_dim;
    let rows = new.batch * new.sq * heads;
    let r0 = (block * ROWS) as i32;
    let view = View2::<_, Bf16, 8>::new(src, rows, d, d);
    let x = make_tile_window::<HeadRows, _>(view, [r0, 0]).load::<Bf16>();
    let p = HeadRows::partition_index(thread_idx());
    let nz = |x: u32| NonZeroU32::new(x).unwrap_or(NonZeroU32::MIN);
    // A contiguous cache is one "page" of `capacity` rows per sequence.
    let page_rows = if cache.page_size == 0 {
        cache.capacity
    } else {
        cache.page_size
    };
    unroll::<4>(|rep| {
        let [row, d0] = HeadRows::x_index(p, [rep as i32, 0]);
        let (r, d0) = (r0 as u32 + row as u32, d0 as u32);
        if r >= rows || d0 >= d {
            return;
        }
        let (token, head) = (r / nz(heads), r % nz(heads));
        let (b, t) = (token / nz(new.sq), token % nz(new.sq));
        let len = seqlens.load(b);
        let pos = len.max(0) as u32 + t;
        let own: [f32; 8] =
            core::array::from_fn(|e| x.get(HeadRows::d_index([rep as i32, e as i32])).to_f32());
        let y = if part == Part::Values || d0 >= rotary.dim {
            own
        } else if pos >= table_rows {
            [f32::NAN; 8]
        } else {
            rotary.rotate8(own, d0, pos, |pd| {
                load8::<Bf16, 8>(src, r * d + pd).map(|x| x.to_f32())
            })
        };
        let y = y.map(Bf16::from_f32);
        if part == Part::Queries {
            store8::<Bf16, 8>(q_out, r * d + d0, y);
        } else if len >= 0 && pos < cache.capacity {
            let (page, row) = cache.locate(b, pos);
            if page >= cache.pages {
                return;
            }
            let at = ((page * page_rows + row) * new.kv_heads + head) * d + d0;
            // One store per destination, not a pointer chosen at run time.
            if part == Part::Keys {
                store8::<Bf16, 8>(k_cache, at, y);
            } else {
                store8::<Bf16, 8>(v_cache, at, y);
            }
        }
    });
}
