//! What the producer and the consumers of a decode block agree on: the problem, the work items
//! and their key ranges, where the tiles lie in shared memory, and which mbarrier guards which
//! buffer.
//!
//! An *item* is one KV head of one sequence, a *row tile* of its query rows, and one *split* of
//! its keys. The query rows of a KV head are its `group` query heads × `sq` new tokens, packed
//! token-major into tiles of up to 64 rows (`hc` heads × `tc` tokens, [`Problem::row_tile`]):
//! GQA 32/8 with one new token is 4 rows, 64/8 with 4 new tokens 32 — one MMA's rows, and one
//! read of the KV head's keys for all of them.
//!
//! How a sequence's keys are cut into splits ([`Chunking`]) is worked out *on the device*, from
//! the lengths in `cache_seqlens` — so a capture in a CUDA graph stays right when the lengths
//! change between replays: evenly into the splits asked for, or (the heuristic) into chunks of
//! about the same size across the batch, many for a long sequence and few for a short one.
//!
//! A scheduler warp walks the block's items (`block, block + grid, …` of the batch's, `Walk`)
//! and publishes them into a ring in shared memory; every other side takes them from there and,
//! in each, its key tiles, counting tiles from the block's start: tile `t` uses ring stage `t
//! mod STAGES` for the `t / STAGES`-th time (parity as in the prefill kernel). Two producer
//! warps copy the keys and the values, each as far ahead as its half of the ring allows;
//! consumer warpgroup `wg` takes the item's tiles `wg, wg + 2, …` and keeps its own running
//! softmax: it writes its own partial result, merged with the others' in the kernel or by a
//! combine launch ([`super::combine`]). A third producer warp loads each item's Q rows (`cp.async`: a few rows,
//! read once, any token stride) into one of two buffers an item ahead, so that the consumers
//! start an item without a round trip to global memory — the gap that cost 5–9 µs per item when
//! they loaded Q themselves.

use crate::attention::{schedule::lane0_load, HeadDim};
use ck_core::device::*;
use core::num::NonZeroU32;

/// Query rows per item: one consumer warpgroup's MMA rows.
pub const ROWS: u32 = 64;
/// Keys per tile.
pub const BN: u32 = 128;
/// Threads per block: two consumer warpgroups, then the producer's.
pub const THREADS: u32 = 384;
/// Consumer warpgroups (each its own partial result per item).
pub const CONSUMERS: u32 = 2;
/// Warps of a warpgroup: the arrivals on a key/value "empty" barrier.
const WARPGROUP_WARPS: u32 = 4;
/// Bytes of a 64-column panel of a key tile (128 rows of 128 bytes).
pub const K_PANEL_BYTES: u32 = BN * 128;
/// Bytes of a 64-column panel of a Q tile (64 rows of 128 bytes).
pub const Q_PANEL_BYTES: u32 = ROWS * 128;
/// The most ring stages any head dim uses.
const MAX_STAGES: u32 = 6;
/// Q buffers: item `i` of a block has its rows (and its sequence's length) in buffer `i mod 2`,
/// loaded while the consumers work on item `i − 1`.
pub const Q_BUFFERS: u32 = 2;

/// Log-sum-exps a block's warpgroups exchange when an item is not split (two per thread of a
/// warpgroup; the O rows go through the Q buffers, see `consumer`).
pub const EXCHANGED_LSE: usize = 2 * 128;

/// f32 elements from the tiles' start to the end of the Q buffers at head dim 128 (at most 1 KiB
/// of alignment, then the two buffers): the span of the tiles an O exchange may use (one Q
/// buffer, [`Layout::exchange`]).
pub const EXCHANGE_SPAN: usize = (1024 + (Q_BUFFERS * ROWS * 128 * 2) as usize) / 4;

/// Ring stages for head dim `d`: as many (K, V) tile pairs as fit beside two Q buffers and the
/// exchanged log-sum-exps in the 227 KiB of a block's shared memory (128: 3 of 64 KiB; 64: 6
/// of 32 KiB).
pub const fn stages(d: u32) -> u32 {
    let free = 227 * 1024 - 1024 - Q_BUFFERS * ROWS * d * 2 - EXCHANGED_LSE as u32 * 4;
    let s = free / (2 * BN * d * 2);
    if s > MAX_STAGES {
        MAX_STAGES
    } else {
        s
    }
}

