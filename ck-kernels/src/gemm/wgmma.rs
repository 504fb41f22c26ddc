//! `gemm_bf16_wgmma` and `gemm_bf16_wgmma_n128` (f32 C), `gemm_bf16_wgmma_bf16` and
//! `gemm_bf16_wgmma_n128_bf16` (bf16 C): `C[M,N] = act(alpha · A[M,K] · B[K,N] + beta · D +
//! bias)` (bf16 A and B, f32 accumulation, row-major, the [`crate::gemm::epilogue`]) on Hopper's
//! warpgroup MMA (`wgmma`, sm_90a), for any M and any N, K that are
//! multiples of 8 (rows of A and B must be 16-byte aligned for `cp.async`;
//! [`crate::gemm::choice::Bf16Kernel::for_shape`] sends other shapes to the `mma.sync` kernel).
//!
//! A 256-thread block (two warpgroups) computes a `128 × BN` tile of C, `BN` = 256 or 128
//! ([`WgmmaTile`]). K is walked in stages of 64: each thread issues 16-byte `cp.async` copies
//! of A's 128 × 64 and B's 64 × BN slices straight into shared memory (no registers in between;
//! edges zero-filled), two stages ahead of the one being multiplied, into four buffers. Both
//! tiles are stored in the 128-byte swizzle that the MMA's descriptors read ([`ck_core::wgmma`]):
//! A K-major, rows of 128 bytes; B N-major, in 64-column panels of 64 rows × 128 bytes. Per
//! stage, each warpgroup issues four `m64nBNk16` MMAs over its 64 rows of A and all of B, and
//! moves on with them in flight; the one barrier per stage publishes the copies and says every
//! MMA two stages back is done, so its buffer can be refilled.
//!
//! After the last stage the C tile is staged through the freed stage buffers (f32, rows padded
//! to `BN + 8` words so the accumulator layout's stores are conflict-free) and read back in
//! slabs of rows in runs of 4 columns ([`CRows256`], [`CRows128`]): the epilogue reads bias once
//! and D in contiguous runs, and each warp stores whole rows of C.
//!
//! Per stage a 128 × 256 block copies 48 KiB and does 4.2 MFLOP (85 FLOP per byte) with 128
//! f32 accumulators per thread; 128 × 128 copies 32 KiB for 2.1 MFLOP (64 FLOP per byte) but
//! makes twice the blocks, which pays when the larger tiles leave SMs idle.

use crate::gemm::epilogue::{CElement, Epilogue, HAS_BIAS, HAS_D};
use ck_core::device::*;
use ck_core::distribution::TileDistribution;
use ck_core::tile::{make_tile_window, unroll, DistributedTensor, View2};
use ck_core::wgmma::{swizzle_128b, SmemMatrix};
use ck_macros::{tile_distribution, tile_kernel};

/// Block tile rows.
pub const BM: u32 = 128;

/// Whether rows of `[m, k]` A and `[k, n]` B are whole 16-byte vectors (N and K multiples of 8
/// bf16), as the kernels' `cp.async` copies need; other shapes copy element by element
/// ([`ck_core::tile::View2::copy_16`]) or run elsewhere.
pub const fn whole_vector_rows(n: u32, k: u32) -> bool {
    n.is_multiple_of(8) && k.is_multiple_of(8)
}
/// K per stage.
const BK: u32 = 64;
/// Shared-memory stages.
const STAGES: u32 = 4;
/// MMA groups left in flight when a warpgroup moves on to the next stage.
const MMA_IN_FLIGHT: u32 = 1;
/// How far ahead the copies run: a buffer is refilled once no MMA can still be reading it.
const COPY_AHEAD: u32 = STAGES - 1 - MMA_IN_FLIGHT;
/// Block tile rows per group of the launch order (consecutive blocks share A and B panels in L2).
const GROUP_M: u32 = 16;
const A_BYTES: u32 = BM * BK * 2;
/// B is stored in 64-column panels of `BK` rows × 128 bytes.
const PANEL_BYTES: u32 = BK * 128;

/// Shared elements of the kernel with block tiles `BM × bn`: the stages plus up to 1 KiB to
/// start them on a 1024-byte boundary (the swizzle XORs absolute address bits).
pub(crate) const fn smem_elems(bn: u32) -> usize {
    ((STAGES * (A_BYTES + BK * bn * 2) + 1024) / 2) as usize
}

