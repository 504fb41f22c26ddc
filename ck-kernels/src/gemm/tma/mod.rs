//! `gemm_tma_*` and `gemm_fp8_*`: `C[b] = act(alpha · A[b]·B[b] + beta · D[b] + bias)` on
//! Hopper (sm_90a) with the copies on the TMA engine and a warp-specialised, persistent block —
//! bf16 operands (`B` as `[K, N]`, or as `[N, K]`: [`Bf16NkOperands`]; `A` as `[M, K]`, or
//! as `[K, M]`: [`Bf16KmOperands`], a weight's gradient) or 8-bit floats (`B`
//! as `[N, K]`, the only layout the fp8 MMA reads), f32 accumulation, bf16 or f32 C, the
//! [`crate::gemm::epilogue`], any batch of products.
//!
//! One block per multiprocessor takes the `128 × 256` tiles of C `block, block + grid, …` (in
//! the grouped order of [`crate::gemm::wgmma`], product by product) — or `128 × 192` ones
//! ([`Width`], `*_n192*` kernels: alpha alone, a bias with an activation, D alone), for shapes
//! whose wider tiles leave the last wave mostly idle. Where few tiles meet a long K (fewer
//! tiles than multiprocessors, many stages each), the host shares the tiles' K stages out over
//! more blocks instead ([`stream_k`]: each block sums a run of stages, the last of a tile's
//! blocks adds the others' parts from a workspace and stores C). A block has three warpgroups:
//!
//! * **the producer** (one thread of warpgroup 2, which gives its registers to the others):
//!   for every tile and every K stage, waits until the stage's buffer is free, announces its
//!   48 KiB on the stage's "full" mbarrier and issues TMA copies of A's `128 × BK` slice and
//!   B's `BK × 256` slice, where `BK` is one 128-byte row (64 bf16 or 128 fp8). The copy engine
//!   writes them in the 128-byte swizzle the MMAs read, zero-fills what lies outside the
//!   matrices, and completes the barrier. The ring of four stages runs on across tiles, so the
//!   next tile's operands arrive while the consumers write this one's C;
//! * **two consumer warpgroups** (64 rows of the tile each): per stage, wait on "full", issue
//!   four `m64n256k16` (bf16) or `m64n256k32` (fp8) MMAs over their rows, leave them in flight
//!   and release the *previous* stage (its MMAs are done once one group is pending) with one
//!   arrival per warp on its "empty" mbarrier. After the last stage, the epilogue runs on the
//!   accumulators in registers, 32 columns at a time ([`CWgmma32`]); f32 C is stored straight
//!   from the accumulator layout (a quad's pairs of columns fill 32-byte sectors); bf16 C is
//!   written with `stmatrix` into a warp's 2 KiB box of shared memory (two per warp, in turn)
//!   and stored by the copy engine, which writes it to global memory while the consumers run
//!   the next tile's MMAs.
//!
//! Neither side passes a block barrier after the start and the consumers issue no load: the
//! MMAs are all they do until the epilogue. Shared memory is one region — the rings of A and
//! B, then C's staging, after one alignment pad (each part starts on a 1024-byte boundary, as
//! the 128-byte swizzle needs) — beside the barriers and the bias: 226 KiB of the 227.
//!
//! A kernel is compiled for one epilogue (`EPI`, a const of the body: the flags, or
//! `RUNTIME_FLAGS`). Each operand and output type has two: `gemm_tma_bf16` (and the others
//! without a suffix) computes `C = alpha · A·B`, `gemm_tma_bf16_epilogue` the whole
//! [`Epilogue`] its flags ask for; bf16 C also has `gemm_tma_bf16_bias{,_relu,_gelu,_silu}`.
//! bf16 C with a residual alone (`alpha · A·B + beta · D`) has `gemm_tma_bf16_residual`, whose
//! producer copies each tile's D through the ring as two more stages, and whose consumers stage
//! C where D arrived ([`DRing`]); `gemm_tma_bf16_residual_bias{,_relu,_gelu,_silu}` add a bias
//! and an activation, and the run-time-flags twin `gemm_tma_bf16_residual_epilogue` takes the
//! rest (an activation without a bias). The others read D in the accumulator layout from global
//! memory ([`DLoads`]).
//! `gemm_tma_grouped_bf16{,_f32}` run a group of products that share N and K, each
//! problem's rows in tiles of their own ([`grouped`]).
//! The host launches the kernel compiled for the epilogue it is given, the run-time one when
//! none is: that one's paths for D, bias and the activations, never taken by a plain GEMM,
//! cost it registers (spills) and instruction fetch — 10–17 % at 8192×8192×1024 on an H100. A
//! tile's bias is read before its MMAs and staged in shared memory (`store::stage_bias`).
//!
//! Shapes: rows of A, B and C start 16-byte aligned, as the copy engine and the slices of a
//! batch need (K a multiple of 8 for bf16, of 16 for fp8; N a multiple of 8).

