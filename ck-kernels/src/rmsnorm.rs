//! RMSNorm forward: `y[i, j] = x[i, j] · rsqrt(mean_j(x[i, :]²) + eps) · gamma[j]`, f32 or bf16
//! in and out, f32 arithmetic, any M × N.
//!
//! A block normalises a `ROWS × COLS` tile given by a tile distribution: `load` the rows (16-byte
//! vectors), square, `block_reduce_x` over X1 (lane shuffles, and shared memory across warps
//! when warps split a row), scale by `rsqrt`, multiply by gamma (read through a view with row
//! stride 0, so it uses the same distribution) and `store`. Rows longer than `COLS` are done in
//! column tiles: a first pass accumulates the sum of squares, a second re-reads and scales.
//! Columns past N and rows past M are padding (read as 0, never written).
//!
//! Configurations ([`host::config`]): N ≤ 1024 → 8 rows per block, one warp per row; N ≤ 4096 →
//! one row of 4096 per block of 128 threads; larger → one row of 8192 per block (looping when
//! N > 8192). Each thread keeps 4–8 independent 16-byte loads in flight.

use ck_core::device::*;
use ck_core::tile::{block_reduce_x, make_tile_window, DistributedTensor, View2};
use ck_core::TileDistribution;
use ck_macros::{tile_distribution, tile_kernel};

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
    /// bf16, one row of 8192: 4 warps × 32 lanes × 8 × 8 repeats.
    pub struct RowBf16x8192 {
        warp_size: 32, block_size: 128,
        h: { m: [one: 1], n: [repeat: 8, warp: 4, lane: 32, vec: 8] },
        p: [[n.warp], [n.lane]],
        y: [m.one, n.repeat, n.vec],
    }
}

/// Scratch for the cross-warp reduction: `BLOCK_SIZE · rows per thread` words.
const SCRATCH: usize = 256;

/// The shared body of every configuration.
#[inline(always)]
fn rmsnorm_tile<D, T, const VEC: usize>(
    x: Global<T>,
    gamma: Global<T>,
    y: GlobalMut<T>,
    (m, n, eps): (u32, u32, f32),
    scratch: &SharedArray<u32, SCRATCH>,
) where
    D: TileDistribution<X = [i32; 2]>,
    T: Real,
{
    let [rows, cols] = D::X_LENGTHS;
    let row0 = (block_idx() * rows as u32) as i32;
    let xv = View2::<_, T, VEC>::new(x, m, n, n);
    let gv = View2::<_, T, VEC>::new(gamma, rows as u32, n, 0);
    let yv = View2::<_, T, VEC>::new(y, m, n, n);
    let tiles = n.div_ceil(cols as u32) as i32;
    let add = |a: f32, b: f32| a + b;
    let inv_n = 1.0 / n as f32;
    if tiles == 1 {
        let xf = make_tile_window::<D, _>(xv, [row0, 0])
            .load::<T>()
            .map(T::to_f32);
        let ss = block_reduce_x::<D, f32, 1, SCRATCH>(&xf.map(|v| v * v), add, scratch);
        let g = make_tile_window::<D, _>(gv, [0, 0])
            .load::<T>()
            .map(T::to_f32);
        let out = xf
            .zip_map(&ss, |v, s| v * math::rsqrt(s * inv_n + eps))
            .zip_map(&g, |v, g| T::from_f32(v * g));
        make_tile_window::<D, _>(yv, [row0, 0]).store(&out);
        return;
    }
    let mut sq = DistributedTensor::<D, f32>::zeros();
    let mut w = make_tile_window::<D, _>(xv, [row0, 0]);
    for _ in 0..tiles {
        let xf = w.load::<T>();
        sq = sq.zip_map(&xf, |s, v| {
            let v = v.to_f32();
            s + v * v
        });
        w.move_by([0, cols]);
    }
    let scale = block_reduce_x::<D, f32, 1, SCRATCH>(&sq, add, scratch)
        .map(|s| math::rsqrt(s * inv_n + eps));
    let xv = View2::<_, T, VEC>::new(x, m, n, n);
    let mut wx = make_tile_window::<D, _>(xv, [row0, 0]);
    let mut wg = make_tile_window::<D, _>(gv, [0, 0]);
    let mut wy = make_tile_window::<D, _>(yv, [row0, 0]);
    for _ in 0..tiles {
        let xf = wx.load::<T>().map(T::to_f32);
        let g = wg.load::<T>().map(T::to_f32);
        let out = xf
            .zip_map(&scale, |v, s| v * s)
            .zip_map(&g, |v, g| T::from_f32(v * g));
        wy.store(&out);
        wx.move_by([0, cols]);
        wg.move_by([0, cols]);
        wy.move_by([0, cols]);
    }
}

