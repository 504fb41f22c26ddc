//! `attention_d64` and `attention_d128`: fused multi-head attention forward (FlashAttention's
//! algorithm) on Hopper's warpgroup MMA, `O = softmax(scale · Q·Kᵀ + mask) · V` with the row
//! log-sum-exp, bf16 Q, K, V and O with f32 accumulation, layout `[batch, heads, seq, head_dim]`
//! (contiguous; O also `[batch, seq, heads, head_dim]`, what an output projection reads as
//! `[batch · seq, heads · head_dim]`; Q, K and V also read in place from a fused QKV projection
//! `[batch, seq, (heads + 2·kv_heads)·head_dim]`, [`host::launch_fused`]), grouped-query heads (`heads` a multiple of `kv_heads`), causal masking aligned
//! to the bottom-right corner when `Sq ≠ Sk` (query row `i` sees keys `j ≤ i + Sk − Sq`).
//!
//! `attention_varlen_d64` / `_d128` run the same blocks over sequences of different lengths
//! packed end to end (FlashAttention's varlen contract, [`varlen`]): Q and O `[total_q, heads,
//! head_dim]`, K and V `[total_k, kv_heads, head_dim]`, the bounds on the device.
//!
//! The work is split into *items* of 128 query rows of one head of one sequence, each walking
//! that sequence's keys in tiles of 128. The grid is persistent: one block per multiprocessor,
//! each taking items `block, block + grid, …` (packed sequences: the next item a counter hands
//! out), found by a walk over the sequences ([`schedule::Sequences`]: all of one length, or
//! packed with their bounds read 32 at a time by the lanes of a warp). A block has three
//! warpgroups:
//!
//! * **the producer** (one thread of warpgroup 2 — a warp for packed sequences, whose walk
//!   takes all its lanes — which gives its registers to the others with `setmaxnreg`;
//!   `producer`) copies each item's Q, and each key and value tile, with TMA:
//!   64-column panels of 128 rows of 128 bytes in the copy engine's 128-byte swizzle — the
//!   layout the MMAs read. Q has two buffers and the key and value tiles a ring of stages,
//!   each with a "full" mbarrier (the producer announces a copy's bytes, the copy completes
//!   them) and an "empty" one (every consumer warp arrives when done with it). The ring runs
//!   on across items, so the next item's tiles arrive while the consumers finish the last;
//! * **two consumer warpgroups** (warpgroups 0 and 1, 64 query rows each; `consumer`) run
//!   the online softmax: `S = Q·Kᵀ` with `wgmma` from shared memory; the tile's row max through
//!   [`reduce_x_in_warp`](ck_core::tile::reduce_x_in_warp) (the four lanes of a quad share a
//!   row of the accumulator layout); `P = exp2(scale·log₂e·S − max)`, one fused multiply-add
//!   and one `ex2` per score; the rescale of the running sum and of `O`; `O += P·V` with
//!   `wgmma` taking P from registers (the score tile's accumulator layout *is* the A-operand
//!   layout, [`WgmmaA::Regs`]). The MMAs of tile `j`'s values and tile `j + 1`'s keys are
//!   issued together, so the tensor cores have the next product queued while the warpgroup
//!   waits.
//!
//! No block barrier is passed after the start: the copies cost the consumers no instructions
//! and no registers, and the two consumer warpgroups are not held in lock-step.
//!
//! Keys past a sequence's end arrive as zeros (the copy engine's fill) or, packed, as the next
//! sequence's rows; their scores, like those above the causal diagonal, are set to −∞ before
//! the max — only in the tiles that reach them — and packed values past the end are zeroed in
//! shared memory (`0 · ∞` is NaN). A
//! row that sees no key at all (`Sk = 0`, or a causal row above the corner when `Sq > Sk`)
//! keeps a running max of −∞; it is exponentiated against 0 instead, so it gives `O = 0` and
//! `LSE = −∞`, never NaN.

use ck_core::device::*;
use ck_core::TileDistribution;
use ck_macros::{tile_distribution, tile_kernel};

pub mod backward;
mod consumer;
pub mod decode;
mod producer;
pub mod schedule;