pub mod grouped;
mod kernels;
mod residual;
mod store;
pub mod stream_k;
mod width;
use grouped::{Direct, GroupedRows};
pub use kernels::*;
pub use residual::{DLoads, DRing, D_BOX};
pub use store::{
    c_stage_bytes, BiasRows, BiasWgmma32, CWgmma32, DSource, Staging, TileAt, TmaOutput,
    BIAS_STAGE, C_BOX, C_BUFFERS,
};
use store::{
    flags, load_bias, stage_bias, store_gated_tile, store_rotary_tile, store_tile, TileOut,
};
use stream_k::{Parts, Schedule};
pub use width::{CWgmma192, Width, N192, N256};

use crate::gemm::epilogue::{
    Activation, Epilogue, ACTIVATION_SHIFT, GATED, HAS_BIAS, HAS_D, ROTARY, RUNTIME_FLAGS,
};
use crate::gemm::wgmma::block_tile;
use ck_core::device::*;
use ck_core::tile::{unroll, DistributedTensor};
use ck_core::wgmma::{SmemMatrix, SwizzleMode};
use ck_macros::tile_kernel;

/// Block tile rows.
pub const BM: u32 = 128;

/// Threads per block: two consumer warpgroups, then the producer's.
pub const THREADS: u32 = 384;
/// Stages in the ring.
const STAGES: u32 = 4;
/// Bytes of one row of a stage (one K stage: 64 bf16 or 128 fp8), the swizzle's row.
const ROW_BYTES: u32 = 128;
/// Bytes of A's slice of one stage, and of B's for tiles `bn` wide.
pub const A_STAGE_BYTES: u32 = BM * ROW_BYTES;
pub const fn b_stage_bytes(bn: u32) -> u32 {
    bn * ROW_BYTES
}
/// bf16 B is copied in 64-column panels of 64 rows × 128 bytes.
const PANEL_BYTES: u32 = 64 * ROW_BYTES;
/// Consumer warps, each arriving once at an "empty" barrier when done with a stage.
const CONSUMER_WARPS: u32 = 8;
/// mbarriers: "full" and "empty" per stage.
pub const BARRIERS: usize = 2 * STAGES as usize;

/// Stage `s` is full / empty.
const fn full(s: u32) -> u32 {
    s
}
const fn empty(s: u32) -> u32 {
    STAGES + s
}

/// What the shared region's parts start after: up to 1 KiB, to the first 1024-byte boundary
/// (the swizzle XORs absolute address bits).
const ALIGN_PAD: u32 = 1024;

/// Elements of `elem_bytes` in a part of the region of `bytes` used bytes: the part reaches
/// over the pad, so that its contents fit from the aligned start.
const fn part_elems(bytes: u32, elem_bytes: u32) -> usize {
    ((bytes + ALIGN_PAD) / elem_bytes) as usize
}

/// The shared region of a kernel on operands `P` writing C of `O` with `C_BOXES` C box buffers
/// per consumer warp ([`C_BUFFERS`], or none where C is staged in the ring, [`DRing`]): A's
/// ring and B's ring, then C's staging ([`c_stage_bytes`]), after one alignment pad; in
/// elements of A (the region's type) and bytes. For bf16 operands and C with two boxes:
/// 64 + 128 + 32 KiB + the pad, 225 KiB of the 227 a block may have.
pub struct Region<P, O, const C_BOXES: u32>(core::marker::PhantomData<(P, O)>);

impl<P: Operands, O: TmaOutput, const C_BOXES: u32> Region<P, O, C_BOXES> {
    const A_RING: u32 = STAGES * A_STAGE_BYTES;
    const B_RING: u32 = STAGES * b_stage_bytes(P::W::BN);
    const C_STAGE: u32 = c_stage_bytes(O::BYTES, C_BOXES);
    /// The region's elements.
    pub const ELEMS: usize =
        ((Self::A_RING + Self::B_RING + Self::C_STAGE + ALIGN_PAD) / P::A::BYTES) as usize;
    /// A's ring: elements (of A), from byte 0.
    pub const A_ELEMS: usize = part_elems(Self::A_RING, P::A::BYTES);
    /// B's ring: its first byte, its elements (of B).
    pub const B_AT: usize = Self::A_RING as usize;
    pub const B_ELEMS: usize = part_elems(Self::B_RING, P::B::BYTES);
    /// C's staging: its first byte, its elements (of C).
    pub const C_AT: usize = (Self::A_RING + Self::B_RING) as usize;
    pub const C_ELEMS: usize = part_elems(Self::C_STAGE, O::BYTES);
}

