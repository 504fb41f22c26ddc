//! RMSNorm backward: from `dy` (the gradient of `y = x · r · gamma`, `r = rsqrt(mean(x²) +
//! eps)`), the gradients
//!
//! ```text
//! dx[i, j]  = r_i · gamma[j] · dy[i, j] − x[i, j] · r_i³ · (Σ_k dy[i, k] · gamma[k] · x[i, k]) / N
//! dgamma[j] = Σ_i dy[i, j] · x[i, j] · r_i
//! ```
//!
//! f32 or bf16 in and out, f32 arithmetic, any M × N; `r` is recomputed from `x`, which the
//! gradient reads anyway (nothing saved by the forward but its inputs).
//!
//! Two kernels, deterministic (no float atomics, a fixed order of every sum):
//! 1. `rmsnorm_bwd_*`: a grid of at most [`crate::rows::column_sum::MAX_THREADS`] threads, the
//!    blocks walking row tiles a grid apart ([`crate::rows::plan`]'s backward tiles: a thread holds
//!    whole rows of its columns). Per row tile it loads `x`, `dy` (staged through shared memory
//!    a row tile ahead where the instance says so: `rows::stage`) and `gamma`, reduces the pair
//!    `(Σx², Σ dy·gamma·x)` over each row with one `block_reduce_x`, writes `dx`, sums `dy · x ·
//!    r` down the tile's rows in the thread and adds that into one accumulator per column the
//!    thread owns. At the end each block writes its accumulators as its row of a `[blocks, N]`
//!    f32 workspace. Rows longer than 8192 (the `_long` kernels) are read twice (the sums, then
//!    `dx`), and their columns' sums kept in the block's workspace row instead of registers.
//! 2. `column_sum_*` ([`crate::rows::column_sum`]): `dgamma[j]` = the sum of column `j` of the
//!    workspace, in a fixed order (by chunks of rows, the last block of each column block to
//!    finish adding the chunks').

use crate::rows::column_sum::row_stride;
use crate::rows::plan::*;
use crate::rows::stage::{inputs, stage_elems, Stage};
use ck_core::device::*;
#[cfg(not(target_arch = "nvptx64"))]
use ck_core::host::DeviceBuffer;
use ck_core::tile::{
    block_reduce_x, broadcast_x, make_tile_window, reduce_x_in_warp, DistributedTensor, View1,
    View2,
};
use ck_core::TileDistribution;
use ck_macros::tile_kernel;

/// Scratch for the pair reduction: `BLOCK_SIZE · rows per thread · 2` words (at most 256 · 4 ·
/// 2).
pub(crate) const SCRATCH: usize = 2048;

/// `(Σx², Σ dy·gamma·x)` of two accumulators.
#[inline(always)]
fn add_pair(a: (f32, f32), b: (f32, f32)) -> (f32, f32) {
    (a.0 + b.0, a.1 + b.1)
}

/// `rsqrt(v)`, at most `f32::MAX`: the rows of a tile past the last row read as zeros, and
/// with `eps = 0` their `r` would be ∞ and their zero products `dy · x · r` NaN in `dgamma`'s
/// sums.
#[inline(always)]
fn finite_rsqrt(v: f32) -> f32 {
    math::rsqrt(v).min(f32::MAX)
}

/// The shared body of every configuration of the first kernel, of this operator and of the
/// fused add's backward ([`crate::rows::add_rmsnorm_bwd`], whose incoming gradient `dr` is the
/// `addend` of `dx`): `D` the tile, `C` its columns (`D` reduced over X0).
#[inline(always)]
pub(crate) fn rmsnorm_bwd_tile<
    D,
    C,
    T,
    const VEC: usize,
    const PAD: bool,
    const LONG: bool,
    const STAGED: bool,
    const S: usize,