use schedule::{
    Layout, Packed, Problem, Sequences, Smem, Uniform, BARRIERS, CONSUMER_WARPS, ITEM_SLOTS,
};
pub use schedule::{BM, BN, THREADS};

/// `log₂ e`: scores are scaled into the log₂ domain once, so every exponential is one `exp2`.
pub const LOG2_E: f32 = core::f32::consts::LOG2_E;

/// The 128 × 128 score tile in the wgmma accumulator layout — the GEMM's 128 × 128 C tile:
/// warpgroup `wg` owns rows 64·wg..64·wg + 64; in it warp `w` and lane (g, t) hold rows
/// 16w + {g, g + 8} and columns 8j + 2t + {0, 1} — register 4j + 2h + e. Also `O`'s layout for
/// head dim 128.
pub use crate::gemm::wgmma::CWgmma128 as Scores;

/// `O`'s 128 × 64 tile (head dim 64) in the accumulator layout ([`Scores`] with j < 8).
pub use crate::gemm::wgmma::CWgmma64 as Out64;

tile_distribution! {
    /// One value per query row: [`Scores`] (or [`Out64`]) reduced over its columns. The lane
    /// digit `t` that split a row becomes the replication `r.t`: the quad's four lanes hold the
    /// same two rows (registers h = 0, 1).
    pub struct RowStats {
        warp_size: 32, block_size: 256,
        r: [t: 4],
        h: { m: [wg: 2, w: 4, h: 2, g: 8] },
        p: [[m.wg, m.w], [m.g, r.t]],
        y: [m.h],
    }
}

/// What depends on the head dim.
pub trait HeadDim {
    /// The head dim (a multiple of 64: tiles are stored in 64-column panels).
    const D: u32;
    /// Stages of (K, V) tiles in the ring (as many as shared memory holds).
    const STAGES: u32;
    /// `O`'s accumulators: one `m64nDk16` MMA's.
    type Acc: WgmmaAccumulators;
    /// `O`'s tile in the accumulator layout.
    type Out: TileDistribution<X = [i32; 2], Buffer<f32> = Self::Acc>;
}

/// Head dim 64 (`attention_d64`).
pub struct D64;
/// Head dim 128 (`attention_d128`).
pub struct D128;

impl HeadDim for D64 {
    const D: u32 = 64;
    const STAGES: u32 = 2;
    type Acc = [f32; 32];
    type Out = Out64;
}

impl HeadDim for D128 {
    const D: u32 = 128;
    const STAGES: u32 = 2;
    type Acc = [f32; 64];
    type Out = Scores;
}

/// The kernel body for head dim `H` and sequences `S`: the barriers, then the producer and the
/// consumers.
#[inline(always)]
fn attention<H: HeadDim, S: Sequences, const SMEM: usize>(
    (q, k, v): (Tma<Bf16, 4>, Tma<Bf16, 4>, Tma<Bf16, 4>),
    (o, lse): (GlobalMut<Bf16>, GlobalMut<f32>),
    pb: Problem<S>,
    smem: Smem<SMEM>,
) {
    let lay = Layout::of::<H, SMEM>(&smem);
    if thread_idx() == 0 {
        schedule::init_barriers::<H, SMEM>(&smem);
    }
    block_sync();
    if warp_id() >= CONSUMER_WARPS {
        setmaxnreg_dec::<24>();
        if warp_id() == CONSUMER_WARPS && lane_id() < S::PRODUCER_LANES {
            producer::produce::<H, S, SMEM>((&q, &k, &v), &smem, lay, &pb);
        }
    } else {
        setmaxnreg_inc::<240>();
        consumer::consume::<H, S, SMEM>((o, lse), &smem, lay, &pb);
    }
}