/// What depends on the operand types: how A and B are laid out and copied, and the MMA.
pub trait Operands {
    /// A's and B's element types.
    type A: Element;
    type B: Element;
    /// The block tile's width.
    type W: Width;
    /// K per stage (a 128-byte row of A).
    const BK: u32;
    /// Columns of C a tile writes: the tile's width, or half of it for a gated linear unit
    /// ([`Bf16GatedOperands`]: the other half is the up projection's).
    const C_BN: u32 = <Self::W as Width>::BN;
    /// Rows of B (`[N, K]`) or columns (`[K, N]`) per column of C: 2 for a gated unit.
    const B_PER_C: u32 = 1;
    /// B's TMA box (innermost first): `[64, BK, 1]` for row-major bf16 B (`BN / 64` per
    /// stage), `[BK, BN, 1]` for K-major fp8 B.
    const B_BOX: [u32; 3];
    /// Copies B's slice of stage `k0..k0 + BK`, columns `bn..bn + BN`, of product `batch`
    /// into the ring at element `at`, completing on barrier `bar`.
    fn copy_b<const N: usize, const NB: usize>(
        b: &Tma<Self::B, 3>,
        ring: &SharedArray<Self::B, N>,
        at: u32,
        k0_bn_batch: (u32, u32, u32),
        bars_bar: (&SharedArray<Mbarrier, NB>, u32),
    );
    /// The descriptor of the first k-slice of the B stage at shared byte `stage`.
    fn b_descriptor(stage: u32) -> u64;
    /// Bytes from one k-slice (of four per stage) of B to the next.
    const B_SLICE_BYTES: u32;
    /// One MMA: `acc += A_slice · B_slice`.
    fn mma(acc: &mut <Self::W as Width>::Regs, a: u64, b: u64);
    /// A is given transposed, `[K, M]` (M-major), not `[M, K]` (K-major).
    const A_M_MAJOR: bool = false;
    /// Copies A's slice of stage `k0..k0 + BK`, rows `bm..bm + BM`, of product `batch` into
    /// the ring at element `at`, completing on barrier `bar`: one box of `BM` rows of 128 bytes.
    #[inline(always)]
    fn copy_a<const N: usize, const NB: usize>(
        a: &Tma<Self::A, 3>,
        ring: &SharedArray<Self::A, N>,
        at: u32,
        (k0, bm, batch): (u32, u32, u32),
        (bars, bar): (&SharedArray<Mbarrier, NB>, u32),
    ) {
        a.copy_to_shared([k0 as i32, bm as i32, batch as i32], ring, at, bars, bar);
    }
    /// The descriptor of the first k-slice of warpgroup `wg`'s 64 rows in the A stage at shared
    /// byte `stage`.
    #[inline(always)]
    fn a_descriptor(stage: u32, wg: u32) -> u64 {
        k_major(stage + wg * 64 * ROW_BYTES)
    }
    /// Bytes from one k-slice (of four per stage) of A to the next.
    const A_SLICE_BYTES: u32 = 32;
}

/// bf16 A `[M, K]` and B `[K, N]`, both row-major, in tiles `W` wide.
pub struct Bf16Operands<W = N256>(core::marker::PhantomData<W>);

impl<W: Width> Operands for Bf16Operands<W> {
    type A = Bf16;
    type B = Bf16;
    type W = W;
    const BK: u32 = 64;
    const B_BOX: [u32; 3] = [64, 64, 1];

    #[inline(always)]
    fn copy_b<const N: usize, const NB: usize>(
        b: &Tma<Bf16, 3>,
        ring: &SharedArray<Bf16, N>,
        at: u32,
        (k0, bn, batch): (u32, u32, u32),
        bars_bar: (&SharedArray<Mbarrier, NB>, u32),
    ) {
        copy_panels::<4, N, NB>(b, (ring, at), (bn, k0, batch), W::BN / 64, bars_bar);
    }