>(
    (dy, x, gamma): (Global<T>, Global<T>, Global<T>),
    addend: Option<Global<T>>,
    (dx, partial): (GlobalMut<T>, GlobalMut<f32>),
    (m, n, eps): (u32, u32, f32),
    (scratch, stage): (&SharedArray<u32, SCRATCH>, SharedArray<T, S>),
) where
    D: TileDistribution<X = [i32; 2]>,
    C: TileDistribution<X = [i32; 1]>,
    T: Real,
{
    // The column sums' blocks may start as this kernel's leave (they wait for it to finish).
    launch_dependents();
    let [rows, cols] = D::X_LENGTHS;
    let (block, grid) = (block_idx(), grid_dim());
    let row_tiles = m.div_ceil(rows as u32);
    // Unpadded (rows exactly the tile, kernels of their own): the views' width is the tile's
    // constant, so no load or store checks its columns, and the loads of x and dy issue
    // together instead of one vector at a time between the checks.
    assert!(
        PAD || n == cols as u32,
        "rmsnorm_bwd: an unpadded kernel for a row that is not the tile"
    );
    let n = if PAD { n } else { cols as u32 };
    let tiles = n.div_ceil(cols as u32) as i32;
    let inv_n = 1.0 / n as f32;
    let mut wx = make_tile_window::<D, _>(View2::<_, T, VEC>::new(x, m, n, n), [0, 0]);
    let mut wdy = make_tile_window::<D, _>(View2::<_, T, VEC>::new(dy, m, n, n), [0, 0]);
    let mut wdx = make_tile_window::<D, _>(View2::<_, T, VEC>::new(dx, m, n, n), [0, 0]);
    let mut wg = make_tile_window::<C, _>(View1::<_, T, VEC>::new(gamma, n), [0]);
    // This block's row of the workspace.
    let part = partial.slice(block * row_stride(n), n);
    let mut wp = make_tile_window::<C, _>(View1::<_, f32, 4>::new(part, n), [0]);
    // The addend's tile, loaded with x and dy (its latency hidden behind the reduction), kept
    // in the element type until it is added.
    let mut wadd =
        addend.map(|a| make_tile_window::<D, _>(View2::<_, T, VEC>::new(a, m, n, n), [0, 0]));
    let plus = |g: DistributedTensor<D, f32>, a: Option<DistributedTensor<D, T>>| match a {
        Some(a) => g.zip_map(&a.map(T::to_f32), |g, a| g + a),
        None => g,
    };
    // `dy · x · r` summed down the tile's rows, in the thread.
    let column_part = |dyf: &DistributedTensor<D, f32>,
                       xf: &DistributedTensor<D, f32>,
                       r: &DistributedTensor<D, f32>| {
        let products = dyf.zip_map(&xf.zip_map(r, |v, r| v * r), |d, v| d * v);
        reduce_x_in_warp::<D, C, f32, 0>(&products, |a, b| a + b)
    };
    if !LONG {
        assert!(
            tiles == 1,
            "rmsnorm_bwd: a row longer than the tile; use the _long kernel"
        );
        let mut dgamma = DistributedTensor::<C, f32>::zeros();
        let mut staged = STAGED.then(|| Stage::<D, T, VEC, S>::new((x, dy, addend), (m, n), stage));
        let (mut t, mut slot) = (block, 0);
        if let Some(staged) = staged.as_mut().filter(|_| t < row_tiles) {
            staged.fetch(t, slot);
        }
        while t < row_tiles {
            let next = t + grid;
            if let Some(staged) = staged.as_mut() {
                staged.wait();
                if next < row_tiles {
                    staged.fetch(next, slot ^ 1);
                }
            }
            let at = [(t * rows as u32) as i32, 0];
            wdx.set_origin(at);
            // gamma again for every row tile (from L1): kept, it would hold registers that
            // the loads in flight need.
            let g = broadcast_x::<D, C, f32, 0>(&wg.load::<T>().map(T::to_f32));
            let (xs, dys, add) = inputs(&mut staged, slot, (&mut wx, &mut wdy, wadd.as_mut()), at);
            let (xf, dyf) = (xs.map(T::to_f32), dys.map(T::to_f32));
            let gdy = dyf.zip_map(&g, |d, g| d * g);
            let pairs = xf.zip_map(&gdy, |v, d| (v * v, d * v));
            let sums = block_reduce_x::<D, (f32, f32), 1, SCRATCH>(&pairs, add_pair, scratch);
            let r = sums.map(|(ss, _)| finite_rsqrt(ss * inv_n + eps));
            let k = sums.zip_map(&r, |(_, dot), r| r * r * r * dot * inv_n);
            // Staged: read again from shared memory rather than held across the reduction.
            let (xs, dys, add) = match staged.as_mut() {
                Some(staged) => staged.load(slot),
                None => (xs, dys, add),
            };
            let (xf, dyf) = (xs.map(T::to_f32), dys.map(T::to_f32));
            let out = dyf
                .zip_map(&g, |d, g| d * g)
                .zip_map(&r, |d, r| d * r)
                .zip_map(&xf.zip_map(&k, |v, k| v * k), |a, b| a - b);
            wdx.store(&plus(out, add).round_to::<T>());
            dgamma = dgamma.zip_map(&column_part(&dyf, &xf, &r), |a, b| a + b);
            (t, slot) = (next, slot ^ 1);
        }
        wp.store(&dgamma);
        return;
    }
    // Rows longer than a tile: the sums over every column tile first, then `dx` and the
    // workspace row, read back and added to for every row tile after the block's first.
    let mut t = block;
    while t < row_tiles {
        let row0 = (t * rows as u32) as i32;
        let mut acc = DistributedTensor::<D, (f32, f32)>::zeros();
        for c in 0..tiles {
            wx.set_origin([row0, c * cols]);
            wdy.set_origin([row0, c * cols]);
            wg.set_origin([c * cols]);
            let (xf, dyf) = (
                wx.load::<T>().map(T::to_f32),
                wdy.load::<T>().map(T::to_f32),
            );
            let g = broadcast_x::<D, C, f32, 0>(&wg.load::<T>().map(T::to_f32));
            let gdy = dyf.zip_map(&g, |d, g| d * g);
            acc = acc.zip_map(&xf.zip_map(&gdy, |v, d| (v * v, d * v)), add_pair);
        }
        let sums = block_reduce_x::<D, (f32, f32), 1, SCRATCH>(&acc, add_pair, scratch);
        let r = sums.map(|(ss, _)| finite_rsqrt(ss * inv_n + eps));
        let k = sums.zip_map(&r, |(_, dot), r| r * r * r * dot * inv_n);
        for c in 0..tiles {
            wx.set_origin([row0, c * cols]);
            wdy.set_origin([row0, c * cols]);
            wdx.set_origin([row0, c * cols]);
            wg.set_origin([c * cols]);
            wp.set_origin([c * cols]);
            let (xf, dyf) = (
                wx.load::<T>().map(T::to_f32),
                wdy.load::<T>().map(T::to_f32),
            );
            let add = wadd.as_mut().map(|w| {
                w.set_origin([row0, c * cols]);
                w.load::<T>()
            });
            let g = broadcast_x::<D, C, f32, 0>(&wg.load::<T>().map(T::to_f32));
            let out = dyf
                .zip_map(&g, |d, g| d * g)
                .zip_map(&r, |d, r| d * r)
                .zip_map(&xf.zip_map(&k, |v, k| v * k), |a, b| a - b);
            wdx.store(&plus(out, add).round_to::<T>());
            let part = column_part(&dyf, &xf, &r);
            let sum = if t == block {
                part
            } else {
                wp.load::<f32>().zip_map(&part, |a, b| a + b)
            };
            wp.store(&sum);
        }
        t += grid;
    }
    // A block with no row tile still owns its workspace row: it sums nothing.
    if block >= row_tiles {
        for c in 0..tiles {
            wp.set_origin([c * cols]);
            wp.store(&DistributedTensor::<C, f32>::zeros());
        }
    }
}