pub const fn k_full(s: u32) -> u32 {
    4 * s
}
pub const fn v_full(s: u32) -> u32 {
    k_full(s) + 1
}
pub const fn k_empty(s: u32) -> u32 {
    k_full(s) + 2
}
pub const fn v_empty(s: u32) -> u32 {
    k_full(s) + 3
}
/// Q buffer `b` loaded (the Q warp's 32 lanes arrive), and read (every consumer thread arrives:
/// an unsplit item's merge reads and writes the buffer from every lane, see `consumer`).
pub const fn q_full(b: u32) -> u32 {
    4 * MAX_STAGES + b
}
pub const fn q_empty(b: u32) -> u32 {
    q_full(b) + Q_BUFFERS
}
/// Slot `s` of the item ring written by the scheduler warp (its lane 0 arrives), and read (the
/// `ITEM_READERS` warps arrive).
pub const fn item_full(s: u32) -> u32 {
    4 * MAX_STAGES + 2 * Q_BUFFERS + s
}
pub const fn item_empty(s: u32) -> u32 {
    item_full(s) + ITEM_SLOTS
}
/// mbarriers per block.
pub const BARRIERS: usize = (4 * MAX_STAGES + 2 * Q_BUFFERS + 2 * ITEM_SLOTS) as usize;

/// Items the scheduler warp publishes ahead of the slowest reader.
pub const ITEM_SLOTS: u32 = 8;
/// Words of a published item: its sequence, its index there, the sequence's `cache_seqlens`
/// entry, and the sequence's cut (tiles per split, splits).
pub const ITEM_WORDS: u32 = 5;
/// The warps that read every item: the 8 consumer warps, the key, value and Q producers.
const ITEM_READERS: u32 = CONSUMERS * WARPGROUP_WARPS + 3;

/// Shared elements for head dim `H`: two 64-row Q buffers, the ring of 128-key (K, V) tiles,
/// and 1 KiB to start them on a 1024-byte boundary (the swizzle XORs absolute address bits).
pub const fn smem_elems<H: HeadDim>() -> usize {
    ((Q_BUFFERS * ROWS * H::D * 2 + stages(H::D) * 2 * BN * H::D * 2 + 1024) / 2) as usize
}

/// Where a sequence's keys are: `[batch, capacity, kv_heads, D]` (`page_size = 0`), or pages
/// `[pages, page_size, kv_heads, D]` named by `page_table` `[batch, max_pages]`.
#[derive(Clone, Copy)]
pub struct Cache {
    pub page_table: Global<i32>,
    /// Keys per page (a power of two), or 0 for the contiguous cache.
    pub page_size: u32,
    pub max_pages: u32,
    /// Pages in the pool (a contiguous cache: the batch); a page-table entry outside
    /// `0..pages` is read as zeros and never written (where the table is on the host, such an
    /// entry is refused first: `CacheLayout::check_pages`).
    pub pages: u32,
    /// Keys a sequence can hold: `capacity`, or `max_pages · page_size`.
    pub capacity: u32,
    /// Keys per TMA box: 128, or the page size when a page holds fewer.
    pub box_rows: u32,
}

impl Cache {
    /// The page (or the batch entry) and the row in it of key `key` of sequence `b`.
    #[inline(always)]
    pub fn locate(&self, b: u32, key: u32) -> (u32, u32) {
        if self.page_size == 0 {
            (b, key)
        } else {
            let shift = self.page_size.trailing_zeros();
            let page = self.page_table.load(b * self.max_pages + (key >> shift));
            (page as u32, key & (self.page_size - 1))
        }
    }
}

/// Where the consumers and the merges write: O `[batch, sq, heads, D]` and the LSE `[batch,
/// heads, sq]` (one split), or the split scratch: partial O `[slots, batch, sq, heads, D]` and
/// LSE `[slots, batch, sq, heads]`.
#[derive(Clone, Copy)]
pub struct Outputs {
    pub o: GlobalMut<Bf16>,
    pub lse: GlobalMut<f32>,
    pub o_part: GlobalMut<f32>,
    pub lse_part: GlobalMut<f32>,
}

