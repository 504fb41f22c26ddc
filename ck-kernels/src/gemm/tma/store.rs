//! The epilogue of a tile of the TMA GEMM and the store of C: the accumulators in 32-column
//! slices ([`CWgmma32`]), the epilogue on each; bf16 C written to shared memory with `stmatrix`
//! and stored by the copy engine while the consumers go on to the next tile, f32 C stored
//! from the accumulator layout; the tile's bias staged once in shared memory ([`BiasRows`],
//! read back as [`BiasWgmma32`]).

use super::{Width, BARRIERS, CONSUMER_WARPS, N256};
use crate::gemm::epilogue::{CElement, Epilogue, RUNTIME_FLAGS};
use crate::rope::Projection;
use ck_core::device::*;
use ck_core::tile::{
    broadcast_x, make_tile_window, DistributedTensor, TmaBoxView, View, View1, View2,
};
use ck_macros::tile_distribution;

/// A tile's place (product, first row, first column) and its first D stage's use of the ring
/// (meaningful where [`DSource::D_STAGES`] is not 0).
pub type TileAt = ((u32, u32, u32), u32);

/// The source of D for a tile's epilogue, the place C is staged in, and how C is passed.
pub trait DSource<O: TmaOutput>: Copy {
    /// The kernel's C argument.
    type Dest: Copy;
    /// Ring stages a tile's D takes after its K stages (0: D is not in the ring).
    const D_STAGES: u32;
    /// The producer, after a tile's K stages: copies its D into the ring from stage use `t`.
    fn produce(&self, bars: &SharedArray<Mbarrier, BARRIERS>, tile: (u32, u32, u32), t: u32);
    /// D's values at slice `Q` (columns `32Q..32Q + 32`) of the tile, in the accumulator layout
    /// of the `m × n` D (called only when the epilogue has a D).
    fn slice<const Q: u32>(
        &self,
        epilogue: &Epilogue<O>,
        at: TileAt,
        mn: (u32, u32),
    ) -> DistributedTensor<CWgmma32, f32>;
    /// Stores slice `Q` of C (`x`, the epilogue applied): through `staged` (C's own staging
    /// array and the slice's box buffer in it), or from where D arrived.
    fn store<const NC: usize, const Q: u32>(
        &self,
        x: &DistributedTensor<CWgmma32, f32>,
        c: Self::Dest,
        staged: (SharedArray<O, NC>, u32),
        at: TileAt,
        mn: (u32, u32),
    );
}

tile_distribution! {
    /// A 128 × 32 tile in the wgmma accumulator layout ([`crate::gemm::wgmma::CWgmma256`] with
    /// j < 4): the 32-column slice `q` of a wider tile, whose registers are its 16q..16q + 16.
    pub struct CWgmma32 {
        warp_size: 32, block_size: 256,
        h: { m: [wg: 2, w: 4, h: 2, g: 8], n: [j: 4, t: 4, e: 2] },
        p: [[m.wg, m.w], [m.g, n.t]],
        y: [n.j, m.h, n.e],
    }
}

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
/// A narrower tile reads the first of its 256.
pub const BIAS_STAGE: usize = 2 * N256::BN as usize;

/// Rows and columns of one box of bf16 C: a warp's 16 rows of a 64-column (128-byte) slice of
/// the tile, 2 KiB, what one TMA store writes.
pub const C_BOX: [u32; 2] = [16, 64];

/// C box buffers per consumer warp: one being filled while the copy engine reads the other.
pub const C_BUFFERS: u32 = 2;

/// Bytes of a kernel's C staging for elements of `bytes` bytes: `boxes` boxes per consumer
/// warp for bf16 ([`C_BUFFERS`]; none where C is staged where D arrived, [`super::DRing`]);
/// none for f32, which is stored straight from the accumulators.
pub const fn c_stage_bytes(bytes: u32, boxes: u32) -> u32 {
    if bytes == 2 {
        CONSUMER_WARPS * boxes * C_BOX[0] * C_BOX[1] * bytes
    } else {
        0
    }
}