    // N-major: 64-column panels of 64 rows × 128 bytes; a k-slice is 16 rows further.
    const B_SLICE_BYTES: u32 = 16 * ROW_BYTES;

    #[inline(always)]
    fn b_descriptor(stage: u32) -> u64 {
        SmemMatrix::mn_major_128b(stage, PANEL_BYTES).descriptor()
    }

    #[inline(always)]
    fn mma(acc: &mut W::Regs, a: u64, b: u64) {
        wgmma_bf16(acc, a, b, true);
    }
}

/// bf16 A `[M, K]` and B given transposed, `[N, K]` (`nn.Linear`'s weight), both row-major:
/// B K-major, as the MMA reads it without a transpose. A stage of B is one box of `BN` rows of
/// 128 bytes (64 k), in the swizzle A's stage has; a k-slice of 16 is 32 bytes further along
/// each row.
pub struct Bf16NkOperands<W = N256>(core::marker::PhantomData<W>);

impl<W: Width> Operands for Bf16NkOperands<W> {
    type A = Bf16;
    type B = Bf16;
    type W = W;
    const BK: u32 = 64;
    const B_BOX: [u32; 3] = [64, W::BN, 1];

    #[inline(always)]
    fn copy_b<const N: usize, const NB: usize>(
        b: &Tma<Bf16, 3>,
        ring: &SharedArray<Bf16, N>,
        at: u32,
        (k0, bn, batch): (u32, u32, u32),
        (bars, bar): (&SharedArray<Mbarrier, NB>, u32),
    ) {
        b.copy_to_shared([k0 as i32, bn as i32, batch as i32], ring, at, bars, bar);
    }

    const B_SLICE_BYTES: u32 = 32;

    #[inline(always)]
    fn b_descriptor(stage: u32) -> u64 {
        k_major(stage)
    }

    #[inline(always)]
    fn mma(acc: &mut W::Regs, a: u64, b: u64) {
        wgmma_bf16_b_kmajor(acc, a, b, true);
    }
}

/// bf16 A given transposed, `[K, M]`, and B `[K, N]`, both row-major: `C = Aᵀ·B` read as the
/// tensors lie — a weight's gradient `dW = dYᵀ·X` from `dY` `[tokens, N_out]` and `X`
/// `[tokens, N_in]`, without a transposed copy of `dY`. A's stage is two boxes of 64 columns
/// (M) by 64 rows (K), each warpgroup's 64 rows of the tile one box, read M-major by the MMA
/// (`imm-trans-a = 1`); a k-slice of 16 is 16 rows further, as in B's N-major stage.
pub struct Bf16KmOperands<W = N256>(core::marker::PhantomData<W>);

impl<W: Width> Operands for Bf16KmOperands<W> {
    type A = Bf16;
    type B = Bf16;
    type W = W;
    const BK: u32 = 64;
    const B_BOX: [u32; 3] = [64, 64, 1];

    #[inline(always)]
    fn copy_b<const N: usize, const NB: usize>(
        b: &Tma<Bf16, 3>,
        ring: &SharedArray<Bf16, N>,
        at: u32,
        k0_bn_batch: (u32, u32, u32),
        bars_bar: (&SharedArray<Mbarrier, NB>, u32),
    ) {
        Bf16Operands::<W>::copy_b(b, ring, at, k0_bn_batch, bars_bar);
    }

    const B_SLICE_BYTES: u32 = <Bf16Operands as Operands>::B_SLICE_BYTES;

    #[inline(always)]
    fn b_descriptor(stage: u32) -> u64 {
        Bf16Operands::<W>::b_descriptor(stage)
    }

    #[inline(always)]
    fn mma(acc: &mut W::Regs, a: u64, b: u64) {
        wgmma_bf16_a_mn(acc, a, b, true);
    }

    const A_M_MAJOR: bool = true;

    #[inline(always)]
    fn copy_a<const N: usize, const NB: usize>(
        a: &Tma<Bf16, 3>,
        ring: &SharedArray<Bf16, N>,
        at: u32,
        (k0, bm, batch): (u32, u32, u32),
        bars_bar: (&SharedArray<Mbarrier, NB>, u32),
    ) {
        copy_panels::<2, N, NB>(a, (ring, at), (bm, k0, batch), 2, bars_bar);
    }

    #[inline(always)]
    fn a_descriptor(stage: u32, wg: u32) -> u64 {
        SmemMatrix::mn_major_128b(stage + wg * PANEL_BYTES, PANEL_BYTES).descriptor()
    }

