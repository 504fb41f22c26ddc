//! The TMA GEMM on a group of problems that share N and K — a mixture-of-experts layer, each
//! expert's tokens times its own weights — in one launch (`gemm_tma_grouped_*`).
//!
//! The problems' A and C are one matrix each, `[Σ m_g, K]` and `[Σ m_g, N]` (problem `g`'s rows
//! after problem `g − 1`'s), and B is `[groups, K, N]`: one tensor map each. Each problem's rows
//! are cut into 128-row tiles of their own, so that no tile mixes two problems; the grid is
//! these *row tiles* by N's column tiles, in the grouped order of one product
//! (`gemm::wgmma::block_tile`). A table on the device gives each row tile three fields, each a column
//! of `row_tiles` values (`field · row_tiles + r`): its first row, the row its problem ends at,
//! and its problem (B's product):
//!
//! ```text
//! problem   m     its rows     row tiles: (first row, end, problem)
//!    0      200   0..200       r = 0: (0, 200, 0)     r = 1: (128, 200, 0)
//!    1      0     —            —
//!    2      130   200..330     r = 2: (200, 330, 2)   r = 3: (328, 330, 2)
//! ```
//!
//! The producer copies A's 128 rows from the tile's first row — rows past the problem's end
//! are the next problem's (or zeros past the matrix), multiplied and never stored — and B's
//! slice of product `problem`. The consumers store C's rows below `end` with their own stores
//! ([`Direct`]): a TMA store writes whole 16-row boxes and clips only at the matrix's edge,
//! so it would write the next problem's first rows.

use super::residual::DLoads;
use super::store::{CWgmma32, TmaOutput};
use super::store::{DSource, TileAt};
use super::stream_k::Schedule;
use super::{Place, Tiles, BARRIERS, BM};
use crate::gemm::epilogue::Epilogue;
use crate::gemm::wgmma::block_tile;
use ck_core::device::*;
use ck_core::tile::DistributedTensor;

/// The row table's fields (see the module documentation).
pub mod field {
    /// The tile's first row of A and C.
    pub const FIRST_ROW: u32 = 0;
    /// The row its problem's rows end at.
    pub const END: u32 = 1;
    /// Its problem: B's product.
    pub const PROBLEM: u32 = 2;
    /// Fields per row tile.
    pub const COUNT: u32 = 3;
}

/// The tiles of a group: `row_tiles` row tiles (their table in `rows`) by N's column tiles.
#[derive(Clone, Copy)]
pub struct GroupedRows {
    rows: Global<u32>,
    row_tiles: u32,
    tiles_n: u32,
    n: u32,
    schedule: Schedule,
}

impl GroupedRows {
    /// The group's tiles of `bk × bn` for problems of `n` columns and depth `k`, every tile
    /// whole.
    #[inline(always)]
    pub fn new(
        (rows, row_tiles): (Global<u32>, u32),
        (n, k): (u32, u32),
        (bk, bn): (u32, u32),
    ) -> GroupedRows {
        let tiles_n = n.div_ceil(bn);
        GroupedRows {
            rows,
            row_tiles,
            tiles_n,
            n,
            schedule: Schedule::new(row_tiles * tiles_n, k.div_ceil(bk), grid_dim(), 0),
        }
    }
}

impl Tiles for GroupedRows {
    #[inline(always)]
    fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    #[inline(always)]
    fn n(&self) -> u32 {
        self.n
    }

    /// Tile `i`: its row tile's fields; A and C have one product, B one per problem.
    #[inline(always)]
    fn place(&self, i: u32, bn: u32) -> Place {
        let (row, bn) = block_tile(i, (self.row_tiles, self.tiles_n), bn);
        let r = row / BM;
        let at = |f: u32| self.rows.load(f * self.row_tiles + r);
        let (first, end) = (at(field::FIRST_ROW), at(field::END));
        Place {
            a: (first, 0),
            b: at(field::PROBLEM),
            c: (0, first, bn),
            m: end,
        }
    }
}

/// No D; C passed as its buffer and stored row by row, nothing at or past the tile's `m` (the
/// grouped kernels: the row its problem ends at) — [`TmaOutput::store_slice_rows`].
#[derive(Clone, Copy)]
pub struct Direct;

impl<O: TmaOutput> DSource<O> for Direct {
    type Dest = GlobalMut<O>;
    const D_STAGES: u32 = 0;

    #[inline(always)]
    fn produce(&self, _bars: &SharedArray<Mbarrier, BARRIERS>, _tile: (u32, u32, u32), _t: u32) {}

    /// As [`DLoads`] (the grouped kernels have no D: never called).
    #[inline(always)]
    fn slice<const Q: u32>(
        &self,
        epilogue: &Epilogue<O>,
        at: TileAt,
        mn: (u32, u32),
    ) -> DistributedTensor<CWgmma32, f32> {
        DLoads.slice::<Q>(epilogue, at, mn)
    }

    #[inline(always)]
    fn store<const NC: usize, const Q: u32>(
        &self,
        x: &DistributedTensor<CWgmma32, f32>,
        c: GlobalMut<O>,
        staged: (SharedArray<O, NC>, u32),
        (tile, _): TileAt,
        mn: (u32, u32),
    ) {
        O::store_slice_rows::<NC, Q>(x, c, staged, tile, mn);
    }
}
