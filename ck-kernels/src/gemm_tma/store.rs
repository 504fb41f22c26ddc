//! The epilogue of a tile of the TMA GEMM and the store of C: the accumulators in 32-column
//! slices ([`CWgmma32`]), the epilogue on each, bf16 C staged through shared memory and stored in
//! 16-byte vectors ([`CRows64`]), f32 C stored from the accumulator layout; the tile's bias
//! staged once in shared memory ([`BiasRows`], read back as [`BiasWgmma32`]).

use super::{BM, BN};
use crate::epilogue::{CElement, Epilogue, HAS_D, RUNTIME_FLAGS};
use crate::gemm_sm90::CWgmma256;
use ck_core::device::*;
use ck_core::tile::{broadcast_x, make_tile_window, DistributedTensor, View1, View2};
use ck_macros::tile_distribution;

tile_distribution! {
    /// A 128 × 32 tile in the wgmma accumulator layout ([`CWgmma256`] with j < 4): the 32-column
    /// slice `q` of a [`CWgmma256`] tile, whose registers are its 16q..16q + 16.
    pub struct CWgmma32 {
        warp_size: 32, block_size: 256,
        h: { m: [wg: 2, w: 4, h: 2, g: 8], n: [j: 4, t: 4, e: 2] },
        p: [[m.wg, m.w], [m.g, n.t]],
        y: [n.j, m.h, n.e],
    }
}

tile_distribution! {
    /// A staged 128 × 64 slice of C read back in 16-byte vectors: warp `w` of warpgroup `wg`
    /// reads rows `64·wg + 16·rep + 4w + lane / 8`, 8 columns per lane — each quarter-warp one
    /// row's 128 contiguous bytes (conflict-free in shared memory, whole lines in global).
    pub struct CRows64 {
        warp_size: 32, block_size: 256,
        h: { m: [wg: 2, rep: 4, w: 4, l: 4], n: [l: 8, vec: 8] },
        p: [[m.wg, m.w], [m.l, n.l]],
        y: [m.rep, n.vec],
    }
}

/// Row stride of a staged slice of C, in elements: 64 columns + 8, so the accumulator layout's
/// 4-byte stores (8 rows × 4 lanes of a warp) fall in 32 distinct banks, and rows start 16-byte
/// aligned.
const STAGED_STRIDE: u32 = 72;

tile_distribution! {
    /// A tile's 256 bias values, two consecutive ones per thread, once per consumer warpgroup:
    /// row `wg` of a 2 × 256 tile (read from a view with row stride 0, staged in row `wg` of
    /// [`BIAS_STAGE`]).
    pub struct BiasRows {
        warp_size: 32, block_size: 256,
        h: { m: [wg: 2], n: [w: 4, l: 32, e: 2] },
        p: [[m.wg, n.w], [n.l]],
        y: [n.e],
    }
}

tile_distribution! {
    /// The bias of a [`CWgmma32`] slice: [`CWgmma32`] reduced over its rows (the row digits
    /// become replication), each thread holding its own columns' values.
    pub struct BiasWgmma32 {
        warp_size: 32, block_size: 256,
        r: [wg: 2, w: 4, g: 8],
        h: { n: [j: 4, t: 4, e: 2] },
        p: [[r.wg, r.w], [r.g, n.t]],
        y: [n.j, n.e],
    }
}

/// Elements of the staged bias: one tile's 256 values per consumer warpgroup, which the
/// epilogue's slices read from shared memory. (Read from global memory by each 32-column slice,
/// every slice waited out a load's latency: bias + GELU cost the 8192³ GEMM 6–7 %, not 2–4 %.)
pub const BIAS_STAGE: usize = 2 * BN as usize;

/// Elements of a kernel's C staging buffer for elements of `bytes` bytes: a 128 × 64 slice
/// for bf16; one vector for f32, which is stored straight from the accumulators.
pub const fn staging_elems(bytes: u32) -> usize {
    if bytes == 2 {
        (BM * STAGED_STRIDE) as usize
    } else {
        4
    }
}