    const A_SLICE_BYTES: u32 = 16 * ROW_BYTES;
}

/// A gated linear unit's operands (SwiGLU, GeGLU): bf16 A `[M, K]` and the gate's and up
/// projection's weights stacked, `[2F, K]` (gate rows first, as `torch.cat([w_gate, w_up])`
/// and serving stacks' merged `gate_up_proj` lay them out), both row-major. A tile of C is
/// 128 × 128: B's stage holds the gate's 128 rows for its columns, then the up projection's
/// (two TMA boxes of the weight seen as `[2, F, K]`), so one `m64n256k16` MMA gives a warpgroup
/// both products of its columns, in the same registers' two halves, and the epilogue combines
/// them without leaving the thread ([`crate::gemm::epilogue::GATED`]). One product (batch 1).
pub struct Bf16GatedOperands;

/// Rows of each half of a gated unit's B stage.
const GATE_ROWS: u32 = N256::BN / 2;

impl Operands for Bf16GatedOperands {
    type A = Bf16;
    type B = Bf16;
    type W = N256;
    const BK: u32 = 64;
    const C_BN: u32 = GATE_ROWS;
    const B_PER_C: u32 = 2;
    const B_BOX: [u32; 3] = [64, GATE_ROWS, 1];

    #[inline(always)]
    fn copy_b<const N: usize, const NB: usize>(
        b: &Tma<Bf16, 3>,
        ring: &SharedArray<Bf16, N>,
        at: u32,
        (k0, bn, _): (u32, u32, u32),
        (bars, bar): (&SharedArray<Mbarrier, NB>, u32),
    ) {
        // The gate's rows, then the up projection's: the weight's halves are its "batch" 0, 1.
        b.copy_to_shared([k0 as i32, bn as i32, 0], ring, at, bars, bar);
        let up = at + GATE_ROWS * ROW_BYTES / 2;
        b.copy_to_shared([k0 as i32, bn as i32, 1], ring, up, bars, bar);
    }

    // The stage is read as [`Bf16NkOperands`]' is: K-major bf16 rows of 128 bytes.
    const B_SLICE_BYTES: u32 = <Bf16NkOperands as Operands>::B_SLICE_BYTES;

    #[inline(always)]
    fn b_descriptor(stage: u32) -> u64 {
        Bf16NkOperands::<N256>::b_descriptor(stage)
    }

    #[inline(always)]
    fn mma(acc: &mut [f32; 128], a: u64, b: u64) {
        Bf16NkOperands::<N256>::mma(acc, a, b);
    }
}

/// 8-bit float A `[M, K]` (format `A`) and B given transposed, `[N, K]` (format `B`), both
/// row-major — K-major, as the fp8 MMA requires.
pub struct Fp8Operands<A, B>(core::marker::PhantomData<(A, B)>);

impl<A: Fp8, B: Fp8> Operands for Fp8Operands<A, B> {
    type A = A;
    type B = B;
    type W = N256;
    const BK: u32 = 128;
    const B_BOX: [u32; 3] = [128, N256::BN, 1];

    #[inline(always)]
    fn copy_b<const N: usize, const NB: usize>(
        b: &Tma<B, 3>,
        ring: &SharedArray<B, N>,
        at: u32,
        (k0, bn, batch): (u32, u32, u32),
        (bars, bar): (&SharedArray<Mbarrier, NB>, u32),
    ) {
        b.copy_to_shared([k0 as i32, bn as i32, batch as i32], ring, at, bars, bar);
    }

    const B_SLICE_BYTES: u32 = 32;

    #[inline(always)]
    fn b_descriptor(stage: u32) -> u64 {
        k_major(stage)
    }

    #[inline(always)]
    fn mma(acc: &mut [f32; 128], a: u64, b: u64) {
        wgmma_fp8::<A, B>(acc, a, b, true);
    }
}

/// Copies an M- or N-major operand's stage: `panels` (at most `P`) boxes of 64 columns from
/// column `x0` (k rows from `k0`, batch `batch`) into consecutive panels of the ring from
/// element `at`, completing on barrier `bar`.
#[inline(always)]
fn copy_panels<const P: usize, const N: usize, const NB: usize>(
    t: &Tma<Bf16, 3>,
    (ring, at): (&SharedArray<Bf16, N>, u32),
    (x0, k0, batch): (u32, u32, u32),
    panels: u32,
    (bars, bar): (&SharedArray<Mbarrier, NB>, u32),
) {
    unroll::<P>(|p| {
        let p = p as u32;
        if p < panels {
            let coords = [(x0 + 64 * p) as i32, k0 as i32, batch as i32];
            t.copy_to_shared(coords, ring, at + p * PANEL_BYTES / 2, bars, bar);
        }
    });
}