tile_distribution! {
    /// A's 128 × 64 stage as 16-byte copies: each warp copies 4 rows of 128 bytes, 4 times.
    pub struct ACopy {
        warp_size: 32, block_size: 256,
        h: { m: [rep: 4, warp: 8, lane: 4], k: [lane: 8, vec: 8] },
        p: [[m.warp], [m.lane, k.lane]],
        y: [m.rep, k.vec],
    }
}

tile_distribution! {
    /// B's 64 × 256 stage as 16-byte copies: each warp copies one row of 512 bytes, 8 times.
    pub struct BCopy256 {
        warp_size: 32, block_size: 256,
        h: { k: [rep: 8, warp: 8], n: [lane: 32, vec: 8] },
        p: [[k.warp], [n.lane]],
        y: [k.rep, n.vec],
    }
}

tile_distribution! {
    /// B's 64 × 128 stage as 16-byte copies: each warp copies two rows of 256 bytes, 4 times.
    pub struct BCopy128 {
        warp_size: 32, block_size: 256,
        h: { k: [rep: 4, warp: 8, lane: 2], n: [lane: 16, vec: 8] },
        p: [[k.warp], [k.lane, n.lane]],
        y: [k.rep, n.vec],
    }
}

tile_distribution! {
    /// C's 128 × 256 tile in the wgmma accumulator layout: warpgroup `wg` owns rows
    /// 64·wg..64·wg + 64; in it, warp `w` and lane (g, t) hold rows 16w + {g, g + 8} and columns
    /// 8j + 2t + {0, 1} for j < 32 — register 4j + 2h + e (PTX ISA, wgmma D fragments).
    pub struct CWgmma256 {
        warp_size: 32, block_size: 256,
        h: { m: [wg: 2, w: 4, h: 2, g: 8], n: [j: 32, t: 4, e: 2] },
        p: [[m.wg, m.w], [m.g, n.t]],
        y: [n.j, m.h, n.e],
    }
}

tile_distribution! {
    /// C's 128 × 128 tile in the wgmma accumulator layout ([`CWgmma256`] with j < 16).
    pub struct CWgmma128 {
        warp_size: 32, block_size: 256,
        h: { m: [wg: 2, w: 4, h: 2, g: 8], n: [j: 16, t: 4, e: 2] },
        p: [[m.wg, m.w], [m.g, n.t]],
        y: [n.j, m.h, n.e],
    }
}

tile_distribution! {
    /// A 128 × 64 tile in the wgmma accumulator layout ([`CWgmma256`] with j < 8).
    pub struct CWgmma64 {
        warp_size: 32, block_size: 256,
        h: { m: [wg: 2, w: 4, h: 2, g: 8], n: [j: 8, t: 4, e: 2] },
        p: [[m.wg, m.w], [m.g, n.t]],
        y: [n.j, m.h, n.e],
    }
}

tile_distribution! {
    /// 8 rows × 256 columns of C in runs of 4 consecutive columns: warp `w` has row `w`, lane
    /// `l` columns 4l..4l + 4 and 128 + 4l..: a warp's accesses are contiguous (512 bytes of
    /// f32 or 256 of bf16), in shared memory conflict-free and in global memory whole sectors.
    pub struct CRows256 {
        warp_size: 32, block_size: 256,
        h: { m: [warp: 8], n: [rep: 2, lane: 32, vec: 4] },
        p: [[m.warp], [n.lane]],
        y: [n.rep, n.vec],
    }
}

tile_distribution! {
    /// 16 rows × 128 columns of C in runs of 4: warp `w` has rows 2w + lane / 16.
    pub struct CRows128 {
        warp_size: 32, block_size: 256,
        h: { m: [warp: 8, lane: 2], n: [rep: 2, lane: 16, vec: 4] },
        p: [[m.warp], [m.lane, n.lane]],
        y: [n.rep, n.vec],
    }
}

/// The staged C tile's row stride in f32 words: `BN + 8` ≡ 8 (mod 32), so the 8-byte stores
/// of the accumulator layout (rows g = 0..3 of a half-warp, 8 words each) hit distinct banks.
const fn staged_stride(bn: u32) -> u32 {
    bn + 8
}

/// f32 elements of the staged C tile.
pub(crate) const fn staged_elems(bn: u32) -> usize {
    (BM * staged_stride(bn)) as usize
}

