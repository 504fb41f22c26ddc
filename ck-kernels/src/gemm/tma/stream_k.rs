//! Stream-K: the last tiles' K stages shared out evenly over the blocks, so that the last
//! wave of a persistent GEMM leaves no multiprocessor idle.
//!
//! A persistent grid of `G` blocks takes `T` tiles in rounds of `G`; when `G` does not divide
//! `T`, the last round runs `T mod G` tiles while the other blocks wait. The schedule here
//! gives the first tiles out whole (data-parallel) and cuts the stages of the last ones into
//! `G` runs of (nearly) equal length, which may start and end inside a tile: a tile is then
//! summed by two or more blocks, each storing its part in a workspace, and the last to finish
//! adds the others' parts to its own and runs the epilogue.
//!
//! Worked example, 4096³ in 128 × 256 tiles on 132 multiprocessors: T = 512 tiles of 64
//! stages; 512 = 3 · 132 + 116. Data-parallel alone, a block runs up to 4 · 64 = 256 stages.
//! Here the first 512 − (116 + 132) = 264 tiles are data-parallel (two per block) and the last
//! 248 tiles' 248 · 64 = 15872 stages are one run cut at `⌊15872 · b / 132⌋` for
//! `b = 0..=132`: block 1 takes stages 120..240 of the run — the last 8 of tile 265, all of
//! tile 266 and the first 48 of tile 267 — so every block runs 248 or 249 stages instead of up
//! to 256: 2.7 % fewer — before the hand-overs, which cost more than that (below).
//!
//! Each run is at least one stage long (the host keeps the stream-K stages ≥ `G`), so the
//! blocks that share tile `t` are exactly those whose runs hold its first and last stage and
//! every block between: [`Schedule::sharers`]. With one data-parallel round kept in stream-K
//! (`T mod G + G` tiles; all `T` when `T < G`), a run is at least a tile long, and a tile has
//! at most two sharers unless `T < G`.
//!
//! **The hand-over** ([`Parts::settle`]): each sharer stores its accumulators in its slot of
//! the workspace (in their own register order, so that each thread's stores and loads are
//! whole 16-byte vectors, coalesced), fences, and takes a ticket — [`last_arrival`], an atomic
//! increment of the tile's counter. The block whose ticket completes the count sets the counter
//! back to zero for the next launch, loads every part, and stores C. It adds the parts in block order,
//! whoever finishes: C is the same bits from run to run. (The finishing block could keep its
//! own part in registers and load only the others', but with the accumulators live beside the
//! loads ptxas spilled them, and the K loop with them.)
//!
//! **Where it pays** ([`Schedule::plan`]): every hand-over moves a 128 KiB part out and back,
//! and the grid's hand-overs ran at about 1 TB/s on an H100 — 0.4 of a stage per part. That is
//! far more than the 2.7 % above: stream-K made 4096³ 25–30 % slower and 8192×8192×1024 up to
//! 15 %. Where few tiles meet a long K it is the other way round: 1024×1024×8192 is 32 tiles of
//! 128 stages, a quarter of the machine; shared out on 64, 96 or 128 blocks it ran 1.44, 1.70
//! or 1.66 × as fast, and 512×2048×16384 2.2 ×. The plan takes stream-K where its estimate
//! promises at least a fifth off.

use super::Width;
use ck_core::device::*;
use ck_core::tile::{unroll, DistributedTensor};

/// The consumer threads' named barrier for the hand-over (1 and 2 are the warpgroups' own).
const HAND_OVER_BARRIER: u32 = 3;
/// The consumer threads (two warpgroups).
const CONSUMERS: u32 = 256;

/// A block's run of stages of one tile: `k0..k1` of tile `tile` (in the order of the kernel's
/// `Problem::tile_at`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unit {
    pub tile: u32,
    pub k0: u32,
    pub k1: u32,
}

/// The blocks' share of a GEMM: tiles `0..dp_tiles` whole, block `b` taking `b, b + grid, …`;
/// then the stages of tiles `dp_tiles..tiles`, one run in tile order, block `b` taking stages
/// `start(b)..start(b + 1)` of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schedule {
    pub tiles: u32,
    pub k_stages: u32,
    pub grid: u32,
    pub dp_tiles: u32,
    /// Stages of the stream-K tiles.
    pub sk_stages: u32,
}