/// A K-major operand of 128-byte rows from shared byte `start` (a k-slice of 32 bytes).
#[inline(always)]
fn k_major(start: u32) -> u64 {
    SmemMatrix::k_major_128b(start).descriptor()
}

/// The shared memory of a kernel: A's and B's rings and the mbarriers.
pub struct Smem<A, B, const NA: usize, const NB: usize> {
    pub a: SharedArray<A, NA>,
    pub b: SharedArray<B, NB>,
    pub bars: SharedArray<Mbarrier, BARRIERS>,
}

/// Where a tile lies: A's first row and product (its TMA coordinates past K), B's product,
/// C's place (product, first row, first column) and the rows of C below which its epilogue
/// writes (`m`).
#[derive(Clone, Copy)]
pub struct Place {
    pub a: (u32, u32),
    pub b: u32,
    pub c: (u32, u32, u32),
    pub m: u32,
}

/// The tiles of a launch and the blocks' share of them: a batch of products of one shape
/// ([`Problem`]) or the row tiles of a group of problems ([`GroupedRows`]).
pub trait Tiles: Copy {
    /// Which blocks run which stages of which tiles.
    fn schedule(&self) -> &Schedule;
    /// Columns of C.
    fn n(&self) -> u32;
    /// Where tile `i` of `bn` columns lies.
    fn place(&self, i: u32, bn: u32) -> Place;
}

/// The problem: `batch` products of `m × k` by `k × n`, in tiles, and the blocks' share of
/// them.
#[derive(Clone, Copy)]
pub struct Problem {
    m: u32,
    n: u32,
    tiles_m: u32,
    tiles_n: u32,
    schedule: Schedule,
}

impl Problem {
    /// The problem in tiles of `bk × bn`, the last `sk_tiles` in stream-K ([`Schedule::new`]
    /// checks them).
    #[inline(always)]
    pub fn new(
        (m, n, k, batch): (u32, u32, u32, u32),
        (bk, bn): (u32, u32),
        sk_tiles: u32,
    ) -> Problem {
        let (tiles_m, tiles_n, k_stages) = (m.div_ceil(BM), n.div_ceil(bn), k.div_ceil(bk));
        let tiles = batch * tiles_m * tiles_n;
        Problem {
            m,
            n,
            tiles_m,
            tiles_n,
            schedule: Schedule::new(tiles, k_stages, grid_dim(), sk_tiles),
        }
    }
}

impl Tiles for Problem {
    #[inline(always)]
    fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    #[inline(always)]
    fn n(&self) -> u32 {
        self.n
    }

    /// Tile `i` in the grouped order of `gemm::wgmma::block_tile`, product by product.
    #[inline(always)]
    fn place(&self, i: u32, bn: u32) -> Place {
        let per_product = self.tiles_m * self.tiles_n;
        let (bm, bn) = block_tile(i % per_product, (self.tiles_m, self.tiles_n), bn);
        let product = i / per_product;
        Place {
            a: (bm, product),
            b: product,
            c: (product, bm, bn),
            m: self.m,
        }
    }
}

/// Stage use `t` of the block (over all its tiles): its stage and the parity of that use.
#[inline(always)]
fn stage(t: u32) -> (u32, u32) {
    (t % STAGES, (t / STAGES) % 2)
}

/// Element `first` of `ring`: the first on a 1024-byte boundary.
#[inline(always)]
fn aligned_start<T: Element, const N: usize>(ring: &SharedArray<T, N>) -> u32 {
    (1024 - ring.shared_address(0) % 1024) % 1024 / T::BYTES
}