macro_rules! attention_kernel {
    ($name:ident, $h:ty, $d:literal) => {
        #[doc = concat!("Attention forward for head dim ", stringify!($d), ": a persistent grid (at most one block of 384 threads per multiprocessor) over `⌈Sq / 128⌉ · batch · heads` items; Q, K and V as rank-4 tensor maps `[head dim, seq, heads, batch]` in boxes of 64 × 128 with the 128-byte swizzle (K's and V's heads from `k_first`, `v_first`: one map over a fused QKV projection serves all three; see the module documentation).")]
        #[tile_kernel(block = 384, min_blocks_per_sm = 1)]
        #[allow(clippy::too_many_arguments)]
        pub fn $name(
            q: Tma<Bf16, 4>,
            k: Tma<Bf16, 4>,
            v: Tma<Bf16, 4>,
            o: GlobalMut<Bf16>,
            lse: GlobalMut<f32>,
            sq: u32,
            sk: u32,
            batch: u32,
            heads: u32,
            group: u32,
            scale_log2: f32,
            causal: bool,
            o_row_stride: u32,
            o_head_stride: u32,
            k_first: u32,
            v_first: u32,
        ) {
            let smem = Smem {
                tiles: shared!(Bf16; schedule::smem_elems::<$h>()),
                bars: shared!(Mbarrier; BARRIERS),
                items: shared!(u32; ITEM_SLOTS),
            };
            let o_strides = (o_row_stride, o_head_stride, heads * sq * $d);
            let seqs = Uniform { sq, sk, batch, kv_first: (k_first, v_first), o_strides };
            let pb = Problem::new(seqs, (heads, group), scale_log2, causal);
            attention::<$h, Uniform, { schedule::smem_elems::<$h>() }>((q, k, v), (o, lse), pb, smem);
        }
    };
}

attention_kernel!(attention_d64, D64, 64);
attention_kernel!(attention_d128, D128, 128);

macro_rules! attention_varlen_kernel {
    ($name:ident, $h:ty, $d:literal) => {
        #[doc = concat!("Attention forward over packed sequences (FlashAttention's varlen contract) for head dim ", stringify!($d), ": Q and O `[total_q, heads, D]`, K and V `[total_k, kv_heads, D]`, sequence `b` in rows `cu_q[b]..cu_q[b + 1]` and `cu_k[b]..cu_k[b + 1]`, the LSE `[heads, total_q]`; a persistent grid over the sequences' 128-row query tiles, handed out one at a time by `counter` (two words, 0 at the launch, and 0 again after it; see the module documentation).")]
        #[tile_kernel(block = 384, min_blocks_per_sm = 1)]
        #[allow(clippy::too_many_arguments)]
        pub fn $name(
            q: Tma<Bf16, 4>,
            k: Tma<Bf16, 4>,
            v: Tma<Bf16, 4>,
            o: GlobalMut<Bf16>,
            lse: GlobalMut<f32>,
            cu_q: Global<i32>,
            cu_k: Global<i32>,
            counter: GlobalMut<i32>,
            total_q: u32,
            total_k: u32,
            batch: u32,
            heads: u32,
            group: u32,
            scale_log2: f32,
            causal: bool,
        ) {
            let smem = Smem {
                tiles: shared!(Bf16; schedule::smem_elems::<$h>()),
                bars: shared!(Mbarrier; BARRIERS),
                items: shared!(u32; ITEM_SLOTS),
            };
            let seqs = Packed { cu_q, cu_k, counter, batch, total_q, total_k, head_dim: $d };
            let pb = Problem::new(seqs, (heads, group), scale_log2, causal);
            attention::<$h, Packed, { schedule::smem_elems::<$h>() }>((q, k, v), (o, lse), pb, smem);
        }
    };
}

attention_varlen_kernel!(attention_varlen_d64, D64, 64);
attention_varlen_kernel!(attention_varlen_d128, D128, 128);

#[cfg(not(target_arch = "nvptx64"))]
pub mod describe;
#[cfg(not(target_arch = "nvptx64"))]
pub mod host;
#[cfg(not(target_arch = "nvptx64"))]
pub mod varlen;
#[cfg(not(target_arch = "nvptx64"))]
pub mod varlen_describe;
/// The family's operators, as the registry lists them.
#[cfg(not(target_arch = "nvptx64"))]
pub const OPS: &[&crate::op::Op] = &[
    &describe::OP,
    &describe::QKV,
    &varlen_describe::OP,
    &backward::describe::OP,
];