macro_rules! rmsnorm_bwd_kernel {
    ($name:ident, $dist:ident, $cols:ident, $t:ty, $vec:literal, $block:literal, $pad:literal, $long:literal
     $(, staged = $staged:literal)?) => {
        #[doc = concat!("RMSNorm backward with `", stringify!($dist), "` tiles, `", stringify!($t), "` in and out.")]
        #[tile_kernel(block = $block, distributions($dist, $cols))]
        pub fn $name(
            dy: Global<$t>,
            x: Global<$t>,
            gamma: Global<$t>,
            dx: GlobalMut<$t>,
            partial: GlobalMut<f32>,
            m: u32,
            n: u32,
            eps: f32,
        ) {
            let scratch = shared!(u32; SCRATCH);
            let stage = shared!($t; stage_elems::<$dist, $t>(if !$long $(&& $staged)? { 2 } else { 0 }));
            rmsnorm_bwd_tile::<$dist, $cols, $t, $vec, $pad, $long, { !$long $(&& $staged)? }, { stage_elems::<$dist, $t>(if !$long $(&& $staged)? { 2 } else { 0 }) }>((dy, x, gamma), None, (dx, partial), (m, n, eps), (&scratch, stage));
        }
    };
}

instances! {
    declare: rmsnorm_bwd_kernel,
    launch(
        dy: &DeviceBuffer<Self>,
        x: &DeviceBuffer<Self>,
        gamma: &DeviceBuffer<Self>,
        dx: &mut DeviceBuffer<Self>,
        partial: &mut DeviceBuffer<f32>,
        m: u32,
        n: u32,
        eps: f32,
    ),
    f32 {
        // Not staged: 2 % slower staged at 65536 × 1024 and 4096 × 4096 (job 114 of
        // notes/h200-rows-backward-staged.txt).
        Rows Padded => rmsnorm_bwd_f32_rows / RmsnormBwdF32Rows (BwdRowsF32, BwdRowsF32Cols, f32, 4, 32, true, false, staged = false),
        Row4096 Padded => rmsnorm_bwd_f32_c4096 / RmsnormBwdF32C4096 (BwdRowF32x4096c16, BwdRowF32x4096c16Cols, f32, 4, 256, true, false, staged = false),
        // 8192 at 32 columns a thread: at 16, 229 → 127 registers but 2.5 % slower at
        // 16384 × 8192 (4096 at 16: 2 % faster; job 122 of
        // notes/h100-last-arrival-and-small-decode.txt).
        Row8192 Padded => rmsnorm_bwd_f32_c8192 / RmsnormBwdF32C8192 (BwdRowF32x8192, BwdRowF32x8192Cols, f32, 4, 256, true, false),
        Row8192 Long => rmsnorm_bwd_f32_long / RmsnormBwdF32Long (BwdRowF32x8192, BwdRowF32x8192Cols, f32, 4, 256, true, true),
    }
    Bf16 {
        Rows Padded => rmsnorm_bwd_bf16_rows / RmsnormBwdBf16Rows (BwdRowsBf16, BwdRowsBf16Cols, Bf16, 8, 32, true, false),
        Row4096 Padded => rmsnorm_bwd_bf16_c4096 / RmsnormBwdBf16C4096 (BwdRowBf16x4096c16, BwdRowBf16x4096c16Cols, Bf16, 8, 256, true, false),
        Row8192 Padded => rmsnorm_bwd_bf16_c8192 / RmsnormBwdBf16C8192 (BwdRowBf16x8192c16, BwdRowBf16x8192c16Cols, Bf16, 8, 512, true, false),
        Row8192 Long => rmsnorm_bwd_bf16_long / RmsnormBwdBf16Long (BwdRowBf16x8192, BwdRowBf16x8192Cols, Bf16, 8, 256, true, true),
        // Rows exactly the tile's width: no padding.
        Rows Full => rmsnorm_bwd_bf16_rows_full / RmsnormBwdBf16RowsFull (BwdRowsBf16, BwdRowsBf16Cols, Bf16, 8, 32, false, false),
        Row4096 Full => rmsnorm_bwd_bf16_c4096_full / RmsnormBwdBf16C4096Full (BwdRowBf16x4096c16, BwdRowBf16x4096c16Cols, Bf16, 8, 256, false, false),
        Row8192 Full => rmsnorm_bwd_bf16_c8192_full / RmsnormBwdBf16C8192Full (BwdRowBf16x8192c16, BwdRowBf16x8192c16Cols, Bf16, 8, 512, false, false),
    }
}

