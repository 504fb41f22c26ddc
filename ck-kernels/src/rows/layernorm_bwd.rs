//! LayerNorm backward: from `dy`, `x`, `gamma` and the forward's row statistics (`mean`, `rstd`:
//! what `layernorm` writes when asked, and what torch saves), with `x̂ = (x − mean) · rstd`,
//!
//! ```text
//! dx[i, j]  = rstd_i · (g_j·dy_ij − mean_k(g_k·dy_ik) − x̂_ij · mean_k(g_k·dy_ik·x̂_ik))
//! dgamma[j] = Σ_i dy_ij · x̂_ij
//! dbeta[j]  = Σ_i dy_ij
//! ```
//!
//! f32 or bf16 in and out (the statistics f32), f32 arithmetic, any M × N; deterministic, as
//! [`crate::rows::rmsnorm_bwd`]: a grid of at most [`crate::rows::column_sum::MAX_THREADS`]
//! threads walks [`crate::rows::plan`]'s backward tiles (`x` and `dy` staged through shared
//! memory a row tile ahead where the instance says so: `rows::stage`), each thread summing its
//! columns' `dy · x̂` and `dy` down the tile's rows into one register per column (rows past
//! 8192, the `_long` kernels: into the block's workspace row), then
//! [`crate::rows::column_sum`] adds the blocks' rows in a fixed order. A row's statistics reach
//! every thread of the row through the tile's rows distribution (one register per row,
//! replicated over the row's threads).

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

/// Scratch for the pair reductions: `BLOCK_SIZE · rows per thread · 2` words (at most 256 · 4
/// · 2).
const SCRATCH: usize = 2048;

#[inline(always)]
fn add_pair(a: (f32, f32), b: (f32, f32)) -> (f32, f32) {
    (a.0 + b.0, a.1 + b.1)
}

/// The shared body of every configuration of the first kernel: `D` the tile, `C` its columns
/// (reduced over X0), `R` its rows (reduced over X1).
#[inline(always)]
fn layernorm_bwd_tile<
    D,
    C,
    R,
    T,
    const VEC: usize,
    const PAD: bool,
    const LONG: bool,
    const STAGED: bool,
    const S: usize,