/// The problem as the kernel sees it (see [`super::host`] for the checks made before launch).
#[derive(Clone, Copy)]
pub struct Problem {
    /// New tokens (query rows) per sequence and per head.
    pub sq: u32,
    pub heads: u32,
    pub kv_heads: NonZeroU32,
    /// Query heads per KV head.
    pub group: NonZeroU32,
    /// Q `[batch, sq, heads, D]` with `q_token_stride` elements from a token to the next (a
    /// head's row is contiguous, the heads of a token `D` apart).
    pub q: Global<Bf16>,
    pub q_token_stride: u32,
    /// How the sequences' keys are cut into splits.
    pub chunks: Chunking,
    pub cache: Cache,
    /// `scale · log₂ e` (positive).
    pub scale_log2: f32,
    pub causal: bool,
    /// A row tile's splits merged by the block whose split ends last (else by the combine
    /// launch after the kernel; [`super::combine`]).
    pub merges: bool,
}

/// One item: the rows it owns, its keys, and its split.
#[derive(Clone, Copy)]
pub struct Work {
    pub b: u32,
    pub kv_head: u32,
    /// The row tile's first head (within the group) and first token, and its shape
    /// (`hc` heads × `tc` tokens, row `r` = token `r / hc`, head `r % hc`).
    pub h0: u32,
    pub t0: u32,
    pub hc: NonZeroU32,
    pub tc: u32,
    /// The sequence's keys, and whether its length is out of range (negative, or past the
    /// cache's capacity: its rows are written as NaN).
    pub sk: u32,
    pub bad_length: bool,
    /// The split's key tiles: `first_tile ..+ tiles`.
    pub first_tile: u32,
    pub tiles: u32,
    pub split: u32,
    /// The sequence's split count (1: the block merges its warpgroups' halves and writes the
    /// rows' O and LSE itself; more: the splits' slots are merged, [`super::combine`]).
    pub splits: u32,
    /// The row tile's index in the batch (`b · items_per_split + …`): its ticket, counting its
    /// splits' arrivals where the kernel merges them.
    pub ticket: u32,
}

impl Work {
    /// Query row `r` of the tile as (token, head within the group), if it is a row of the
    /// problem (the tile's last rows may be padding).
    #[inline(always)]
    pub fn row(&self, r: u32, pb: &Problem) -> Option<(u32, u32)> {
        let (t, h) = (r / self.hc, r % self.hc);
        let (t, h) = (self.t0 + t, self.h0 + h);
        (r < self.hc.get() * self.tc && t < pb.sq && h < pb.group.get()).then_some((t, h))
    }

    /// The keys query token `t` sees: `key ≤ t + sk − sq` under the causal mask (the new
    /// tokens are the last `sq` positions).
    #[inline(always)]
    pub fn sees(&self, t: u32, key: u32, pb: &Problem) -> bool {
        key < self.sk && (!pb.causal || key as i64 <= t as i64 + self.sk as i64 - pb.sq as i64)
    }
}

impl Problem {
    /// The row tile's shape: `hc` heads × `tc` tokens, at most [`ROWS`] rows.
    #[inline(always)]
    pub fn row_tile(&self) -> (NonZeroU32, u32) {
        let hc = self
            .group
            .min(NonZeroU32::new(ROWS).unwrap_or(NonZeroU32::MIN));
        let tc = (ROWS / hc).min(self.sq).max(1);
        (hc, tc)
    }

    /// Row tiles per KV head: head chunks × token chunks.
    #[inline(always)]
    pub fn row_tiles(&self) -> (u32, u32) {
        let (hc, tc) = self.row_tile();
        (self.group.get().div_ceil(hc.get()), self.sq.div_ceil(tc))
    }

