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
//! The tile per row length follows [`RowTile::for_columns`](crate::rows::plan::RowTile::for_columns).

#[cfg(not(target_arch = "nvptx64"))]
use crate::rows::describe;
use crate::rows::plan::*;
use ck_core::device::*;
#[cfg(not(target_arch = "nvptx64"))]
use ck_core::host::DeviceBuffer;
use ck_core::tile::{block_reduce_x, make_tile_window, DistributedTensor, View2};
use ck_core::TileDistribution;
use ck_macros::tile_kernel;

/// Scratch for the cross-warp reduction: `BLOCK_SIZE · rows per thread` words.
const SCRATCH: usize = 256;

/// The shared body of every configuration.
#[inline(always)]
fn rmsnorm_tile<D, T, const VEC: usize, const PAD: bool>(
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
    // Without padding (CK's `kPadN = false`: rows exactly the tile, a kernel of its own) the
    // views' column count is the tile's constant, so no column check survives and the
    // column-tile loop below is not compiled in.
    assert!(
        PAD || n == cols as u32,
        "rmsnorm: an unpadded kernel for a row that is not the tile"
    );
    let width = if PAD { n } else { cols as u32 };
    let xv = View2::<_, T, VEC>::new(x, m, width, width);
    let gv = View2::<_, T, VEC>::new(gamma, rows as u32, width, 0);
    let yv = View2::<_, T, VEC>::new(y, m, width, width);
    let tiles = if PAD {
        n.div_ceil(cols as u32) as i32
    } else {
        1
    };
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
            .zip_map(&g, |v, g| v * g)
            .round_to::<T>();
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
            .zip_map(&g, |v, g| v * g)
            .round_to::<T>();
        wy.store(&out);
        wx.move_by([0, cols]);
        wg.move_by([0, cols]);
        wy.move_by([0, cols]);
    }
}

macro_rules! rmsnorm_kernel {
    ($name:ident, $dist:ident, $t:ty, $vec:literal, $block:literal, $pad:literal) => {
        #[doc = concat!("RMSNorm with `", stringify!($dist), "` tiles, `", stringify!($t), "` in and out.")]
        #[tile_kernel(block = $block, distributions($dist))]
        pub fn $name(x: Global<$t>, gamma: Global<$t>, y: GlobalMut<$t>, m: u32, n: u32, eps: f32) {
            let scratch = shared!(u32; SCRATCH);
            rmsnorm_tile::<$dist, $t, $vec, $pad>(x, gamma, y, (m, n, eps), &scratch);
        }
    };
}

instances! {
    declare: rmsnorm_kernel,
    launch(
        x: &DeviceBuffer<Self>,
        gamma: &DeviceBuffer<Self>,
        y: &mut DeviceBuffer<Self>,
        m: u32,
        n: u32,
        eps: f32,
    ),
    f32 {
        Rows Padded => rmsnorm_f32_rows / RmsnormF32Rows (RowsF32, f32, 4, 256, true),
        Row4096 Padded => rmsnorm_f32_c4096 / RmsnormF32C4096 (RowF32x4096, f32, 4, 128, true),
        Row8192 Padded => rmsnorm_f32_c8192 / RmsnormF32C8192 (RowF32x8192, f32, 4, 256, true),
    }
    Bf16 {
        Rows Padded => rmsnorm_bf16_rows / RmsnormBf16Rows (RowsBf16, Bf16, 8, 256, true),
        Row4096 Padded => rmsnorm_bf16_c4096 / RmsnormBf16C4096 (RowBf16x4096, Bf16, 8, 128, true),
        Row8192 Padded => rmsnorm_bf16_c8192 / RmsnormBf16C8192 (RowBf16x8192, Bf16, 8, 256, true),
        // Rows exactly the tile's width (bf16, where registers limit the loads in flight).
        Rows Full => rmsnorm_bf16_rows_full / RmsnormBf16RowsFull (RowsBf16, Bf16, 8, 256, false),
        Row4096 Full => rmsnorm_bf16_c4096_full / RmsnormBf16C4096Full (RowBf16x4096, Bf16, 8, 128, false),
        Row8192 Full => rmsnorm_bf16_c8192_full / RmsnormBf16C8192Full (RowBf16x8192, Bf16, 8, 256, false),
    }
}

/// Host side: configuration choice, launch, CPU reference.
#[cfg(not(target_arch = "nvptx64"))]
pub mod host {
    use super::*;
    use ck_core::host::{Device, LaunchError, LaunchStats};

    /// Launches the kernel of `T` for rows of `n` ([`Instance::pick`]) on device buffers.
    pub fn launch<T: Kernels>(
        device: &Device,
        x: &DeviceBuffer<T>,
        gamma: &DeviceBuffer<T>,
        y: &mut DeviceBuffer<T>,
        (m, n, eps): (u32, u32, f32),
    ) -> Result<LaunchStats, LaunchError> {
        let instance = Instance::pick(n, T::DTYPE, T::INSTANCES);
        let cfg = instance.tile.launch_config(T::DTYPE, m);
        T::launch_instance(instance, device, cfg, x, gamma, y, m, n, eps)
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

/// RMSNorm as every front end calls it.
#[cfg(not(target_arch = "nvptx64"))]
pub const OP: crate::op::Op = crate::op::Op {
    name: "rmsnorm",
    summary: "RMSNorm over the last dimension: y = x · rsqrt(mean(x²) + eps) · gamma",
    params: &[describe::X, describe::GAMMA, describe::Y],
    scalars: &[describe::eps(1e-6)],
    dtypes: describe::DTYPES,
    constraints: crate::op::no_constraints,
    launch: op::launch,
    sample: op::sample,
    error: op::error,
    tolerance: describe::tolerance,
    agreement: crate::op::max_relative_error,
    cases: describe::cases,
    bytes: |s, d| describe::bytes(s, d, 2.0, 1.0),
};

#[cfg(not(target_arch = "nvptx64"))]
mod op {
    use crate::op::{max_relative_error, HostOutput, Launch, Launched, Rng, Sizes};
    use ck_core::host::Device;

    pub fn launch(d: &Device, l: &mut Launch) -> Launched {
        let p = (l.sizes.u32("M"), l.sizes.u32("N"), l.scalar("eps"));
        crate::by_dtype!(l.dtype, T => {
            let mut y = l.take::<T>(d, "y")?;
            let st = super::host::launch(d, l.input::<T>("x")?, l.input::<T>("gamma")?, &mut y, p);
            l.put("y", y);
            st
        })
    }

    /// x in [−1, 1], gamma in [0.5, 2.5].
    pub fn sample(s: &Sizes, rng: &mut Rng) -> Vec<Vec<f32>> {
        let (m, n) = (s.get("M"), s.get("N"));
        vec![rng.values(m * n, 1.0, 0.0), rng.values(n, 1.0, 1.5)]
    }

    pub fn error(o: &HostOutput) -> f64 {
        let (mn, eps) = ((o.sizes.u32("M"), o.sizes.u32("N")), o.scalar("eps"));
        let want = super::host::reference(o.input("x"), o.input("gamma"), mn, eps);
        max_relative_error(o.output("y").unwrap_or(&[]), &want)
    }
}