>(
    (dy, x, gamma): (Global<T>, Global<T>, Global<T>),
    (mean, rstd): (Global<f32>, Global<f32>),
    (dx, part_g, part_b): (GlobalMut<T>, GlobalMut<f32>, GlobalMut<f32>),
    (m, n): (u32, u32),
    (scratch, stage): (&SharedArray<u32, SCRATCH>, SharedArray<T, S>),
) where
    D: TileDistribution<X = [i32; 2]>,
    C: TileDistribution<X = [i32; 1]>,
    R: TileDistribution<X = [i32; 1]>,
    T: Real,
{
    // The column sums' blocks may start as this kernel's leave (they wait for it to finish).
    launch_dependents();
    let [rows, cols] = D::X_LENGTHS;
    let (block, grid) = (block_idx(), grid_dim());
    let row_tiles = m.div_ceil(rows as u32);
    let tiles = if LONG {
        n.div_ceil(cols as u32) as i32
    } else {
        1
    };
    assert!(
        LONG || n <= cols as u32,
        "layernorm_bwd: a row longer than the tile; use the _long kernel"
    );
    // Unpadded (rows exactly the tile, kernels of their own): the views' width is the tile's
    // constant, so no load or store checks its columns (RMSNorm's backward has the numbers).
    assert!(
        PAD || n == cols as u32,
        "layernorm_bwd: an unpadded kernel for a row that is not the tile"
    );
    let n = if PAD { n } else { cols as u32 };
    let inv_n = 1.0 / n as f32;
    let mut wx = make_tile_window::<D, _>(View2::<_, T, VEC>::new(x, m, n, n), [0, 0]);
    let mut wdy = make_tile_window::<D, _>(View2::<_, T, VEC>::new(dy, m, n, n), [0, 0]);
    let mut wdx = make_tile_window::<D, _>(View2::<_, T, VEC>::new(dx, m, n, n), [0, 0]);
    let mut wg = make_tile_window::<C, _>(View1::<_, T, VEC>::new(gamma, n), [0]);
    let mut wm = make_tile_window::<R, _>(View1::<_, f32, 1>::new(mean, m), [0]);
    let mut wr = make_tile_window::<R, _>(View1::<_, f32, 1>::new(rstd, m), [0]);
    // This block's row of the two workspaces.
    let at = block * row_stride(n);
    let mut wpg = make_tile_window::<C, _>(View1::<_, f32, 4>::new(part_g.slice(at, n), n), [0]);
    let mut wpb = make_tile_window::<C, _>(View1::<_, f32, 4>::new(part_b.slice(at, n), n), [0]);
    let down_rows =
        |t: &DistributedTensor<D, f32>| reduce_x_in_warp::<D, C, f32, 0>(t, |a, b| a + b);
    let mut acc_g = DistributedTensor::<C, f32>::zeros();
    let mut acc_b = DistributedTensor::<C, f32>::zeros();
    // x and dy staged a row tile ahead (one column tile), or read from global memory (long rows:
    // twice).
    let mut staged = STAGED.then(|| Stage::<D, T, VEC, S>::new((x, dy, None), (m, n), stage));
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
        let row0 = (t * rows as u32) as i32;

        wm.set_origin([row0]);
        wr.set_origin([row0]);
        let rows_stats = wm.load::<f32>().zip_map(&wr.load::<f32>(), |a, b| (a, b));
        let stats = broadcast_x::<D, R, (f32, f32), 1>(&rows_stats);
        let mut acc = DistributedTensor::<D, (f32, f32)>::zeros();
        for c in 0..tiles {
            wg.set_origin([c * cols]);
            let (xs, dys, _) = inputs(
                &mut staged,
                slot,
                (&mut wx, &mut wdy, None),
                [row0, c * cols],
            );
            let xhat = xs.zip_map(&stats, |v, (mu, r)| (v.to_f32() - mu) * r);
            let g = broadcast_x::<D, C, f32, 0>(&wg.load::<T>().map(T::to_f32));
            let gdy = dys.zip_map(&g, |d, g| d.to_f32() * g);
            acc = acc.zip_map(&gdy.zip_map(&xhat, |d, h| (d, d * h)), add_pair);
        }
        let sums = block_reduce_x::<D, (f32, f32), 1, SCRATCH>(&acc, add_pair, scratch);
        for c in 0..tiles {
            // Read again (from the stage, or long rows' from global memory) rather than held
            // across the reduction.
            wdx.set_origin([row0, c * cols]);
            wg.set_origin([c * cols]);
            let (xs, dys, _) = inputs(
                &mut staged,
                slot,
                (&mut wx, &mut wdy, None),
                [row0, c * cols],
            );
            let xhat = xs.zip_map(&stats, |v, (mu, r)| (v.to_f32() - mu) * r);
            let dyf = dys.map(T::to_f32);
            let g = broadcast_x::<D, C, f32, 0>(&wg.load::<T>().map(T::to_f32));
            let gdy = dyf.zip_map(&g, |d, g| d * g);
            let k = sums.zip_map(&stats, |(s1, s2), (_, r)| (s1 * inv_n, s2 * inv_n, r));
            let out = gdy
                .zip_map(&xhat, |d, h| (d, h))
                .zip_map(&k, |(d, h), (c1, c2, r)| r * (d - c1 - h * c2))
                .round_to::<T>();
            wdx.store(&out);
            let g_part = down_rows(&dyf.zip_map(&xhat, |d, h| d * h));
            let b_part = down_rows(&dyf);
            if !LONG {
                acc_g = acc_g.zip_map(&g_part, |a, b| a + b);
                acc_b = acc_b.zip_map(&b_part, |a, b| a + b);
                continue;
            }
            wpg.set_origin([c * cols]);
            wpb.set_origin([c * cols]);
            if t == block {
                wpg.store(&g_part);
                wpb.store(&b_part);
            } else {
                wpg.store(&wpg.load::<f32>().zip_map(&g_part, |a, b| a + b));
                wpb.store(&wpb.load::<f32>().zip_map(&b_part, |a, b| a + b));
            }
        }
        (t, slot) = (next, slot ^ 1);
    }
    if !LONG {
        wpg.store(&acc_g);
        wpb.store(&acc_b);
    } else if block >= row_tiles {
        // A block with no row tile still owns its workspace row: it sums nothing.
        for c in 0..tiles {
            wpg.set_origin([c * cols]);
            wpb.set_origin([c * cols]);
            wpg.store(&DistributedTensor::<C, f32>::zeros());
            wpb.store(&DistributedTensor::<C, f32>::zeros());
        }
    }
}