    /// Item `r` of sequence `b`, whose `cache_seqlens` entry is `len` and whose keys are cut
    /// into `count` splits of `per` tiles: its rows, and its split's key tiles (of those its
    /// rows see). Within a sequence the splits of a row tile are consecutive items.
    #[inline(always)]
    fn work_in(&self, (b, r): (u32, u32), len: i32, (per, count): (u32, u32)) -> Work {
        let (hc, tc) = self.row_tile();
        let (hn, tn) = self.row_tiles();
        let nz = |x: u32| NonZeroU32::new(x).unwrap_or(NonZeroU32::MIN);
        let (rest, split) = (r / nz(count), r % nz(count));
        let (rest, tt) = (rest / nz(tn), rest % nz(tn));
        let (kv_head, hh) = (rest / nz(hn), rest % nz(hn));
        let (t0, h0) = (tt * tc, hh * hc.get());
        let (sk, bad_length) = self.chunks.keys(len);
        // Under the mask the tile's last token sees the most keys.
        let last = (t0 + tc).min(self.sq) - 1;
        let key_end = if self.causal {
            (last as i64 + sk as i64 - self.sq as i64 + 1).clamp(0, sk as i64) as u32
        } else {
            sk
        };
        let all = key_end.div_ceil(BN);
        let first_tile = (split * per).min(all);
        Work {
            b,
            kv_head,
            h0,
            t0,
            hc,
            tc,
            sk,
            bad_length,
            first_tile,
            tiles: per.min(all - first_tile),
            split,
            splits: count,
            ticket: b * self.items_per_split() + r / nz(count),
        }
    }

    /// Items per split of a sequence: its KV heads × row tiles.
    #[inline(always)]
    pub fn items_per_split(&self) -> u32 {
        let (hn, tn) = self.row_tiles();
        self.kv_heads.get() * hn * tn
    }

    /// The balanced chunk of this call's lengths ([`Chunking::chunk`]; the calling warp's
    /// lanes together).
    #[inline(always)]
    pub fn chunk(&self) -> u32 {
        self.chunks.chunk(self.items_per_split())
    }
}

/// The scheduler (one warp, its lanes together): this block's items — items `block, block +
/// grid, …` of the batch's, sequence by sequence (`Walk`) — published one after the other
/// into the ring of [`ITEM_SLOTS`] slots, each once every reader has read the slot's previous
/// item; then an end mark. The walk's state stays in this warp's registers, the others read an
/// item's five words.
#[inline(always)]
pub fn publish_items<const SMEM: usize>(smem: &Smem<SMEM>, pb: &Problem) {
    let mut walk = Walk::new(pb.chunks, pb.chunk(), pb.items_per_split());
    let (mut item, mut i) = (block_idx(), 0u32);
    loop {
        let found = walk.find(item);
        let (slot, round) = (i % ITEM_SLOTS, i / ITEM_SLOTS);
        if round > 0 {
            smem.bars.wait(item_empty(slot), (round - 1) % 2);
        }
        if lane_id() == 0 {
            // Word by word: an array of them would live in local memory.
            let (b, r, len, (per, count)) = found.unwrap_or((u32::MAX, 0, 0, (0, 0)));
            let at = slot * ITEM_WORDS;
            smem.items.store(at, b);
            smem.items.store(at + 1, r);
            smem.items.store(at + 2, len as u32);
            smem.items.store(at + 3, per);
            smem.items.store(at + 4, count);
            smem.bars.arrive(item_full(slot));
        }
        if found.is_none() {
            return;
        }
        item += grid_dim();
        i += 1;
    }
}

/// The block's items as the scheduler publishes them (a reader warp, its lanes together: lane
/// 0 reads the slot, hands its words to the other lanes, and releases it).
#[inline(always)]
pub fn items<'a, const SMEM: usize>(
    smem: &'a Smem<SMEM>,
    pb: &'a Problem,
) -> impl Iterator<Item = Work> + 'a {
    let mut i = 0u32;
    core::iter::from_fn(move || {
        let slot = i % ITEM_SLOTS;
        smem.bars.wait(item_full(slot), (i / ITEM_SLOTS) % 2);
        let word = |k: u32| lane0_load(&smem.items, slot * ITEM_WORDS + k);
        let (b, r, len, per, count) = (word(0), word(1), word(2), word(3), word(4));
        if lane_id() == 0 {
            smem.bars.arrive(item_empty(slot));
        }
        i += 1;
        (b != u32::MAX).then(|| pb.work_in((b, r), len as i32, (per, count)))
    })
}

