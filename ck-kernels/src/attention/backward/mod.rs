//! Attention backward: `dQ`, `dK`, `dV` from Q, K, V, O, dO and the forward's log-sum-exp
//! (FlashAttention-2's algorithm, on Hopper's warpgroup MMA), bf16 in and out with f32
//! accumulation, the forward's layout (`[batch, heads, seq, head_dim]`, K and V
//! `[batch, kv_heads, seq, head_dim]`; O and dO also as the forward's `[batch, seq, heads,
//! head_dim]` output, which an output projection's gradient arrives in), causal or not, grouped-query heads (dK and dV summed
//! over each group).
//!
//! | file | what |
//! |---|---|
//! | [`rows`] | `attention_bwd_rows`: per query row `Δ = Σ dO ∘ O` and `LSE · log₂ e`, the workspaces cleared; `attention_bwd_dq_*`: dQ from its f32 sums |
//! | [`schedule`] | the problem, a block's key tile and its steps, the shared-memory plan, the barriers |
//! | `producer` | one thread copying K and V once, then each step's Q and dO, with TMA |
//! | `consumer` | two warpgroups of 64 keys each: `Sᵀ`, `dPᵀ`, `dV`, `dK` in registers, `dQ` staged in shared memory |
//! | `dq_sums` | one thread adding the staged dQ to an f32 workspace with the copy engine (deterministic: in key tile order) |
//! | [`host`] | the workspace, the three launches, the fp64 reference |
//!
//! A block owns 128 keys of one key/value head and keeps their `dK`, `dV` in registers while
//! it walks every query tile (64 rows) of every query head of the group that sees them — so
//! the group's sum of dK and dV is made in registers, in a fixed order. Each query tile's dQ
//! gets one partial sum per key tile, staged in shared memory and added to an f32 workspace by
//! one bulk reduction of the copy engine (`cp.reduce.async.bulk`), which a thread of its own
//! issues; the *deterministic* mode orders those additions by key tile (a counter per query
//! tile), so two runs give the same bits. Three launches: the rows, the blocks, dQ's conversion.

use crate::attention::{HeadDim, D128, D64};
use ck_core::device::*;
use ck_core::TileDistribution;
use ck_macros::{tile_distribution, tile_kernel};

mod consumer;
pub use consumer::dq_chunk;
mod dq_sums;
mod producer;
pub mod rows;
pub mod schedule;

use producer::Heads;
use schedule::{Layout, Problem, Smem, BARRIERS, CONSUMER_WARPS};
pub use schedule::{BM, BN, THREADS};

tile_distribution! {
    /// One value per query column of a transposed score tile ([`Out64`](crate::attention::Out64),
    /// keys as rows): the tile reduced over its rows. The digits that split the rows (warpgroup,
    /// warp, lane group `g`) become replications: a thread holds its 16 columns' values.
    pub struct ColStats {
        warp_size: 32, block_size: 256,
        r: [wg: 2, w: 4, g: 8],
        h: { n: [j: 8, t: 4, e: 2] },
        p: [[r.wg, r.w], [r.g, n.t]],
        y: [n.j, n.e],
    }
}

tile_distribution! {
    /// A warpgroup's half of dQ for head dim 128: 64 query rows × 64 of the 128 columns
    /// (warpgroup `wg` has columns `64·wg..`), in the accumulator layout of an `m64n64k16` MMA.
    pub struct DqHalf128 {
        warp_size: 32, block_size: 256,
        h: { m: [w: 4, h: 2, g: 8], n: [wg: 2, j: 8, t: 4, e: 2] },
        p: [[n.wg, m.w], [m.g, n.t]],
        y: [n.j, m.h, n.e],
    }
}

tile_distribution! {
    /// [`DqHalf128`] for head dim 64: 64 rows × 32 of the 64 columns (`m64n32k16`).
    pub struct DqHalf64 {
        warp_size: 32, block_size: 256,
        h: { m: [w: 4, h: 2, g: 8], n: [wg: 2, j: 4, t: 4, e: 2] },
        p: [[n.wg, m.w], [m.g, n.t]],
        y: [n.j, m.h, n.e],
    }
}

/// What the backward adds to a head dim: dQ's half tile per warpgroup.
pub trait BwdHeadDim: HeadDim {
    /// The accumulators of one warpgroup's dQ half (`m64n(D/2)k16`).
    type DqAcc: WgmmaAccumulators;
    /// dQ's tile (64 rows × D) in that layout.
    type Dq: TileDistribution<X = [i32; 2], Buffer<f32> = Self::DqAcc>;
}

