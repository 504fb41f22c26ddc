//! LayerNorm forward: `y = (x − mean) · rsqrt(var + eps) · gamma + beta` over each row, f32 or
//! bf16 in and out with f32 arithmetic, any M × N, optionally writing each row's mean and rstd
//! (what a backward pass needs).
//!
//! Mean and variance are computed on shifted data, the stable two-pass method in one pass over
//! memory: the mean of the row's first tile (one `block_reduce_x`) is the shift `s`; then the
//! sums of `d = x − s` and `d²` over the row (one `block_reduce_x` of a pair) give
//! `mean = s + Σd/N` and `var = Σd²/N − (Σd/N)²`. `x − s` is exact for values near the shift,
//! and `Σd/N` is small, so nothing cancels: rows like `1e4 + N(0, 1)` keep their variance, and
//! `y = (d − Σd/N) · rstd` never subtracts two numbers of size 1e4 rounded apart. Padding is left
//! out with the window's validity mask. Rows that fit one tile are read once; longer rows are
//! read twice (statistics, then output).
//!
//! f32 rows exactly one tile wide (CK's `kPadN = false`, kernels of their own) need no shift
//! first: each thread folds its values into a [`Welford`] accumulator ([`welford_x`]: the shift
//! is its first value, so `x − mean` stays exact-ish far from zero), and one `block_reduce_x`
//! merges them (Chan's update) — one reduction, one trip through shared memory and two barriers fewer.

#[cfg(not(target_arch = "nvptx64"))]
use crate::rows::describe;
use crate::rows::plan::*;
use ck_core::device::*;
#[cfg(not(target_arch = "nvptx64"))]
use ck_core::host::DeviceBuffer;
use ck_core::tile::{
    block_reduce_x, make_tile_window, welford_x, DistributedTensor, View2, Welford,
};
use ck_core::TileDistribution;
use ck_macros::tile_kernel;

/// Scratch for the cross-warp reductions: `BLOCK_SIZE` (≤ 256) × 2 words (a pair).
const SCRATCH: usize = 512;
/// The same for the one-reduction kernels: × 4 words (a [`Welford`]).
const SCRATCH_WELFORD: usize = 1024;

/// `(d, d²)` of the valid elements of `x − shift` (padding contributes nothing).
#[inline(always)]
fn deviations<D: TileDistribution>(
    x: &DistributedTensor<D, f32>,
    shift: &DistributedTensor<D, f32>,
    valid: &DistributedTensor<D, bool>,
) -> DistributedTensor<D, (f32, f32)> {
    x.zip_map(shift, |v, s| v - s)
        .zip_map(valid, |d, ok| if ok { (d, d * d) } else { (0.0, 0.0) })
}

/// A row's statistics from the sums of its deviations: per register, `(mean(d), rstd)`.
#[inline(always)]
fn row_stats<D: TileDistribution>(
    acc: &DistributedTensor<D, (f32, f32)>,
    (n, eps): (u32, f32),
    scratch: &SharedArray<u32, SCRATCH>,
) -> DistributedTensor<D, (f32, f32)> {
    let sums =
        block_reduce_x::<D, (f32, f32), 1, SCRATCH>(acc, |a, b| (a.0 + b.0, a.1 + b.1), scratch);
    let inv_n = 1.0 / n as f32;
    sums.map(|(s, q)| {
        let md = s * inv_n;
        let var = (q * inv_n - md * md).max(0.0);
        (md, math::rsqrt(var + eps))
    })
}