/// How the sequences' keys are cut into splits, as the decode kernel's scheduler works it out
/// from `cache_seqlens` (under the balanced cut each sequence's first item hands its split
/// count to the combine, through the scratch).
///
/// * **Even** (`target = 0`, a split count asked for): each sequence's key tiles in `splits`
///   shares of `⌈tiles / splits⌉`, the last ones possibly empty.
/// * **Balanced** (`target > 0`, the heuristic; `target` = the grid, the items of one wave):
///   one chunk size across the batch ([`balanced_chunk`]), a sequence cut into `⌈tiles /
///   chunk⌉` splits — at most `splits`, the scratch's room — its tiles spread evenly over them.
///   A long sequence beside short ones gets many splits, a short one few: every
///   multiprocessor streams about the same bytes (evenly, the mixed batch [4641, 45118, 1730,
///   1696] at 8 splits left the long sequence's 64 items to 64 of 132 SMs).
#[derive(Clone, Copy)]
pub struct Chunking {
    /// Keys of sequence `b`: `cache_seqlens[b] + appended` (the new tokens' keys are in the
    /// cache already when they were appended by this call).
    pub seqlens: Global<i32>,
    pub batch: u32,
    pub appended: u32,
    /// Keys a sequence can hold (the cache's; more, or a negative length: the sequence's rows
    /// are NaN).
    pub capacity: u32,
    /// The most splits of a sequence (the scratch holds two slots per split).
    pub splits: NonZeroU32,
    /// The blocks of the grid (balanced), or 0 (even).
    pub target: u32,
}

impl Chunking {
    /// Keys of a sequence whose `cache_seqlens` entry is `len` (plus the appended tokens; never
    /// past the cache's capacity), and whether `len` is out of range — negative, or past the
    /// capacity with the appended tokens: the sequence's rows are then NaN, the call having no
    /// way to refuse lengths that live on the device.
    #[inline(always)]
    pub fn keys(&self, len: i32) -> (u32, bool) {
        let keys = len.max(0) as u32 + self.appended;
        (keys.min(self.capacity), len < 0 || keys > self.capacity)
    }

    /// Key tiles of a sequence whose `cache_seqlens` entry is `len`.
    #[inline(always)]
    fn tiles(&self, len: i32) -> u32 {
        self.keys(len).0.div_ceil(BN)
    }

    /// The balanced chunk for `per_split` items per split of a sequence (0 when even): the
    /// calling warp's lanes read the lengths side by side, twice (the work, then the items of
    /// the block's share).
    #[inline(always)]
    pub fn chunk(&self, per_split: u32) -> u32 {
        if self.target == 0 {
            return 0;
        }
        let work = self.summed(per_split, |len| self.tiles(len));
        let items = |chunk| self.summed(per_split, |len| self.cut(len, chunk).1);
        let base = self.batch as u64 * per_split as u64;
        balanced_chunk(work, base, self.target as u64, items)
    }

    /// `Σ of(cache_seqlens[b])` over the batch, times `per_split` (the calling warp's lanes
    /// side by side).
    #[inline(always)]
    fn summed(&self, per_split: u32, of: impl Fn(i32) -> u32) -> u64 {
        let mut sum = 0u32;
        let mut b = lane_id();
        while b < self.batch {
            sum += of(self.seqlens.load(b));
            b += 32;
        }
        warp_reduce(sum, |a, b| a + b) as u64 * per_split as u64
    }

    /// A sequence of `len`'s cut: tiles per split and the splits (each at least 1).
    #[inline(always)]
    pub fn cut(&self, len: i32, chunk: u32) -> (u32, u32) {
        let tiles = self.tiles(len);
        let per = tiles.div_ceil(self.splits.get()).max(chunk).max(1);
        if self.target == 0 {
            return (per, self.splits.get());
        }
        // As many splits as chunks, the tiles spread evenly over them (the same count: `⌈tiles
        // / ⌈tiles / count⌉⌉ = count`): 1024 tiles at a chunk of 67 are 16 splits of 64.
        let count = tiles.div_ceil(per).max(1);
        (tiles.div_ceil(count).max(1), count)
    }
}