macro_rules! layernorm_bwd_kernel {
    ($name:ident, $dist:ident, $cols:ident, $rows:ident, $t:ty, $vec:literal, $block:literal, $pad:literal, $long:literal
     $(, min_blocks_per_sm = $mb:literal)? $(, staged = $staged:literal)?) => {
        #[doc = concat!("LayerNorm backward with `", stringify!($dist), "` tiles, `", stringify!($t), "` in and out.")]
        #[tile_kernel(block = $block, $(min_blocks_per_sm = $mb,)? distributions($dist, $cols, $rows))]
        #[allow(clippy::too_many_arguments)]
        pub fn $name(
            dy: Global<$t>,
            x: Global<$t>,
            gamma: Global<$t>,
            mean: Global<f32>,
            rstd: Global<f32>,
            dx: GlobalMut<$t>,
            part_g: GlobalMut<f32>,
            part_b: GlobalMut<f32>,
            m: u32,
            n: u32,
        ) {
            let scratch = shared!(u32; SCRATCH);
            let stage = shared!($t; stage_elems::<$dist, $t>(if !$long $(&& $staged)? { 2 } else { 0 }));
            layernorm_bwd_tile::<$dist, $cols, $rows, $t, $vec, $pad, $long, { !$long $(&& $staged)? }, { stage_elems::<$dist, $t>(if !$long $(&& $staged)? { 2 } else { 0 }) }>(
                (dy, x, gamma),
                (mean, rstd),
                (dx, part_g, part_b),
                (m, n),
                (&scratch, stage),
            );
        }
    };
}

