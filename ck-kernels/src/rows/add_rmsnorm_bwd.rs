//! Fused residual add + RMSNorm backward. The forward ([`crate::rows::add_rmsnorm`]) writes
//! `r = x + residual` and `y = rmsnorm(r) · gamma`; a model reads both (`r` is the next
//! residual), so two gradients arrive: `dy` and `dr`. Both `x` and `residual` get
//!
//! ```text
//! dx[i, j]  = dr[i, j] + s_i · gamma[j] · dy[i, j] − r[i, j] · s_i³ · (Σ_k dy[i, k] · gamma[k] · r[i, k]) / N
//! dgamma[j] = Σ_i dy[i, j] · r[i, j] · s_i,     s_i = rsqrt(mean_j(r[i, j]²) + eps)
//! ```
//!
//! — RMSNorm's backward of `r` ([`crate::rows::rmsnorm_bwd`], whose kernel body this is, with
//! `dr` added before `dx` is rounded) in one pass: `dy`, `dr` and `r` read once, `dx` written
//! once, where the backward followed by an addition writes and reads an intermediate `dx`.
//! For example, with `N = 2`, `eps = 0`, `r = (3, 4)`, `gamma = (1, 1)`, `dy = (1, 0)` and
//! `dr = (0.5, 0.5)`: `s = 1/√12.5`, `Σ dy·gamma·r = 3`, so
//! `dx = (0.5 + s − 3·s³·3/2, 0.5 − 4·s³·3/2) = (0.5 + 0.1811, 0.5 − 0.1358)` and
//! `dgamma = (3s, 0) = (0.8485, 0)`.

#[cfg(not(target_arch = "nvptx64"))]
use crate::rows::describe;
use crate::rows::plan::*;
use crate::rows::rmsnorm_bwd::{rmsnorm_bwd_tile, SCRATCH};
use crate::rows::stage::stage_elems;
use ck_core::device::*;
#[cfg(not(target_arch = "nvptx64"))]
use ck_core::host::DeviceBuffer;
use ck_macros::tile_kernel;

macro_rules! add_rmsnorm_bwd_kernel {
    ($name:ident, $dist:ident, $cols:ident, $t:ty, $vec:literal, $block:literal, $pad:literal, $long:literal
     $(, staged = $staged:literal)?) => {
        #[doc = concat!("Residual add + RMSNorm backward with `", stringify!($dist), "` tiles, `", stringify!($t), "` in and out.")]
        #[tile_kernel(block = $block, distributions($dist, $cols))]
        #[allow(clippy::too_many_arguments)]
        pub fn $name(
            dy: Global<$t>,
            dr: Global<$t>,
            r: Global<$t>,
            gamma: Global<$t>,
            dx: GlobalMut<$t>,
            partial: GlobalMut<f32>,
            m: u32,
            n: u32,
            eps: f32,
        ) {
            let scratch = shared!(u32; SCRATCH);
            let stage = shared!($t; stage_elems::<$dist, $t>(if !$long $(&& $staged)? { 3 } else { 0 }));
            rmsnorm_bwd_tile::<$dist, $cols, $t, $vec, $pad, $long, { !$long $(&& $staged)? }, { stage_elems::<$dist, $t>(if !$long $(&& $staged)? { 3 } else { 0 }) }>((dy, r, gamma), Some(dr), (dx, partial), (m, n, eps), (&scratch, stage));
        }
    };
}

