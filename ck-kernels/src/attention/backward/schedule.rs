//! What the producer and the consumers of a backward block agree on: the problem, the block's
//! key tile and its steps, where the tiles lie in shared memory, and which mbarrier guards
//! which buffer.
//!
//! A block owns one key tile of one key/value head ([`Problem::block`]): its 128 keys and
//! values stay in shared memory while it walks its *steps* — every query head
//! of the group, and in each head every 64-row query tile that sees one of the keys
//! ([`Problem::steps`]). Step `t` uses ring stage `t mod STAGES` (its Q and dO tiles, and its
//! rows' `LSE · log₂ e` and Δ) for the
//! `t / STAGES`-th time: use `n` waits for phase `n` of the stage's "full" barrier, refilling it
//! waits for phase `n − 1` of its "empty" one. The keys and values arrive once, on
//! [`KV_FULL`].

use ck_core::device::*;
use core::num::NonZeroU32;

/// Keys per block (two consumer warpgroups of 64).
pub const BN: u32 = 128;
/// Query rows per step.
pub const BM: u32 = 64;
/// Threads per block: two consumer warpgroups, then the producer's.
pub const THREADS: u32 = 384;
/// Consumer warps, each arriving once at an "empty" barrier when done with a stage.
pub const CONSUMER_WARPS: u32 = 8;
/// Stages of (Q, dO) tiles in the ring.
pub const STAGES: u32 = 2;
/// Bytes of a 64-column panel of a 64-row tile (Q, dO, dS): one TMA box.
pub const STEP_PANEL: u32 = BM * 128;
/// Bytes of a 64-column panel of the 128-row key and value tiles.
pub const KEY_PANEL: u32 = BN * 128;

/// The keys and values have arrived.
pub const KV_FULL: u32 = 0;
/// Stage `s`'s Q and dO tiles are full / empty.
pub const fn full(s: u32) -> u32 {
    1 + s
}
pub const fn empty(s: u32) -> u32 {
    1 + STAGES + s
}
/// Deterministic mode: both consumer warpgroups have staged their halves of a step's dQ (two
/// arrivals) / the ordered additions have read them (one arrival).
pub const DQ_STAGED: u32 = 1 + 2 * STAGES;
pub const DQ_READ: u32 = DQ_STAGED + 1;
/// mbarriers per block.
pub const BARRIERS: usize = (3 + 2 * STAGES) as usize;

/// Named barriers of the two consumer warpgroups around the dS tile they share: it is free to
/// write (both read the last step's), and it is written (both read this step's).
pub const DS_FREE: u32 = 1;
pub const DS_WRITTEN: u32 = 2;

/// f32 elements for head dim `d`: the stages' row statistics (64 values of `LSE · log₂ e`, then
/// 64 of Δ, per stage), each warpgroup's dQ staging tile (`64 · d / 2`), and up to 128 bytes to
/// start them on a 128-byte boundary (a TMA destination).
pub const fn stats_elems(d: u32) -> usize {
    (STAGES * 2 * BM + BM * d + 32) as usize
}

/// Shared elements for head dim `d`: K and V (128 rows), dS (64 × 128), the stages of Q and
/// dO (64 rows), and up to 1 KiB to start them on a 1024-byte boundary.
pub const fn smem_elems(d: u32) -> usize {
    ((2 * BN * d + BM * BN + STAGES * 2 * BM * d) + 512) as usize
}

/// The problem as the kernel sees it. Divisors are `NonZeroU32` (the host checks them), so no
/// division can panic in the consumers' code.
#[derive(Clone, Copy)]
pub struct Problem {
    pub sq: u32,
    pub sk: u32,
    pub heads: NonZeroU32,
    pub group: NonZeroU32,
    /// Query rows of a head in the row workspaces (LSE, Δ): `sq` rounded up to [`BM`].
    pub sq_pad: u32,
    /// `scale · log₂ e` (the scale is positive).
    pub scale_log2: f32,
    pub causal: bool,
    /// dQ's partial sums are added key tile by key tile in order (bitwise reproducible).
    pub deterministic: bool,
}

/// `x` as a divisor (a zero, which the host never passes, taken as 1).
#[inline(always)]
pub fn nz(x: u32) -> NonZeroU32 {
    NonZeroU32::new(x).unwrap_or(NonZeroU32::MIN)
}

/// One step: the query head (`batch · heads + head`) and its tile's first row.
#[derive(Clone, Copy)]
pub struct Step {
    pub bh: u32,
    pub q0: u32,
}

impl Problem {
    /// Key tiles of a head.
    #[inline(always)]
    pub fn key_tiles(&self) -> NonZeroU32 {
        nz(self.sk.div_ceil(BN))
    }

