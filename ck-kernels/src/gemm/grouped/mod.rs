//! `gemm_grouped_bf16` (bf16 C) and `gemm_grouped_bf16_f32` (f32 C): a list of problems of
//! different shapes, `C_g = act(alpha · A_g · B_g + beta · D_g + bias_g)`, in one launch
//! (CK Tile's `grouped_gemm`; a mixture-of-experts layer is the usual user: one problem per
//! expert, its rows the tokens routed to it).
//!
//! Every problem's operands lie in four shared buffers (A, B, C and D, bias), each at an offset
//! that starts 16 bytes aligned ([`host::GroupedGemm`]). A table in device memory, built on
//! the host, says per problem where its tiles start in the grid and where its operands are;
//! the grid is every problem's `128 × 256` tiles in turn. A block finds its problem in the
//! table — a warp tests 32 problems per step with one vote — slices its operands out of the
//! buffers (each slice checked, once) and computes its tile with the body of the `wgmma` GEMM
//! ([`crate::gemm::wgmma`]): the same `cp.async` pipeline, MMAs and epilogue.
//!
//! ```text
//! problem   (m, n, k)        tiles      first tile
//!    0      (200, 512, 64)   2 · 2 = 4  0           grid tiles 0..=3
//!    1      (0, 256, 64)     0          4           (empty: never found)
//!    2      (100, 300, 8)    1 · 2 = 2  4           grid tiles 4..=5
//!    3      (1, 1, 1)        1 · 1 = 1  6           grid tile 6
//! block 5 → the last problem whose first tile ≤ 5 is problem 2; its tile 5 − 4 = 1 covers
//!           rows 0..100 and columns 256..300
//! ```
//!
//! Shapes are free: where a problem's rows are not whole 16-byte vectors (N or K not a multiple
//! of 8), its blocks copy element by element ([`ck_core::tile::View2::copy_16`]) in a second
//! instance of the body, which only the `gemm_grouped_any_*` kernels hold: the host launches
//! them for groups with such a problem, and the others where every row is whole vectors.
//!
//! Groups whose problems share N and K and have enough rows to be bound by the MMAs
//! ([`host::TMA_MIN_ROWS`]) run `C = alpha · A·B` on the TMA kernels instead
//! ([`crate::gemm::tma::grouped`]): a persistent grid over each problem's own row tiles. The
//! TMA kernels also take the experts' weights as `nn.Linear` keeps them, `[groups, N, K]`
//! (`gemm_tma_grouped_bf16_nk*`, [`host::GroupedGemm::launch_nk`]).

use crate::gemm::epilogue::{Epilogue, HAS_D};
use crate::gemm::wgmma::{
    block_tile, gemm_tile, smem_elems, staged_elems, whole_vector_rows, ACopy, BCopy256, CRows256,
    CWgmma256, Tile128x256, WgmmaTile, BM,
};
use ck_core::device::*;
use ck_macros::tile_kernel;

/// The table's fields: field `f` of problem `g` is element `f · groups + g` (a field of 32
/// problems is one coalesced load).
pub mod field {
    /// The problem's first tile in the grid (non-decreasing; 0 for the first problem).
    pub const FIRST_TILE: u32 = 0;
    /// Rows of A and C.
    pub const M: u32 = 1;
    /// Columns of B and C.
    pub const N: u32 = 2;
    /// Columns of A, rows of B.
    pub const K: u32 = 3;
    /// Offset of A in its buffer, in elements.
    pub const A_AT: u32 = 4;
    /// Offset of B.
    pub const B_AT: u32 = 5;
    /// Offset of C and D (D lies like C).
    pub const C_AT: u32 = 6;
    /// Offset of the bias.
    pub const BIAS_AT: u32 = 7;
    /// Fields per problem.
    pub const COUNT: u32 = 8;
}

/// Block tile columns of the grouped kernels.
pub const BN: u32 = <Tile128x256 as WgmmaTile>::BN;

/// Tiles of one problem: `⌈m / 128⌉ · ⌈n / 256⌉`, none when any of m and n is 0.
pub const fn tiles(m: u32, n: u32) -> u32 {
    m.div_ceil(BM) * n.div_ceil(BN)
}