/// A block tile of the wgmma GEMM, `BM × BN`: what depends on its width.
pub trait WgmmaTile {
    /// Block tile columns (a multiple of 64: B is stored in 64-column panels).
    const BN: u32;
    /// B's `BK × BN` stage as 16-byte copies.
    type BCopy: TileDistribution<Y = [i32; 2], X = [i32; 2]>;
    /// A thread's accumulators: one `m64nBNk16` MMA's.
    type Acc: WgmmaAccumulators;
    /// C's tile in the accumulator layout.
    type C: TileDistribution<X = [i32; 2], Buffer<f32> = Self::Acc>;
    /// A slab of C's rows in runs of 4 columns, for the epilogue and the store.
    type CRows: TileDistribution<X = [i32; 2]>;
}

/// 128 × 256 tiles (`gemm_bf16_wgmma`): 85 FLOP per byte copied, 128 accumulators per thread.
pub struct Tile128x256;
/// 128 × 128 tiles (`gemm_bf16_wgmma_n128`): twice the blocks, for shapes with too few tiles.
pub struct Tile128x128;

impl WgmmaTile for Tile128x256 {
    const BN: u32 = 256;
    type BCopy = BCopy256;
    type Acc = [f32; 128];
    type C = CWgmma256;
    type CRows = CRows256;
}

impl WgmmaTile for Tile128x128 {
    const BN: u32 = 128;
    type BCopy = BCopy128;
    type Acc = [f32; 64];
    type C = CWgmma128;
    type CRows = CRows128;
}

/// The bf16 operands as views: `[m, k]` A and `[k, n]` B, row-major, rows of 8-element
/// (16-byte) vectors.
type Operand = View2<Global<Bf16>, Bf16, 8>;

/// Issues the copies of one stage (A rows `bm..`, B columns `bn..`, K from `k0`) into the stage
/// buffers that start at element `tile` of `smem`; outside the matrices the copies zero-fill.
/// `VECTOR_ROWS`: the rows of A and B are whole 16-byte vectors (N and K multiples of 8), so
/// the copies are `cp.async`; otherwise they go element by element.
#[inline(always)]
fn copy_stage<T: WgmmaTile, const SMEM: usize, const VECTOR_ROWS: bool>(
    (a, b): (&Operand, &Operand),
    smem: &SharedArray<Bf16, SMEM>,
    tile: u32,
    (bm, bn, k0): (u32, u32, u32),
) {
    let pa = ACopy::partition_index(thread_idx());
    unroll::<4>(|rep| {
        let [r, c] = ACopy::x_index(pa, [rep as i32, 0]).map(|x| x as u32);
        let at = tile + swizzle_128b(r * 128 + c * 2) / 2;
        if VECTOR_ROWS {
            a.copy_16_async(smem, at, [bm + r, k0 + c]);
        } else {
            a.copy_16(smem, at, [bm + r, k0 + c]);
        }
    });
    let pb = T::BCopy::partition_index(thread_idx());
    // BK · BN / 8 chunks over 256 threads.
    unroll::<32>(|rep| {
        if (rep as u32) < BK * T::BN / 8 / 256 {
            let [r, c] = T::BCopy::x_index(pb, [rep as i32, 0]).map(|x| x as u32);
            let panel = (c / 64) * PANEL_BYTES;
            let at = tile + (A_BYTES + panel + swizzle_128b(r * 128 + (c % 64) * 2)) / 2;
            if VECTOR_ROWS {
                b.copy_16_async(smem, at, [k0 + r, bn + c]);
            } else {
                b.copy_16(smem, at, [k0 + r, bn + c]);
            }
        }
    });
}

/// The origin (row, column) in C of block `block`'s tile: blocks run through groups of
/// `GROUP_M` tile rows column by column, so the blocks resident at once share few A and B
/// panels (Triton's grouped order).
#[inline(always)]
pub(crate) fn block_tile(block: u32, (tiles_m, tiles_n): (u32, u32), bn: u32) -> (u32, u32) {
    let per_group = GROUP_M * tiles_n;
    let first_row = block / per_group * GROUP_M;
    let rows = (tiles_m - first_row).min(GROUP_M);
    let at = block % per_group;
    ((first_row + at % rows) * BM, at / rows * bn)
}