impl BwdHeadDim for D64 {
    type DqAcc = [f32; 16];
    type Dq = DqHalf64;
}

impl BwdHeadDim for D128 {
    type DqAcc = [f32; 32];
    type Dq = DqHalf128;
}

/// The kernel body for head dim `H`: the barriers, then the producer (warp 8), the thread that
/// adds dQ (warp 9) and the consumers (240 registers for a consumer thread — dK and dV take 128
/// at head dim 128 — and 24 for the producer's warpgroup: `256 · 240 + 128 · 24 ≤ 64 K`).
#[inline(always)]
fn backward<H: BwdHeadDim, const SMEM: usize, const STATS: usize>(
    maps: (Heads, Heads, Heads, Heads, Tma<f32, 1>),
    (out, batch): (consumer::Outputs, u32),
    pb: Problem,
    smem: Smem<SMEM, STATS>,
) {
    let lay = Layout::of(&smem, H::D);
    if thread_idx() == 0 {
        schedule::init_barriers(&smem);
    }
    block_sync();
    if warp_id() >= CONSUMER_WARPS {
        setmaxnreg_dec::<24>();
        if warp_id() == CONSUMER_WARPS && lane_id() == 0 {
            let (q, dout, k, v, stats) = maps;
            let half = pb.sq_pad * pb.heads.get() * batch;
            producer::produce((&q, &dout, &k, &v), (&stats, half), &smem, lay, &pb, H::D);
        } else if warp_id() == CONSUMER_WARPS + 1 && lane_id() == 0 {
            dq_sums::add(&out, &smem, lay, &pb, H::D);
        }
    } else {
        setmaxnreg_inc::<240>();
        consumer::consume::<H, SMEM, STATS>(&out, &smem, lay, &pb);
    }
}

macro_rules! backward_kernel {
    ($name:ident, $h:ty, $d:literal) => {
        #[doc = concat!("Attention backward for head dim ", stringify!($d), ": one block of 384 threads per 128 keys of a key/value head; Q, dO, K and V as rank-4 tensor maps `[head dim, seq, heads, batch]` (Q and dO in boxes of 64 × 64 × 1 × 1, K and V of 64 × 128 × 1 × 1) with the 128-byte swizzle; the row workspace from [`rows`] (`[2, batch · heads, sq_pad]`: `LSE · log₂ e`, then Δ) as a rank-1 map in boxes of 64 (see the module documentation).")]
        #[tile_kernel(block = 384, min_blocks_per_sm = 1)]
        #[allow(clippy::too_many_arguments)]
        pub fn $name(
            q: Tma<Bf16, 4>,
            dout: Tma<Bf16, 4>,
            k: Tma<Bf16, 4>,
            v: Tma<Bf16, 4>,
            stats: Tma<f32, 1>,
            dq: GlobalMut<f32>,
            counters: GlobalMut<u32>,
            dk: GlobalMut<Bf16>,
            dv: GlobalMut<Bf16>,
            sq: u32,
            sk: u32,
            batch: u32,
            heads: u32,
            group: u32,
            scale: f32,
            causal: bool,
            deterministic: bool,
        ) {
            let smem = Smem {
                tiles: shared!(Bf16; schedule::smem_elems($d)),
                stats: shared!(f32; schedule::stats_elems($d)),
                bars: shared!(Mbarrier; BARRIERS),
            };
            let pb = Problem {
                sq,
                sk,
                heads: schedule::nz(heads),
                group: schedule::nz(group),
                sq_pad: sq.div_ceil(BM) * BM,
                scale_log2: scale * crate::attention::LOG2_E,
                causal,
                deterministic,
            };
            let out = consumer::Outputs { dq, counters, dk, dv, scale };
            let maps = (q, dout, k, v, stats);
            const SMEM: usize = schedule::smem_elems($d);
            const STATS: usize = schedule::stats_elems($d);
            backward::<$h, SMEM, STATS>(maps, (out, batch), pb, smem);
        }
    };
}

backward_kernel!(attention_bwd_d64, D64, 64);
backward_kernel!(attention_bwd_d128, D128, 128);

#[cfg(not(target_arch = "nvptx64"))]
pub mod describe;
#[cfg(not(target_arch = "nvptx64"))]
pub mod host;
