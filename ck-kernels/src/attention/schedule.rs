//! What the producer and the consumers of an attention block agree on: the problem, the work
//! items and their order, where the tiles lie in shared memory, and which mbarrier guards
//! which buffer.
//!
//! Both sides take the same sequence — the block's items in order ([`Problem::my_items`]), and
//! in each item its key tiles — and count the key tiles from the block's start, so key tile
//! `t` of the block (over all its items) uses ring stage `t mod STAGES`, for the
//! `t / STAGES`-th time. Use `n` of a stage waits for phase `n` of its "full" barrier (parity
//! `n mod 2`); refilling it waits for phase `n − 1` of its "empty" barrier. Item `i` of the
//! block uses Q buffer `i mod 2` the same way. Each consumer warp walks the items itself, or,
//! where the walk reads memory ([`Sequences::PUBLISHED`]), reads each [`Item`] where the
//! producer wrote it beside the item's Q buffer: the buffer's "full" barrier, which the
//! producer arrives on after writing, publishes it, and an end marker in the next slot stops
//! the consumers.

use super::HeadDim;
use ck_core::device::*;
use core::num::NonZeroU32;

/// Query rows per item (two consumer warpgroups of 64).
pub const BM: u32 = 128;
/// Keys per tile.
pub const BN: u32 = 128;
/// Threads per block: two consumer warpgroups, then the producer's.
pub const THREADS: u32 = 384;
/// Consumer warps, each arriving once at an "empty" barrier when done with a buffer.
pub const CONSUMER_WARPS: u32 = 8;
/// Bytes of one 64-column panel of a 128-row tile (128 rows × 128 bytes): one TMA box.
pub const PANEL_BYTES: u32 = 128 * 128;
/// The most ring stages any head dim uses.
const MAX_STAGES: u32 = 4;
/// Q buffers.
const Q_BUFFERS: u32 = 2;
/// Words of the Q buffers' item slots ([`Item::publish`]).
pub const ITEM_SLOTS: usize = (Q_BUFFERS * ITEM_WORDS) as usize;

