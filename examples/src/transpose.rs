//! Matrix transpose through shared memory, `y[j, i] = x[i, j]` (f32, any M × N), and what a
//! swizzle does to its bank conflicts.
//!
//! A block moves one 64 × 64 tile ([`Tile64`]: warp `w`, lane `l` hold rows `8·i + w`, columns
//! `l` and `32 + l`, so each warp access reads or writes 32 consecutive floats of a row):
//! 1. load the tile of `x` at `(row0, col0)` through a window (rows and columns past the matrix
//!    read as 0);
//! 2. store it into shared memory through [`SmemTile`], a view written in this crate;
//! 3. after a barrier, load it back through the *transposed* view with the same distribution —
//!    each thread now holds `x[row0 + c, col0 + r]` at the place of `(r, c)`;
//! 4. store that through a window on `y` at `(col0, row0)` (padding dropped).
//!
//! Step 3 reads a column of the stored tile per warp access. Stored plainly (`r·64 + c`), the 32
//! words of a column share one bank: a 32-way conflict, 32 wavefronts per access. Swizzled —
//! element `(r, c)` at word `r·64 + (c XOR (r mod 32))` — the column's words land in 32
//! different banks, and the row stores of step 2 stay conflict-free:
//!
//! ```text
//! bank of (r, c)      c = 0   1   2   3  …        reading column c = 0, rows 0..31:
//! r = 0                   0   1   2   3           plain:    banks 0, 0, 0, 0, … (32-way)
//! r = 1                   1   0   3   2           swizzled: banks 0, 1, 2, 3, … (1 wavefront)
//! r = 2                   2   3   0   1
//! ```
//!
//! The emulator's profiler counts both (`LaunchStats::shared_load_conflicts`), as `ncu` does on
//! the GPU.

use ck_core::device::buffer_view::BufferView;
use ck_core::device::*;
use ck_core::tile::{make_tile_window, View, View2};
use ck_core::Index;
use ck_macros::{tile_distribution, tile_kernel};

tile_distribution! {
    /// A 64 × 64 tile over 256 threads, 16 floats per thread.
    pub struct Tile64 {
        warp_size: 32, block_size: 256,
        h: { row: [repeat: 8, warp: 8], col: [half: 2, lane: 32] },
        p: [[row.warp], [col.lane]],
        y: [row.repeat, col.half],
    }
}

/// Rows and columns of a block's tile.
pub const TILE: u32 = Tile64::X_LENGTHS[0] as u32;
const TILE_ELEMS: usize = (TILE * TILE) as usize;

/// A `TILE × TILE` f32 tile in shared memory: element `(r, c)` at word `r·TILE + c`, or
/// `r·TILE + (c XOR (r mod 32))` when `SWIZZLED`. With `TRANSPOSED` the view's `(i, j)` is the
/// tile's `(j, i)`. Implementing [`View`] is all a window needs: offsets, validity, and the
/// vector guarantee (none: the swizzle moves single words).
pub struct SmemTile<const SWIZZLED: bool, const TRANSPOSED: bool> {
    buffer: BufferView<SharedArray<f32, TILE_ELEMS>, f32>,
}

impl<const SWIZZLED: bool, const TRANSPOSED: bool> SmemTile<SWIZZLED, TRANSPOSED> {
    /// The tile stored in `smem`.
    #[inline(always)]
    pub fn new(smem: SharedArray<f32, TILE_ELEMS>) -> Self {
        SmemTile {
            buffer: BufferView::new(smem),
        }
    }
}

impl<const SWIZZLED: bool, const TRANSPOSED: bool> View<f32> for SmemTile<SWIZZLED, TRANSPOSED> {
    const RANK: usize = 2;
    const VECTOR: Index = 1;
    type Memory = SharedArray<f32, TILE_ELEMS>;
    #[inline(always)]
    fn buffer(&self) -> &BufferView<Self::Memory, f32> {
        &self.buffer
    }
    #[inline(always)]
    fn offset(&self, x: &[Index]) -> Index {
        let (r, c) = if TRANSPOSED {
            (x[1], x[0])
        } else {
            (x[0], x[1])
        };
        r * TILE as Index + if SWIZZLED { c ^ (r & 31) } else { c }
    }
    #[inline(always)]
    fn valid(&self, x: &[Index]) -> bool {
        (x[0] as u32) < TILE && (x[1] as u32) < TILE
    }
    #[inline(always)]
    fn vector_ok(&self, n: Index) -> bool {
        n == 1
    }
}