/// The kernel body for block tiles `T` and C of element type `O`, with the shared memory of
/// its kernel: a batch of products, `[batch, m, k] · [batch, k, n]`. The grid is the tiles of
/// each product in turn, and a block works on its product's slices (checked once, here).
#[inline(always)]
fn gemm_wgmma<T: WgmmaTile, O: CElement, const SMEM: usize, const STAGED: usize>(
    (a, b, c): (Global<Bf16>, Global<Bf16>, GlobalMut<O>),
    (m, n, k): (u32, u32, u32),
    epilogue: Epilogue<O>,
    smem: SharedArray<Bf16, SMEM>,
) {
    let tiles = (m.div_ceil(BM), n.div_ceil(T::BN));
    let per_product = tiles.0 * tiles.1;
    let (product, block) = (block_idx() / per_product, block_idx() % per_product);
    let (a, b) = (
        a.slice(product * m * k, m * k),
        b.slice(product * k * n, k * n),
    );
    let c = c.slice(product * m * n, m * n);
    let mut epilogue = epilogue;
    if epilogue.flags & HAS_D != 0 {
        epilogue.d = epilogue.d.slice(product * m * n, m * n);
    }
    let origin = block_tile(block, tiles, T::BN);
    gemm_tile::<T, O, SMEM, STAGED, true>((a, b, c), (m, n, k), origin, epilogue, smem);
}

/// One block's `BM × T::BN` tile of `C = epilogue(A · B)` at `(bm, bn)`, for `[m, k]` A,
/// `[k, n]` B and `[m, n]` C (and D), row-major; bias has `n` elements. `VECTOR_ROWS`: N and
/// K are multiples of 8 ([`copy_stage`]).
#[inline(always)]
pub(crate) fn gemm_tile<
    T: WgmmaTile,
    O: CElement,
    const SMEM: usize,
    const STAGED: usize,
    const VECTOR_ROWS: bool,
>(
    (a, b, c): (Global<Bf16>, Global<Bf16>, GlobalMut<O>),
    (m, n, k): (u32, u32, u32),
    (bm, bn): (u32, u32),
    epilogue: Epilogue<O>,
    smem: SharedArray<Bf16, SMEM>,
) {
    let stage_bytes = A_BYTES + BK * T::BN * 2;
    let first = (1024 - smem.shared_address(0) % 1024) % 1024 / 2;
    let stage_at = |s: u32| first + s * stage_bytes / 2;
    let k_tiles = k.div_ceil(BK);
    let (a, b) = (Operand::new(a, m, k, k), Operand::new(b, k, n, n));
    let prologue = |s: u32| {
        if s < k_tiles {
            copy_stage::<T, SMEM, VECTOR_ROWS>((&a, &b), &smem, stage_at(s), (bm, bn, s * BK));
        }
        cp_async_commit();
    };
    if VECTOR_ROWS {
        unroll::<{ COPY_AHEAD as usize }>(|s| prologue(s as u32));
    } else {
        // A loop: the element copies make the closure too large to inline into `unroll`, and
        // a call would cost a stack frame.
        for s in 0..COPY_AHEAD {
            prologue(s);
        }
    }
    let wg = warp_id() / 4;
    let mut acc = DistributedTensor::<T::C, f32>::splat(0.0);
    // The loop and its last wait in one branch: with K = 0 the zero accumulators then join
    // after every MMA path, and ptxas does not see them written inside an MMA pipeline stage.
    if k_tiles > 0 {
        for kt in 0..k_tiles {
            // This thread's copies of stage kt have landed; the barrier publishes everyone's
            // (to the MMA's async proxy, hence the fence) and says every warpgroup is done with
            // stage kt − 1 − MMA_IN_FLIGHT, whose buffer the next copies overwrite.
            cp_async_wait::<{ COPY_AHEAD - 1 }>();
            fence_proxy_async();
            block_sync();
            let ahead = kt + COPY_AHEAD;
            if ahead < k_tiles {
                let at = stage_at(ahead % STAGES);
                copy_stage::<T, SMEM, VECTOR_ROWS>((&a, &b), &smem, at, (bm, bn, ahead * BK));
            }
            cp_async_commit();
            let stage = smem.shared_address(stage_at(kt % STAGES));
            wgmma_fence();
            unroll::<4>(|kk| {
                let kk = kk as u32;
                let a_desc = SmemMatrix::k_major_128b(stage + wg * 64 * 128 + kk * 32);
                // B: 64-column panels of BK rows × 128 bytes; a k-slice is 16 rows further.
                let b_desc =
                    SmemMatrix::mn_major_128b(stage + A_BYTES + kk * 16 * 128, PANEL_BYTES);
                wgmma_bf16(
                    &mut acc.data,
                    a_desc.descriptor(),
                    b_desc.descriptor(),
                    true,
                );
            });
            wgmma_commit();
            wgmma_wait::<MMA_IN_FLIGHT>(&mut acc.data);
        }
        wgmma_wait::<0>(&mut acc.data);
    }
    // Every warpgroup's MMAs are done with the stage buffers: they stage C, so that the
    // epilogue sees runs of consecutive columns and each warp's stores are contiguous.
    block_sync();
    let staged = smem.reinterpret::<f32, STAGED>();
    let stride = staged_stride(T::BN);
    make_tile_window::<T::C, _>(View2::<_, f32, 2>::new(staged, BM, T::BN, stride), [0, 0])
        .store(&acc);
    block_sync();
    let rows = T::CRows::X_LENGTHS[0] as u32;
    let mut slab =
        make_tile_window::<T::CRows, _>(View2::<_, f32, 4>::new(staged, BM, T::BN, stride), [0, 0]);
    // Bias: the same for every slab (a view with row stride 0).
    let bias = if epilogue.flags & HAS_BIAS != 0 {
        O::load_f32::<T::CRows, 4>(epilogue.bias, (rows, n, 0), [0, bn as i32])
    } else {
        DistributedTensor::zeros()
    };
    for r in 0..BM / rows {
        let origin = [(bm + r * rows) as i32, bn as i32];
        let mut x = slab.load::<f32>();
        if !epilogue.is_identity() {
            epilogue.apply(
                &mut x,
                || O::load_f32::<T::CRows, 4>(epilogue.d, (m, n, n), origin),
                || bias,
            );
        }
        O::store_f32::<T::CRows, 4>(c, (m, n, n), origin, &x);
        slab.move_by([rows as i32, 0]);
    }
}