/// The balanced cut's chunk (key tiles per split) from the batch's `work` (key tiles × items
/// per split, summed over the sequences), `base` (the items with every sequence unsplit), the
/// `grid` (the items of one wave) and `items(chunk)`, the items a chunk makes.
///
/// The blocks take items round robin, so what a block streams is about its items' sizes times
/// the waves: the chunk starts as one block's share of the work (half of it when the batch
/// alone makes more than a wave: many small items even out), rounded to whole waves — shrunk
/// while its items surely fit the waves it needs (`items(c) ≤ base + work / c`, so `c =
/// ⌈work / (waves · grid − base)⌉` fits), or widened to one wave fewer where that costs a
/// block at most 10 % more. A chunk that overshot a wave by a few items left a second wave of
/// them to a few SMs: B1 × 128k at 136 items of 63 tiles on 132 SMs took 253 µs, 16 splits
/// 190 (H100 job 132).
///
/// For example the mixed batch [4641, 45118, 1730, 1696] (GQA 32/8, 4 new tokens): 37, 353,
/// 14 and 14 key tiles, 8 items per split, so `work` 3344, `base` 32; on 132 SMs the share
/// `⌈3344 / 132⌉ = 26` makes `(2 + 14 + 1 + 1) · 8 = 144` items, two waves, which fit at
/// `⌈3344 / (264 − 32)⌉ = 15` (one wave would need 34 > 1.1 · 2 · 15): splits of 13, 15, 14
/// and 14 tiles, 3, 24, 1 and 1 of them, 232 items — 8 even splits made 45-tile items.
///
/// ```
/// use ck_kernels::attention::decode::schedule::balanced_chunk;
/// let tiles = [37u64, 353, 14, 14];
/// let items = |c: u32| tiles.iter().map(|t| t.div_ceil(c as u64).max(1)).sum::<u64>() * 8;
/// assert_eq!(balanced_chunk(418 * 8, 32, 132, items), 15);
/// assert_eq!(items(15), 232);
/// ```
#[inline(always)]
pub fn balanced_chunk(work: u64, base: u64, grid: u64, items: impl Fn(u32) -> u64) -> u32 {
    let grid = grid.max(1);
    let tiles = |x: u64| x.clamp(1, u32::MAX as u64) as u32;
    let shares = if base > grid { 2 * grid } else { grid };
    let share = tiles(work.div_ceil(shares));
    let waves = items(share).div_ceil(grid).max(1);
    let fitting = |w: u64| (w * grid > base).then(|| tiles(work.div_ceil(w * grid - base)));
    let mut chunk = fitting(waves).map_or(share, |c| c.min(share));
    if let Some(wider) = fitting(waves - 1) {
        if 10 * (waves - 1) * wider as u64 <= 11 * waves * chunk as u64 {
            chunk = wider;
        }
    }
    chunk
}

/// A warp's walk over the batch's items, sequence by sequence, for increasing item indices:
/// the lanes hold 32 sequences' lengths, cuts and item counts (their sum along the lanes, by
/// shuffles), so that finding an item's sequence is a ballot — and a round of loads only per
/// 32 sequences passed.
struct Walk {
    chunks: Chunking,
    chunk: u32,
    per_split: u32,
    /// The lanes' sequence is `group + lane`; `first`, the group's first item.
    group: u32,
    first: u32,
    /// This lane's sequence: its length, cut, and its items' end (from `first`).
    len: i32,
    cut: (u32, u32),
    end: u32,
}

impl Walk {
    #[inline(always)]
    fn new(chunks: Chunking, chunk: u32, per_split: u32) -> Walk {
        let mut w = Walk {
            chunks,
            chunk,
            per_split,
            group: 0,
            first: 0,
            len: 0,
            cut: (1, 1),
            end: 0,
        };
        w.load();
        w
    }

    /// Reads the group's sequences (a lane past the batch holds none).
    #[inline(always)]
    fn load(&mut self) {
        let b = self.group + lane_id();
        let (len, items) = if b < self.chunks.batch {
            let len = self.chunks.seqlens.load(b);
            self.cut = self.chunks.cut(len, self.chunk);
            (len, self.cut.1 * self.per_split)
        } else {
            self.cut = (1, 0);
            (0, 0)
        };
        self.len = len;
        let mut end = items;
        for d in [1, 2, 4, 8, 16] {
            let below = shfl_up(end, d);
            if lane_id() >= d {
                end += below;
            }
        }
        self.end = end;
    }