    /// This block's key tile and key/value head (`batch · kv_heads + kv_head`): the tiles of a
    /// head side by side (blocks running together share its queries in L2), or under the
    /// causal mask the heads of a tile side by side, so the first key tiles, which most query
    /// tiles see, start first and the light ones fill the end of the grid.
    #[inline(always)]
    pub fn block(&self) -> (u32, u32) {
        let tiles = self.key_tiles();
        if self.causal {
            let heads = nz(grid_dim() / tiles);
            (block_idx() / heads, block_idx() % heads)
        } else {
            (block_idx() % tiles, block_idx() / tiles)
        }
    }

    /// The first query tile that sees a key of tile `n`: 0, or under the causal mask the
    /// first whose last row reaches the tile's first key (row `i` sees keys `≤ i + sk − sq`).
    #[inline(always)]
    pub fn first_query_tile(&self, n: u32) -> u32 {
        if !self.causal {
            return 0;
        }
        let first_row = (n * BN) as i64 - (self.sk as i64 - self.sq as i64);
        ((first_row - (BM as i64 - 1)).max(0) as u32).div_ceil(BM)
    }

    /// The block's steps, in the order both sides take them: head by head of the group, query
    /// tile by query tile.
    #[inline(always)]
    pub fn steps(&self) -> impl Iterator<Item = Step> {
        let (n, bkv) = self.block();
        let kv_heads = self.heads.get() / self.group;
        let (b, kvh) = (bkv / nz(kv_heads), bkv % nz(kv_heads));
        let first = self.first_query_tile(n);
        let tiles = self.sq.div_ceil(BM).saturating_sub(first);
        let per_head = nz(tiles);
        let bh0 = b * self.heads.get() + kvh * self.group.get();
        (0..tiles * self.group.get()).map(move |i| Step {
            bh: bh0 + i / per_head,
            q0: (first + i % per_head) * BM,
        })
    }
}

/// The shared memory of a kernel: the tiles, the row statistics, and the mbarriers.
pub struct Smem<const SMEM: usize, const STATS: usize> {
    pub tiles: SharedArray<Bf16, SMEM>,
    pub stats: SharedArray<f32, STATS>,
    pub bars: SharedArray<Mbarrier, BARRIERS>,
}

/// Element offsets of the tiles from `first`, the first element on a 1024-byte boundary: K,
/// V, dS, then stage by stage Q and dO; and of the statistics, then the dQ staging tiles, from
/// `stats`, on a 128-byte boundary.
#[derive(Clone, Copy)]
pub struct Layout {
    first: u32,
    stats: u32,
    d: u32,
}

impl Layout {
    #[inline(always)]
    pub fn of<const SMEM: usize, const STATS: usize>(smem: &Smem<SMEM, STATS>, d: u32) -> Layout {
        Layout {
            first: (1024 - smem.tiles.shared_address(0) % 1024) % 1024 / 2,
            stats: (128 - smem.stats.shared_address(0) % 128) % 128 / 4,
            d,
        }
    }

    /// Stage `s`'s `LSE · log₂ e` of its 64 query rows (f32 elements of `stats`).
    #[inline(always)]
    pub fn lse2(&self, s: u32) -> u32 {
        self.stats + s * 2 * BM
    }

    /// Stage `s`'s Δ of its 64 query rows.
    #[inline(always)]
    pub fn delta(&self, s: u32) -> u32 {
        self.lse2(s) + BM
    }

    /// Warpgroup `wg`'s dQ staging tile (f32 elements of `stats`, `64 · d / 2` of them).
    #[inline(always)]
    pub fn dq(&self, wg: u32, d: u32) -> u32 {
        self.stats + STAGES * 2 * BM + wg * BM * d / 2
    }

    #[inline(always)]
    pub fn k(&self) -> u32 {
        self.first
    }

    #[inline(always)]
    pub fn v(&self) -> u32 {
        self.first + BN * self.d
    }

    #[inline(always)]
    pub fn ds(&self) -> u32 {
        self.first + 2 * BN * self.d
    }

    #[inline(always)]
    pub fn q(&self, s: u32) -> u32 {
        self.ds() + BM * BN + s * 2 * BM * self.d
    }

    #[inline(always)]
    pub fn dout(&self, s: u32) -> u32 {
        self.q(s) + BM * self.d
    }
}

/// Step `t` of the block: its stage and the parity of that stage's use.
#[inline(always)]
pub fn stage(t: u32) -> (u32, u32) {
    (t % STAGES, (t / STAGES) % 2)
}

/// Initialises every barrier (one thread; a block barrier follows).
#[inline(always)]
pub fn init_barriers<const SMEM: usize, const STATS: usize>(smem: &Smem<SMEM, STATS>) {
    smem.bars.init(KV_FULL, 1);
    for s in 0..STAGES {
        smem.bars.init(full(s), 1);
        smem.bars.init(empty(s), CONSUMER_WARPS);
    }
    smem.bars.init(DQ_STAGED, 2);
    smem.bars.init(DQ_READ, 1);
    fence_barrier_init();
}