/// Declares a wgmma GEMM kernel: block tile `$tile`, C of element type `$o`.
macro_rules! wgmma_gemm_kernel {
    ($(#[$doc:meta])* $name:ident, $tile:ty, $bn:literal, $o:ty, $bcopy:ident, $c:ident, $rows:ident) => {
        $(#[$doc])*
        #[tile_kernel(block = 256, distributions(ACopy, $bcopy, $c, $rows))]
        #[allow(clippy::too_many_arguments)]
        pub fn $name(
            a: Global<Bf16>,
            b: Global<Bf16>,
            c: GlobalMut<$o>,
            d: Global<$o>,
            bias: Global<$o>,
            m: u32,
            n: u32,
            k: u32,
            alpha: f32,
            beta: f32,
            flags: u32,
        ) {
            let smem = shared!(Bf16; smem_elems($bn));
            let epilogue = Epilogue::of(alpha, beta, (d, bias), flags);
            gemm_wgmma::<$tile, $o, { smem_elems($bn) }, { staged_elems($bn) }>(
                (a, b, c),
                (m, n, k),
                epilogue,
                smem,
            );
        }
    };
}

wgmma_gemm_kernel!(
    /// f32 C on 128 × 256 tiles: grid ⌈M/128⌉ · ⌈N/256⌉ blocks.
    gemm_bf16_wgmma, Tile128x256, 256, f32, BCopy256, CWgmma256, CRows256
);
wgmma_gemm_kernel!(
    /// f32 C on 128 × 128 tiles: grid ⌈M/128⌉ · ⌈N/128⌉ blocks.
    gemm_bf16_wgmma_n128, Tile128x128, 128, f32, BCopy128, CWgmma128, CRows128
);
wgmma_gemm_kernel!(
    /// bf16 C on 128 × 256 tiles.
    gemm_bf16_wgmma_bf16, Tile128x256, 256, Bf16, BCopy256, CWgmma256, CRows256
);
wgmma_gemm_kernel!(
    /// bf16 C on 128 × 128 tiles.
    gemm_bf16_wgmma_n128_bf16, Tile128x128, 128, Bf16, BCopy128, CWgmma128, CRows128
);