/// The body of the one-reduction kernels: rows exactly the tile's width (rows past `m` read
/// zeros and are never written).
#[inline(always)]
fn layernorm_full_rows<D: TileDistribution<X = [i32; 2]>, T: Real, const VEC: usize>(
    (x, gamma, beta): (Global<T>, Global<T>, Global<T>),
    y: GlobalMut<T>,
    (mean_out, rstd_out, stats_rows): (GlobalMut<f32>, GlobalMut<f32>, u32),
    (m, n, eps): (u32, u32, f32),
    scratch: &SharedArray<u32, SCRATCH_WELFORD>,
) {
    let [rows, cols] = D::X_LENGTHS;
    assert!(
        n == cols as u32,
        "layernorm: an unpadded kernel for a row that is not the tile"
    );
    let row0 = (block_idx() * rows as u32) as i32;
    // gamma and beta as rows of stride 0, every row the same. (The windows are made before the
    // loads, as in `layernorm_tile`: made after the reduction, ptxas kept more registers.)
    let wx = make_tile_window::<D, _>(View2::<_, T, VEC>::new(x, m, n, n), [row0, 0]);
    let wg = make_tile_window::<D, _>(View2::<_, T, VEC>::new(gamma, rows as u32, n, 0), [0, 0]);
    let wb = make_tile_window::<D, _>(View2::<_, T, VEC>::new(beta, rows as u32, n, 0), [0, 0]);
    let wy = make_tile_window::<D, _>(View2::<_, T, VEC>::new(y, m, n, n), [row0, 0]);
    let x = wx.load::<T>().map(T::to_f32);
    let w = block_reduce_x::<D, Welford, 1, SCRATCH_WELFORD>(
        &welford_x::<D, 1>(&x),
        Welford::merge,
        scratch,
    );
    let rstd = w.map(|w| math::rsqrt(w.variance() + eps));
    let scaled = x
        .zip_map(&w, |v, w| w.deviation(v))
        .zip_map(&rstd, |d, r| d * r)
        .zip_map(&wg.load::<T>(), |v, g| v * g.to_f32());
    wy.store(
        &scaled
            .zip_map(&wb.load::<T>(), |v, b| v + b.to_f32())
            .round_to::<T>(),
    );
    // Each row's mean and rstd (where asked: `stats_rows` = m, else 0), from column 0, one
    // after the other (both made first, they were live together: +12 to +31 registers).
    let column = |g: GlobalMut<f32>| View2::<_, f32, 1>::new(g, stats_rows, 1, 1);
    make_tile_window::<D, _>(column(mean_out), [row0, 0]).store(&w.map(Welford::row_mean));
    make_tile_window::<D, _>(column(rstd_out), [row0, 0]).store(&rstd);
}

/// `(x − shift − mean(d)) · rstd · gamma + beta`, computed in place as gamma and beta arrive
/// (fewer registers live than loading all three first).
#[inline(always)]
fn normalize<D: TileDistribution, T: Real>(
    x: &DistributedTensor<D, f32>,
    shift: &DistributedTensor<D, f32>,
    stats: &DistributedTensor<D, (f32, f32)>,
    (gamma, beta): (&DistributedTensor<D, T>, &DistributedTensor<D, T>),
) -> DistributedTensor<D, T> {
    x.zip_map(shift, |v, s| v - s)
        .zip_map(stats, |d, (md, r)| (d - md) * r)
        .zip_map(gamma, |v, g| v * g.to_f32())
        .zip_map(beta, |v, b| v + b.to_f32())
        .round_to::<T>()
}