    /// Item `item`'s sequence, its index there, the sequence's length and cut; `None` past the
    /// last item.
    #[inline(always)]
    fn find(&mut self, item: u32) -> Option<(u32, u32, i32, (u32, u32))> {
        loop {
            if self.group >= self.chunks.batch {
                return None;
            }
            let holders = ballot(item < self.first + self.end);
            if holders == 0 {
                self.first += shfl_idx(self.end, 31);
                self.group += 32;
                self.load();
                continue;
            }
            // The first lane whose sequence ends past the item holds it.
            let l = holders.trailing_zeros();
            let count = self.cut.1 * self.per_split;
            let start = self.first + shfl_idx(self.end - count, l);
            let len = shfl_idx(self.len as u32, l) as i32;
            let cut = (shfl_idx(self.cut.0, l), shfl_idx(self.cut.1, l));
            return Some((self.group + l, item - start, len, cut));
        }
    }
}

/// The shared memory of a kernel: the tiles, the mbarriers, the log-sum-exps of an unsplit
/// item's merge, and the item ring.
pub struct Smem<const SMEM: usize> {
    pub tiles: SharedArray<Bf16, SMEM>,
    pub bars: SharedArray<Mbarrier, BARRIERS>,
    pub lse: SharedArray<f32, EXCHANGED_LSE>,
    pub items: SharedArray<u32, { (ITEM_SLOTS * ITEM_WORDS) as usize }>,
    /// A split's arrival as its consumers' thread 0 counted it ([`last_arrival`]).
    pub said: SharedArray<u32, 1>,
}

/// Element offsets of the buffers from `first`, the first element on a 1024-byte boundary: the
/// two Q buffers, then stage by stage the key and the value tile.
#[derive(Clone, Copy)]
pub struct Layout {
    first: u32,
    q_tile: u32,
    kv_tile: u32,
    pub stages: u32,
}

impl Layout {
    #[inline(always)]
    pub fn of<H: HeadDim, const SMEM: usize>(smem: &Smem<SMEM>) -> Layout {
        Layout {
            first: (1024 - smem.tiles.shared_address(0) % 1024) % 1024 / 2,
            q_tile: ROWS * H::D,
            kv_tile: BN * H::D,
            stages: stages(H::D),
        }
    }

    #[inline(always)]
    pub fn q(&self, i: u32) -> u32 {
        self.first + i * self.q_tile
    }

    /// Where an unsplit item's O rows are exchanged between the warpgroups, as an f32 offset:
    /// the item's own Q buffer `b` (`64 · D` bf16 = `32 · D` f32, half a warpgroup's O, so the
    /// exchange takes two rounds) — the other buffer may hold the next item's rows already.
    #[inline(always)]
    pub fn exchange(&self, b: u32) -> u32 {
        self.q(b) / 2
    }

    #[inline(always)]
    pub fn k(&self, s: u32) -> u32 {
        self.first + Q_BUFFERS * self.q_tile + 2 * s * self.kv_tile
    }

    #[inline(always)]
    pub fn v(&self, s: u32) -> u32 {
        self.k(s) + self.kv_tile
    }

    /// Key tile `t` of the block: its stage and the parity of that stage's use.
    #[inline(always)]
    pub fn stage(&self, t: u32) -> (u32, u32) {
        (t % self.stages, (t / self.stages) % 2)
    }
}

/// Item `i` of the block: its Q buffer.
#[inline(always)]
pub fn q_buffer(i: u32) -> u32 {
    i % Q_BUFFERS
}

/// Initialises every barrier (one thread; a block barrier follows). A key or value tile is
/// read by one warpgroup, a Q buffer by both.
#[inline(always)]
pub fn init_barriers<H: HeadDim, const SMEM: usize>(smem: &Smem<SMEM>) {
    for s in 0..stages(H::D) {
        smem.bars.init(k_full(s), 1);
        smem.bars.init(v_full(s), 1);
        smem.bars.init(k_empty(s), WARPGROUP_WARPS);
        smem.bars.init(v_empty(s), WARPGROUP_WARPS);
    }
    for b in 0..Q_BUFFERS {
        smem.bars.init(q_full(b), 32);
        smem.bars.init(q_empty(b), CONSUMERS * 128);
    }
    for s in 0..ITEM_SLOTS {
        smem.bars.init(item_full(s), 1);
        smem.bars.init(item_empty(s), ITEM_READERS);
    }
    fence_barrier_init();
}