macro_rules! rmsnorm_kernel {
    ($name:ident, $dist:ident, $t:ty, $vec:literal, $block:literal) => {
        #[doc = concat!("RMSNorm with `", stringify!($dist), "` tiles, `", stringify!($t), "` in and out.")]
        #[tile_kernel(block = $block, distributions($dist))]
        pub fn $name(x: Global<$t>, gamma: Global<$t>, y: GlobalMut<$t>, m: u32, n: u32, eps: f32) {
            let scratch = shared!(u32; SCRATCH);
            rmsnorm_tile::<$dist, $t, $vec>(x, gamma, y, (m, n, eps), &scratch);
        }
    };
}

rmsnorm_kernel!(rmsnorm_f32_rows, RowsF32, f32, 4, 256);
rmsnorm_kernel!(rmsnorm_f32_c4096, RowF32x4096, f32, 4, 128);
rmsnorm_kernel!(rmsnorm_f32_c8192, RowF32x8192, f32, 4, 256);
rmsnorm_kernel!(rmsnorm_bf16_rows, RowsBf16, Bf16, 8, 256);
rmsnorm_kernel!(rmsnorm_bf16_c4096, RowBf16x4096, Bf16, 8, 128);
rmsnorm_kernel!(rmsnorm_bf16_c8192, RowBf16x8192, Bf16, 8, 128);

/// Host side: configuration choice, launch, CPU reference.
#[cfg(not(target_arch = "nvptx64"))]
pub mod host {
    use super::*;
    use ck_core::host::{Device, DeviceBuffer, LaunchConfig, LaunchError, LaunchStats};