/// The shared body of every configuration.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn layernorm_tile<D, T, const VEC: usize, const LONG: bool, const PAD: bool>(
    (x, gamma, beta): (Global<T>, Global<T>, Global<T>),
    y: GlobalMut<T>,
    (mean_out, rstd_out, stats_rows): (GlobalMut<f32>, GlobalMut<f32>, u32),
    (m, n, eps): (u32, u32, f32),
    scratch: &SharedArray<u32, SCRATCH>,
) where
    D: TileDistribution<X = [i32; 2]>,
    T: Real,
{
    let [rows, cols] = D::X_LENGTHS;
    let row0 = (block_idx() * rows as u32) as i32;
    let add = |a: f32, b: f32| a + b;
    let xv = View2::<_, T, VEC>::new(x, m, n, n);
    let gv = View2::<_, T, VEC>::new(gamma, rows as u32, n, 0);
    let bv = View2::<_, T, VEC>::new(beta, rows as u32, n, 0);
    let yv = View2::<_, T, VEC>::new(y, m, n, n);
    let mut wx = make_tile_window::<D, _>(xv, [row0, 0]);
    let mut wg = make_tile_window::<D, _>(gv, [0, 0]);
    let mut wb = make_tile_window::<D, _>(bv, [0, 0]);
    let mut wy = make_tile_window::<D, _>(yv, [row0, 0]);
    // 1. The shift: the mean of the first tile (its padding reads 0).
    let first = wx.load::<T>().map(T::to_f32);
    let first_n = n.min(cols as u32) as f32;
    let shift = block_reduce_x::<D, f32, 1, SCRATCH>(&first, add, scratch).map(|s| s / first_n);
    // 2. Σd and Σd² over the row, then y. Without padding (CK's `kPadN = false`: the row is
    // exactly the tile, a kernel of its own) no element needs its validity: the mask's index
    // arithmetic and selects were a third of the bf16 kernels' instructions. (Rows past `m`
    // read zeros with a zero shift and are never written.)
    let mut acc = if PAD {
        deviations(&first, &shift, &wx.valid_mask::<T>())
    } else {
        assert!(
            n == cols as u32,
            "layernorm: an unpadded kernel for a row that is not the tile"
        );
        first.zip_map(&shift, |v, s| {
            let d = v - s;
            (d, d * d)
        })
    };
    let stats = if !LONG {
        // The row is in registers: one read of x. (Kernels without the long-row path are only
        // launched for rows that fit: a separate kernel keeps its registers out of this one.)
        assert!(
            n <= cols as u32,
            "layernorm: row longer than the tile; use the _long kernel"
        );
        let stats = row_stats(&acc, (n, eps), scratch);
        // gamma, then beta once x·gamma is made: x, gamma and beta are never all live.
        let scaled = first
            .zip_map(&shift, |v, s| v - s)
            .zip_map(&stats, |d, (md, r)| (d - md) * r)
            .zip_map(&wg.load::<T>(), |v, g| v * g.to_f32());
        wy.store(
            &scaled
                .zip_map(&wb.load::<T>(), |v, b| v + b.to_f32())
                .round_to::<T>(),
        );
        stats
    } else {
        // Longer rows: the other tiles for the sums, then every tile again for y.
        for _ in 1..n.div_ceil(cols as u32) {
            wx.move_by([0, cols]);
            let t = wx.load::<T>().map(T::to_f32);
            let d = deviations(&t, &shift, &wx.valid_mask::<T>());
            acc = acc.zip_map(&d, |a, b| (a.0 + b.0, a.1 + b.1));
        }
        let stats = row_stats(&acc, (n, eps), scratch);
        wx.set_origin([row0, 0]);
        for _ in 0..n.div_ceil(cols as u32) {
            let t = wx.load::<T>().map(T::to_f32);
            let (g, b) = (wg.load::<T>(), wb.load::<T>());
            wy.store(&normalize(&t, &shift, &stats, (&g, &b)));
            wx.move_by([0, cols]);
            wg.move_by([0, cols]);
            wb.move_by([0, cols]);
            wy.move_by([0, cols]);
        }
        stats
    };
    // 3. Each row's mean and rstd (where asked: `stats_rows` = m, else 0), from column 0.
    let column = |g: GlobalMut<f32>| View2::<_, f32, 1>::new(g, stats_rows, 1, 1);
    make_tile_window::<D, _>(column(mean_out), [row0, 0])
        .store(&shift.zip_map(&stats, |s, (md, _)| s + md));
    make_tile_window::<D, _>(column(rstd_out), [row0, 0]).store(&stats.map(|(_, r)| r));
}