instances! {
    declare: add_rmsnorm_bwd_kernel,
    launch(
        dy: &DeviceBuffer<Self>,
        dr: &DeviceBuffer<Self>,
        r: &DeviceBuffer<Self>,
        gamma: &DeviceBuffer<Self>,
        dx: &mut DeviceBuffer<Self>,
        partial: &mut DeviceBuffer<f32>,
        m: u32,
        n: u32,
        eps: f32,
    ),
    f32 {
        // Not staged: 2 / 22 / 9 % slower staged at 4096 × 4096 / 16384 × 8192 / 65536 × 1024
        // (job 115 of notes/h200-rows-backward-staged.txt; three f32 tiles of shared memory).
        Rows Padded => add_rmsnorm_bwd_f32_rows / AddRmsnormBwdF32Rows (BwdRowsF32, BwdRowsF32Cols, f32, 4, 32, true, false, staged = false),
        // 32 columns a thread: at 16, 255 → 154 registers but 4 % slower at 4096 × 4096 (job 122
        // of notes/h100-last-arrival-and-small-decode.txt); at 8192 (512 threads) it needs 148
        // registers, more than a block of 512 can have.
        Row4096 Padded => add_rmsnorm_bwd_f32_c4096 / AddRmsnormBwdF32C4096 (BwdRowF32x4096, BwdRowF32x4096Cols, f32, 4, 128, true, false, staged = false),
        Row8192 Padded => add_rmsnorm_bwd_f32_c8192 / AddRmsnormBwdF32C8192 (BwdRowF32x8192, BwdRowF32x8192Cols, f32, 4, 256, true, false, staged = false),
        Row8192 Long => add_rmsnorm_bwd_f32_long / AddRmsnormBwdF32Long (BwdRowF32x8192, BwdRowF32x8192Cols, f32, 4, 256, true, true),
    }
    Bf16 {
        Rows Padded => add_rmsnorm_bwd_bf16_rows / AddRmsnormBwdBf16Rows (BwdRowsBf16, BwdRowsBf16Cols, Bf16, 8, 32, true, false),
        Row4096 Padded => add_rmsnorm_bwd_bf16_c4096 / AddRmsnormBwdBf16C4096 (BwdRowBf16x4096c16, BwdRowBf16x4096c16Cols, Bf16, 8, 256, true, false),
        Row8192 Padded => add_rmsnorm_bwd_bf16_c8192 / AddRmsnormBwdBf16C8192 (BwdRowBf16x8192c16, BwdRowBf16x8192c16Cols, Bf16, 8, 512, true, false),
        Row8192 Long => add_rmsnorm_bwd_bf16_long / AddRmsnormBwdBf16Long (BwdRowBf16x8192, BwdRowBf16x8192Cols, Bf16, 8, 256, true, true),
        // Rows exactly the tile's width: no padding.
        Rows Full => add_rmsnorm_bwd_bf16_rows_full / AddRmsnormBwdBf16RowsFull (BwdRowsBf16, BwdRowsBf16Cols, Bf16, 8, 32, false, false),
        Row4096 Full => add_rmsnorm_bwd_bf16_c4096_full / AddRmsnormBwdBf16C4096Full (BwdRowBf16x4096c16, BwdRowBf16x4096c16Cols, Bf16, 8, 256, false, false),
        Row8192 Full => add_rmsnorm_bwd_bf16_c8192_full / AddRmsnormBwdBf16C8192Full (BwdRowBf16x8192c16, BwdRowBf16x8192c16Cols, Bf16, 8, 512, false, false),
    }
}

/// Host side: the two launches and the CPU reference.
#[cfg(not(target_arch = "nvptx64"))]
pub mod host {
    use super::*;
    use crate::rows::column_sum::ColumnSum;
    use crate::rows::rmsnorm_bwd::host::{with_column_sums, Reference};
    use ck_core::host::{Device, LaunchError, LaunchStats};

    /// Launches both kernels of `T` for rows of `n`: `dx` (`m × n`, the gradient of `x` and of
    /// `residual`) and `dgamma` (`n`) from `dy`, `dr`, `r` (`m × n`) and `gamma` (`n`).
    pub fn launch<T: Kernels + ColumnSum>(
        device: &Device,
        (dy, dr, r, gamma): (
            &DeviceBuffer<T>,
            &DeviceBuffer<T>,
            &DeviceBuffer<T>,
            &DeviceBuffer<T>,
        ),
        (dx, dgamma): (&mut DeviceBuffer<T>, &mut DeviceBuffer<T>),
        (m, n, eps): (u32, u32, f32),
    ) -> Result<LaunchStats, LaunchError> {
        let first = |instance, cfg, partial: &mut DeviceBuffer<f32>| {
            T::launch_instance(
                instance, device, cfg, dy, dr, r, gamma, dx, partial, m, n, eps,
            )
        };
        with_column_sums(device, T::pick(n)?, dgamma, (m, n), None, first)
    }

