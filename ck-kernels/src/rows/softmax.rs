//! Softmax over the last dim, `y[i, j] = exp(x[i, j] − max_i) / Σ_j exp(x[i, j] − max_i)`, f32 or
//! bf16 in and out with f32 arithmetic, any M × N.
//!
//! Padding reads as −∞, so it changes neither a row's max nor its sum. A row that fits one tile
//! is read once: its max, then the sum of `exp2((x − max)·log₂e)`, each one `block_reduce_x`.
//! Longer rows (the `_long` kernels) are read twice: first each thread keeps an online
//! `(max, sum)` per row — on a new max the sum is rescaled by `exp2((old − new)·log₂e)` — and
//! one `block_reduce_x` of the pair merges them; then every tile again for the output.

#[cfg(not(target_arch = "nvptx64"))]
use crate::rows::describe;
use crate::rows::plan::*;
use ck_core::device::*;
#[cfg(not(target_arch = "nvptx64"))]
use ck_core::host::DeviceBuffer;
use ck_core::tile::{block_reduce_x, make_tile_window, DistributedTensor, View2};
use ck_core::TileDistribution;
use ck_macros::tile_kernel;

/// Scratch for the cross-warp reductions: `BLOCK_SIZE` (≤ 256) × 2 words (a pair).
const SCRATCH: usize = 512;

const LOG2_E: f32 = core::f32::consts::LOG2_E;

/// `exp(v − max)`.
#[inline(always)]
fn exp_from(v: f32, max: f32) -> f32 {
    math::exp2((v - max) * LOG2_E)
}

/// An online accumulator that has seen nothing: a finite "−∞" as its max, so that merging two
/// of them, or one with padding (−∞), stays a number: `(−MAX) − (−MAX) = 0`.
const EMPTY: (f32, f32) = (-f32::MAX, 0.0);

/// Two online `(max, sum of exp(x − max))` accumulators as one. Branch-free, and commutative
/// bit for bit, so every thread of a row ends with the same pair.
#[inline(always)]
fn merge((m1, s1): (f32, f32), (m2, s2): (f32, f32)) -> (f32, f32) {
    let m = m1.max(m2);
    (m, s1 * exp_from(m1, m) + s2 * exp_from(m2, m))
}

/// The shared body of every configuration.
#[inline(always)]
fn softmax_tile<D, T, const VEC: usize, const LONG: bool>(
    x: Global<T>,
    y: GlobalMut<T>,
    (m, n): (u32, u32),
    scratch: &SharedArray<u32, SCRATCH>,
) where
    D: TileDistribution<X = [i32; 2]>,
    T: Real,
{
    let [rows, cols] = D::X_LENGTHS;
    let row0 = (block_idx() * rows as u32) as i32;
    let xv = View2::<_, T, VEC>::with_invalid_value(x, m, n, n, T::from_f32(f32::NEG_INFINITY));
    let mut wx = make_tile_window::<D, _>(xv, [row0, 0]);
    let mut wy = make_tile_window::<D, _>(View2::<_, T, VEC>::new(y, m, n, n), [row0, 0]);
    if !LONG {
        assert!(
            n <= cols as u32,
            "softmax: row longer than the tile; use the _long kernel"
        );
        let t = wx.load::<T>().map(T::to_f32);
        let max = block_reduce_x::<D, f32, 1, SCRATCH>(&t, f32::max, scratch);
        let e = t.zip_map(&max, exp_from);
        let sum = block_reduce_x::<D, f32, 1, SCRATCH>(&e, |a, b| a + b, scratch);
        wy.store(&e.zip_map(&sum, |v, s| v / s).round_to::<T>());
        return;
    }
    let tiles = n.div_ceil(cols as u32);
    let mut acc = DistributedTensor::<D, (f32, f32)>::splat(EMPTY);
    for _ in 0..tiles {
        let t = wx.load::<T>().map(T::to_f32);
        acc = acc.zip_map(&t, |a, v| merge(a, (v, 1.0)));
        wx.move_by([0, cols]);
    }
    let stats = block_reduce_x::<D, (f32, f32), 1, SCRATCH>(&acc, merge, scratch);
    wx.set_origin([row0, 0]);
    for _ in 0..tiles {
        let t = wx.load::<T>().map(T::to_f32);
        wy.store(
            &t.zip_map(&stats, |v, (mx, s)| exp_from(v, mx) / s)
                .round_to::<T>(),
        );
        wx.move_by([0, cols]);
        wy.move_by([0, cols]);
    }
}

