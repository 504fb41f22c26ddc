//! Decode attention: a few new query tokens per sequence (`sq` from 1 to 16) against a long KV
//! cache — the serving step, whose floor is reading the cache once at memory speed.
//!
//! | file | what |
//! |---|---|
//! | [`schedule`] | the problem, the items (sequence × KV head × row tile × split) and their key ranges, the cut of the keys into splits, the scheduler warp publishing the items, the shared-memory plan, the barriers |
//! | `producer` | two warps copying key and value tiles with TMA, page by page; a third loading each item's Q rows an item ahead |
//! | `consumer` | two warpgroups, each an online softmax over every other key tile of an item, writing a partial result — or, for a sequence of one split, the two merged in the block into O |
//! | [`combine`] | a row tile's splits merged by their log-sum-exps: by the block whose split ends last (small tiles), or a launch of its own |
//! | [`append`] | the new tokens' keys and values written into the cache, with RoPE |
//! | [`host`] | shapes and checks, the split heuristic, the launches, the fp64 reference |
//!
//! Four ideas make it memory-bound instead of latency-bound (the prefill kernel, used for one
//! query token, leaves most of the machine idle):
//!
//! * **GQA packing**: the query rows of a KV head (`group` heads × `sq` tokens, e.g. 4 × 1 for
//!   32/8 heads) are the rows of one MMA against each key tile, so every key and value is read
//!   once per KV head, not once per query head;
//! * **split-KV**: a sequence's key tiles are shared among several items that run on
//!   different multiprocessors (FlashDecoding), each writing O normalised over its keys and their
//!   log-sum-exp, merged by the block whose split of a small row tile ends last, or by a
//!   combine launch ([`combine`]); the host plans the most splits and the grid ([`host::plan`]),
//!   the device cuts each sequence from its length — a long one into many splits, a short one
//!   into few ([`schedule::Chunking`]). A sequence of one split (asked for, a cache too short
//!   to split, or a short sequence the cut leaves whole) has its block's two warpgroups merge
//!   their halves through shared memory and write O and the LSE (with one split for every
//!   sequence: no scratch);
//! * **Q an item ahead**: a producer warp loads the next item's query rows while the consumers
//!   work on this one, so that a block walks many short items (the splits of a ragged batch)
//!   without a round trip to global memory at each start;
//! * **a deep ring**: the rows of an item are few, so shared memory holds 3 (head dim 128) or 6
//!   (64) stages of 128 keys and values in flight per multiprocessor.
//!
//! The cache is contiguous, `[batch, capacity, kv_heads, D]`, or paged, `[pages, page_size,
//! kv_heads, D]` with a page table `[batch, max_pages]`; the same kernel reads both (a page of
//! fewer than 128 keys is one TMA box of the tile).

use crate::attention::{HeadDim, D128, D64};
use ck_core::device::*;
use ck_macros::tile_kernel;

pub mod append;
pub mod combine;
mod consumer;
mod producer;
pub mod schedule;

use producer::Side;
use schedule::{Cache, Chunking, Layout, Outputs, Problem, Smem, BARRIERS, EXCHANGED_LSE};

/// Registers of a consumer thread (O, the scores and P take 160 at head dim 128) and of the
/// producers' warpgroup: `256 · 232 + 128 · 40 ≤ 64 K`.
const CONSUMER_REGISTERS: u32 = 232;
const PRODUCER_REGISTERS: u32 = 40;

/// The kernel body for head dim `H`: the barriers, then the producer and the consumers.
#[inline(always)]
fn decode<H: HeadDim, const SMEM: usize>(
    (k, v): (Tma<Bf16, 5>, Tma<Bf16, 5>),
    outputs: Outputs,
    pb: Problem,
    smem: Smem<SMEM>,
) {
    let lay = Layout::of::<H, SMEM>(&smem);
    if thread_idx() == 0 {
        schedule::init_barriers::<H, SMEM>(&smem);
    }
    block_sync();
    if warp_id() >= 8 {
        setmaxnreg_dec::<PRODUCER_REGISTERS>();
        if warp_id() == 8 {
            producer::produce::<H, SMEM>((&k, Side::Keys), &smem, lay, &pb);
        } else if warp_id() == 9 {
            producer::produce::<H, SMEM>((&v, Side::Values), &smem, lay, &pb);
        } else if warp_id() == 10 {
            producer::produce_queries::<H, SMEM>(&smem, lay, &pb);
        } else {
            schedule::publish_items::<SMEM>(&smem, &pb);
        }
    } else {
        setmaxnreg_inc::<CONSUMER_REGISTERS>();
        consumer::consume::<H, SMEM>(outputs, &smem, lay, &pb);
    }
}

macro_rules! decode_kernel {
    ($name:ident, $h:ty, $d:literal) => {
        #[doc = concat!("Decode attention for head dim ", stringify!($d), ": a persistent grid of blocks of 384 threads over (sequence, KV head, split, row tile) items, writing partial results, or with one split O and the LSE themselves (see the module documentation).")]
        #[tile_kernel(block = 384, min_blocks_per_sm = 1)]
        #[allow(clippy::too_many_arguments)]
        pub fn $name(
            q: Global<Bf16>,
            q_token_stride: u32,
            k: Tma<Bf16, 5>,
            v: Tma<Bf16, 5>,
            o: GlobalMut<Bf16>,
            lse: GlobalMut<f32>,
            o_part: GlobalMut<f32>,
            lse_part: GlobalMut<f32>,
            seqlens: Global<i32>,
            page_table: Global<i32>,
            sq: u32,
            batch: u32,
            heads: u32,
            kv_heads: u32,
            splits: u32,
            target: u32,
            appended: u32,
            page_size: u32,
            max_pages: u32,
            pages: u32,
            capacity: u32,
            box_rows: u32,
            scale_log2: f32,
            causal: bool,
            merges: bool,
        ) {
            let smem = Smem {
                tiles: shared!(Bf16; schedule::smem_elems::<$h>()),
                bars: shared!(Mbarrier; BARRIERS),
                lse: shared!(f32; EXCHANGED_LSE),
                items: shared!(u32; (schedule::ITEM_SLOTS * schedule::ITEM_WORDS) as usize),
                said: shared!(u32; 1),
            };
            let nz = |x: u32| core::num::NonZeroU32::new(x).unwrap_or(core::num::NonZeroU32::MIN);
            let kv_heads = nz(kv_heads);
            let pb = Problem {
                sq,
                heads,
                kv_heads,
                group: nz(heads / kv_heads),
                q,
                q_token_stride,
                chunks: Chunking {
                    seqlens,
                    batch,
                    appended,
                    capacity,
                    splits: nz(splits),
                    target,
                },
                cache: Cache {
                    page_table,
                    page_size,
                    max_pages,
                    pages,
                    capacity,
                    box_rows,
                },
                scale_log2,
                causal,
                merges,
            };
            let outputs = Outputs {
                o,
                lse,
                o_part,
                lse_part,
            };
            decode::<$h, { schedule::smem_elems::<$h>() }>((k, v), outputs, pb, smem);
        }
    };
}

decode_kernel!(attention_decode_d64, D64, 64);
decode_kernel!(attention_decode_d128, D128, 128);

#[cfg(not(target_arch = "nvptx64"))]
pub mod host;