/// C's element types and how the tile's 32-column slices reach global memory.
pub trait TmaOutput: CElement {
    /// Stores the 128 × 32 slice `x` (the epilogue applied) of the `m × n` C at `origin`,
    /// the `H`-th (0 or 1) half of a 64-column slice, through `staging` if this type uses it.
    fn store_half<const NC: usize, const H: u32>(
        x: &DistributedTensor<CWgmma32, f32>,
        c: GlobalMut<Self>,
        staging: SharedArray<Self, NC>,
        mn: (u32, u32),
        origin: [i32; 2],
    );
}

impl TmaOutput for f32 {
    /// Straight from the accumulator layout: a quad's 8-byte stores fill a 32-byte sector.
    #[inline(always)]
    fn store_half<const NC: usize, const H: u32>(
        x: &DistributedTensor<CWgmma32, f32>,
        c: GlobalMut<f32>,
        _staging: SharedArray<f32, NC>,
        (m, n): (u32, u32),
        origin: [i32; 2],
    ) {
        f32::store_f32::<CWgmma32, 2>(c, (m, n, n), origin, x);
    }
}

impl TmaOutput for Bf16 {
    /// Through shared memory (the accumulator layout's 4-byte stores would write half
    /// sectors): each warpgroup stages its 64 rows of a 64-column slice, half by half, then
    /// stores them in 16-byte vectors. The warpgroup's named barrier (1 + wg) orders the
    /// buffer's reuse.
    #[inline(always)]
    fn store_half<const NC: usize, const H: u32>(
        x: &DistributedTensor<CWgmma32, f32>,
        c: GlobalMut<Bf16>,
        staging: SharedArray<Bf16, NC>,
        (m, n): (u32, u32),
        origin: [i32; 2],
    ) {
        let wg = warp_id() / 4;
        if H == 0 {
            // The warpgroup has read the previous slice out of the buffer.
            named_barrier_sync(1 + wg, 128);
        }
        let staged = View2::<_, Bf16, 2>::new(staging, BM, 64, STAGED_STRIDE);
        make_tile_window::<CWgmma32, _>(staged, [0, 32 * H as i32]).store(&x.round_to::<Bf16>());
        if H == 1 {
            named_barrier_sync(1 + wg, 128);
            let staged = View2::<_, Bf16, 8>::new(staging, BM, 64, STAGED_STRIDE);
            let rows = make_tile_window::<CRows64, _>(staged, [0, 0]).load::<Bf16>();
            let slice = [origin[0], origin[1] - 32];
            make_tile_window::<CRows64, _>(View2::<_, Bf16, 8>::new(c, m, n, n), slice)
                .store(&rows);
        }
    }
}

/// The consumers' shared memory: C's staging buffer (see [`TmaOutput`]) and the tile's bias.
#[derive(Clone, Copy)]
pub struct Staging<O, const NC: usize> {
    pub c: SharedArray<O, NC>,
    pub bias: SharedArray<O, BIAS_STAGE>,
}

/// The tile's bias at columns `bn..bn + 256` of the `n` in `bias`, two values per thread
/// ([`BiasRows`]; 0 past `n`): read before the tile's MMAs, so that its latency passes behind
/// them.
#[inline(always)]
pub(super) fn load_bias<O: TmaOutput>(
    bias: Global<O>,
    n: u32,
    bn: u32,
) -> DistributedTensor<BiasRows, O> {
    let row = View2::<_, O, 2>::new(bias, 2, n, 0);
    make_tile_window::<BiasRows, _>(row, [0, bn as i32]).load::<O>()
}

/// Stages the bias in shared memory, each warpgroup its own copy, between two of its barriers:
/// after its reads of the previous tile's, before this tile's epilogue. (Not after the store
/// of C alone: the f32-C store passes no barrier.)
#[inline(always)]
pub(super) fn stage_bias<O: TmaOutput>(
    bias: &DistributedTensor<BiasRows, O>,
    staged: SharedArray<O, BIAS_STAGE>,
) {
    let wg = warp_id() / 4;
    named_barrier_sync(1 + wg, 128);
    let view = View2::<_, O, 2>::new(staged, 2, BN, BN);
    make_tile_window::<BiasRows, _>(view, [0, 0]).store(bias);
    named_barrier_sync(1 + wg, 128);
}