/// What a tile's part costs, for [`Schedule::plan`]: the grid's hand-overs move each part
/// out and back (2 × 128 KiB for a 128 × 256 tile) at about 1 TB/s in all (an H100, `ck bench
/// gemm`: 1024×1024×8192 on 64 blocks, 40 µs of stages and 14 µs more; 1536×1536×8192 on 132
/// blocks, 44 µs and 47 µs more), about 2/5 of a stage (0.6 µs) per part.
const PART_STAGES: (u64, u64) = (2, 5);

/// How much fewer stages stream-K must promise before it is chosen: the estimate above is
/// rough, and where it promised 5 % (1024×1024×8192 in 128 × 192 tiles), 5 % was lost.
const GAIN: (u64, u64) = (4, 5);

/// The fewest stages a tile must have to be shared. A hand-over's latency (a part stored, a
/// ticket taken, every part loaded back) does not shrink with the tile, and the cost above
/// (bandwidth) misses it where the tiles are short. On an H200 (`notes/gemm.md`, skinny
/// products), against whole tiles of the `cp.async` 128 × 128 kernel: 16 stages
/// (64×1024×1024) 17–19 µs against 11; 32 stages (64×1024×2048, 128×2048×2048,
/// 256×1024×2048) 20–24 µs against 17–18; 64 stages (64×4096×4096) 28–30 against 30; 128
/// stages (1024×1024×8192) 1.7 × as fast. A GPU's floor: the emulator, which has no such
/// latency, plans with the cost alone (a floor of 1), so that its small problems still reach
/// the hand-over.
pub const GPU_MIN_SHARED_STAGES: u32 = 64;

impl Schedule {
    /// `tiles` tiles of `k_stages` stages on `grid` blocks, the last `sk_tiles` of them in
    /// stream-K; all of them whole where the stream-K part would leave a block without a stage,
    /// where more tiles are asked for than there are, or where the stream-K stages times the
    /// grid pass 2³² (K in the millions).
    pub fn new(tiles: u32, k_stages: u32, grid: u32, sk_tiles: u32) -> Schedule {
        // The run's stage numbers times the grid fit in 32 bits (`start`, `block_of`).
        let sk_stages = sk_tiles as u64 * k_stages as u64;
        let sk = sk_tiles <= tiles
            && sk_stages >= grid as u64
            && sk_stages * grid as u64 <= u32::MAX as u64;
        let sk_stages = sk_stages as u32;
        let sk_tiles = if sk { sk_tiles } else { 0 };
        Schedule {
            tiles,
            k_stages,
            grid,
            dp_tiles: tiles - sk_tiles,
            sk_stages: if sk { sk_stages } else { 0 },
        }
    }

    /// Every one of `tiles` tiles of `k_stages` stages whole, on `min(tiles, sms)` blocks (one
    /// at least).
    pub fn whole_tiles(tiles: u32, k_stages: u32, sms: u32) -> Schedule {
        Schedule::new(tiles, k_stages, tiles.clamp(1, sms.max(1)), 0)
    }

    /// The host's choice for `tiles` tiles of `k_stages` stages on `sms` multiprocessors (one
    /// block each): of every tile whole on `min(tiles, sms)` blocks; the last round and one
    /// more in stream-K on `sms` blocks; and, with fewer tiles than multiprocessors, every tile
    /// in stream-K on `s` blocks per tile or on `sms` — the one of least [`Schedule::cost`],
    /// stream-K only where it costs at most 4/5 of the whole tiles (`GAIN`). In practice
    /// that is a grid with many idle multiprocessors and a long K: 32 tiles of 128 stages
    /// (1024×1024×8192) on 96 blocks, 1.7 × as fast on an H100; the hand-overs cost more than
    /// they save at 4096³ (25–30 % slower) or 1536×1536×8192 (11–17 % slower). Tiles of fewer
    /// than `min_shared_stages` stages are never shared ([`GPU_MIN_SHARED_STAGES`] on a GPU).
    pub fn plan(tiles: u32, k_stages: u32, sms: u32, min_shared_stages: u32) -> Schedule {
        let sms = sms.max(1);
        let whole = Schedule::whole_tiles(tiles, k_stages, sms);
        if k_stages < min_shared_stages {
            return whole;
        }
        let shared = |(sk_tiles, grid)| Schedule::new(tiles, k_stages, grid, sk_tiles);
        let per_tile = (tiles > 0 && tiles < sms).then_some(2..=sms / tiles.max(1));
        let fewer_tiles = (per_tile.into_iter().flatten().map(|s| s * tiles))
            .chain((tiles < sms).then_some(sms))
            .map(|grid| (tiles, grid));
        let last_rounds = (tiles >= sms).then_some((tiles % sms + sms, sms));
        let best = fewer_tiles
            .chain(last_rounds)
            .map(shared)
            .filter(Schedule::streams)
            .min_by_key(Schedule::cost);
        match best {
            Some(s) if s.cost() * GAIN.1 <= whole.cost() * GAIN.0 => s,
            _ => whole,
        }
    }

