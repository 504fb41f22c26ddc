//! What the producer and the consumers of an attention block agree on: the problem, the work
//! items and their order, where the tiles lie in shared memory, and which mbarrier guards
//! which buffer.
//!
//! Both sides walk the same sequence — the block's items in order, and in each item its key
//! tiles — and count the key tiles from the block's start, so key tile `t` of the block (over
//! all its items) uses ring stage `t mod STAGES`, for the `t / STAGES`-th time. Use `n` of a
//! stage waits for phase `n` of its "full" barrier (parity `n mod 2`); refilling it waits for
//! phase `n − 1` of its "empty" barrier. Item `i` of the block uses Q buffer `i mod 2` the same
//! way.

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

/// The problem as the kernel sees it. The divisors are `NonZeroU32`: the host has checked
/// them, and a division that cannot panic keeps panic calls (and the register budget they
/// impose) out of the consumers' code.
#[derive(Clone, Copy)]
pub struct Problem {
    /// Query and key lengths.
    pub sq: u32,
    pub sk: u32,
    /// Batch, query heads, and query heads per key/value head.
    pub batch: u32,
    pub heads: NonZeroU32,
    pub group: NonZeroU32,
    /// `scale · log₂ e` (the scale is positive).
    pub scale_log2: f32,
    pub causal: bool,
    /// O's strides in elements: from a query row of a head to the next, and from a head to the
    /// next (`[B, H, S, D]`: `D` and `S·D`; `[B, S, H, D]`: `H·D` and `D`); a batch is `H·S·D`.
    pub o_strides: (u32, u32),
}

impl Problem {
    /// The kernel's arguments as a problem (a zero divisor, which the host never passes, is
    /// taken as 1).
    #[inline(always)]
    pub fn new(
        (sq, sk, batch): (u32, u32, u32),
        (heads, group): (u32, u32),
        scale_log2: f32,
        causal: bool,
    ) -> Problem {
        let nz = |x: u32| NonZeroU32::new(x).unwrap_or(NonZeroU32::MIN);
        Problem {
            sq,
            sk,
            batch,
            heads: nz(heads),
            group: nz(group),
            scale_log2,
            causal,
            o_strides: (0, 0),
        }
    }

    /// The problem with O at strides `(row, head)` (see [`Problem::o_strides`]).
    #[inline(always)]
    pub fn with_o_strides(self, row: u32, head: u32) -> Problem {
        Problem {
            o_strides: (row, head),
            ..self
        }
    }

    /// 128-row query tiles per head (at least 1, so it divides).
    #[inline(always)]
    fn q_tiles(&self) -> NonZeroU32 {
        NonZeroU32::new(self.sq.div_ceil(BM)).unwrap_or(NonZeroU32::MIN)
    }

    /// Items: 128-row query tiles of every head.
    #[inline(always)]
    pub fn items(&self) -> u32 {
        self.sq.div_ceil(BM) * self.batch * self.heads.get()
    }

    /// This block's items, in the order both sides take them: `block, block + grid, …`, head
    /// by head — so the blocks running at one time share a few heads' keys and values in L2 —
    /// and under a causal mask each head's longest tiles first.
    #[inline(always)]
    pub fn my_items(&self) -> impl Iterator<Item = Work> + '_ {
        let (items, q_tiles) = (self.items(), self.q_tiles());
        let mut next = block_idx();
        core::iter::from_fn(move || {
            let item = next;
            next += grid_dim();
            (item < items).then(|| {
                let (bh, qt) = (item / q_tiles, item % q_tiles);
                let qt = if self.causal {
                    q_tiles.get() - 1 - qt
                } else {
                    qt
                };
                Work::of(bh, qt, self)
            })
        })
    }
}

/// One item: its query tile, its head and key/value head, and the key tiles its rows see.
#[derive(Clone, Copy)]
pub struct Work {
    pub q0: u32,
    pub bh: u32,
    pub kv_head: u32,
    pub key_tiles: u32,
}

impl Work {
    /// Query tile `qt` of head `bh`.
    #[inline(always)]
    fn of(bh: u32, qt: u32, pb: &Problem) -> Work {
        let q0 = qt * BM;
        let (batch, head) = (bh / pb.heads, bh % pb.heads);
        let kv_heads = pb.heads.get() / pb.group;
        // Keys any row of the tile sees: all, or up to the last row's diagonal.
        let last_row = (q0 + BM).min(pb.sq) as i64 - 1;
        let key_end = if pb.causal {
            (last_row + pb.sk as i64 - pb.sq as i64 + 1).clamp(0, pb.sk as i64) as u32
        } else {
            pb.sk
        };
        Work {
            q0,
            bh,
            kv_head: batch * kv_heads + head / pb.group,
            key_tiles: key_end.div_ceil(BN),
        }
    }
}

/// The shared memory of a kernel: the tiles, and the mbarriers.
pub struct Smem<const SMEM: usize> {
    pub tiles: SharedArray<Bf16, SMEM>,
    pub bars: SharedArray<Mbarrier, BARRIERS>,
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