/// Host side: the two launches and the CPU reference.
#[cfg(not(target_arch = "nvptx64"))]
pub mod host {
    use super::*;
    use crate::rows::column_sum::{grid, take_partials, workspace, ColumnSum};
    use ck_core::host::{Device, LaunchConfig, LaunchError, LaunchStats};

    /// The device's workspace of the first kernel's column sums (kept between launches).
    pub const WORKSPACE: &str = "rmsnorm_bwd column sums";

    /// The tensors of one backward: inputs `(dy, x, gamma)` and outputs `(dx, dgamma)`.
    pub type Tensors<'a, T> = (
        (
            &'a DeviceBuffer<T>,
            &'a DeviceBuffer<T>,
            &'a DeviceBuffer<T>,
        ),
        (&'a mut DeviceBuffer<T>, &'a mut DeviceBuffer<T>),
    );

    /// Launches both kernels of `T` for rows of `n` on device buffers: `dx` (`m × n`) and
    /// `dgamma` (`n`) from `dy`, `x` (`m × n`) and `gamma` (`n`).
    pub fn launch<T: Kernels + ColumnSum>(
        device: &Device,
        tensors: Tensors<'_, T>,
        problem: (u32, u32, f32),
    ) -> Result<LaunchStats, LaunchError> {
        launch_with_blocks(device, tensors, problem, None)
    }

    /// [`launch`] with at most `max_blocks` blocks in the first kernel where given (the tests
    /// use few, so that small problems walk several row tiles per block).
    pub fn launch_with_blocks<T: Kernels + ColumnSum>(
        device: &Device,
        ((dy, x, gamma), (dx, dgamma)): Tensors<'_, T>,
        (m, n, eps): (u32, u32, f32),
        max_blocks: Option<u32>,
    ) -> Result<LaunchStats, LaunchError> {
        let first = |instance, cfg, partial: &mut DeviceBuffer<f32>| {
            T::launch_instance(instance, device, cfg, dy, x, gamma, dx, partial, m, n, eps)
        };
        with_column_sums(device, T::pick(n)?, dgamma, (m, n), max_blocks, first)
    }

    /// The two launches of a backward of this shape: `first` (given the `picked` instance for
    /// rows of `n` and its `(rows, threads)`, its grid and the workspace) writes the blocks'
    /// column sums, then [`ColumnSum`] adds them into `dgamma`.
    pub(crate) fn with_column_sums<T: ColumnSum>(
        device: &Device,
        (instance, (rows, threads)): (Instance, (u32, u32)),
        dgamma: &mut DeviceBuffer<T>,
        (m, n): (u32, u32),
        max_blocks: Option<u32>,
        first: impl FnOnce(
            Instance,
            LaunchConfig,
            &mut DeviceBuffer<f32>,
        ) -> Result<LaunchStats, LaunchError>,
    ) -> Result<LaunchStats, LaunchError> {
        let blocks = grid(m, (rows, threads), max_blocks);
        let (stride, len) = workspace(blocks, n)?;
        let mut partial = take_partials(device, WORKSPACE, len)?;
        let first = first(instance, LaunchConfig::new(blocks, threads), &mut partial);
        let both = first.and_then(|mut stats| {
            let second = T::column_sum(device, &partial, dgamma, (blocks, n, stride))?;
            stats.add(&second); // both launches' counters and time
            stats.elapsed += second.elapsed;
            Ok(stats)
        });
        device.keep_workspace(WORKSPACE, partial);
        both
    }

    /// RMSNorm's gradients in fp64, with the magnitudes their f32 errors are relative to.
    pub struct Reference {
        /// dx, `m × n`.
        pub dx: Vec<f64>,
        /// dgamma, `n`.
        pub dgamma: Vec<f64>,
        /// `|r·g·dy| + |x·r³·dot/N|`, the two terms each `dx` is the difference of: where they
        /// cancel, as in a row of one element, `dx` is tiny and its f32 error is not.
        pub dx_size: Vec<f64>,
        /// `Σ_i |dy·x·r|`, the terms each `dgamma` sums: where they cancel (a column of values
        /// of both signs), the sum is small and its f32 error is not.
        pub dgamma_size: Vec<f64>,
    }

    /// The fp64 CPU reference.
    pub fn reference(
        (dy, x, gamma): (&[f32], &[f32], &[f32]),
        (m, n): (u32, u32),
        eps: f32,
    ) -> Reference {
        let n = n as usize;
        let (mut dx, mut dx_size) = (vec![0.0; x.len()], vec![0.0; x.len()]);
        let (mut dgamma, mut dgamma_size) = (vec![0.0; n], vec![0.0; n]);
        for i in 0..m as usize {
            let row = |v: &[f32], j: usize| v[i * n + j] as f64;
            let ms = (0..n).map(|j| row(x, j) * row(x, j)).sum::<f64>() / n as f64;
            let r = 1.0 / (ms + eps as f64).sqrt();
            let dot: f64 = (0..n)
                .map(|j| row(dy, j) * gamma[j] as f64 * row(x, j))
                .sum();
            for j in 0..n {
                let g = gamma[j] as f64;
                let (a, b) = (r * g * row(dy, j), row(x, j) * r * r * r * dot / n as f64);
                dx[i * n + j] = a - b;
                dx_size[i * n + j] = a.abs() + b.abs();
                let term = row(dy, j) * row(x, j) * r;
                dgamma[j] += term;
                dgamma_size[j] += term.abs();
            }
        }
        Reference {
            dx,
            dgamma,
            dx_size,
            dgamma_size,
        }
    }
}

