//! Fused residual add + RMSNorm: `r = x + residual`, written out in the input type, and
//! `y = r · rsqrt(mean(r²) + eps) · gamma` computed from that written `r` — what the two
//! operations give one after the other, with one read of x and of the residual and one write of
//! r and of y. Rows longer than one tile read their `r` back for the second pass.

#[cfg(not(target_arch = "nvptx64"))]
use crate::rows::describe;
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
fn add_rmsnorm_tile<D, T, const VEC: usize, const PAD: bool>(
    (x, residual, gamma): (Global<T>, Global<T>, Global<T>),
    (r_out, y): (GlobalMut<T>, GlobalMut<T>),
    (m, n, eps): (u32, u32, f32),
    scratch: &SharedArray<u32, SCRATCH>,
) where
    D: TileDistribution<X = [i32; 2]>,
    T: Real,
{
    let [rows, cols] = D::X_LENGTHS;
    let row0 = (block_idx() * rows as u32) as i32;
    // Unpadded (rows exactly the tile, kernels of their own): the views' width is the tile's
    // constant, so neither the column check nor the column-tile loop is compiled in.
    assert!(
        PAD || n == cols as u32,
        "add_rmsnorm: an unpadded kernel for a row that is not the tile"
    );
    let w = if PAD { n } else { cols as u32 };
    let tiles = if PAD {
        n.div_ceil(cols as u32) as i32
    } else {
        1
    };
    let view = |g, rows, stride| View2::<_, T, VEC>::new(g, rows, w, stride);
    let mut wx = make_tile_window::<D, _>(view(x, m, w), [row0, 0]);
    let mut wres = make_tile_window::<D, _>(view(residual, m, w), [row0, 0]);
    let mut wg = make_tile_window::<D, _>(view(gamma, rows as u32, 0), [0, 0]);
    let mut wr = make_tile_window::<D, _>(View2::<_, T, VEC>::new(r_out, m, w, w), [row0, 0]);
    let mut wy = make_tile_window::<D, _>(View2::<_, T, VEC>::new(y, m, w, w), [row0, 0]);
    let add = |a: f32, b: f32| a + b;
    let sum = |a: T, b: T| a.to_f32() + b.to_f32();
    let inv_n = 1.0 / n as f32;
    let normalize = |r: &DistributedTensor<D, f32>,
                     ss: &DistributedTensor<D, f32>,
                     g: &DistributedTensor<D, T>| {
        r.zip_map(ss, |v, s| v * math::rsqrt(s * inv_n + eps))
            .zip_map(g, |v, g| v * g.to_f32())
            .round_to::<T>()
    };
    if tiles == 1 {
        let r = wx
            .load::<T>()
            .zip_map(&wres.load::<T>(), sum)
            .round_to::<T>();
        wr.store(&r);
        let rf = r.map(T::to_f32);
        let ss = block_reduce_x::<D, f32, 1, SCRATCH>(&rf.map(|v| v * v), add, scratch);
        let g = wg.load::<T>();
        wy.store(&normalize(&rf, &ss, &g));
        return;
    }
    let mut sq = DistributedTensor::<D, f32>::zeros();
    for _ in 0..tiles {
        let r = wx
            .load::<T>()
            .zip_map(&wres.load::<T>(), sum)
            .round_to::<T>();
        wr.store(&r);
        sq = sq.zip_map(&r, |s, v| s + v.to_f32() * v.to_f32());
        wx.move_by([0, cols]);
        wres.move_by([0, cols]);
        wr.move_by([0, cols]);
    }
    let ss = block_reduce_x::<D, f32, 1, SCRATCH>(&sq, add, scratch);
    // Each thread reads back the elements of r it wrote itself.
    wr.set_origin([row0, 0]);
    for _ in 0..tiles {
        let (rf, g) = (wr.load::<T>().map(T::to_f32), wg.load::<T>());
        wy.store(&normalize(&rf, &ss, &g));
        wr.move_by([0, cols]);
        wg.move_by([0, cols]);
        wy.move_by([0, cols]);
    }
}

macro_rules! add_rmsnorm_kernel {
    ($name:ident, $dist:ident, $t:ty, $vec:literal, $block:literal, $pad:literal) => {
        #[doc = concat!("Residual add + RMSNorm with `", stringify!($dist), "` tiles, `", stringify!($t), "` in and out.")]
        #[tile_kernel(block = $block, distributions($dist))]
        #[allow(clippy::too_many_arguments)]
        pub fn $name(
            x: Global<$t>,
            residual: Global<$t>,
            gamma: Global<$t>,
            r: GlobalMut<$t>,
            y: GlobalMut<$t>,
            m: u32,
            n: u32,
            eps: f32,
        ) {
            let scratch = shared!(u32; SCRATCH);
            add_rmsnorm_tile::<$dist, $t, $vec, $pad>((x, residual, gamma), (r, y), (m, n, eps), &scratch);
        }
    };
}

