//! The column sums of the backward kernels' workspaces: `out[j] = Σ_i partial[i, j]` over the
//! f32 rows the first kernel wrote (each block's per-thread accumulators), in a fixed order, so
//! that a parameter's gradient (`dgamma`, `dbeta`) is the same bits on every run.
//!
//! A block of 256 threads owns 128 columns: each warp walks every 8th row, 4 columns per lane,
//! and `block_reduce_x` over X0 adds the 8 warps' sums.

use ck_core::device::*;
#[cfg(not(target_arch = "nvptx64"))]
use ck_core::host::DeviceBuffer;
use ck_core::tile::{block_reduce_x, make_tile_window, DistributedTensor, View2};
use ck_macros::{tile_distribution, tile_kernel};

tile_distribution! {
    /// The column sum's tile: 8 workspace rows (one per warp) × 128 columns (4 per lane).
    pub struct ColumnSums {
        warp_size: 32, block_size: 256,
        h: { m: [warp: 8], n: [lane: 32, vec: 4] },
        p: [[m.warp], [n.lane]],
        y: [n.vec],
    }
}

/// Scratch for the column sum's reduction over its 8 warps: `BLOCK_SIZE · 4` words.
const COLUMN_SCRATCH: usize = 1024;

/// `out[j] = Σ_i partial[i, j]` over `rows` rows of `n` columns, 128 columns per block.
#[inline(always)]
fn column_sum<T: Real>(
    partial: Global<f32>,
    out: GlobalMut<T>,
    (rows, n): (u32, u32),
    scratch: &SharedArray<u32, COLUMN_SCRATCH>,
) {
    let [step, cols] = ColumnSums::X_LENGTHS;
    let col0 = (block_idx() * cols as u32) as i32;
    let mut w =
        make_tile_window::<ColumnSums, _>(View2::<_, f32, 4>::new(partial, rows, n, n), [0, col0]);
    let mut acc = DistributedTensor::<ColumnSums, f32>::zeros();
    for _ in 0..rows.div_ceil(step as u32) {
        acc = acc.zip_map(&w.load::<f32>(), |a, b| a + b);
        w.move_by([step, 0]);
    }
    let sum = block_reduce_x::<ColumnSums, f32, 0, COLUMN_SCRATCH>(&acc, |a, b| a + b, scratch);
    let ov = View2::<_, T, 4>::new(out, 1, n, n);
    make_tile_window::<ColumnSums, _>(ov, [0, col0]).store(&sum.round_to::<T>());
}

macro_rules! column_sum_kernel {
    ($name:ident, $t:ty) => {
        #[doc = concat!("The column sums of the RMSNorm backward's workspace, into `", stringify!($t), "`.")]
        #[tile_kernel(block = 256, distributions(ColumnSums))]
        pub fn $name(partial: Global<f32>, out: GlobalMut<$t>, rows: u32, n: u32) {
            let scratch = shared!(u32; COLUMN_SCRATCH);
            column_sum::<$t>(partial, out, (rows, n), &scratch);
        }
    };
}

column_sum_kernel!(column_sum_f32, f32);
column_sum_kernel!(column_sum_bf16, Bf16);

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use crate::op::OpElement;
    use ck_core::host::{Device, LaunchConfig, LaunchError, LaunchStats};

    /// The column sum of one element type.
    pub trait ColumnSum: OpElement {
        /// Launches the column sum of `rows` workspace rows of `n` into `out`.
        fn column_sum(
            device: &Device,
            partial: &DeviceBuffer<f32>,
            out: &mut DeviceBuffer<Self>,
            rows: u32,
            n: u32,
        ) -> Result<LaunchStats, LaunchError>;
    }

    impl ColumnSum for f32 {
        fn column_sum(
            d: &Device,
            p: &DeviceBuffer<f32>,
            o: &mut DeviceBuffer<f32>,
            rows: u32,
            n: u32,
        ) -> Result<LaunchStats, LaunchError> {
            ColumnSumF32::launch(d, column_config(n), p, o, rows, n)
        }
    }

    impl ColumnSum for Bf16 {
        fn column_sum(
            d: &Device,
            p: &DeviceBuffer<f32>,
            o: &mut DeviceBuffer<Bf16>,
            rows: u32,
            n: u32,
        ) -> Result<LaunchStats, LaunchError> {
            ColumnSumBf16::launch(d, column_config(n), p, o, rows, n)
        }
    }

    /// The most blocks of a backward's first kernel: 4 per SM of an H100, so that the workspace
    /// stays a few percent of the traffic (`4 · 132 · rows per tile` rows of N) while every SM
    /// has work.
    pub const MAX_BLOCKS: u32 = 528;

    /// `(blocks, workspace rows)` of a backward's first kernel over `m` rows in tiles of `rows`,
    /// at most `max_blocks` blocks ([`MAX_BLOCKS`] but in tests).
    pub fn grid(m: u32, rows: u32, max_blocks: u32) -> (u32, u32) {
        let blocks = m.div_ceil(rows).clamp(1, max_blocks.max(1));
        (blocks, blocks * rows)
    }

    /// The device's workspace `name` of at least `len` f32 (kept between launches: give it back
    /// with `Device::keep_workspace`), or a fresh one where the device keeps none (a stream
    /// being captured into a CUDA graph). The first kernel writes every element it sums.
    pub fn take_partials(
        device: &Device,
        name: &'static str,
        len: usize,
    ) -> Result<DeviceBuffer<f32>, LaunchError> {
        match device.take_workspace::<f32>(name, len)? {
            Some(w) => Ok(w),
            None => DeviceBuffer::zeros(device, len),
        }
    }

    fn column_config(n: u32) -> LaunchConfig {
        let [_, cols] = ColumnSums::X_LENGTHS;
        LaunchConfig::new(n.div_ceil(cols as u32), ColumnSums::BLOCK_SIZE)
    }
}
#[cfg(not(target_arch = "nvptx64"))]
pub use host::{grid, take_partials, ColumnSum, MAX_BLOCKS};
