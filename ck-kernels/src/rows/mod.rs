//! The row-wise family: operators that reduce along each row of an `M × N` tensor and write a
//! row of the same length (f32 or bf16 in and out, f32 arithmetic, any M × N).
//!
//! | file | what |
//! |---|---|
//! | [`plan`] | the tile plan: how a block covers rows of N columns (the forward's tiles and the backward's), which tile a row length gets ([`plan::RowTile::for_columns`]), the instance table ([`plan::Instance`]) |
//! | [`describe`] | what the operators' descriptions share (`x`, `gamma`, `y`, `eps`, the checked shapes) |
//! | `stage` | the backward kernels' inputs staged through shared memory a row tile ahead (`cp.async`), where an instance asks for it |
//! | [`column_sum`] | `column_sum_*`: the backward kernels' workspace columns summed in a fixed order (`dgamma`, `dbeta`) |
//! | [`rmsnorm`] | `rmsnorm_{f32,bf16}_*`: `y = x · rsqrt(mean(x²) + eps) · gamma` |
//! | [`rmsnorm_bwd`] | `rmsnorm_bwd_{f32,bf16}_*`: `dx` and `dgamma` (a workspace row of column sums per block, then [`column_sum`]) |
//! | [`add_rmsnorm`] | `add_rmsnorm_{f32,bf16}_*`: `r = x + residual` written out, `y = rmsnorm(r) · gamma` |
//! | [`add_rmsnorm_bwd`] | `add_rmsnorm_bwd_{f32,bf16}_*`: [`rmsnorm_bwd`]'s kernel of `r` with the incoming `dr` added to `dx` |
//! | [`layernorm`] | `layernorm_{f32,bf16}_*`: LayerNorm on shifted data, optionally each row's mean and rstd |
//! | [`layernorm_bwd`] | `layernorm_bwd_{f32,bf16}_*`: `dx`, `dgamma`, `dbeta` from the forward's mean and rstd |
//! | [`softmax`] | `softmax_{f32,bf16}_*`: row softmax, online `(max, sum)` for rows longer than a tile |
//! | [`softmax_bwd`] | `softmax_bwd_{f32,bf16}_*`: `dx = y · (dy − Σ dy·y)` |
//!
//! Each operator file holds its kernels (one per tile of the plan), their host launcher, the
//! fp64 CPU reference and its description `OP` (listed in [`OPS`], which the registry
//! iterates); every operator depends on [`plan`] and [`describe`] (the backward ones also on
//! [`column_sum`] and `stage`) and on nothing else here, but [`add_rmsnorm_bwd`], which is
//! [`rmsnorm_bwd`]'s kernel with one more input.

pub mod add_rmsnorm;
pub mod add_rmsnorm_bwd;
pub mod column_sum;
#[cfg(not(target_arch = "nvptx64"))]
pub mod describe;
pub mod layernorm;
pub mod layernorm_bwd;
pub mod plan;
pub mod rmsnorm;
pub mod rmsnorm_bwd;
pub mod softmax;
pub mod softmax_bwd;
mod stage;

/// The family's operators, as the registry lists them.
#[cfg(not(target_arch = "nvptx64"))]
pub const OPS: &[&crate::op::Op] = &[
    &rmsnorm::OP,
    &rmsnorm_bwd::OP,
    &add_rmsnorm::OP,
    &add_rmsnorm_bwd::OP,
    &layernorm::OP,
    &layernorm_bwd::OP,
    &softmax::OP,
    &softmax_bwd::OP,
];