    /// The fp64 CPU reference: RMSNorm's backward of `r` with `dr` added to `dx`, and `|dr|`
    /// to the magnitude its error is measured against.
    pub fn reference(
        (dy, dr, r, gamma): (&[f32], &[f32], &[f32], &[f32]),
        (m, n): (u32, u32),
        eps: f32,
    ) -> Reference {
        let mut want = crate::rows::rmsnorm_bwd::host::reference((dy, r, gamma), (m, n), eps);
        for ((d, s), &a) in want.dx.iter_mut().zip(&mut want.dx_size).zip(dr) {
            *d += a as f64;
            *s += (a as f64).abs();
        }
        want
    }
}

/// Residual add + RMSNorm backward as every front end calls it.
#[cfg(not(target_arch = "nvptx64"))]
pub const OP: crate::op::Op = crate::op::Op {
    name: "add_rmsnorm_backward",
    summary: "residual add + RMSNorm backward: dx (of x and of residual) and dgamma from dy, dr, r and gamma",
    params: &[
        describe::rows_input("dy", "dy", "dy, the gradient of y, [..., N]"),
        describe::rows_input("dr", "dr", "dr, the gradient of the forward's r, [..., N]"),
        describe::rows_input("r", "r", "r = x + residual, the forward's residual_out, [..., N]"),
        describe::GAMMA,
        describe::rows_output("dx", "dx-out", "dx, the gradient of x and of residual, [..., N]"),
        describe::vector_output("dgamma", "dgamma-out", "dgamma, [N]"),
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
    bytes: |s, d| describe::bytes(s, d, 4.0, 2.0),
};

#[cfg(not(target_arch = "nvptx64"))]
mod op {
    use crate::op::{norm_error_relative_to, worst, HostOutput, Launch, Launched, Rng, Sizes};
    use ck_core::host::Device;

    pub fn launch(d: &Device, l: &mut Launch) -> Launched {
        let p = (l.sizes.u32("M"), l.sizes.u32("N"), l.scalar("eps"));
        crate::by_dtype!(l.dtype, T => {
            let (mut dx, mut dgamma) = (l.take::<T>(d, "dx")?, l.take::<T>(d, "dgamma")?);
            let inputs = (
                l.input::<T>("dy")?,
                l.input::<T>("dr")?,
                l.input::<T>("r")?,
                l.input::<T>("gamma")?,
            );
            let st = super::host::launch(d, inputs, (&mut dx, &mut dgamma), p);
            l.put("dx", dx);
            l.put("dgamma", dgamma);
            st
        })
    }

    /// dy, dr and r in [−1, 1], gamma in [0.5, 2.5].
    pub fn sample(s: &Sizes, rng: &mut Rng) -> Vec<Vec<f32>> {
        let (m, n) = (s.get("M"), s.get("N"));
        let (dy, dr) = (rng.values(m * n, 1.0, 0.0), rng.values(m * n, 1.0, 0.0));
        vec![dy, dr, rng.values(m * n, 1.0, 0.0), rng.values(n, 1.0, 1.5)]
    }

    /// As RMSNorm's backward: each gradient norm-wise relative to the size of its terms.
    pub fn error(o: &HostOutput) -> f64 {
        let (mn, eps) = ((o.sizes.u32("M"), o.sizes.u32("N")), o.scalar("eps"));
        let inputs = (o.input("dy"), o.input("dr"), o.input("r"), o.input("gamma"));
        let want = super::host::reference(inputs, mn, eps);
        let got = |name| o.output(name).unwrap_or(&[]);
        worst(
            norm_error_relative_to(got("dx"), &want.dx, &want.dx_size),
            norm_error_relative_to(got("dgamma"), &want.dgamma, &want.dgamma_size),
        )
    }
}