/// C's element types and how the tile's 32-column slices reach global memory.
pub trait TmaOutput: CElement {
    /// The kernel's C argument: a TMA store map (`TmaMut`) or the buffer (`GlobalMut`).
    type Dest: Copy;
    /// Stores slice `Q` (columns `32Q..32Q + 32`) of the tile of product `product` at rows
    /// `bm..`, columns `bn..` of the `m × n` C: `x`, the epilogue applied, through the
    /// staging array's box buffer from element `buffer` (`box_buffer`; 1024-byte aligned)
    /// if this type uses it.
    fn store_slice<const NC: usize, const Q: u32>(
        x: &DistributedTensor<CWgmma32, f32>,
        c: Self::Dest,
        staging_buffer: (SharedArray<Self, NC>, u32),
        product_bm_bn: (u32, u32, u32),
        mn: (u32, u32),
    );
    /// As [`TmaOutput::store_slice`] into C passed as its buffer, nothing at or past row `m`:
    /// for C whose tiles end where a TMA store cannot clip them (the grouped kernels: a
    /// problem's last rows, followed by the next problem's).
    fn store_slice_rows<const NC: usize, const Q: u32>(
        x: &DistributedTensor<CWgmma32, f32>,
        c: GlobalMut<Self>,
        staging_buffer: (SharedArray<Self, NC>, u32),
        product_bm_bn: (u32, u32, u32),
        mn: (u32, u32),
    );
    /// After the block's last tile: whatever the stores still need from shared memory is
    /// read (a block must not exit before its TMA stores have read their source).
    fn finish();
}

impl TmaOutput for f32 {
    type Dest = GlobalMut<f32>;

    /// Straight from the accumulator layout: a quad's 8-byte stores fill a 32-byte sector.
    #[inline(always)]
    fn store_slice<const NC: usize, const Q: u32>(
        x: &DistributedTensor<CWgmma32, f32>,
        c: GlobalMut<f32>,
        _staging: (SharedArray<f32, NC>, u32),
        (product, bm, bn): (u32, u32, u32),
        (m, n): (u32, u32),
    ) {
        let c = c.slice(product * m * n, m * n);
        let origin = [bm as i32, (bn + 32 * Q) as i32];
        f32::store_f32::<CWgmma32, 2>(c, (m, n, n), origin, x);
    }

    /// The same: f32 C is stored from the accumulators, with C's bounds.
    #[inline(always)]
    fn store_slice_rows<const NC: usize, const Q: u32>(
        x: &DistributedTensor<CWgmma32, f32>,
        c: GlobalMut<f32>,
        staging: (SharedArray<f32, NC>, u32),
        tile: (u32, u32, u32),
        mn: (u32, u32),
    ) {
        Self::store_slice::<NC, Q>(x, c, staging, tile, mn);
    }

    #[inline(always)]
    fn finish() {}
}

impl TmaOutput for Bf16 {
    type Dest = TmaMut<Bf16, 3>;

    /// Each warp writes its 16 rows of the slice into one of its [`C_BOX`] buffers with
    /// `stmatrix` (the accumulator layout is `stmatrix`'s fragment: see `stage_pairs`);
    /// after the second slice of a box, lane 0 hands the box to the copy engine (which clips
    /// it at C's edges) and the warp goes on. Before the first slice of a box, lane 0 waits
    /// until the engine has read every box but the last one stored (with two buffers, the one
    /// stored from this buffer two boxes ago; they alternate over the warp's boxes, across
    /// tiles: a 192-wide tile has three). Only warp barriers: a warp's rows are its own.
    #[inline(always)]
    fn store_slice<const NC: usize, const Q: u32>(
        x: &DistributedTensor<CWgmma32, f32>,
        c: TmaMut<Bf16, 3>,
        (staging, buffer): (SharedArray<Bf16, NC>, u32),
        (product, bm, bn): (u32, u32, u32),
        _mn: (u32, u32),
    ) {
        let (warp, lane) = (warp_id(), lane_id());
        let view = TmaBoxView::new(staging, buffer, (C_BOX[0], C_BOX[1]), C_BOX[0]);
        let half = Q % 2;
        if half == 0 {
            if lane == 0 {
                bulk_wait_group_read::<1>();
            }
            warp_sync();
        }
        stage_pairs::<NC>(x, &view, staging, half);
        if half == 1 {
            fence_proxy_async();
            warp_sync();
            if lane == 0 {
                let col = (bn + 64 * (Q / 2)) as i32;
                let row = (bm + C_BOX[0] * warp) as i32;
                c.store_from_shared([col, row, product as i32], &staging, buffer);
                bulk_commit_group();
            }
        }
    }