/// The body of both kernels: one tile, blocks in row-major tile order.
#[inline(always)]
fn transpose_tile<const SWIZZLED: bool>(
    x: Global<f32>,
    y: GlobalMut<f32>,
    (m, n): (u32, u32),
    smem: SharedArray<f32, TILE_ELEMS>,
) {
    let tiles_per_row = n.div_ceil(TILE);
    let row0 = (block_idx() / tiles_per_row * TILE) as i32;
    let col0 = (block_idx() % tiles_per_row * TILE) as i32;
    let t = make_tile_window::<Tile64, _>(View2::<_, f32, 1>::new(x, m, n, n), [row0, col0])
        .load::<f32>();
    make_tile_window::<Tile64, _>(SmemTile::<SWIZZLED, false>::new(smem), [0, 0]).store(&t);
    block_sync();
    let tt =
        make_tile_window::<Tile64, _>(SmemTile::<SWIZZLED, true>::new(smem), [0, 0]).load::<f32>();
    make_tile_window::<Tile64, _>(View2::<_, f32, 1>::new(y, n, m, m), [col0, row0]).store(&tt);
}

/// `y = xᵀ` (`x` is `m × n`, `y` is `n × m`, both row-major) through a swizzled tile.
#[tile_kernel(block = 256, distributions(Tile64))]
pub fn transpose_swizzled(x: Global<f32>, y: GlobalMut<f32>, m: u32, n: u32) {
    transpose_tile::<true>(x, y, (m, n), shared!(f32; TILE_ELEMS));
}

/// [`transpose_swizzled`](TransposeSwizzled) with the tile stored plainly: the same result, 32-way
/// bank conflicts on every shared load.
#[tile_kernel(block = 256, distributions(Tile64))]
pub fn transpose_plain(x: Global<f32>, y: GlobalMut<f32>, m: u32, n: u32) {
    transpose_tile::<false>(x, y, (m, n), shared!(f32; TILE_ELEMS));
}

/// Host side: launch and CPU reference.
#[cfg(not(target_arch = "nvptx64"))]
pub mod host {
    use super::*;
    use ck_core::host::{Device, DeviceBuffer, LaunchConfig, LaunchError, LaunchStats};

    /// How the tile is kept in shared memory.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Layout {
        /// `c XOR (r mod 32)`: conflict-free ([`transpose_swizzled`](TransposeSwizzled)).
        Swizzled,
        /// `r·64 + c`: column reads conflict 32 ways ([`transpose_plain`](TransposePlain)).
        Plain,
    }

    /// Launches the transpose of an `m × n` matrix already on `device` into `y` (`n × m`).
    pub fn launch(
        device: &Device,
        x: &DeviceBuffer<f32>,
        y: &mut DeviceBuffer<f32>,
        (m, n): (u32, u32),
        layout: Layout,
    ) -> Result<LaunchStats, LaunchError> {
        let blocks = m.div_ceil(TILE) as u64 * n.div_ceil(TILE) as u64;
        let cfg = LaunchConfig::new(
            u32::try_from(blocks).unwrap_or(u32::MAX),
            Tile64::BLOCK_SIZE,
        );
        match layout {
            Layout::Swizzled => TransposeSwizzled::launch(device, cfg, x, y, m, n),
            Layout::Plain => TransposePlain::launch(device, cfg, x, y, m, n),
        }
    }

    /// The transpose of the `m × n` row-major `x`.
    pub fn transpose(
        device: &Device,
        x: &[f32],
        (m, n): (u32, u32),
        layout: Layout,
    ) -> Result<(Vec<f32>, LaunchStats), LaunchError> {
        if x.len() != m as usize * n as usize {
            return Err(LaunchError::invalid(
                ck_core::rules::SHAPE_MISMATCH,
                format!("x has {} elements, but the shape is {m} × {n}", x.len()),
            ));
        }
        if x.is_empty() {
            return Ok((Vec::new(), LaunchStats::default()));
        }
        let xd = DeviceBuffer::from_slice(device, x)?;
        let mut yd = DeviceBuffer::from_slice(device, &vec![f32::NAN; x.len()])?;
        let stats = launch(device, &xd, &mut yd, (m, n), layout)?;
        Ok((yd.to_vec()?, stats))
    }

    /// `y[j·m + i] = x[i·n + j]`.
    pub fn reference(x: &[f32], (m, n): (u32, u32)) -> Vec<f32> {
        let (m, n) = (m as usize, n as usize);
        (0..n * m).map(|k| x[(k % m) * n + k / m]).collect()
    }
}