    /// The most stages a block runs, plus `PART_STAGES` (2/5) for each part the grid hands over
    /// (at most a part per stream-K tile and one more per block but the first, where a run
    /// starts inside a tile).
    pub fn cost(&self) -> u64 {
        let parts = if self.streams() {
            (self.tiles - self.dp_tiles + self.grid - 1) as u64
        } else {
            0
        };
        self.stages_per_block() + (parts * PART_STAGES.0).div_ceil(PART_STAGES.1)
    }

    /// Whether some tile is shared.
    pub fn streams(&self) -> bool {
        self.sk_stages > 0
    }

    /// The most stages a block runs.
    pub fn stages_per_block(&self) -> u64 {
        let whole = self.dp_tiles.div_ceil(self.grid.max(1)) as u64 * self.k_stages as u64;
        whole + (self.sk_stages as u64).div_ceil(self.grid.max(1) as u64)
    }

    /// The first stage of block `b`'s run (`b ≤ grid`).
    #[inline(always)]
    fn start(&self, b: u32) -> u32 {
        b * self.sk_stages / self.grid
    }

    /// The block whose run holds stage `s` of the run: the last `b` with `start(b) ≤ s`.
    #[inline(always)]
    fn block_of(&self, s: u32) -> u32 {
        ((s + 1) * self.grid - 1) / self.sk_stages
    }

    /// Block `block`'s units: its whole tiles, then its run, tile by tile.
    #[inline(always)]
    pub fn units(&self, block: u32) -> impl Iterator<Item = Unit> {
        let s = *self;
        let mut whole = block;
        let (mut at, end) = (s.start(block), s.start(block + 1));
        core::iter::from_fn(move || {
            if whole < s.dp_tiles {
                let unit = Unit {
                    tile: whole,
                    k0: 0,
                    k1: s.k_stages,
                };
                whole += s.grid;
                return Some(unit);
            }
            (at < end).then(|| {
                let (tile, k0) = (s.dp_tiles + at / s.k_stages, at % s.k_stages);
                let k1 = s.k_stages.min(k0 + (end - at));
                at += k1 - k0;
                Unit { tile, k0, k1 }
            })
        })
    }

    /// Whether `unit` is a whole tile.
    #[inline(always)]
    pub fn whole(&self, unit: Unit) -> bool {
        unit.k0 == 0 && unit.k1 == self.k_stages
    }

    /// The first and the last block sharing stream-K tile `tile`.
    #[inline(always)]
    pub fn sharers(&self, tile: u32) -> (u32, u32) {
        let first = (tile - self.dp_tiles) * self.k_stages;
        (
            self.block_of(first),
            self.block_of(first + self.k_stages - 1),
        )
    }

    /// Block `b`'s slot for its part of stream-K tile `tile`: `2b` for the tile its run starts
    /// in, `2b + 1` for the one it ends in.
    #[inline(always)]
    pub fn slot(&self, b: u32, tile: u32) -> u32 {
        let starts_in = self.dp_tiles + self.start(b) / self.k_stages;
        2 * b + (tile != starts_in) as u32
    }

    /// Slots in the workspace: two per block.
    pub const fn slots(grid: u32) -> u32 {
        2 * grid
    }
}

/// The workspace of the hand-over: the parts (`Schedule::slots` of a tile's accumulators each)
/// and a counter per stream-K tile, zero between launches; and a word of shared memory through
/// which thread 0 tells the others what its ticket said.
#[derive(Clone, Copy)]
pub struct Parts {
    pub parts: GlobalMut<f32>,
    pub tickets: GlobalMut<u32>,
    pub said: SharedArray<u32, 1>,
}

