//! Softmax backward: from `y = softmax(x)` (each row) and `dy`, the gradient
//!
//! ```text
//! dx[i, j] = y[i, j] · (dy[i, j] − Σ_k dy[i, k] · y[i, k])
//! ```
//!
//! f32 or bf16 in and out, f32 arithmetic, any M × N. One block per row tile of the forward's
//! plan: load `y` and `dy`, one `block_reduce_x` of `dy · y`, write `dx`. Rows longer than 8192
//! (the `_long` kernels) are read twice: the sum over every column tile, then `dx`.

use crate::rows::plan::*;
use ck_core::device::*;
#[cfg(not(target_arch = "nvptx64"))]
use ck_core::host::DeviceBuffer;
use ck_core::tile::{block_reduce_x, make_tile_window, DistributedTensor, View2};
use ck_core::TileDistribution;
use ck_macros::tile_kernel;

/// Scratch for the cross-warp reduction: `BLOCK_SIZE` (≤ 256) words.
const SCRATCH: usize = 256;

/// The shared body of every configuration.
#[inline(always)]
fn softmax_bwd_tile<D, T, const VEC: usize, const LONG: bool>(
    (dy, y): (Global<T>, Global<T>),
    dx: GlobalMut<T>,
    (m, n): (u32, u32),
    scratch: &SharedArray<u32, SCRATCH>,
) where
    D: TileDistribution<X = [i32; 2]>,
    T: Real,
{
    let [rows, cols] = D::X_LENGTHS;
    let row0 = (block_idx() * rows as u32) as i32;
    let tiles = if LONG {
        n.div_ceil(cols as u32) as i32
    } else {
        1
    };
    assert!(
        LONG || n <= cols as u32,
        "softmax_bwd: a row longer than the tile; use the _long kernel"
    );
    let mut wy = make_tile_window::<D, _>(View2::<_, T, VEC>::new(y, m, n, n), [row0, 0]);
    let mut wdy = make_tile_window::<D, _>(View2::<_, T, VEC>::new(dy, m, n, n), [row0, 0]);
    let mut wdx = make_tile_window::<D, _>(View2::<_, T, VEC>::new(dx, m, n, n), [row0, 0]);
    let add = |a: f32, b: f32| a + b;
    let product = |y: &DistributedTensor<D, T>, dy: &DistributedTensor<D, T>| {
        y.zip_map(dy, |a, b| a.to_f32() * b.to_f32())
    };
    let mut acc = DistributedTensor::<D, f32>::zeros();
    for c in 0..tiles {
        wy.set_origin([row0, c * cols]);
        wdy.set_origin([row0, c * cols]);
        acc = acc.zip_map(&product(&wy.load::<T>(), &wdy.load::<T>()), add);
    }
    let dot = block_reduce_x::<D, f32, 1, SCRATCH>(&acc, add, scratch);
    for c in 0..tiles {
        // One tile: the loads above, which the compiler keeps; long rows: read again.
        wy.set_origin([row0, c * cols]);
        wdy.set_origin([row0, c * cols]);
        wdx.set_origin([row0, c * cols]);
        let (yf, dyf) = (
            wy.load::<T>().map(T::to_f32),
            wdy.load::<T>().map(T::to_f32),
        );
        let out = dyf
            .zip_map(&dot, |d, s| d - s)
            .zip_map(&yf, |d, v| v * d)
            .round_to::<T>();
        wdx.store(&out);
    }
}

macro_rules! softmax_bwd_kernel {
    ($name:ident, $dist:ident, $t:ty, $vec:literal, $block:literal, $long:literal) => {
        #[doc = concat!("Softmax backward with `", stringify!($dist), "` tiles, `", stringify!($t), "` in and out.")]
        #[tile_kernel(block = $block, distributions($dist))]
        pub fn $name(dy: Global<$t>, y: Global<$t>, dx: GlobalMut<$t>, m: u32, n: u32) {
            let scratch = shared!(u32; SCRATCH);
            softmax_bwd_tile::<$dist, $t, $vec, $long>((dy, y), dx, (m, n), &scratch);
        }
    };
}

