//! Tiles of the row-wise operators (RMSNorm, LayerNorm): how a block covers rows of N columns,
//! and which tile a row length gets ([`RowTile::for_columns`]).
//!
//! The rule, per element type: N ≤ 1024 → 8 rows per block, one warp per row; N ≤ 4096 → one
//! row of 4096 per block of 128 threads; larger → one row of 8192 per block of 256 threads, the
//! kernel looping over column tiles when N > 8192. Every thread keeps 4–8 independent 16-byte
//! loads in flight; columns past N are padding (read as 0, never written).

use ck_core::TileDistribution;
use ck_macros::tile_distribution;

tile_distribution! {
    /// f32, 8 rows × 1024: one warp per row, 32 floats per lane.
    pub struct RowsF32 {
        warp_size: 32, block_size: 256,
        h: { m: [warp: 8], n: [repeat: 8, lane: 32, vec: 4] },
        p: [[m.warp], [n.lane]],
        y: [n.repeat, n.vec],
    }
}

tile_distribution! {
    /// f32, one row of 4096: 4 warps × 32 lanes × 4 × 8 repeats (8 loads in flight per thread).
    pub struct RowF32x4096 {
        warp_size: 32, block_size: 128,
        h: { m: [one: 1], n: [repeat: 8, warp: 4, lane: 32, vec: 4] },
        p: [[n.warp], [n.lane]],
        y: [m.one, n.repeat, n.vec],
    }
}

tile_distribution! {
    /// f32, one row of 8192: 8 warps × 32 lanes × 4 × 8 repeats.
    pub struct RowF32x8192 {
        warp_size: 32, block_size: 256,
        h: { m: [one: 1], n: [repeat: 8, warp: 8, lane: 32, vec: 4] },
        p: [[n.warp], [n.lane]],
        y: [m.one, n.repeat, n.vec],
    }
}

tile_distribution! {
    /// bf16, 8 rows × 1024: one warp per row, 4 × 8 per lane.
    pub struct RowsBf16 {
        warp_size: 32, block_size: 256,
        h: { m: [warp: 8], n: [repeat: 4, lane: 32, vec: 8] },
        p: [[m.warp], [n.lane]],
        y: [n.repeat, n.vec],
    }
}

tile_distribution! {
    /// bf16, one row of 4096: 4 warps × 32 lanes × 8 × 4 repeats.
    pub struct RowBf16x4096 {
        warp_size: 32, block_size: 128,
        h: { m: [one: 1], n: [repeat: 4, warp: 4, lane: 32, vec: 8] },
        p: [[n.warp], [n.lane]],
        y: [m.one, n.repeat, n.vec],
    }
}

tile_distribution! {
    /// bf16, one row of 8192: 8 warps × 32 lanes × 8 × 4 repeats (32 values per thread: with
    /// 64, RMSNorm took 164 registers and LayerNorm spilled).
    pub struct RowBf16x8192 {
        warp_size: 32, block_size: 256,
        h: { m: [one: 1], n: [repeat: 4, warp: 8, lane: 32, vec: 8] },
        p: [[n.warp], [n.lane]],
        y: [m.one, n.repeat, n.vec],
    }
}

/// Element type of a row-wise operator's input and output (arithmetic is f32 either way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    /// f32.
    F32,
    /// bf16 (f32 arithmetic).
    Bf16,
}

impl Dtype {
    /// Parses `f32` / `bf16`.
    pub fn parse(s: &str) -> Option<Dtype> {
        match s {
            "f32" => Some(Dtype::F32),
            "bf16" => Some(Dtype::Bf16),
            _ => None,
        }
    }

    /// Bytes per element.
    pub fn bytes(self) -> usize {
        match self {
            Dtype::F32 => 4,
            Dtype::Bf16 => 2,
        }
    }

    /// `v` as a kernel of this type sees it (rounded to bf16, or as is).
    pub fn round(self, v: f32) -> f32 {
        match self {
            Dtype::F32 => v,
            Dtype::Bf16 => ck_core::device::Bf16::from_f32(v).to_f32(),
        }
    }

    /// `f32` / `bf16`.
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::Bf16 => "bf16",
        }
    }
}

/// Which tile a row length gets (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowTile {
    /// 8 rows × 1024 columns, one warp per row.
    Rows,
    /// One row of 4096 columns, 4 warps.
    Row4096,
    /// One row of 8192 columns (f32: 8 warps, bf16: 4), looping when N > 8192.
    Row8192,
}

impl RowTile {
    /// The tile for rows of `n` columns.
    pub fn for_columns(n: u32) -> RowTile {
        match n {
            0..=1024 => RowTile::Rows,
            1025..=4096 => RowTile::Row4096,
            _ => RowTile::Row8192,
        }
    }

    /// `(rows, columns, threads)` of this tile's distribution for `dtype`.
    fn dims(self, dtype: Dtype) -> (u32, u32, u32) {
        fn of<D: TileDistribution<X = [i32; 2]>>() -> (u32, u32, u32) {
            let [rows, cols] = D::X_LENGTHS;
            (rows as u32, cols as u32, D::BLOCK_SIZE)
        }
        match (dtype, self) {
            (Dtype::F32, RowTile::Rows) => of::<RowsF32>(),
            (Dtype::F32, RowTile::Row4096) => of::<RowF32x4096>(),
            (Dtype::F32, RowTile::Row8192) => of::<RowF32x8192>(),
            (Dtype::Bf16, RowTile::Rows) => of::<RowsBf16>(),
            (Dtype::Bf16, RowTile::Row4096) => of::<RowBf16x4096>(),
            (Dtype::Bf16, RowTile::Row8192) => of::<RowBf16x8192>(),
        }
    }

    /// `(rows per block, threads per block)` of this tile for `dtype`.
    pub fn shape(self, dtype: Dtype) -> (u32, u32) {
        let (rows, _, threads) = self.dims(dtype);
        (rows, threads)
    }

    /// Columns of this tile for `dtype` (a row of exactly this many needs no padding).
    pub fn columns(self, dtype: Dtype) -> u32 {
        self.dims(dtype).1
    }

    /// The launch configuration for `m` rows.
    #[cfg(not(target_arch = "nvptx64"))]
    pub fn launch_config(self, dtype: Dtype, m: u32) -> ck_core::host::LaunchConfig {
        let (rows, block) = self.shape(dtype);
        ck_core::host::LaunchConfig::new(m.div_ceil(rows), block)
    }
}