    /// Staged as for the copy engine (a warp's 16 × 64 box, two slices), then each lane
    /// copies four of the box's 16-byte chunks to global memory, row `lane / 8 + 4i`, chunk
    /// `lane % 8`: each store instruction writes four whole 128-byte rows. (From the
    /// accumulator layout each store would write 4 bytes, a quad 16 of a 32-byte sector:
    /// eight times the instructions, each sector half used.) N is a multiple of 8, so a chunk
    /// lies wholly inside C or wholly past it.
    #[inline(always)]
    fn store_slice_rows<const NC: usize, const Q: u32>(
        x: &DistributedTensor<CWgmma32, f32>,
        c: GlobalMut<Bf16>,
        (staging, buffer): (SharedArray<Bf16, NC>, u32),
        (product, bm, bn): (u32, u32, u32),
        (m, n): (u32, u32),
    ) {
        let (warp, lane) = (warp_id(), lane_id());
        let view = TmaBoxView::new(staging, buffer, (C_BOX[0], C_BOX[1]), C_BOX[0]);
        let half = Q % 2;
        if half == 0 {
            // Every lane's reads of this buffer's previous box are done.
            warp_sync();
        }
        stage_pairs::<NC>(x, &view, staging, half);
        if half == 1 {
            warp_sync();
            let c = c.slice(product * m * n, m * n);
            let chunk = 8 * (lane % 8);
            let col = bn + 64 * (Q / 2) + chunk;
            for i in 0..4 {
                let r = lane / 8 + 4 * i;
                let row = bm + C_BOX[0] * warp + r;
                if row < m && col < n {
                    let at = view.offset(&[r as ck_core::Index, chunk as ck_core::Index]);
                    c.store_vec::<8>(row * n + col, staging.load_vec::<8>(at as u32));
                }
            }
        }
    }

    #[inline(always)]
    fn finish() {
        if lane_id() == 0 {
            bulk_wait_group_read::<0>();
        }
    }
}

/// The first element of this warp's box buffer `which` (of [`C_BUFFERS`]) in C's staging from
/// `start`.
#[inline(always)]
fn box_buffer(start: u32, which: u32) -> u32 {
    start + (C_BUFFERS * warp_id() + which) * C_BOX[0] * C_BOX[1]
}

/// Where this lane names its row for the `x4` matrix access to 8-column groups `j, j + 1` of
/// half `half` of a warp's box (see [`stage_pairs`]).
#[inline(always)]
pub(super) fn pairs_at<T: Element, const NC: usize>(
    view: &TmaBoxView<T, NC>,
    half: u32,
    j: u32,
) -> u32 {
    let lane = lane_id();
    let row = 8 * (lane / 8 % 2) + lane % 8;
    let col = 8 * (4 * half + j + lane / 16);
    view.offset(&[row as ck_core::Index, col as ck_core::Index]) as u32
}

/// Writes a warp's 16 rows of the 32-column slice `x` (rounded to bf16) into half `half` of
/// the 16 × 64 box `view`, with two `stmatrix.x4`.
///
/// The wgmma accumulators are the m16n8 C fragment, repeated: lane `l` holds rows `l / 4` and
/// `l / 4 + 8` of the warp's 16, columns `8j + 2(l % 4) + {0, 1}` of each 8-column group `j`
/// — registers `4j + 2h + e` of [`CWgmma32`] for row half `h`. `stmatrix.x4` stores four 8 × 8
/// matrices whose register `i` in lane `l` is exactly that pair for matrix `i`; lanes `8i..8i
/// + 8` name matrix `i`'s rows. So the call for groups `j, j + 1` passes the pairs (j, h = 0),
/// (j, 1), (j + 1, 0), (j + 1, 1) and lane `l` names row `8·(l / 8 % 2) + l % 8` at column
/// `8·(j + l / 16)` — a 16-byte chunk of the swizzled box, which [`TmaBoxView`] places.
#[inline(always)]
fn stage_pairs<const NC: usize>(
    x: &DistributedTensor<CWgmma32, f32>,
    view: &TmaBoxView<Bf16, NC>,
    staging: SharedArray<Bf16, NC>,
    half: u32,
) {
    let pair = |j: usize, h: usize| Bf16::pack2(x.data[4 * j + 2 * h], x.data[4 * j + 2 * h + 1]);
    for j in [0, 2] {
        let regs = [pair(j, 0), pair(j, 1), pair(j + 1, 0), pair(j + 1, 1)];
        stmatrix_x4(&staging, pairs_at(view, half, j as u32), regs);
    }
}