/// The epilogue and the store of one tile of C, 32 columns at a time (so the accumulators, D
/// and bias of a slice are live together, not of the whole tile: 128 + 3 · 16 registers).
/// `EPI`: the epilogue's flags (`HAS_D`, `HAS_BIAS`, the activation) fixed at compile time, or
/// [`RUNTIME_FLAGS`] to read them from the kernel argument.
#[inline(always)]
pub(super) fn store_tile<O: TmaOutput, const EPI: u32, const NC: usize>(
    acc: DistributedTensor<CWgmma256, f32>,
    (c, epilogue, staging): (GlobalMut<O>, &Epilogue<O>, Staging<O, NC>),
    (product, bm, bn): (u32, u32, u32),
    (m, n): (u32, u32),
) {
    let c = c.slice(product * m * n, m * n);
    let d = if flags::<O, EPI>(epilogue) & HAS_D != 0 {
        epilogue.d.slice(product * m * n, m * n)
    } else {
        epilogue.d
    };
    // Four calls with a constant slice (not a closure, which LLVM may outline and then index
    // the accumulators through the stack).
    let tile = (c, d, epilogue, staging, [bm, bn], (m, n));
    store_slice::<O, EPI, NC, 0>(&acc, tile);
    store_slice::<O, EPI, NC, 1>(&acc, tile);
    store_slice::<O, EPI, NC, 2>(&acc, tile);
    store_slice::<O, EPI, NC, 3>(&acc, tile);
    store_slice::<O, EPI, NC, 4>(&acc, tile);
    store_slice::<O, EPI, NC, 5>(&acc, tile);
    store_slice::<O, EPI, NC, 6>(&acc, tile);
    store_slice::<O, EPI, NC, 7>(&acc, tile);
}

/// The epilogue's flags: `EPI`, or the kernel argument's where `EPI` is [`RUNTIME_FLAGS`].
#[inline(always)]
pub(super) fn flags<O: Element, const EPI: u32>(epilogue: &Epilogue<O>) -> u32 {
    if EPI == RUNTIME_FLAGS {
        epilogue.flags
    } else {
        EPI
    }
}

/// Columns `32Q..32Q + 32` of the tile at `origin`: a [`CWgmma32`] tile whose registers are
/// the accumulators' `16Q..16Q + 16`.
#[inline(always)]
#[allow(clippy::type_complexity)]
fn store_slice<O: TmaOutput, const EPI: u32, const NC: usize, const Q: u32>(
    acc: &DistributedTensor<CWgmma256, f32>,
    (c, d, epilogue, staging, [bm, bn], (m, n)): (
        GlobalMut<O>,
        Global<O>,
        &Epilogue<O>,
        Staging<O, NC>,
        [u32; 2],
        (u32, u32),
    ),
) {
    let mut x = DistributedTensor::<CWgmma32, f32> {
        data: core::array::from_fn(|i| acc.data[16 * Q as usize + i]),
    };
    let origin = [bm as i32, (bn + 32 * Q) as i32];
    if EPI == 0 {
        epilogue.scale(&mut x);
    } else {
        epilogue.apply_flags(
            flags::<O, EPI>(epilogue),
            &mut x,
            || O::load_f32::<CWgmma32, 2>(d, (m, n, n), origin),
            // Bias: this warpgroup's staged copy, the same in every row of the slice.
            || {
                let at = (BN * (warp_id() / 4) + 32 * Q) as i32;
                let row = View1::<_, O, 2>::new(staging.bias, BIAS_STAGE as u32);
                let cols = make_tile_window::<BiasWgmma32, _>(row, [at]).load::<O>();
                broadcast_x::<CWgmma32, BiasWgmma32, O, 0>(&cols).map(O::to_f32)
            },
        );
    }
    // Const generic arithmetic is not stable: the half's parity as a match.
    match Q % 2 {
        0 => O::store_half::<NC, 0>(&x, c, staging.c, (m, n), origin),
        _ => O::store_half::<NC, 1>(&x, c, staging.c, (m, n), origin),
    }
}