/// The problem that grid tile `tile` belongs to: the last one whose first tile is ≤ `tile`
/// (an empty problem has its successor's first tile, so it is passed over). Each lane tests one
/// of 32 problems; the vote counts those that started, a prefix as first tiles never decrease.
#[inline(always)]
fn problem_of(table: &Global<u32>, groups: u32, tile: u32) -> u32 {
    let mut base = 0;
    loop {
        let g = base + lane_id();
        let started = g < groups && table.load(field::FIRST_TILE * groups + g) <= tile;
        let count = ballot(started).count_ones();
        if count < 32 || base + 32 >= groups {
            // Count 0 only past a full step: the answer is that step's last problem.
            return (base + count).wrapping_sub(1);
        }
        base += 32;
    }
}

/// The kernel body: this block's problem and tile, its operands sliced out of the buffers.
/// `ANY_SHAPE`: some problems' rows are not whole 16-byte vectors (N or K not a multiple of 8).
#[inline(always)]
fn gemm_grouped<
    O: crate::gemm::epilogue::CElement,
    const SMEM: usize,
    const STAGED: usize,
    const ANY_SHAPE: bool,
>(
    (a, b, c): (Global<Bf16>, Global<Bf16>, GlobalMut<O>),
    (table, groups): (Global<u32>, u32),
    epilogue: Epilogue<O>,
    smem: SharedArray<Bf16, SMEM>,
) {
    let g = problem_of(&table, groups, block_idx());
    let at = |f: u32| table.load(f * groups + g);
    let (m, n, k) = (at(field::M), at(field::N), at(field::K));
    let (a, b) = (
        a.slice(at(field::A_AT), m * k),
        b.slice(at(field::B_AT), k * n),
    );
    let c_at = at(field::C_AT);
    let c = c.slice(c_at, m * n);
    let mut epilogue = epilogue;
    if epilogue.flags & HAS_D != 0 {
        epilogue.d = epilogue.d.slice(c_at, m * n);
    }
    if epilogue.flags & crate::gemm::epilogue::HAS_BIAS != 0 {
        epilogue.bias = epilogue.bias.slice(at(field::BIAS_AT), n);
    }
    let tile = block_idx() - at(field::FIRST_TILE);
    let origin = block_tile(tile, (m.div_ceil(BM), n.div_ceil(BN)), BN);
    // One branch per block: problems of whole-vector rows keep the `cp.async` copies. Only the
    // kernels for groups with other problems hold the second instance of the body (it costs
    // registers and code in the hot loop of every problem).
    let operands = (a, b, c);
    if !ANY_SHAPE || whole_vector_rows(n, k) {
        gemm_tile::<Tile128x256, O, SMEM, STAGED, true>(
            operands,
            (m, n, k),
            origin,
            epilogue,
            smem,
        );
    } else {
        gemm_tile::<Tile128x256, O, SMEM, STAGED, false>(
            operands,
            (m, n, k),
            origin,
            epilogue,
            smem,
        );
    }
}

/// Declares a grouped GEMM kernel writing C of element type `$o`.
macro_rules! grouped_gemm_kernel {
    ($(#[$doc:meta])* $name:ident, $o:ty, any_shape: $any:literal) => {
        $(#[$doc])*
        #[tile_kernel(block = 256, distributions(ACopy, BCopy256, CWgmma256, CRows256))]
        #[allow(clippy::too_many_arguments)]
        pub fn $name(
            a: Global<Bf16>,
            b: Global<Bf16>,
            c: GlobalMut<$o>,
            d: Global<$o>,
            bias: Global<$o>,
            table: Global<u32>,
            groups: u32,
            alpha: f32,
            beta: f32,
            flags: u32,
        ) {
            let smem = shared!(Bf16; smem_elems(BN));
            let epilogue = Epilogue::of(alpha, beta, (d, bias), flags);
            gemm_grouped::<$o, { smem_elems(BN) }, { staged_elems(BN) }, $any>(
                (a, b, c),
                (table, groups),
                epilogue,
                smem,
            );
        }
    };
}

grouped_gemm_kernel!(
    /// bf16 C, every problem's N and K multiples of 8: grid = the problems' tiles ([`tiles`]).
    gemm_grouped_bf16, Bf16, any_shape: false
);
grouped_gemm_kernel!(
    /// f32 C, every problem's N and K multiples of 8.
    gemm_grouped_bf16_f32, f32, any_shape: false
);
grouped_gemm_kernel!(
    /// bf16 C, problems of any shapes.
    gemm_grouped_any_bf16, Bf16, any_shape: true
);
grouped_gemm_kernel!(
    /// f32 C, problems of any shapes.
    gemm_grouped_any_bf16_f32, f32, any_shape: true
);

#[cfg(not(target_arch = "nvptx64"))]
pub mod host;