/// RMSNorm backward as every front end calls it.
#[cfg(not(target_arch = "nvptx64"))]
pub const OP: crate::op::Op = crate::op::Op {
    name: "rmsnorm_backward",
    summary: "RMSNorm backward: dx and dgamma from dy, x and gamma (r recomputed from x)",
    params: &[
        describe::rows_input("dy", "dy", "dy, the gradient of y, [..., N]"),
        describe::X,
        describe::GAMMA,
        describe::rows_output("dx", "dx-out", "dx, [..., N]"),
        crate::op::Param {
            name: "dgamma",
            flag: "dgamma-out",
            role: crate::op::Role::Output,
            elem: crate::op::Elem::Op,
            dims: describe::VECTOR,
            alt: None,
            doc: "dgamma, [N]",
        },
    ],
    scalars: &[describe::eps(1e-6)],
    dtypes: describe::DTYPES,
    constraints: crate::op::no_constraints,
    launch: op::launch,
    sample: op::sample,
    error: op::error,
    tolerance: describe::tolerance,
    agreement: crate::op::norm_relative_error,
    cases: describe::cases,
    bytes: |s, d| describe::bytes(s, d, 3.0, 2.0),
};

#[cfg(not(target_arch = "nvptx64"))]
use crate::rows::describe;