/// Q buffer `i` is full / empty.
pub const fn q_full(i: u32) -> u32 {
    i
}
pub const fn q_empty(i: u32) -> u32 {
    Q_BUFFERS + i
}
/// Ring stage `s`'s keys / values are full / empty.
pub const fn k_full(s: u32) -> u32 {
    2 * Q_BUFFERS + 4 * s
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
/// mbarriers per block.
pub const BARRIERS: usize = (2 * Q_BUFFERS + 4 * MAX_STAGES) as usize;

/// Bytes of a 128-row tile of head dim `d`.
pub const fn tile_bytes(d: u32) -> u32 {
    128 * d * 2
}

/// Shared elements of the kernel for head dim `H`: the Q buffers, the stages of (K, V), and up
/// to 1 KiB to start them on a 1024-byte boundary (the swizzle XORs absolute address bits).
pub const fn smem_elems<H: HeadDim>() -> usize {
    (((Q_BUFFERS + 2 * H::STAGES) * tile_bytes(H::D) + 1024) / 2) as usize
}

/// The problem as the kernel sees it: where the sequences lie (`S`), the heads, the scale and
/// the mask. The divisors are `NonZeroU32`: the host has checked them, and a division that
/// cannot panic keeps panic calls (and the register budget they impose) out of the consumers'
/// code.
#[derive(Clone, Copy)]
pub struct Problem<S> {
    pub seqs: S,
    /// Query heads, and query heads per key/value head.
    pub heads: NonZeroU32,
    pub group: NonZeroU32,
    /// `scale · log₂ e` (the scale is positive).
    pub scale_log2: f32,
    pub causal: bool,
}

/// `x` as a divisor (a zero, which the host never passes, taken as 1).
#[inline(always)]
fn nz(x: u32) -> NonZeroU32 {
    NonZeroU32::new(x).unwrap_or(NonZeroU32::MIN)
}

impl<S: Sequences> Problem<S> {
    /// The kernel's arguments as a problem.
    #[inline(always)]
    pub fn new(seqs: S, (heads, group): (u32, u32), scale_log2: f32, causal: bool) -> Problem<S> {
        Problem {
            seqs,
            heads: nz(heads),
            group: nz(group),
            scale_log2,
            causal,
        }
    }

    /// This block's items, in the order both sides take them ([`ItemsAt::next`]): `block,
    /// block + grid, …` of uniform sequences' items, or packed ones as a counter hands them out
    /// (only the producer walks those). A packed walk takes the 32 lanes of a warp together.
    #[inline(always)]
    pub fn my_items(&self) -> impl Iterator<Item = Work> {
        let mut items = S::items(*self);
        core::iter::from_fn(move || items.next())
    }
}

/// Where a problem's sequences lie: all of one length in `[batch, heads, seq, head_dim]`
/// tensors ([`Uniform`]), or packed end to end in `[total, heads, head_dim]` ones with their
/// bounds on the device ([`Packed`]).
///
/// Item order: sequence by sequence, in a sequence head by head — so the blocks running at one
/// time share a few heads' keys and values in L2 — and in a head its 128-row query tiles, under
/// a causal mask the longest (last) first.
pub trait Sequences: Copy + Sized {
    /// The rows of a key tile past its sequence's end hold another sequence's keys and values
    /// (not the copy engine's zeros): the consumers zero those values (`0 · ∞` is NaN).
    const FOREIGN_ROWS: bool;
    /// Lanes of the producer warp that run it: the walk's (one thread walks uniform sequences,
    /// the whole warp packed ones).
    const PRODUCER_LANES: u32;
    /// The producer publishes each item beside its Q buffer ([`Item::publish`]) and the
    /// consumers read it there, instead of walking the items themselves: for a walk that reads
    /// memory, which would stall the consumers between items.
    const PUBLISHED: bool;
    /// Elements from a row of O to the next.
    fn o_row_stride(pb: &Problem<Self>) -> u32;
    /// The walk over the items.
    type Items: ItemsAt;
    /// The items of `pb`, found by their increasing index.
    fn items(pb: Problem<Self>) -> Self::Items;
}

/// A problem's items, asked for in increasing order.
pub trait ItemsAt {
    /// Item `item`, `None` past the last.
    fn at(&mut self, item: u32) -> Option<Work>;
    /// The block's next item, `None` once it has had its last.
    fn next(&mut self) -> Option<Work>;
}

/// What the consumers need of an item (a 128-row query tile of one head of one sequence): its
/// rows and keys, and where its output goes.
#[derive(Clone, Copy)]
pub struct Item {
    /// The tile's first query row, counted in its sequence; the sequence's query and key
    /// lengths.
    pub q0: u32,
    pub sq: u32,
    pub sk: u32,
    /// Key tiles any row of the tile sees.
    pub key_tiles: u32,
    /// O's element offset of the sequence's row 0 of this head, and the LSE's index of it
    /// (a head's LSE rows are contiguous).
    pub o_base: u32,
    pub lse_base: u32,
    /// The sequence's bounds are valid; if not, its rows are written as NaN.
    pub valid: bool,
}

/// Words of an item's slot: its fields, then a flag word (bit 0: valid; bit 1: an item, not
/// the end).
pub const ITEM_WORDS: u32 = 7;

impl Item {
    /// Writes the item into slot `slot` (one thread; the Q buffer's "full" barrier, which the
    /// writer arrives on next, publishes it).
    #[inline(always)]
    pub fn publish<const N: usize>(&self, words: &SharedArray<u32, N>, slot: u32) {
        let at = slot * ITEM_WORDS;
        let fields = [
            self.q0,
            self.sq,
            self.sk,
            self.key_tiles,
            self.o_base,
            self.lse_base,
        ];
        for (i, f) in (0u32..).zip(fields) {
            words.store(at + i, f);
        }
        words.store(at + 6, 2 | self.valid as u32);
    }

    /// Marks slot `slot` as the end of the block's items.
    #[inline(always)]
    pub fn publish_end<const N: usize>(words: &SharedArray<u32, N>, slot: u32) {
        words.store(slot * ITEM_WORDS + 6, 0);
    }

    /// The item in slot `slot`, `None` at the end (read once its Q buffer is full, by a whole
    /// warp): lane 0 reads the words and hands them to the other lanes, so that the slot is
    /// read only by the thread whose arrival on the buffer's "empty" barrier frees it for the
    /// producer's next write.
    #[inline(always)]
    pub fn read<const N: usize>(words: &SharedArray<u32, N>, slot: u32) -> Option<Item> {
        let at = slot * ITEM_WORDS;
        let word = |k: u32| lane0_load(words, at + k);
        let flags = word(6);
        (flags & 2 != 0).then(|| Item {
            q0: word(0),
            sq: word(1),
            sk: word(2),
            key_tiles: word(3),
            o_base: word(4),
            lse_base: word(5),
            valid: flags & 1 != 0,
        })
    }
}

/// An item as the producer sees it: also where the tile's first query row and the sequence's
/// first key and value are in Q's, K's and V's tensor maps, as (row, head, batch).
#[derive(Clone, Copy)]
pub struct Work {
    pub item: Item,
    pub q_at: [u32; 3],
    pub k_at: [u32; 3],
    pub v_at: [u32; 3],
}

/// Key tiles the rows `q0..q0 + 128` of a sequence of `sq` queries and `sk` keys see: all, or
/// up to the last row's diagonal.
#[inline(always)]
fn key_tiles(q0: u32, (sq, sk): (u32, u32), causal: bool) -> u32 {
    let last_row = (q0 + BM).min(sq) as i64 - 1;
    let key_end = if causal {
        (last_row + sk as i64 - sq as i64 + 1).clamp(0, sk as i64) as u32
    } else {
        sk
    };
    key_end.div_ceil(BN)
}

/// Sequences of one length: Q `[batch, heads, sq, D]`, K and V `[batch, kv_heads, sk, D]` or
/// any other strides (tensor maps over `[D, seq, heads, batch]`; all three may be one map over
/// a fused QKV projection's `[batch, seq, heads + 2·kv_heads, D]`, K's and V's heads from
/// `kv_first`), O at the strides given.
#[derive(Clone, Copy)]
pub struct Uniform {
    pub sq: u32,
    pub sk: u32,
    pub batch: u32,
    /// K's and V's first head in their maps: 0 and 0 for tensors of their own, `heads` and
    /// `heads + kv_heads` in a fused QKV projection.
    pub kv_first: (u32, u32),
    /// O's strides in elements: from a query row of a head to the next, from a head to the
    /// next (`[B, H, S, D]`: `D` and `S·D`; `[B, S, H, D]`: `H·D` and `D`), and from a batch to
    /// the next (`H·S·D`).
    pub o_strides: (u32, u32, u32),
}

impl Sequences for Uniform {
    const FOREIGN_ROWS: bool = false;
    const PRODUCER_LANES: u32 = 1;
    const PUBLISHED: bool = false;

    #[inline(always)]
    fn o_row_stride(pb: &Problem<Uniform>) -> u32 {
        pb.seqs.o_strides.0
    }

    type Items = UniformItems;

    #[inline(always)]
    fn items(pb: Problem<Uniform>) -> UniformItems {
        UniformItems {
            pb,
            next: block_idx(),
        }
    }
}

/// The walk over sequences of one length: arithmetic on the problem; the block's items are
/// `block, block + grid, …` (all cost the same, or under a causal mask each has a block).
pub struct UniformItems {
    pb: Problem<Uniform>,
    next: u32,
}

impl ItemsAt for UniformItems {
    #[inline(always)]
    fn next(&mut self) -> Option<Work> {
        let item = self.next;
        self.next += grid_dim();
        self.at(item)
    }

    #[inline(always)]
    fn at(&mut self, item: u32) -> Option<Work> {
        let pb = &self.pb;
        let Uniform {
            sq,
            sk,
            batch,
            kv_first,
            o_strides,
        } = pb.seqs;
        let q_tiles = nz(sq.div_ceil(BM));
        if item >= q_tiles.get() * batch * pb.heads.get() {
            return None;
        }
        let (bh, qt) = (item / q_tiles, item % q_tiles);
        let qt = if pb.causal {
            q_tiles.get() - 1 - qt
        } else {
            qt
        };
        let q0 = qt * BM;
        let (b, h) = (bh / pb.heads, bh % pb.heads);
        Some(Work {
            item: Item {
                q0,
                sq,
                sk,
                key_tiles: key_tiles(q0, (sq, sk), pb.causal),
                o_base: b * o_strides.2 + h * o_strides.1,
                lse_base: bh * sq,
                valid: true,
            },
            q_at: [q0, h, b],
            k_at: [0, kv_first.0 + h / pb.group, b],
            v_at: [0, kv_first.1 + h / pb.group, b],
        })
    }
}

/// Sequences packed end to end (FlashAttention's varlen contract): Q and O `[total_q, heads,
/// D]`, K and V `[total_k, kv_heads, D]` (tensor maps over `[D, total, heads, 1]`), sequence `b`'s
/// queries rows `cu_q[b]..cu_q[b + 1]` and its keys rows `cu_k[b]..cu_k[b + 1]`; the LSE
/// `[heads, total_q]`.
///
/// The items go to the blocks (one per multiprocessor) one at a time, as each block's producer
/// asks for its next: `counter[0]` is the next item's index, `counter[1]` the blocks done. A
/// block's grid slot would be a walk of its own at its start (the bounds' loads in the way of
/// its first copies) and, under a causal mask, items of unequal cost; a persistent block asks
/// for its next item while this one's tiles are copied. Each block takes one index past the
/// last item; the last block to do so sets both words back to 0 for the next launch.
#[derive(Clone, Copy)]
pub struct Packed {
    pub cu_q: Global<i32>,
    pub cu_k: Global<i32>,
    pub counter: GlobalMut<i32>,
    pub batch: u32,
    pub total_q: u32,
    pub total_k: u32,
    pub head_dim: u32,
}

/// One packed sequence: its first query and key rows and its lengths, read from the bounds.
#[derive(Clone, Copy)]
struct Bounds {
    q_start: u32,
    sq: u32,
    k_start: u32,
    sk: u32,
    valid: bool,
}

impl Packed {
    /// Sequence `b`'s rows. Bounds that decrease or pass the tensor's end make it invalid:
    /// its query rows (clamped to the tensor) see no key and are written as NaN, never a
    /// plausible result.
    #[inline(always)]
    fn bounds(&self, b: u32) -> Bounds {
        let range = |cu: &Global<i32>, total: u32| {
            let (lo, hi) = (cu.load(b), cu.load(b + 1));
            let valid = 0 <= lo && lo <= hi && hi as u32 <= total;
            let start = lo.clamp(0, total as i32) as u32;
            (
                start,
                (hi.clamp(0, total as i32) as u32).max(start) - start,
                valid,
            )
        };
        let (q_start, sq, q_valid) = range(&self.cu_q, self.total_q);
        let (k_start, sk, k_valid) = range(&self.cu_k, self.total_k);
        let valid = q_valid && k_valid;
        Bounds {
            q_start,
            sq,
            k_start,
            sk: if valid { sk } else { 0 },
            valid,
        }
    }
}

impl Sequences for Packed {
    const FOREIGN_ROWS: bool = true;
    const PRODUCER_LANES: u32 = 32;
    const PUBLISHED: bool = true;

    #[inline(always)]
    fn o_row_stride(pb: &Problem<Packed>) -> u32 {
        pb.heads.get() * pb.seqs.head_dim
    }

    type Items = PackedItems;

    #[inline(always)]
    fn items(pb: Problem<Packed>) -> PackedItems {
        PackedItems {
            pb,
            b: 0,
            first: 0,
            asked: None,
        }
    }
}

/// The walk over packed sequences, by the 32 lanes of a warp together: `b` is the first
/// sequence not yet passed, its items start at `first`; `asked`, lane 0's request for the
/// block's next item, made as soon as it has this one (its answer is read when needed).
///
/// A step reads the bounds of sequences `b .. b + 32` at once (a lane each), sums their items
/// along the lanes (a prefix sum by shuffles), and finds the sequence holding the item asked for
/// (a ballot): one round of loads per 32 sequences, wherever the item lies.
pub struct PackedItems {
    pb: Problem<Packed>,
    b: u32,
    first: u32,
    asked: Option<i32>,
}

impl PackedItems {
    /// Lane 0 asks the counter for an item index (the others' value is unused).
    #[inline(always)]
    fn ask(&self) -> i32 {
        if lane_id() == 0 {
            self.pb.seqs.counter.atomic_add(0, 1)
        } else {
            0
        }
    }

    /// The block has passed the last item: counted; the last block resets the counter.
    #[inline(always)]
    fn done(&self) {
        let counter = self.pb.seqs.counter;
        if lane_id() == 0 && counter.atomic_add(1, 1) as u32 == grid_dim() - 1 {
            // Every block has taken its index past the last item: nobody reads the counter
            // again in this launch.
            counter.store(0, 0);
            counter.store(1, 0);
        }
    }
}

impl ItemsAt for PackedItems {
    #[inline(always)]
    fn next(&mut self) -> Option<Work> {
        let asked = match self.asked.take() {
            Some(asked) => asked,
            None => self.ask(),
        };
        let work = self.at(shfl_idx(asked as u32, 0));
        match work {
            Some(_) => self.asked = Some(self.ask()),
            None => self.done(),
        }
        work
    }

    #[inline(always)]
    fn at(&mut self, item: u32) -> Option<Work> {
        let pb = &self.pb;
        let heads = pb.heads.get();
        let lane = lane_id();
        loop {
            if self.b >= pb.seqs.batch {
                return None;
            }
            let b = self.b + lane;
            let seq = if b < pb.seqs.batch {
                pb.seqs.bounds(b)
            } else {
                Bounds {
                    q_start: 0,
                    sq: 0,
                    k_start: 0,
                    sk: 0,
                    valid: true,
                }
            };
            let items = seq.sq.div_ceil(BM) * heads;
            let mut end = items;
            for d in [1, 2, 4, 8, 16] {
                let below = shfl_up(end, d);
                if lane >= d {
                    end += below;
                }
            }
            let end = self.first + end;
            let holders = ballot(item < end);
            if holders == 0 {
                self.first = shfl_idx(end, 31);
                self.b += 32;
                continue;
            }
            // The first lane whose sequence ends past the item holds it.
            let l = holders.trailing_zeros();
            let first = shfl_idx(end - items, l);
            let (q_start, sq) = (shfl_idx(seq.q_start, l), shfl_idx(seq.sq, l));
            let (k_start, sk) = (shfl_idx(seq.k_start, l), shfl_idx(seq.sk, l));
            let valid = shfl_idx(seq.valid as u32, l) != 0;
            self.b += l;
            self.first = first;
            let tiles = nz(sq.div_ceil(BM));
            let (h, qt) = ((item - first) / tiles, (item - first) % tiles);
            let qt = if pb.causal { tiles.get() - 1 - qt } else { qt };
            let q0 = qt * BM;
            let Packed {
                total_q, head_dim, ..
            } = pb.seqs;
            return Some(Work {
                item: Item {
                    q0,
                    sq,
                    sk,
                    key_tiles: key_tiles(q0, (sq, sk), pb.causal),
                    o_base: (q_start * heads + h) * head_dim,
                    lse_base: h * total_q + q_start,
                    valid,
                },
                q_at: [q_start + q0, h, 0],
                k_at: [k_start, h / pb.group, 0],
                v_at: [k_start, h / pb.group, 0],
            });
        }
    }
}

/// The shared memory of a kernel: the tiles, and the mbarriers.
pub struct Smem<const SMEM: usize> {
    pub tiles: SharedArray<Bf16, SMEM>,
    pub bars: SharedArray<Mbarrier, BARRIERS>,
    /// Each Q buffer's item, where the producer publishes them ([`Sequences::PUBLISHED`]).
    pub items: SharedArray<u32, ITEM_SLOTS>,
}

/// Element offsets of the tiles from `first`, the first element on a 1024-byte boundary: the
/// Q buffers, then stage by stage the key and the value tile.
#[derive(Clone, Copy)]
pub struct Layout {
    first: u32,
    tile: u32,
    pub stages: u32,
}

impl Layout {
    #[inline(always)]
    pub fn of<H: HeadDim, const SMEM: usize>(smem: &Smem<SMEM>) -> Layout {
        Layout {
            first: (1024 - smem.tiles.shared_address(0) % 1024) % 1024 / 2,
            tile: tile_bytes(H::D) / 2,
            stages: H::STAGES,
        }
    }

    #[inline(always)]
    pub fn q(&self, i: u32) -> u32 {
        self.first + i * self.tile
    }

    #[inline(always)]
    pub fn k(&self, s: u32) -> u32 {
        self.first + (Q_BUFFERS + 2 * s) * self.tile
    }

    #[inline(always)]
    pub fn v(&self, s: u32) -> u32 {
        self.k(s) + self.tile
    }

    /// Key tile `t` of the block: its stage and the parity of that stage's use.
    #[inline(always)]
    pub fn stage(&self, t: u32) -> (u32, u32) {
        (t % self.stages, (t / self.stages) % 2)
    }
}

/// Item `i` of the block: its Q buffer and the parity of that buffer's use.
#[inline(always)]
pub fn q_buffer(i: u32) -> (u32, u32) {
    (i % Q_BUFFERS, (i / Q_BUFFERS) % 2)
}

/// Initialises every barrier (one thread; a block barrier follows).
#[inline(always)]
pub fn init_barriers<H: HeadDim, const SMEM: usize>(smem: &Smem<SMEM>) {
    for i in 0..Q_BUFFERS {
        smem.bars.init(q_full(i), 1);
        smem.bars.init(q_empty(i), CONSUMER_WARPS);
    }
    for s in 0..H::STAGES {
        smem.bars.init(k_full(s), 1);
        smem.bars.init(v_full(s), 1);
        smem.bars.init(k_empty(s), CONSUMER_WARPS);
        smem.bars.init(v_empty(s), CONSUMER_WARPS);
    }
    fence_barrier_init();
}

/// Word `at`, read by lane 0 alone and handed to the warp's other lanes (the whole warp calls
/// it). For a slot that lane 0 frees afterwards with its arrival alone: the slot's next writer
/// waits on that arrival, which orders it after lane 0's read only — a read by another lane
/// would be ordered by the warp barrier in between, which compute-sanitizer's racecheck does
/// not follow (it reported such reads as hazards).
#[inline(always)]
pub(super) fn lane0_load<const N: usize>(words: &SharedArray<u32, N>, at: u32) -> u32 {
    let mine = if lane_id() == 0 { words.load(at) } else { 0 };
    shfl_idx(mine, 0)
}