instances! {
    declare: add_rmsnorm_kernel,
    launch(
        x: &DeviceBuffer<Self>,
        residual: &DeviceBuffer<Self>,
        gamma: &DeviceBuffer<Self>,
        r: &mut DeviceBuffer<Self>,
        y: &mut DeviceBuffer<Self>,
        m: u32,
        n: u32,
        eps: f32,
    ),
    f32 {
        Rows Padded => add_rmsnorm_f32_rows / AddRmsnormF32Rows (RowsF32, f32, 4, 256, true),
        Row4096 Padded => add_rmsnorm_f32_c4096 / AddRmsnormF32C4096 (RowF32x4096, f32, 4, 128, true),
        Row8192 Padded => add_rmsnorm_f32_c8192 / AddRmsnormF32C8192 (RowF32x8192, f32, 4, 256, true),
    }
    Bf16 {
        Rows Padded => add_rmsnorm_bf16_rows / AddRmsnormBf16Rows (RowsBf16, Bf16, 8, 256, true),
        Row4096 Padded => add_rmsnorm_bf16_c4096 / AddRmsnormBf16C4096 (RowBf16x4096, Bf16, 8, 128, true),
        Row8192 Padded => add_rmsnorm_bf16_c8192 / AddRmsnormBf16C8192 (RowBf16x8192, Bf16, 8, 256, true),
        // Rows exactly the tile's width: no padding.
        Rows Full => add_rmsnorm_bf16_rows_full / AddRmsnormBf16RowsFull (RowsBf16, Bf16, 8, 256, false),
        Row4096 Full => add_rmsnorm_bf16_c4096_full / AddRmsnormBf16C4096Full (RowBf16x4096, Bf16, 8, 128, false),
        Row8192 Full => add_rmsnorm_bf16_c8192_full / AddRmsnormBf16C8192Full (RowBf16x8192, Bf16, 8, 256, false),
    }
}

/// Host side: launch and CPU reference.
#[cfg(not(target_arch = "nvptx64"))]
pub mod host {
    use super::*;
    use ck_core::host::{Device, LaunchError, LaunchStats};

    /// Launches the kernel of `T` for rows of `n` ([`Instance::pick`]) on device buffers:
    /// `r = x + residual`, `y = rmsnorm(r) · gamma`.
    pub fn launch<T: Kernels>(
        device: &Device,
        (x, residual, gamma): (&DeviceBuffer<T>, &DeviceBuffer<T>, &DeviceBuffer<T>),
        (r, y): (&mut DeviceBuffer<T>, &mut DeviceBuffer<T>),
        (m, n, eps): (u32, u32, f32),
    ) -> Result<LaunchStats, LaunchError> {
        let instance = Instance::pick(n, T::DTYPE, T::INSTANCES);
        let cfg = instance.tile.launch_config(T::DTYPE, m);
        T::launch_instance(instance, device, cfg, x, residual, gamma, r, y, m, n, eps)
    }
}

/// Residual add + RMSNorm as every front end calls it.
#[cfg(not(target_arch = "nvptx64"))]
pub const OP: crate::op::Op = crate::op::Op {
    name: "add_rmsnorm",
    summary: "residual add + RMSNorm: r = x + residual, y = rmsnorm(r) · gamma",
    params: &[
        describe::X,
        describe::rows_input("residual", "residual", "the residual, [..., N]"),
        describe::GAMMA,
        describe::rows_output("residual_out", "residual-out", "r = x + residual, [..., N]"),
        describe::Y,
    ],
    scalars: &[describe::eps(1e-6)],
    dtypes: describe::DTYPES,
    constraints: crate::op::no_constraints,
    launch: op::launch,
    sample: op::sample,
    error: op::error,
    tolerance: describe::tolerance,
    agreement: crate::op::max_relative_error,
    cases: describe::cases,
    bytes: |s, d| describe::bytes(s, d, 4.0, 1.0),
};

#[cfg(not(target_arch = "nvptx64"))]
mod op {
    use crate::op::{max_relative_error, worst, HostOutput, Launch, Launched, Rng, Sizes};
    use ck_core::host::Device;

    pub fn launch(d: &Device, l: &mut Launch) -> Launched {
        let p = (l.sizes.u32("M"), l.sizes.u32("N"), l.scalar("eps"));
        crate::by_dtype!(l.dtype, T => {
            let (mut r, mut y) = (l.take::<T>(d, "residual_out")?, l.take::<T>(d, "y")?);
            let inputs = (l.input::<T>("x")?, l.input::<T>("residual")?, l.input::<T>("gamma")?);
            let st = super::host::launch(d, inputs, (&mut r, &mut y), p);
            l.put("residual_out", r);
            l.put("y", y);
            st
        })
    }

    /// x and the residual in [−1, 1], gamma in [0.5, 2.5].
    pub fn sample(s: &Sizes, rng: &mut Rng) -> Vec<Vec<f32>> {
        let (m, n) = (s.get("M"), s.get("N"));
        let (x, residual) = (rng.values(m * n, 1.0, 0.0), rng.values(m * n, 1.0, 0.0));
        vec![x, residual, rng.values(n, 1.0, 1.5)]
    }

    /// `r` against the sum rounded once to the element type (within its ulp), `y` against the
    /// fp64 RMSNorm of the `r` the kernel wrote.
    pub fn error(o: &HostOutput) -> f64 {
        let (mn, eps) = ((o.sizes.u32("M"), o.sizes.u32("N")), o.scalar("eps"));
        let (r, y) = (
            o.output("residual_out").unwrap_or(&[]),
            o.output("y").unwrap_or(&[]),
        );
        let sum = o.input("x").iter().zip(o.input("residual"));
        let want_r: Vec<f64> = sum.map(|(&a, &b)| o.dtype.round(a + b) as f64).collect();
        let want_y = crate::rows::rmsnorm::host::reference(r, o.input("gamma"), mn, eps);
        worst(
            max_relative_error(r, &want_r),
            max_relative_error(y, &want_y),
        )
    }
}