#[cfg(not(target_arch = "nvptx64"))]
mod op {
    use crate::op::{norm_error_relative_to, worst, HostOutput, Launch, Launched, Rng, Sizes};
    use ck_core::host::Device;

    pub fn launch(d: &Device, l: &mut Launch) -> Launched {
        let p = (l.sizes.u32("M"), l.sizes.u32("N"), l.scalar("eps"));
        crate::by_dtype!(l.dtype, T => {
            let (mut dx, mut dgamma) = (l.take::<T>(d, "dx")?, l.take::<T>(d, "dgamma")?);
            let inputs = (l.input::<T>("dy")?, l.input::<T>("x")?, l.input::<T>("gamma")?);
            let st = super::host::launch(d, (inputs, (&mut dx, &mut dgamma)), p);
            l.put("dx", dx);
            l.put("dgamma", dgamma);
            st
        })
    }

    /// dy and x in [−1, 1], gamma in [0.5, 2.5].
    pub fn sample(s: &Sizes, rng: &mut Rng) -> Vec<Vec<f32>> {
        let (m, n) = (s.get("M"), s.get("N"));
        let (dy, x) = (rng.values(m * n, 1.0, 0.0), rng.values(m * n, 1.0, 0.0));
        vec![dy, x, rng.values(n, 1.0, 1.5)]
    }

    /// Both gradients norm-wise against fp64, each relative to the size of the terms it is
    /// made of (see `Reference`).
    pub fn error(o: &HostOutput) -> f64 {
        let (mn, eps) = ((o.sizes.u32("M"), o.sizes.u32("N")), o.scalar("eps"));
        let inputs = (o.input("dy"), o.input("x"), o.input("gamma"));
        let want = super::host::reference(inputs, mn, eps);
        let got = |name| o.output(name).unwrap_or(&[]);
        worst(
            norm_error_relative_to(got("dx"), &want.dx, &want.dx_size),
            norm_error_relative_to(got("dgamma"), &want.dgamma, &want.dgamma_size),
        )
    }
}
