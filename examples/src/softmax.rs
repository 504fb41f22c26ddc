//! Row softmax, `y[i, j] = exp(x[i, j] − max_j x[i, :]) / Σ_j exp(x[i, j] − max_j x[i, :])`, for
//! f32 rows of up to 1024 columns.
//!
//! A block takes 8 rows (the [`Rows`] distribution: warp `w` holds row `w`; lane `l` holds 8
//! vectors of 4 columns, at `4l + 128·r`). It loads them through a window (16-byte vectors;
//! columns past `n` read as −∞, so they change neither the max nor the sum), reduces each row to
//! its max and then its sum of exponentials with `block_reduce_x` (lane shuffles: a row never
//! spans two warps, so no shared memory is touched), and stores `e / sum` through a window that
//! drops the padding.

use ck_core::device::*;
use ck_core::tile::{block_reduce_x, make_tile_window, View2};
use ck_macros::{tile_distribution, tile_kernel};

tile_distribution! {
    /// 8 rows × 1024 columns over 256 threads: one warp per row, 32 floats per lane.
    pub struct Rows {
        warp_size: 32, block_size: 256,
        h: { m: [warp: 8], n: [repeat: 8, lane: 32, vec: 4] },
        p: [[m.warp], [n.lane]],
        y: [n.repeat, n.vec],
    }
}

/// Rows one block normalises.
pub const ROWS_PER_BLOCK: u32 = Rows::X_LENGTHS[0] as u32;
/// The longest row the kernel takes.
pub const MAX_COLS: u32 = Rows::X_LENGTHS[1] as u32;
/// `block_reduce_x` scratch: `BLOCK_SIZE` words (needed only where warps split a row).
const SCRATCH: usize = Rows::BLOCK_SIZE as usize;

/// Softmax of rows `8·block_idx ..` of the `m × n` row-major `x` into `y`.
#[tile_kernel(block = 256, distributions(Rows))]
pub fn softmax_rows(x: Global<f32>, y: GlobalMut<f32>, m: u32, n: u32) {
    let scratch = shared!(u32; SCRATCH);
    let row0 = (block_idx() * ROWS_PER_BLOCK) as i32;
    let xv = View2::<_, f32, 4>::with_invalid_value(x, m, n, n, f32::NEG_INFINITY);
    let t = make_tile_window::<Rows, _>(xv, [row0, 0]).load::<f32>();
    let max = block_reduce_x::<Rows, f32, 1, SCRATCH>(&t, f32::max, &scratch);
    let e = t.zip_map(&max, |v, mx| {
        math::exp2((v - mx) * core::f32::consts::LOG2_E)
    });
    let sum = block_reduce_x::<Rows, f32, 1, SCRATCH>(&e, |a, b| a + b, &scratch);
    let yv = View2::<_, f32, 4>::new(y, m, n, n);
    make_tile_window::<Rows, _>(yv, [row0, 0]).store(&e.zip_map(&sum, |v, s| v / s));
}

/// Host side: launch and CPU reference.
#[cfg(not(target_arch = "nvptx64"))]
pub mod host {
    use super::*;
    use ck_core::host::{Device, DeviceBuffer, LaunchConfig, LaunchError, LaunchStats};

    /// Launches [`softmax_rows`](super::SoftmaxRows) over an `m × n` matrix already on `device`.
    pub fn launch(
        device: &Device,
        x: &DeviceBuffer<f32>,
        y: &mut DeviceBuffer<f32>,
        (m, n): (u32, u32),
    ) -> Result<LaunchStats, LaunchError> {
        if n > MAX_COLS {
            return Err(LaunchError::invalid(
                ck_core::rules::SHAPE_UNSUPPORTED,
                format!("softmax_rows takes rows of up to {MAX_COLS} columns; got {n}"),
            ));
        }
        let cfg = LaunchConfig::new(m.div_ceil(ROWS_PER_BLOCK), Rows::BLOCK_SIZE);
        SoftmaxRows::launch(device, cfg, x, y, m, n)
    }

    /// Softmax of each row of the `m × n` row-major `x`.
    pub fn softmax(
        device: &Device,
        x: &[f32],
        (m, n): (u32, u32),
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
        let stats = launch(device, &xd, &mut yd, (m, n))?;
        Ok((yd.to_vec()?, stats))
    }

    /// The fp64 reference: for each row, `exp(x − max) / Σ exp(x − max)`.
    pub fn reference(x: &[f32], (m, n): (u32, u32)) -> Vec<f64> {
        let n = n as usize;
        let mut y = Vec::with_capacity(x.len());
        for row in x.chunks(n.max(1)).take(m as usize) {
            let max = row.iter().fold(f64::NEG_INFINITY, |a, &v| a.max(v as f64));
            let e: Vec<f64> = row.iter().map(|&v| (v as f64 - max).exp()).collect();
            let sum: f64 = e.iter().sum();
            y.extend(e.iter().map(|v| v / sum));
        }
        y
    }
}