macro_rules! layernorm_kernel {
    // Launch bounds only where given: with `min_blocks_per_sm = 1` ptxas takes registers freely
    // (the bf16 row kernel went 77 → 120).
    ($name:ident, $dist:ident, $t:ty, $vec:literal, $block:literal, $long:literal, $pad:literal) => {
        layernorm_kernel!(@ $name, $dist, $t, [block = $block, distributions($dist)], SCRATCH,
            layernorm_tile::<$dist, $t, $vec, $long, $pad>);
    };
    ($name:ident, $dist:ident, $t:ty, $vec:literal, $block:literal, $long:literal, $pad:literal, min_blocks_per_sm = $mb:literal) => {
        layernorm_kernel!(@ $name, $dist, $t, [block = $block, min_blocks_per_sm = $mb, distributions($dist)], SCRATCH,
            layernorm_tile::<$dist, $t, $vec, $long, $pad>);
    };
    // Rows exactly the tile's width, one reduction.
    ($name:ident, $dist:ident, $t:ty, $vec:literal, $block:literal, one_reduction) => {
        layernorm_kernel!(@ $name, $dist, $t, [block = $block, distributions($dist)], SCRATCH_WELFORD,
            layernorm_full_rows::<$dist, $t, $vec>);
    };
    (@ $name:ident, $dist:ident, $t:ty, [$($opts:tt)*], $scratch:ident, $body:expr) => {
        #[doc = concat!("LayerNorm with `", stringify!($dist), "` tiles, `", stringify!($t), "` in and out.")]
        #[tile_kernel($($opts)*)]
        #[allow(clippy::too_many_arguments)]
        pub fn $name(
            x: Global<$t>,
            gamma: Global<$t>,
            beta: Global<$t>,
            y: GlobalMut<$t>,
            mean: GlobalMut<f32>,
            rstd: GlobalMut<f32>,
            stats_rows: u32,
            m: u32,
            n: u32,
            eps: f32,
        ) {
            let scratch = shared!(u32; $scratch);
            $body(
                (x, gamma, beta),
                y,
                (mean, rstd, stats_rows),
                (m, n, eps),
                &scratch,
            );
        }
    };
}

instances! {
    declare: layernorm_kernel,
    launch(
        x: &DeviceBuffer<Self>,
        gamma: &DeviceBuffer<Self>,
        beta: &DeviceBuffer<Self>,
        y: &mut DeviceBuffer<Self>,
        mean: &mut DeviceBuffer<f32>,
        rstd: &mut DeviceBuffer<f32>,
        stats_rows: u32,
        m: u32,
        n: u32,
        eps: f32,
    ),
    f32 {
        Rows Padded => layernorm_f32_rows / LayernormF32Rows (RowsF32, f32, 4, 256, false, true),
        Row4096 Padded => layernorm_f32_c4096 / LayernormF32C4096 (RowF32x4096, f32, 4, 128, false, true),
        Row8192 Padded => layernorm_f32_c8192 / LayernormF32C8192 (RowF32x8192, f32, 4, 256, false, true),
        Row8192 Long => layernorm_f32_long / LayernormF32Long (RowF32x8192, f32, 4, 256, true, true),
        // f32 rows exactly the tile's width: one reduction (see the module documentation). (The
        // bf16 ones keep two: at 8192 columns the one-reduction kernel spilled under its
        // four-blocks bound and lost 14 %; at 1024 and 4096 columns it gained nothing.)
        Rows Full => layernorm_f32_rows_full / LayernormF32RowsFull (RowsF32, f32, 4, 256, one_reduction),
        Row4096 Full => layernorm_f32_c4096_full / LayernormF32C4096Full (RowF32x4096, f32, 4, 128, one_reduction),
        Row8192 Full => layernorm_f32_c8192_full / LayernormF32C8192Full (RowF32x8192, f32, 4, 256, one_reduction),
    }
    Bf16 {
        Rows Padded => layernorm_bf16_rows / LayernormBf16Rows (RowsBf16, Bf16, 8, 256, false, true),
        Row4096 Padded => layernorm_bf16_c4096 / LayernormBf16C4096 (RowBf16x4096, Bf16, 8, 128, false, true),
        // Three blocks per SM (80 registers; 12 bytes spilled in the epilogue): the row is 16 KiB
        // of loads, and the third block's are what keeps the memory system busy.
        Row8192 Padded => layernorm_bf16_c8192 / LayernormBf16C8192 (RowBf16x8192, Bf16, 8, 256, false, true, min_blocks_per_sm = 3),
        Row8192 Long => layernorm_bf16_long / LayernormBf16Long (RowBf16x8192, Bf16, 8, 256, true, true),
        // Rows exactly the tile's width (bf16, where the mask's instructions were the limit).
        Rows Full => layernorm_bf16_rows_full / LayernormBf16RowsFull (RowsBf16, Bf16, 8, 256, false, false),
        Row4096 Full => layernorm_bf16_c4096_full / LayernormBf16C4096Full (RowBf16x4096, Bf16, 8, 128, false, false),
        // Four blocks per SM (63 registers, no spill; 72 at three): 2796 -> 2940 GB/s at
        // 16384 × 8192.
        Row8192 Full => layernorm_bf16_c8192_full / LayernormBf16C8192Full (RowBf16x8192, Bf16, 8, 256, false, false, min_blocks_per_sm = 4),
    }
}