/// Every stage of every tile of the block, into the ring as its buffers are released.
#[inline(always)]
fn produce<P: Operands, O: TmaOutput, S: DSource<O>, T: Tiles, const NA: usize, const NB: usize>(
    (a, b, dsrc): (&Tma<P::A, 3>, &Tma<P::B, 3>, S),
    smem: &Smem<P::A, P::B, NA, NB>,
    pb: &T,
) {
    a.prefetch();
    b.prefetch();
    let (a0, b0) = (aligned_start(&smem.a), aligned_start(&smem.b));
    let mut t = 0;
    for unit in pb.schedule().units(block_idx()) {
        let place = pb.place(unit.tile, P::C_BN);
        let (_, _, bn) = place.c;
        for ks in unit.k0..unit.k1 {
            let (s, parity) = stage(t);
            if t >= STAGES {
                // Use n − 1 of this stage has been released by every consumer warp.
                smem.bars.wait(empty(s), parity ^ 1);
            }
            smem.bars
                .arrive_expect_tx(full(s), A_STAGE_BYTES + b_stage_bytes(P::W::BN));
            let k0 = ks * P::BK;
            let a_at = a0 + s * A_STAGE_BYTES / <P::A as Element>::BYTES;
            let (bm, product) = place.a;
            P::copy_a(a, &smem.a, a_at, (k0, bm, product), (&smem.bars, full(s)));
            let b_at = b0 + s * b_stage_bytes(P::W::BN) / <P::B as Element>::BYTES;
            P::copy_b(b, &smem.b, b_at, (k0, bn, place.b), (&smem.bars, full(s)));
            t += 1;
        }
        dsrc.produce(&smem.bars, place.c, t);
        t += S::D_STAGES;
    }
}

/// This warp is done with stage `s`: its MMAs have read it (the warpgroup waited for them).
#[inline(always)]
fn release<A, B, const NA: usize, const NB: usize>(smem: &Smem<A, B, NA, NB>, s: u32) {
    warp_sync();
    if lane_id() == 0 {
        smem.bars.arrive(empty(s));
    }
}

/// Every unit of the block: its MMAs stage by stage, then, where the block finishes a tile
/// (a whole one, or the last part of a stream-K one: [`Parts::settle`]), the epilogue and the
/// store of C. Without `STREAM_K` every tile is whole.
#[inline(always)]
fn consume<
    P: Operands,
    O: TmaOutput,
    S: DSource<O>,
    T: Tiles,
    const EPI: u32,
    const STREAM_K: bool,
    const NA: usize,
    const NB: usize,
    const NC: usize,
>(
    (c, epilogue, dsrc, staging): (S::Dest, Epilogue<O>, S, Staging<O, NC>),
    (smem, parts): (&Smem<P::A, P::B, NA, NB>, Parts),
    pb: &T,
) {
    let wg = warp_id() / 4;
    let c_start = aligned_start(&staging.c);
    let has_bias = flags::<O, EPI>(&epilogue) & HAS_BIAS != 0;
    // The first k-slice of this warpgroup's rows of A and of B in stage 0; every other slice is
    // a constant number of bytes further (`SmemMatrix::advance`: one add each).
    let a_first = P::a_descriptor(smem.a.shared_address(aligned_start(&smem.a)), wg);
    let b_first = P::b_descriptor(smem.b.shared_address(aligned_start(&smem.b)));
    let n = pb.n();
    let mut t = 0;
    // The block's stores of C before this one (C's two box buffers alternate by it).
    let mut ordinal = 0;
    let mut units = pb
        .schedule()
        .units(block_idx())
        .map(|u| (u, pb.place(u.tile, P::C_BN)));
    let mut next = units.next();
    while let Some((unit, place)) = next {
        // The tile's bias, read now so that its latency passes behind the MMAs.
        let bias = if has_bias {
            load_bias(epilogue.bias, n, place.c.2)
        } else {
            DistributedTensor::splat(O::default())
        };
        let mut acc = DistributedTensor::<<P::W as Width>::Acc, f32>::splat(0.0);
        // The loop and its last wait in one branch: with no K stage the zero accumulators join
        // after every MMA path (see `gemm::wgmma`).
        if unit.k1 > unit.k0 {
            for ks in unit.k0..unit.k1 {
                let (s, parity) = stage(t);
                smem.bars.wait(full(s), parity);
                let a_stage = SmemMatrix::advance(a_first, s * A_STAGE_BYTES);
                let b_stage = SmemMatrix::advance(b_first, s * b_stage_bytes(P::W::BN));
                wgmma_fence();
                unroll::<4>(|kk| {
                    let kk = kk as u32;
                    P::mma(
                        P::W::regs(&mut acc),
                        SmemMatrix::advance(a_stage, kk * P::A_SLICE_BYTES),
                        SmemMatrix::advance(b_stage, kk * P::B_SLICE_BYTES),
                    );
                });
                wgmma_commit();
                wgmma_wait::<1>(P::W::regs(&mut acc));
                if ks > unit.k0 {
                    release(smem, stage(t - 1).0);
                }
                t += 1;
            }
            // The next unit's coordinates (divisions) while the last stage's MMAs run, not
            // between this tile's epilogue and the next one's first MMA.
            next = units.next();
            wgmma_wait::<0>(P::W::regs(&mut acc));
            release(smem, stage(t - 1).0);
        } else {
            next = units.next();
        }
        // The tile's D stages, if it has any, follow its K stages in the ring.
        let d_use = t;
        t += S::D_STAGES;
        if STREAM_K
            && !pb.schedule().whole(unit)
            && !parts.settle::<P::W>(pb.schedule(), unit, &mut acc)
        {
            continue;
        }
        if has_bias {
            stage_bias(&bias, staging.bias);
        }
        let out = TileOut {
            c,
            epilogue: &epilogue,
            dsrc,
            staging,
            c_start,
            ordinal,
            d_use,
        };
        if EPI != RUNTIME_FLAGS && EPI & GATED != 0 {
            store_gated_tile::<P::W, O, S, EPI, NC>(acc, out, place.c, (place.m, n));
        } else if EPI != RUNTIME_FLAGS && EPI & ROTARY != 0 {
            store_rotary_tile::<P::W, O, S, EPI, NC>(acc, out, place.c, (place.m, n));
        } else {
            store_tile::<P::W, O, S, EPI, NC>(acc, out, place.c, (place.m, n));
        }
        ordinal += 1;
    }
    O::finish();
}