instances! {
    declare: layernorm_bwd_kernel,
    launch(
        dy: &DeviceBuffer<Self>,
        x: &DeviceBuffer<Self>,
        gamma: &DeviceBuffer<Self>,
        mean: &DeviceBuffer<f32>,
        rstd: &DeviceBuffer<f32>,
        dx: &mut DeviceBuffer<Self>,
        part_g: &mut DeviceBuffer<f32>,
        part_b: &mut DeviceBuffer<f32>,
        m: u32,
        n: u32,
    ),
    f32 {
        // Not staged: the stage's pointers pushed the thread's 254 registers into a spill.
        Rows Padded => layernorm_bwd_f32_rows / LayernormBwdF32Rows (BwdRowsF32, BwdRowsF32Cols, BwdRowsF32Rows, f32, 4, 32, true, false, staged = false),
        Row4096 Padded => layernorm_bwd_f32_c4096 / LayernormBwdF32C4096 (BwdRowF32x4096c16, BwdRowF32x4096c16Cols, BwdRowF32x4096c16Rows, f32, 4, 256, true, false),
        Row8192 Padded => layernorm_bwd_f32_c8192 / LayernormBwdF32C8192 (BwdRowF32x8192c16, BwdRowF32x8192c16Cols, BwdRowF32x8192c16Rows, f32, 4, 512, true, false),
        Row8192 Long => layernorm_bwd_f32_long / LayernormBwdF32Long (BwdRowF32x8192, BwdRowF32x8192Cols, BwdRowF32x8192Rows, f32, 4, 256, true, true),
    }
    Bf16 {
        // Four blocks per SM: at 131 registers (three blocks) the rows' tile lost 12 %.
        Rows Padded => layernorm_bwd_bf16_rows / LayernormBwdBf16Rows (BwdRowsBf16x4, BwdRowsBf16x4Cols, BwdRowsBf16x4Rows, Bf16, 8, 128, true, false, min_blocks_per_sm = 4),
        Row4096 Padded => layernorm_bwd_bf16_c4096 / LayernormBwdBf16C4096 (BwdRowBf16x4096c16, BwdRowBf16x4096c16Cols, BwdRowBf16x4096c16Rows, Bf16, 8, 256, true, false),
        Row8192 Padded => layernorm_bwd_bf16_c8192 / LayernormBwdBf16C8192 (BwdRowBf16x8192c16, BwdRowBf16x8192c16Cols, BwdRowBf16x8192c16Rows, Bf16, 8, 512, true, false),
        Row8192 Long => layernorm_bwd_bf16_long / LayernormBwdBf16Long (BwdRowBf16x8192, BwdRowBf16x8192Cols, BwdRowBf16x8192Rows, Bf16, 8, 256, true, true),
        // Rows exactly the tile's width: no padding.
        Rows Full => layernorm_bwd_bf16_rows_full / LayernormBwdBf16RowsFull (BwdRowsBf16x4, BwdRowsBf16x4Cols, BwdRowsBf16x4Rows, Bf16, 8, 128, false, false, min_blocks_per_sm = 4),
        Row4096 Full => layernorm_bwd_bf16_c4096_full / LayernormBwdBf16C4096Full (BwdRowBf16x4096c16, BwdRowBf16x4096c16Cols, BwdRowBf16x4096c16Rows, Bf16, 8, 256, false, false),
        Row8192 Full => layernorm_bwd_bf16_c8192_full / LayernormBwdBf16C8192Full (BwdRowBf16x8192c16, BwdRowBf16x8192c16Cols, BwdRowBf16x8192c16Rows, Bf16, 8, 512, false, false),
    }
}

/// Host side: the launches and the CPU reference.
#[cfg(not(target_arch = "nvptx64"))]
pub mod host {
    use super::*;
    use crate::rows::column_sum::{grid, take_partials, workspace, ColumnSum};
    use ck_core::host::{Device, LaunchConfig, LaunchError, LaunchStats};

    /// The device's workspaces of the first kernel's column sums (kept between launches).
    pub const WORKSPACES: [&str; 2] = ["layernorm_bwd dgamma sums", "layernorm_bwd dbeta sums"];