/// The consumers' shared memory: C's staging buffer (a part of the kernel's shared region,
/// see [`TmaOutput`] and [`c_stage_bytes`]) and the tile's bias.
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
    let view = View2::<_, O, 2>::new(staged, 2, N256::BN, N256::BN);
    make_tile_window::<BiasRows, _>(view, [0, 0]).store(bias);
    named_barrier_sync(1 + wg, 128);
}

/// Where a tile's epilogue writes and what it reads besides the accumulators: C, the
/// epilogue's arguments, D's source, the staging (C's buffers from element `c_start`) and
/// the block's tiles before this one (`ordinal`).
#[derive(Clone, Copy)]
pub(super) struct TileOut<'e, O: TmaOutput, S: DSource<O>, const NC: usize> {
    pub c: S::Dest,
    pub epilogue: &'e Epilogue<O>,
    pub dsrc: S,
    pub staging: Staging<O, NC>,
    pub c_start: u32,
    pub ordinal: u32,
    /// The tile's first D stage's use of the ring ([`DSource::D_STAGES`]).
    pub d_use: u32,
}

/// The epilogue and the store of one tile of C, `W::BN` wide, 32 columns at a time (so the
/// accumulators, D and bias of a slice are live together, not of the whole tile: 128 + 3 · 16
/// registers). `EPI`: the epilogue's flags (`HAS_D`, `HAS_BIAS`, the activation) fixed at
/// compile time, or [`RUNTIME_FLAGS`] to read them from the kernel argument.
#[inline(always)]
pub(super) fn store_tile<W: Width, O: TmaOutput, S: DSource<O>, const EPI: u32, const NC: usize>(
    acc: DistributedTensor<W::Acc, f32>,
    out: TileOut<'_, O, S, NC>,
    tile: (u32, u32, u32),
    mn: (u32, u32),
) {
    // Up to eight calls with a constant slice (not a closure, which LLVM may outline and then
    // index the accumulators through the stack); those past the tile's width do nothing.
    store_slice::<W, O, S, EPI, NC, 0>(&acc, out, tile, mn);
    store_slice::<W, O, S, EPI, NC, 1>(&acc, out, tile, mn);
    store_slice::<W, O, S, EPI, NC, 2>(&acc, out, tile, mn);
    store_slice::<W, O, S, EPI, NC, 3>(&acc, out, tile, mn);
    store_slice::<W, O, S, EPI, NC, 4>(&acc, out, tile, mn);
    store_slice::<W, O, S, EPI, NC, 5>(&acc, out, tile, mn);
    store_slice::<W, O, S, EPI, NC, 6>(&acc, out, tile, mn);
    store_slice::<W, O, S, EPI, NC, 7>(&acc, out, tile, mn);
}

/// The epilogue and the store of one tile of a gated linear unit ([`super::Bf16GatedOperands`]):
/// the accumulators' first `W::BN / 2` columns are the gate's, the next as many the up
/// projection's for the same columns of C; each 32-column slice of C combines slice `Q` of
/// the one with slice `Q + W::BN / 64` of the other ([`Epilogue::gate`]).
#[inline(always)]
pub(super) fn store_gated_tile<
    W: Width,
    O: TmaOutput,
    S: DSource<O>,
    const EPI: u32,
    const NC: usize,
>(
    acc: DistributedTensor<W::Acc, f32>,
    out: TileOut<'_, O, S, NC>,
    tile: (u32, u32, u32),
    mn: (u32, u32),
) {
    gated_slice::<W, O, S, EPI, NC, 0>(&acc, out, tile, mn);
    gated_slice::<W, O, S, EPI, NC, 1>(&acc, out, tile, mn);
    gated_slice::<W, O, S, EPI, NC, 2>(&acc, out, tile, mn);
    gated_slice::<W, O, S, EPI, NC, 3>(&acc, out, tile, mn);
}