/// The tiles of `batch` products of `m × k` by `k × n` on operands `P`, given the tiles the
/// launch shares out in stream-K.
#[inline(always)]
fn batched<P: Operands>(mnk_batch: (u32, u32, u32, u32)) -> impl FnOnce(u32) -> Problem {
    move |sk_tiles| Problem::new(mnk_batch, (P::BK, P::C_BN), sk_tiles)
}

/// The kernel body: the shared region cut into its parts ([`Region`]: `NR` elements; A's ring
/// of `NA`, B's of `NB` from byte `BAT`, C's staging of `NC` from byte `CAT`, each reaching
/// over the alignment pad), the barriers, then the producer and the consumers, on the tiles
/// `tiles` makes of the stream-K tile count (0 where the workspace is too small).
#[inline(always)]
#[allow(clippy::type_complexity)]
fn gemm_tma<
    P: Operands,
    O: TmaOutput,
    S: DSource<O>,
    T: Tiles,
    F: FnOnce(u32) -> T,
    const EPI: u32,
    const STREAM_K: bool,
    const NR: usize,
    const NA: usize,
    const BAT: usize,
    const NB: usize,
    const CAT: usize,
    const NC: usize,
>(
    (a, b): (Tma<P::A, 3>, Tma<P::B, 3>),
    (c, epilogue, dsrc): (S::Dest, Epilogue<O>, S),
    (tiles, (parts, tickets, sk_tiles)): (F, (GlobalMut<f32>, GlobalMut<u32>, u32)),
    (region, bars, bias, said): (
        SharedArray<P::A, NR>,
        SharedArray<Mbarrier, BARRIERS>,
        SharedArray<O, BIAS_STAGE>,
        SharedArray<u32, 1>,
    ),
) {
    let smem = Smem {
        a: region.part::<P::A, 0, NA>(),
        b: region.part::<P::B, BAT, NB>(),
        bars,
    };
    let staging = Staging {
        c: region.part::<O, CAT, NC>(),
        bias,
    };
    let parts = Parts {
        parts,
        tickets,
        said,
    };
    // A workspace too small for the schedule asked for: every tile whole.
    let sk_tiles = if STREAM_K && parts.fits::<P::W>(grid_dim(), sk_tiles) {
        sk_tiles
    } else {
        0
    };
    let pb = tiles(sk_tiles);
    if thread_idx() == 0 {
        for s in 0..STAGES {
            smem.bars.init(full(s), 1);
            smem.bars.init(empty(s), CONSUMER_WARPS);
        }
        fence_barrier_init();
    }
    block_sync();
    if warp_id() >= CONSUMER_WARPS {
        setmaxnreg_dec::<40>();
        if thread_idx() == 32 * CONSUMER_WARPS {
            produce::<P, O, S, T, NA, NB>((&a, &b, dsrc), &smem, &pb);
        }
    } else {
        setmaxnreg_inc::<232>();
        consume::<P, O, S, T, EPI, STREAM_K, NA, NB, NC>(
            (c, epilogue, dsrc, staging),
            (&smem, parts),
            &pb,
        );
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub mod host;