    /// The tensors of one backward: inputs `(dy, x, gamma)`, the forward's `(mean, rstd)`, and
    /// the outputs `(dx, dgamma, dbeta)`.
    pub struct Tensors<'a, T> {
        /// dy, `m × n`.
        pub dy: &'a DeviceBuffer<T>,
        /// x, `m × n`.
        pub x: &'a DeviceBuffer<T>,
        /// gamma, `n`.
        pub gamma: &'a DeviceBuffer<T>,
        /// Each row's mean, `m`.
        pub mean: &'a DeviceBuffer<f32>,
        /// Each row's `rsqrt(var + eps)`, `m`.
        pub rstd: &'a DeviceBuffer<f32>,
        /// dx, `m × n`.
        pub dx: &'a mut DeviceBuffer<T>,
        /// dgamma, `n`.
        pub dgamma: &'a mut DeviceBuffer<T>,
        /// dbeta, `n`.
        pub dbeta: &'a mut DeviceBuffer<T>,
    }

    /// Launches the kernels of `T` for rows of `n` on device buffers: the first, then the
    /// column sums of `dgamma` and `dbeta` together.
    pub fn launch<T: Kernels + ColumnSum>(
        device: &Device,
        t: Tensors<'_, T>,
        problem: (u32, u32),
    ) -> Result<LaunchStats, LaunchError> {
        launch_with_blocks(device, t, problem, None)
    }

    /// [`launch`] with at most `max_blocks` blocks in the first kernel where given (the tests
    /// use few, so that small problems walk several row tiles per block).
    pub fn launch_with_blocks<T: Kernels + ColumnSum>(
        device: &Device,
        t: Tensors<'_, T>,
        (m, n): (u32, u32),
        max_blocks: Option<u32>,
    ) -> Result<LaunchStats, LaunchError> {
        let (instance, (rows, threads)) = T::pick(n)?;
        let blocks = grid(m, (rows, threads), max_blocks);
        let (stride, len) = workspace(blocks, n)?;
        let (mut pg, mut pb) = (
            take_partials(device, WORKSPACES[0], len)?,
            take_partials(device, WORKSPACES[1], len)?,
        );
        let cfg = LaunchConfig::new(blocks, threads);
        let Tensors {
            dy,
            x,
            gamma,
            mean,
            rstd,
            dx,
            dgamma,
            dbeta,
        } = t;
        let first = T::launch_instance(
            instance, device, cfg, dy, x, gamma, mean, rstd, dx, &mut pg, &mut pb, m, n,
        );
        let result = first.and_then(|mut stats| {
            let sums = T::column_sums(
                device,
                &[&pg, &pb],
                &mut [dgamma, dbeta],
                (blocks, n, stride),
            )?;
            stats.add(&sums); // every launch's counters and time
            stats.elapsed += sums.elapsed;
            Ok(stats)
        });
        device.keep_workspace(WORKSPACES[0], pg);
        device.keep_workspace(WORKSPACES[1], pb);
        result
    }

    /// The fp64 CPU reference from the given statistics: `(dx, dgamma, dbeta, size)`, `size`
    /// the magnitude of the three terms each `dx` is made of (what its f32 error is relative
    /// to).
    #[allow(clippy::type_complexity)]
    pub fn reference(
        (dy, x, gamma): (&[f32], &[f32], &[f32]),
        (mean, rstd): (&[f32], &[f32]),
        (m, n): (u32, u32),
    ) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
        let n = n as usize;
        let (mut dx, mut size) = (vec![0.0; x.len()], vec![0.0; x.len()]);
        let (mut dgamma, mut dbeta) = (vec![0.0; n], vec![0.0; n]);
        for i in 0..m as usize {
            let (mu, r) = (mean[i] as f64, rstd[i] as f64);
            let xhat: Vec<f64> = (0..n).map(|j| (x[i * n + j] as f64 - mu) * r).collect();
            let gdy: Vec<f64> = (0..n)
                .map(|j| gamma[j] as f64 * dy[i * n + j] as f64)
                .collect();
            let c1 = gdy.iter().sum::<f64>() / n as f64;
            let c2 = (0..n).map(|j| gdy[j] * xhat[j]).sum::<f64>() / n as f64;
            for j in 0..n {
                dx[i * n + j] = r * (gdy[j] - c1 - xhat[j] * c2);
                size[i * n + j] = r * (gdy[j].abs() + c1.abs() + (xhat[j] * c2).abs());
                dgamma[j] += dy[i * n + j] as f64 * xhat[j];
                dbeta[j] += dy[i * n + j] as f64;
            }
        }
        (dx, dgamma, dbeta, size)
    }
}