macro_rules! softmax_kernel {
    ($name:ident, $dist:ident, $t:ty, $vec:literal, $block:literal, $long:literal) => {
        #[doc = concat!("Softmax with `", stringify!($dist), "` tiles, `", stringify!($t), "` in and out.")]
        #[tile_kernel(block = $block, distributions($dist))]
        pub fn $name(x: Global<$t>, y: GlobalMut<$t>, m: u32, n: u32) {
            let scratch = shared!(u32; SCRATCH);
            softmax_tile::<$dist, $t, $vec, $long>(x, y, (m, n), &scratch);
        }
    };
}

instances! {
    declare: softmax_kernel,
    launch(x: &DeviceBuffer<Self>, y: &mut DeviceBuffer<Self>, m: u32, n: u32),
    f32 {
        Rows Padded => softmax_f32_rows / SoftmaxF32Rows (RowsF32, f32, 4, 256, false),
        Row4096 Padded => softmax_f32_c4096 / SoftmaxF32C4096 (RowF32x4096, f32, 4, 128, false),
        Row8192 Padded => softmax_f32_c8192 / SoftmaxF32C8192 (RowF32x8192, f32, 4, 256, false),
        Row8192 Long => softmax_f32_long / SoftmaxF32Long (RowF32x8192, f32, 4, 256, true),
    }
    Bf16 {
        Rows Padded => softmax_bf16_rows / SoftmaxBf16Rows (RowsBf16, Bf16, 8, 256, false),
        Row4096 Padded => softmax_bf16_c4096 / SoftmaxBf16C4096 (RowBf16x4096, Bf16, 8, 128, false),
        Row8192 Padded => softmax_bf16_c8192 / SoftmaxBf16C8192 (RowBf16x8192, Bf16, 8, 256, false),
        Row8192 Long => softmax_bf16_long / SoftmaxBf16Long (RowBf16x8192, Bf16, 8, 256, true),
    }
}

/// Host side: launch and CPU reference.
#[cfg(not(target_arch = "nvptx64"))]
pub mod host {
    use super::*;
    use ck_core::host::{Device, LaunchError, LaunchStats};

    /// Launches the kernel of `T` for rows of `n` ([`Instance::pick`]) on device buffers.
    pub fn launch<T: Kernels>(
        device: &Device,
        x: &DeviceBuffer<T>,
        y: &mut DeviceBuffer<T>,
        (m, n): (u32, u32),
    ) -> Result<LaunchStats, LaunchError> {
        let instance = Instance::pick(n, T::DTYPE, T::INSTANCES);
        let cfg = instance.tile.launch_config(T::DTYPE, m);
        T::launch_instance(instance, device, cfg, x, y, m, n)
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

/// Softmax as every front end calls it.
#[cfg(not(target_arch = "nvptx64"))]
pub const OP: crate::op::Op = crate::op::Op {
    name: "softmax",
    summary: "softmax over the last dimension (the row max subtracted first)",
    params: &[describe::X, describe::Y],
    scalars: &[],
    dtypes: describe::DTYPES,
    constraints: crate::op::no_constraints,
    launch: op::launch,
    sample: op::sample,
    error: op::error,
    tolerance: describe::tolerance,
    agreement: crate::op::max_relative_error,
    cases: describe::cases,
    bytes: |s, d| describe::bytes(s, d, 2.0, 0.0),
};

#[cfg(not(target_arch = "nvptx64"))]
mod op {
    use crate::op::{max_relative_error, HostOutput, Launch, Launched, Rng, Sizes};
    use ck_core::host::Device;

    pub fn launch(d: &Device, l: &mut Launch) -> Launched {
        let mn = (l.sizes.u32("M"), l.sizes.u32("N"));
        crate::by_dtype!(l.dtype, T => {
            let mut y = l.take::<T>(d, "y")?;
            let st = super::host::launch(d, l.input::<T>("x")?, &mut y, mn);
            l.put("y", y);
            st
        })
    }

    /// Logits in [−8, 8].
    pub fn sample(s: &Sizes, rng: &mut Rng) -> Vec<Vec<f32>> {
        vec![rng.values(s.get("M") * s.get("N"), 8.0, 0.0)]
    }

    pub fn error(o: &HostOutput) -> f64 {
        let want = super::host::reference(o.input("x"), (o.sizes.u32("M"), o.sizes.u32("N")));
        max_relative_error(o.output("y").unwrap_or(&[]), &want)
    }
}