/// Host side: configuration, launch, CPU reference.
#[cfg(not(target_arch = "nvptx64"))]
pub mod host {
    use super::*;
    use ck_core::host::{Device, LaunchError, LaunchStats};

    /// One LayerNorm's device buffers. `mean` and `rstd` receive each row's statistics when they
    /// hold `m` elements; pass empty buffers to skip them.
    pub struct Buffers<'a, T> {
        /// x, `m × n` row-major.
        pub x: &'a DeviceBuffer<T>,
        /// gamma, `n`.
        pub gamma: &'a DeviceBuffer<T>,
        /// beta, `n`.
        pub beta: &'a DeviceBuffer<T>,
        /// y, `m × n`.
        pub y: &'a mut DeviceBuffer<T>,
        /// Row means, `m` (or empty).
        pub mean: &'a mut DeviceBuffer<f32>,
        /// Row `rsqrt(var + eps)`, `m` (or empty).
        pub rstd: &'a mut DeviceBuffer<f32>,
    }

    /// Rows of statistics to write: `m`, or 0 when both buffers are empty; any other length
    /// is an error rather than statistics silently left out.
    fn stats_rows<T>(b: &Buffers<'_, T>, m: u32) -> Result<u32, LaunchError> {
        match (b.mean.len(), b.rstd.len()) {
            (0, 0) => Ok(0),
            (a, r) if a >= m as usize && r >= m as usize => Ok(m),
            (a, r) => Err(LaunchError::invalid(
                ck_core::rules::SHAPE_MISMATCH,
                format!("mean and rstd hold {a} and {r} elements; give {m} each (one per row), or empty buffers to skip the statistics"),
            )),
        }
    }

    /// Launches the kernel of `T` for rows of `n` ([`Instance::pick`]) on device buffers.
    pub fn launch<T: Kernels>(
        device: &Device,
        b: Buffers<'_, T>,
        (m, n, eps): (u32, u32, f32),
    ) -> Result<LaunchStats, LaunchError> {
        let instance = Instance::pick(n, T::DTYPE, T::INSTANCES);
        let cfg = instance.tile.launch_config(T::DTYPE, m);
        let s = stats_rows(&b, m)?;
        let (x, g, be, y, mu, r) = (b.x, b.gamma, b.beta, b.y, b.mean, b.rstd);
        T::launch_instance(instance, device, cfg, x, g, be, y, mu, r, s, m, n, eps)
    }

    /// The fp64 reference, textbook two-pass: `(y, mean, rstd)`.
    pub fn reference(
        (x, gamma, beta): (&[f32], &[f32], &[f32]),
        (m, n): (u32, u32),
        eps: f32,
    ) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let n = n as usize;
        let (mut y, mut means, mut rstds) = (vec![0.0; x.len()], Vec::new(), Vec::new());
        for i in 0..m as usize {
            let row: Vec<f64> = x[i * n..(i + 1) * n].iter().map(|&v| v as f64).collect();
            let mean = row.iter().sum::<f64>() / n as f64;
            let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
            let rstd = 1.0 / (var + eps as f64).sqrt();
            for j in 0..n {
                y[i * n + j] = (row[j] - mean) * rstd * gamma[j] as f64 + beta[j] as f64;
            }
            means.push(mean);
            rstds.push(rstd);
        }
        (y, means, rstds)
    }
}

/// LayerNorm as every front end calls it.
#[cfg(not(target_arch = "nvptx64"))]
pub const OP: crate::op::Op = crate::op::Op {
    name: "layernorm",
    summary: "LayerNorm over the last dimension: y = (x − mean) · rsqrt(var + eps) · gamma + beta",
    params: &[
        describe::X,
        describe::GAMMA,
        describe::vector_input("beta", "beta, [N]"),
        describe::Y,
        STAT_MEAN,
        STAT_RSTD,
    ],
    scalars: &[describe::eps(1e-5)],
    dtypes: describe::DTYPES,
    constraints: crate::op::no_constraints,
    launch: op::launch,
    sample: op::sample,
    error: op::error,
    tolerance: describe::tolerance,
    agreement: crate::op::max_relative_error,
    cases: describe::cases,
    bytes: |s, d| describe::bytes(s, d, 2.0, 2.0),
};