/// LayerNorm backward as every front end calls it.
#[cfg(not(target_arch = "nvptx64"))]
pub const OP: crate::op::Op = crate::op::Op {
    name: "layernorm_backward",
    summary:
        "LayerNorm backward: dx, dgamma and dbeta from dy, x, gamma and the forward's mean and rstd",
    params: &[
        describe::rows_input("dy", "dy", "dy, the gradient of y, [..., N]"),
        describe::X,
        describe::GAMMA,
        describe::statistic(
            crate::op::Role::Input,
            "mean",
            "mean",
            "each row's mean (the forward's), [...]",
        ),
        describe::statistic(
            crate::op::Role::Input,
            "rstd",
            "rstd",
            "each row's rsqrt(var + eps) (the forward's), [...]",
        ),
        describe::rows_output("dx", "dx-out", "dx, [..., N]"),
        describe::vector_output("dgamma", "dgamma-out", "dgamma, [N]"),
        describe::vector_output("dbeta", "dbeta-out", "dbeta, [N]"),
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
    bytes: |s, d| describe::bytes(s, d, 3.0, 3.0) + 8.0 * s.get("M") as f64,
};

#[cfg(not(target_arch = "nvptx64"))]
use crate::rows::describe;

#[cfg(not(target_arch = "nvptx64"))]
mod op {
    use super::host::{launch as launch_typed, reference, Tensors};
    use crate::op::{
        norm_error_relative_to, norm_relative_error, worst, HostOutput, Launch, Launched, Rng,
        Sizes,
    };
    use ck_core::host::Device;

    pub fn launch(d: &Device, l: &mut Launch) -> Launched {
        let mn = (l.sizes.u32("M"), l.sizes.u32("N"));
        crate::by_dtype!(l.dtype, T => {
            let mut dx = l.take::<T>(d, "dx")?;
            let (mut dgamma, mut dbeta) = (l.take::<T>(d, "dgamma")?, l.take::<T>(d, "dbeta")?);
            let t = Tensors {
                dy: l.input::<T>("dy")?,
                x: l.input::<T>("x")?,
                gamma: l.input::<T>("gamma")?,
                mean: l.input::<f32>("mean")?,
                rstd: l.input::<f32>("rstd")?,
                dx: &mut dx,
                dgamma: &mut dgamma,
                dbeta: &mut dbeta,
            };
            let st = launch_typed(d, t, mn);
            l.put("dx", dx);
            l.put("dgamma", dgamma);
            l.put("dbeta", dbeta);
            st
        })
    }

    /// dy in [−1, 1], x around 10, gamma in [0.5, 2.5]; the statistics of x in fp64.
    pub fn sample(s: &Sizes, rng: &mut Rng) -> Vec<Vec<f32>> {
        let (m, n) = (s.get("M"), s.get("N"));
        let (dy, x) = (rng.values(m * n, 1.0, 0.0), rng.values(m * n, 1.0, 10.0));
        let (mut mean, mut rstd) = (Vec::with_capacity(m), Vec::with_capacity(m));
        for row in x.chunks(n.max(1)).take(m) {
            let mu = row.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
            let var = row.iter().map(|&v| (v as f64 - mu).powi(2)).sum::<f64>() / n as f64;
            mean.push(mu as f32);
            rstd.push((1.0 / (var + 1e-5).sqrt()) as f32);
        }
        vec![dy, x, rng.values(n, 1.0, 1.5), mean, rstd]
    }

    /// `dx` norm-wise against fp64 relative to the size of its terms; `dgamma`, `dbeta` (sums
    /// over every row, whose elements may cancel) norm-wise to themselves.
    pub fn error(o: &HostOutput) -> f64 {
        let mn = (o.sizes.u32("M"), o.sizes.u32("N"));
        let inputs = (o.input("dy"), o.input("x"), o.input("gamma"));
        let (dx, dgamma, dbeta, size) = reference(inputs, (o.input("mean"), o.input("rstd")), mn);
        let got = |name| o.output(name).unwrap_or(&[]);
        let dx_err = norm_error_relative_to(got("dx"), &dx, &size);
        let params = worst(
            norm_relative_error(got("dgamma"), &dgamma),
            norm_relative_error(got("dbeta"), &dbeta),
        );
        worst(dx_err, params)
    }
}