instances! {
    declare: softmax_bwd_kernel,
    launch(dy: &DeviceBuffer<Self>, y: &DeviceBuffer<Self>, dx: &mut DeviceBuffer<Self>, m: u32, n: u32),
    f32 {
        Rows Padded => softmax_bwd_f32_rows / SoftmaxBwdF32Rows (RowsF32, f32, 4, 256, false),
        Row4096 Padded => softmax_bwd_f32_c4096 / SoftmaxBwdF32C4096 (RowF32x4096, f32, 4, 128, false),
        Row8192 Padded => softmax_bwd_f32_c8192 / SoftmaxBwdF32C8192 (RowF32x8192, f32, 4, 256, false),
        Row8192 Long => softmax_bwd_f32_long / SoftmaxBwdF32Long (RowF32x8192, f32, 4, 256, true),
    }
    Bf16 {
        Rows Padded => softmax_bwd_bf16_rows / SoftmaxBwdBf16Rows (RowsBf16, Bf16, 8, 256, false),
        Row4096 Padded => softmax_bwd_bf16_c4096 / SoftmaxBwdBf16C4096 (RowBf16x4096, Bf16, 8, 128, false),
        Row8192 Padded => softmax_bwd_bf16_c8192 / SoftmaxBwdBf16C8192 (RowBf16x8192, Bf16, 8, 256, false),
        Row8192 Long => softmax_bwd_bf16_long / SoftmaxBwdBf16Long (RowBf16x8192, Bf16, 8, 256, true),
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
        (dy, y): (&DeviceBuffer<T>, &DeviceBuffer<T>),
        dx: &mut DeviceBuffer<T>,
        (m, n): (u32, u32),
    ) -> Result<LaunchStats, LaunchError> {
        let instance = Instance::pick(n, T::DTYPE, T::INSTANCES);
        let cfg = instance.tile.launch_config(T::DTYPE, m);
        T::launch_instance(instance, device, cfg, dy, y, dx, m, n)
    }

    /// The fp64 reference: `(dx, size)`, `size` the magnitude `|y·dy| + |y·Σ dy·y|` of the two
    /// terms each `dx` is the difference of (what its f32 error is relative to).
    pub fn reference((dy, y): (&[f32], &[f32]), (m, n): (u32, u32)) -> (Vec<f64>, Vec<f64>) {
        let n = n as usize;
        let (mut dx, mut size) = (vec![0.0; y.len()], vec![0.0; y.len()]);
        for i in 0..m as usize {
            let at = |v: &[f32], j: usize| v[i * n + j] as f64;
            let dot: f64 = (0..n).map(|j| at(dy, j) * at(y, j)).sum();
            for j in 0..n {
                let (a, b) = (at(y, j) * at(dy, j), at(y, j) * dot);
                dx[i * n + j] = a - b;
                size[i * n + j] = a.abs() + b.abs();
            }
        }
        (dx, size)
    }
}

/// Softmax backward as every front end calls it.
#[cfg(not(target_arch = "nvptx64"))]
pub const OP: crate::op::Op = crate::op::Op {
    name: "softmax_backward",
    summary: "Softmax backward: dx = y · (dy − Σ dy·y) from dy and the forward's y",
    params: &[
        describe::rows_input("dy", "dy", "dy, the gradient of y, [..., N]"),
        describe::rows_input("y", "y", "y = softmax(x), the forward's output, [..., N]"),
        describe::rows_output("dx", "dx-out", "dx, [..., N]"),
    ],
    scalars: &[],
    dtypes: describe::DTYPES,
    constraints: crate::op::no_constraints,
    launch: op::launch,
    sample: op::sample,
    error: op::error,
    tolerance: describe::tolerance,
    agreement: crate::op::norm_relative_error,
    cases: describe::cases,
    bytes: |s, d| describe::bytes(s, d, 3.0, 0.0),
};

#[cfg(not(target_arch = "nvptx64"))]
use crate::rows::describe;

#[cfg(not(target_arch = "nvptx64"))]
mod op {
    use crate::op::{norm_error_relative_to, HostOutput, Launch, Launched, Rng, Sizes};
    use ck_core::host::Device;

    pub fn launch(d: &Device, l: &mut Launch) -> Launched {
        let mn = (l.sizes.u32("M"), l.sizes.u32("N"));
        crate::by_dtype!(l.dtype, T => {
            let mut dx = l.take::<T>(d, "dx")?;
            let st = super::host::launch(d, (l.input::<T>("dy")?, l.input::<T>("y")?), &mut dx, mn);
            l.put("dx", dx);
            st
        })
    }

    /// dy in [−1, 1]; y the softmax of logits in [−4, 4] (rows that sum to 1, as the forward
    /// gives them).
    pub fn sample(s: &Sizes, rng: &mut Rng) -> Vec<Vec<f32>> {
        let (m, n) = (s.get("M"), s.get("N"));
        let dy = rng.values(m * n, 1.0, 0.0);
        let logits = rng.values(m * n, 4.0, 0.0);
        let mut y = Vec::with_capacity(m * n);
        for row in logits.chunks(n.max(1)) {
            let e: Vec<f64> = row.iter().map(|&v| (v as f64).exp()).collect();
            let sum: f64 = e.iter().sum();
            y.extend(e.iter().map(|v| (v / sum) as f32));
        }
        vec![dy, y]
    }

    /// `dx` norm-wise against fp64, relative to the size of its two terms.
    pub fn error(o: &HostOutput) -> f64 {
        let mn = (o.sizes.u32("M"), o.sizes.u32("N"));
        let (want, size) = super::host::reference((o.input("dy"), o.input("y")), mn);
        norm_error_relative_to(o.output("dx").unwrap_or(&[]), &want, &size)
    }
}