#[cfg(not(target_arch = "nvptx64"))]
const STAT_MEAN: crate::op::Param = describe::statistic(
    crate::op::Role::OptionalOutput,
    "mean",
    "mean-out",
    "each row's mean, [...]",
);
#[cfg(not(target_arch = "nvptx64"))]
const STAT_RSTD: crate::op::Param = describe::statistic(
    crate::op::Role::OptionalOutput,
    "rstd",
    "rstd-out",
    "each row's rsqrt(var + eps), [...]",
);

#[cfg(not(target_arch = "nvptx64"))]
mod op {
    use super::host::{launch as launch_typed, reference, Buffers};
    use crate::op::{max_relative_error, worst, HostOutput, Launch, Launched, Rng, Sizes};
    use ck_core::host::Device;

    pub fn launch(d: &Device, l: &mut Launch) -> Launched {
        let p = (l.sizes.u32("M"), l.sizes.u32("N"), l.scalar("eps"));
        let (mut mean, mut rstd) = (l.take::<f32>(d, "mean")?, l.take::<f32>(d, "rstd")?);
        // The kernel writes both statistics or neither: one asked for alone gets a scratch twin.
        let m = l.sizes.get("M");
        if mean.is_empty() != rstd.is_empty() {
            let scratch = ck_core::host::DeviceBuffer::zeros(d, m)?;
            match mean.is_empty() {
                true => mean = scratch,
                false => rstd = scratch,
            }
        }
        let st = crate::by_dtype!(l.dtype, T => {
            let mut y = l.take::<T>(d, "y")?;
            let b = Buffers {
                x: l.input::<T>("x")?,
                gamma: l.input::<T>("gamma")?,
                beta: l.input::<T>("beta")?,
                y: &mut y,
                mean: &mut mean,
                rstd: &mut rstd,
            };
            let st = launch_typed(d, b, p);
            l.put("y", y);
            st
        });
        l.put("mean", mean);
        l.put("rstd", rstd);
        st
    }

    /// x around 10 (so that the mean matters), gamma in [0.5, 2.5], beta in [−1, 1].
    pub fn sample(s: &Sizes, rng: &mut Rng) -> Vec<Vec<f32>> {
        let (m, n) = (s.get("M"), s.get("N"));
        let x = rng.values(m * n, 1.0, 10.0);
        vec![x, rng.values(n, 1.0, 1.5), rng.values(n, 1.0, 0.0)]
    }

    /// y relative to the size of what it is computed from, `(|x| + |mean|) · rstd · |g| + |b|`;
    /// the statistics (when computed) relative to themselves. `x − mean` cancels: its f32 error
    /// is of the size of x, not of the difference, so an element whose `(x − mean) · rstd · g`
    /// and `b` are both near 0 is no more accurate than its neighbours (measured against
    /// `|y − b| + |b|` alone, 257 rows of 4096 around 10 put some elements' error over 1e-5
    /// with an absolute error of 1e-6, as good as any f32 kernel's).
    pub fn error(o: &HostOutput) -> f64 {
        let (x, g, b) = (o.input("x"), o.input("gamma"), o.input("beta"));
        let mn = (o.sizes.u32("M"), o.sizes.u32("N"));
        let (want, mean, rstd) = reference((x, g, b), mn, o.scalar("eps"));
        let (n, y) = (mn.1 as usize, o.output("y").unwrap_or(&[]));
        let y_err = (0..want.len())
            .map(|i| {
                let (row, j) = (i / n, i % n);
                let size = (x[i].abs() as f64 + mean[row].abs()) * rstd[row] * (g[j].abs() as f64)
                    + (b[j].abs() as f64);
                (y.get(i).map_or(f64::NAN, |&v| v as f64) - want[i]).abs() / size.max(1e-30)
            })
            .fold(0.0, worst);
        let stat = |name, want: &[f64]| o.output(name).map_or(0.0, |v| max_relative_error(v, want));
        worst(worst(y_err, stat("mean", &mean)), stat("rstd", &rstd))
    }
}