/// Columns `32Q..32Q + 32` of a gated tile's C (see [`store_gated_tile`]).
#[inline(always)]
fn gated_slice<
    W: Width,
    O: TmaOutput,
    S: DSource<O>,
    const EPI: u32,
    const NC: usize,
    const Q: u32,
>(
    acc: &DistributedTensor<W::Acc, f32>,
    out: TileOut<'_, O, S, NC>,
    tile: (u32, u32, u32),
    mn: (u32, u32),
) {
    let half = W::BN / 64;
    if Q >= half {
        return;
    }
    let slice = |q: u32| DistributedTensor::<CWgmma32, f32> {
        data: core::array::from_fn(|i| W::reg(acc, 16 * q as usize + i)),
    };
    let (mut x, up) = (slice(Q), slice(Q + half));
    out.epilogue.gate(EPI, &mut x, &up);
    // Two boxes of 64 columns per tile (even): each tile starts on the warp's first buffer.
    let buffer = box_buffer(out.c_start, Q / 2 % 2);
    out.dsrc
        .store::<NC, Q>(&x, out.c, (out.staging.c, buffer), (tile, out.d_use), mn);
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
fn store_slice<
    W: Width,
    O: TmaOutput,
    S: DSource<O>,
    const EPI: u32,
    const NC: usize,
    const Q: u32,
>(
    acc: &DistributedTensor<W::Acc, f32>,
    out: TileOut<'_, O, S, NC>,
    tile: (u32, u32, u32),
    mn: (u32, u32),
) {
    let TileOut {
        epilogue,
        dsrc,
        staging,
        d_use,
        ..
    } = out;
    let at = (tile, d_use);
    if Q >= W::BN / 32 {
        return;
    }
    let mut x = DistributedTensor::<CWgmma32, f32> {
        data: core::array::from_fn(|i| W::reg(acc, 16 * Q as usize + i)),
    };
    if EPI == 0 {
        epilogue.scale(&mut x);
    } else {
        epilogue.apply_flags(
            flags::<O, EPI>(epilogue),
            &mut x,
            || dsrc.slice::<Q>(epilogue, at, mn),
            // Bias: this warpgroup's staged copy, the same in every row of the slice.
            || {
                let at = (N256::BN * (warp_id() / 4) + 32 * Q) as i32;
                let row = View1::<_, O, 2>::new(staging.bias, BIAS_STAGE as u32);
                let cols = make_tile_window::<BiasWgmma32, _>(row, [at]).load::<O>();
                broadcast_x::<CWgmma32, BiasWgmma32, O, 0>(&cols).map(O::to_f32)
            },
        );
    }
    put_slice::<W, O, S, NC, Q>(&x, out, tile, mn);
}

/// Stores slice `Q` of C, `x` (its epilogue applied), through C's own box buffer where it
/// has them: the two alternate over the warp's boxes, across tiles (with an even number of
/// boxes per tile, each tile starts on the first: a constant).
#[inline(always)]
fn put_slice<W: Width, O: TmaOutput, S: DSource<O>, const NC: usize, const Q: u32>(
    x: &DistributedTensor<CWgmma32, f32>,
    out: TileOut<'_, O, S, NC>,
    tile: (u32, u32, u32),
    mn: (u32, u32),
) {
    let boxes_per_tile = W::BN / 64;
    let which = if boxes_per_tile.is_multiple_of(2) {
        Q / 2 % 2
    } else {
        (out.ordinal * boxes_per_tile + Q / 2) % 2
    };
    let buffer = box_buffer(out.c_start, which);
    out.dsrc
        .store::<NC, Q>(x, out.c, (out.staging.c, buffer), (tile, out.d_use), mn);
}

/// The epilogue and the store of one tile of a QKV projection with RoPE
/// ([`ROTARY`](crate::gemm::epilogue::ROTARY), 256 columns: whole heads of 64 or 128): the
/// query and key heads rotated in place in the accumulators ([`rotate_tile`]), then C = alpha
/// · A·B stored as the plain epilogue stores it (the rotation is linear: it commutes with
/// alpha).
#[inline(always)]
pub(super) fn store_rotary_tile<
    W: Width,
    O: TmaOutput,
    S: DSource<O>,
    const EPI: u32,
    const NC: usize,
>(
    mut acc: DistributedTensor<W::Acc, f32>,
    out: TileOut<'_, O, S, NC>,
    tile: (u32, u32, u32),
    mn: (u32, u32),
) {
    rotate_tile::<W>(&mut acc, &out.epilogue.rope, tile, mn);
    store_tile::<W, O, S, 0, NC>(acc, out, tile, mn);
}

/// RoPE on a tile's accumulators ([`Projection`]), slice by 32-column slice (registers
/// `16Q..16Q + 16`, [`CWgmma32`]'s layout). Half-split, `dim / 2` is one or two slices: slice
/// `Q` of a head's first half and slice `Q + dim / 64` hold the pairs' two elements at the
/// same angles, so they are rotated together; interleaved, a pair is a thread's two
/// neighbouring registers. Which slices turn is uniform over the block (and each call's
/// registers are constants), and every angle of a slice is loaded before any is used: a
/// branch per element kept each load's latency in the epilogue's path (the projection took
/// 1.6–2.0 × the plain one's time).
#[inline(always)]
fn rotate_tile<W: Width>(
    acc: &mut DistributedTensor<W::Acc, f32>,
    rope: &Projection,
    tile: (u32, u32, u32),
    mn: (u32, u32),
) {
    let p = CWgmma32::partition_index(thread_idx());
    // Each of the thread's two rows' first element in the tables.
    let half = rope.rotary.dim / 2;
    let row_at = |h: i32| {
        let [r, _] = CWgmma32::x_index(p, [0, h, 0]);
        (tile.1 + r as u32).min(mn.0.max(1) - 1) % rope.table_rows * half
    };
    let at = Turn {
        rows: [row_at(0), row_at(1)],
        col: CWgmma32::x_index(p, [0, 0, 0])[1] as u32,
    };
    // Every angle the slices read lies below `table_rows · dim / 2`: checked here once (a
    // table shorter than that traps), so that their loads need no check of their own — a
    // check per load kept the compiler from issuing them together, and each group waited out
    // its latency (6–25 µs per tile).
    if half == 0 {
        return;
    }
    let end = rope.table_rows * half;
    let _ = (rope.rotary.cos.load(end - 1), rope.rotary.sin.load(end - 1));
    if rope.rotary.interleaved {
        turn_neighbours::<W, 0>(acc, rope, tile, at);
        turn_neighbours::<W, 1>(acc, rope, tile, at);
        turn_neighbours::<W, 2>(acc, rope, tile, at);
        turn_neighbours::<W, 3>(acc, rope, tile, at);
        turn_neighbours::<W, 4>(acc, rope, tile, at);
        turn_neighbours::<W, 5>(acc, rope, tile, at);
        turn_neighbours::<W, 6>(acc, rope, tile, at);
        turn_neighbours::<W, 7>(acc, rope, tile, at);
    } else if half == 32 {
        turn_halves::<W, 0, 1>(acc, rope, tile, at);
        turn_halves::<W, 2, 1>(acc, rope, tile, at);
        turn_halves::<W, 4, 1>(acc, rope, tile, at);
        turn_halves::<W, 6, 1>(acc, rope, tile, at);
    } else {
        turn_halves::<W, 0, 2>(acc, rope, tile, at);
        turn_halves::<W, 1, 2>(acc, rope, tile, at);
        turn_halves::<W, 4, 2>(acc, rope, tile, at);
        turn_halves::<W, 5, 2>(acc, rope, tile, at);
    }
}

/// Where a thread's elements of a slice are in the angle tables: its two rows' first
/// elements, and its first column in the slice (its others 8j further, and the next).
#[derive(Clone, Copy)]
struct Turn {
    rows: [u32; 2],
    col: u32,
}

/// Register `4j + 2h + e` of slice `q`: column `8j + col + e`, row `h` of the thread's two.
const fn slice_reg(q: u32, j: usize, h: usize, e: usize) -> usize {
    16 * q as usize + 4 * j + 2 * h + e
}

/// Half-split: slice `Q` (in a head's first half) and slice `Q + P` (`P = dim / 64`) rotated
/// together at the angles of slice `Q`'s columns — where they are query or key columns.
#[inline(always)]
fn turn_halves<W: Width, const Q: u32, const P: u32>(
    acc: &mut DistributedTensor<W::Acc, f32>,
    rope: &Projection,
    tile: (u32, u32, u32),
    at: Turn,
) {
    let col = tile.2 + 32 * Q;
    let d0 = col % rope.head_dim.max(1);
    if Q + P >= W::BN / 32 || col >= rope.rotated || d0 >= rope.rotary.dim / 2 {
        return;
    }
    let (cos, sin) = (rope.rotary.cos, rope.rotary.sin);
    // Below `table_rows · dim / 2` (`rows[h]` is a row's first angle, and the slice lies in
    // the first half: `d0 + 31 < dim / 2`), and even.
    let angle = |j: usize, h: usize| at.rows[h] + d0 + at.col + 8 * j as u32;
    // SAFETY: in bounds (above; [`rotate_tile`] checked the tables' length) and aligned.
    let load = |t: Global<f32>, j, h| unsafe { t.load_vec_unchecked::<2>(angle(j, h)) };
    let c: [[[f32; 2]; 2]; 4] = core::array::from_fn(|j| core::array::from_fn(|h| load(cos, j, h)));
    let s: [[[f32; 2]; 2]; 4] = core::array::from_fn(|j| core::array::from_fn(|h| load(sin, j, h)));
    for j in 0..4 {
        for h in 0..2 {
            for e in 0..2 {
                let (lo, hi) = (slice_reg(Q, j, h, e), slice_reg(Q + P, j, h, e));
                let x = (W::reg(acc, lo), W::reg(acc, hi));
                let (y1, y2) = Projection::rotate(x, (c[j][h][e], s[j][h][e]));
                W::set_reg(acc, lo, y1);
                W::set_reg(acc, hi, y2);
            }
        }
    }
}

/// Interleaved: slice `Q`'s pairs of neighbouring columns (a thread's registers `e = 0, 1`)
/// rotated in place where they are query or key columns below `dim` (a select, not a branch,
/// where `dim` ends inside the slice).
#[inline(always)]
fn turn_neighbours<W: Width, const Q: u32>(
    acc: &mut DistributedTensor<W::Acc, f32>,
    rope: &Projection,
    tile: (u32, u32, u32),
    at: Turn,
) {
    let col = tile.2 + 32 * Q;
    let d0 = col % rope.head_dim.max(1);
    let dim = rope.rotary.dim;
    if Q >= W::BN / 32 || col >= rope.rotated || d0 >= dim {
        return;
    }
    let (cos, sin) = (rope.rotary.cos, rope.rotary.sin);
    // Pair (d, d + 1) turns by angle d / 2; past `dim` it keeps its values (the table's last
    // angle is read, and not used).
    let pair = |j: usize| d0 + at.col + 8 * j as u32;
    let angle = |j: usize, h: usize| at.rows[h] + (pair(j) / 2).min(dim / 2 - 1);
    // SAFETY: below `table_rows · dim / 2`, which [`rotate_tile`] checked.
    let load = |t: Global<f32>, j, h| unsafe { t.load_vec_unchecked::<1>(angle(j, h))[0] };
    let c: [[f32; 2]; 4] = core::array::from_fn(|j| core::array::from_fn(|h| load(cos, j, h)));
    let s: [[f32; 2]; 4] = core::array::from_fn(|j| core::array::from_fn(|h| load(sin, j, h)));
    for j in 0..4 {
        let inside = pair(j) < dim;
        for h in 0..2 {
            let (lo, hi) = (slice_reg(Q, j, h, 0), slice_reg(Q, j, h, 1));
            let x = (W::reg(acc, lo), W::reg(acc, hi));
            let (cj, sj) = if inside {
                (c[j][h], s[j][h])
            } else {
                (1.0, 0.0)
            };
            let (y1, y2) = Projection::rotate(x, (cj, sj));
            W::set_reg(acc, lo, y1);
            W::set_reg(acc, hi, y2);
        }
    }
}