impl Parts {
    /// Elements of one part of a tile `W` wide: its accumulators, `BN / 2` per consumer thread.
    pub const fn part_elems<W: Width>() -> u32 {
        W::BN / 2 * CONSUMERS
    }

    /// Whether the workspace holds `grid` blocks' parts of tiles `W` wide and `sk_tiles`
    /// tickets.
    #[inline(always)]
    pub fn fits<W: Width>(&self, grid: u32, sk_tiles: u32) -> bool {
        (Schedule::slots(grid) as u64 * Self::part_elems::<W>() as u64) <= self.parts.len() as u64
            && sk_tiles <= self.tickets.len()
    }

    /// Element of vector `j` of this thread in slot `slot` (vectors of four registers, thread
    /// after thread).
    #[inline(always)]
    fn at<W: Width>(slot: u32, j: u32) -> u32 {
        slot * Self::part_elems::<W>() + (j * CONSUMERS + thread_idx()) * 4
    }

    #[inline(always)]
    fn store<W: Width>(&self, slot: u32, acc: &DistributedTensor<W::Acc, f32>) {
        unroll::<32>(|j| {
            if (j as u32) < W::BN / 8 {
                let v = [0, 1, 2, 3].map(|e| acc.get(4 * j + e));
                self.parts.store_vec::<4>(Self::at::<W>(slot, j as u32), v);
            }
        });
        fence_acq_rel_gpu();
    }

    /// `acc` = the parts of blocks `first` and `first + 1` of tile `tile`, then plus those of
    /// the blocks after them up to `last`, in that order. The accumulators are dead while the
    /// first two are loaded (their sum is written over them), so those loads may all be in
    /// flight at once; each later part is added eight vectors at a time in a loop over the
    /// blocks, which keeps 32 registers of loads beside the 128 accumulators (all 32 vectors
    /// in flight beside them, ptxas spilled the accumulators and, with them, the K loop).
    #[inline(always)]
    fn sum<W: Width>(
        &self,
        schedule: &Schedule,
        (tile, first, last): (u32, u32, u32),
        acc: &mut DistributedTensor<W::Acc, f32>,
    ) {
        let (s0, s1) = (schedule.slot(first, tile), schedule.slot(first + 1, tile));
        unroll::<32>(|j| {
            if (j as u32) < W::BN / 8 {
                let a = self.parts.load_vec::<4>(Self::at::<W>(s0, j as u32));
                let b = self.parts.load_vec::<4>(Self::at::<W>(s1, j as u32));
                for e in 0..4 {
                    acc.set(4 * j + e, a[e] + b[e]);
                }
            }
        });
        unroll::<4>(|chunk| {
            for block in first + 2..=last {
                let slot = schedule.slot(block, tile);
                unroll::<8>(|v| {
                    let j = 8 * chunk + v;
                    if (j as u32) < W::BN / 8 {
                        let x = self.parts.load_vec::<4>(Self::at::<W>(slot, j as u32));
                        for (e, x) in x.into_iter().enumerate() {
                            acc.set(4 * j + e, acc.get(4 * j + e) + x);
                        }
                    }
                });
            }
        });
    }

    /// The hand-over of stream-K unit `unit`, whose sum is in `acc`, by every consumer thread
    /// (see the module documentation). True when this block finishes the tile: `acc` then
    /// holds the whole tile's sum.
    #[inline(always)]
    pub fn settle<W: Width>(
        &self,
        schedule: &Schedule,
        unit: Unit,
        acc: &mut DistributedTensor<W::Acc, f32>,
    ) -> bool {
        let (first, last) = schedule.sharers(unit.tile);
        let ticket = unit.tile - schedule.dp_tiles;
        self.store::<W>(schedule.slot(block_idx(), unit.tile), acc);
        let sync = || named_barrier_sync(HAND_OVER_BARRIER, CONSUMERS);
        if !last_arrival((self.tickets, ticket), last - first + 1, &self.said, sync) {
            return false;
        }
        self.sum::<W>(schedule, (unit.tile, first, last), acc);
        true
    }
}