    /// Element type of x, gamma and y.
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
    }

    /// The kernel for `n` columns, the rows one block normalises, and its block size.
    pub fn config(dtype: Dtype, n: u32) -> (&'static str, u32, u32) {
        fn of<D: TileDistribution<X = [i32; 2]>>(name: &'static str) -> (&'static str, u32, u32) {
            (name, D::X_LENGTHS[0] as u32, D::BLOCK_SIZE)
        }
        match (dtype, n) {
            (Dtype::F32, 0..=1024) => of::<RowsF32>("rmsnorm_f32_rows"),
            (Dtype::F32, 1025..=4096) => of::<RowF32x4096>("rmsnorm_f32_c4096"),
            (Dtype::F32, _) => of::<RowF32x8192>("rmsnorm_f32_c8192"),
            (Dtype::Bf16, 0..=1024) => of::<RowsBf16>("rmsnorm_bf16_rows"),
            (Dtype::Bf16, 1025..=4096) => of::<RowBf16x4096>("rmsnorm_bf16_c4096"),
            (Dtype::Bf16, _) => of::<RowBf16x8192>("rmsnorm_bf16_c8192"),
        }
    }

    /// Launches the configured f32 kernel on device buffers.
    pub fn launch_f32(
        device: &Device,
        x: &DeviceBuffer<f32>,
        gamma: &DeviceBuffer<f32>,
        y: &mut DeviceBuffer<f32>,
        (m, n, eps): (u32, u32, f32),
    ) -> Result<LaunchStats, LaunchError> {
        let (kernel, rows, block) = config(Dtype::F32, n);
        let cfg = LaunchConfig::new(m.div_ceil(rows), block);
        match kernel {
            "rmsnorm_f32_rows" => RmsnormF32Rows::launch(device, cfg, x, gamma, y, m, n, eps),
            "rmsnorm_f32_c4096" => RmsnormF32C4096::launch(device, cfg, x, gamma, y, m, n, eps),
            _ => RmsnormF32C8192::launch(device, cfg, x, gamma, y, m, n, eps),
        }
    }

    /// Launches the configured bf16 kernel on device buffers.
    pub fn launch_bf16(
        device: &Device,
        x: &DeviceBuffer<Bf16>,
        gamma: &DeviceBuffer<Bf16>,
        y: &mut DeviceBuffer<Bf16>,
        (m, n, eps): (u32, u32, f32),
    ) -> Result<LaunchStats, LaunchError> {
        let (kernel, rows, block) = config(Dtype::Bf16, n);
        let cfg = LaunchConfig::new(m.div_ceil(rows), block);
        match kernel {
            "rmsnorm_bf16_rows" => RmsnormBf16Rows::launch(device, cfg, x, gamma, y, m, n, eps),
            "rmsnorm_bf16_c4096" => RmsnormBf16C4096::launch(device, cfg, x, gamma, y, m, n, eps),
            _ => RmsnormBf16C8192::launch(device, cfg, x, gamma, y, m, n, eps),
        }
    }

    /// RMSNorm of an `m × n` row-major `x` with `gamma` (f32 values; with `Bf16` they are rounded
    /// to bf16 before the kernel and the bf16 output is returned as f32).
    pub fn rmsnorm(
        device: &Device,
        x: &[f32],
        gamma: &[f32],
        (m, n): (u32, u32),
        eps: f32,
        dtype: Dtype,
    ) -> Result<(Vec<f32>, LaunchStats), LaunchError> {
        let size = m as usize * n as usize;
        if x.len() != size || gamma.len() != n as usize {
            return Err(LaunchError::invalid(
                "shape-mismatch",
                format!(
                    "x has {} elements and gamma {}, but the shape is {m} × {n}",
                    x.len(),
                    gamma.len()
                ),
            ));
        }
        match dtype {
            Dtype::F32 => {
                let (xd, gd) = (
                    DeviceBuffer::from_slice(device, x)?,
                    DeviceBuffer::from_slice(device, gamma)?,
                );
                let mut yd = DeviceBuffer::from_slice(device, &vec![f32::NAN; size])?;
                let st = launch_f32(device, &xd, &gd, &mut yd, (m, n, eps))?;
                Ok((yd.to_vec()?, st))
            }
            Dtype::Bf16 => {
                let round = |v: &[f32]| v.iter().map(|&a| Bf16::from_f32(a)).collect::<Vec<_>>();
                let (xd, gd) = (
                    DeviceBuffer::from_slice(device, &round(x))?,
                    DeviceBuffer::from_slice(device, &round(gamma))?,
                );
                let mut yd = DeviceBuffer::from_slice(device, &vec![Bf16(0x7fc0); size])?;
                let st = launch_bf16(device, &xd, &gd, &mut yd, (m, n, eps))?;
                Ok((yd.to_vec()?.iter().map(|v| v.to_f32()).collect(), st))
            }
        }
    }

    /// The fp64 CPU reference.
    pub fn reference(x: &[f32], gamma: &[f32], (m, n): (u32, u32), eps: f32) -> Vec<f64> {
        let n = n as usize;
        let mut y = vec![0.0; x.len()];
        for i in 0..m as usize {
            let row = &x[i * n..(i + 1) * n];
            let ms = row.iter().map(|&v| (v as f64) * (v as f64)).sum::<f64>() / n as f64;
            let r = 1.0 / (ms + eps as f64).sqrt();
            for j in 0..n {
                y[i * n + j] = row[j] as f64 * r * gamma[j] as f64;
            }
        }
        y
    }
}
