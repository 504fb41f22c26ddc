//! Kernels written with ck-rs, their host launchers and CPU references, and the `ck` command's
//! implementation ([`cli`]).
//!
//! | module | kernels |
//! |---|---|
//! | [`exercise`] | `reverse` (shared memory), `block_sum` (shuffles + shared), `histogram` (atomics) |
//! | [`bank_probe`] | `bank_probe`: a shared-memory access pattern whose bank conflicts are known |
//! | [`elementwise`] | `copy_f32`, `copy_bf16`, `add_f32`, `add_bf16` |
//! | [`rows`] | the row-wise operators' tiles and the rule that picks one per row length |
//! | [`layernorm`] | `layernorm_{f32,bf16}_*`: LayerNorm on shifted data, optional mean/rstd |
//! | [`attention`] | `attention_d64`, `attention_d128`: fused attention forward (wgmma, online softmax, GQA, causal) |
//! | [`add_rmsnorm`] | `add_rmsnorm_{f32,bf16}_*`: `r = x + residual` written out, `y = rmsnorm(r) · gamma` |
//! | [`rmsnorm`] | `rmsnorm_{f32,bf16}_*`: one kernel per row-length class |
//! | [`gemm`] | `gemm_f32` (SIMT), `gemm_bf16` (`mma.sync` + `ldmatrix` from XOR-swizzled LDS) |
//! | [`gemm_sm90`] | `gemm_bf16_wgmma*` (sm_90a: `cp.async` pipeline, 128-byte swizzle, `wgmma`), f32 or bf16 C |
//! | [`gemm_grouped`] | `gemm_grouped_bf16*`, `gemm_grouped_any_bf16*` (sm_90a: problems of different shapes in one launch, on the `gemm_sm90` body) |
//! | [`gemm_tma`] | `gemm_tma_bf16*`, `gemm_fp8_*` (sm_90a: TMA, warp-specialised persistent blocks, bf16 or e4m3/e5m2 operands) |
//! | [`gemm_auto`] | (host) the bf16 GEMM on the kernel chosen for the problem: `ck run gemm` and Python |
//! | [`epilogue`] | the GEMM's fused epilogue: `act(alpha · A·B + beta · D + bias)` |
//! | [`softmax`] | `softmax_{f32,bf16}_*`: row softmax, online (max, sum) for long rows |
//! | [`lds_probe`] | `lds_probe_xor`, `lds_probe_plain`: the spec's TV8 LDS tile |
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx))]

pub mod add_rmsnorm;
pub mod attention;
pub mod bank_probe;
#[cfg(not(target_arch = "nvptx64"))]
pub mod checks;
#[cfg(not(target_arch = "nvptx64"))]
pub mod cli;
pub mod elementwise;
pub mod epilogue;
pub mod exercise;
pub mod gemm;
#[cfg(not(target_arch = "nvptx64"))]
pub mod gemm_auto;
#[cfg(not(target_arch = "nvptx64"))]
pub mod gemm_fused;
pub mod gemm_grouped;
pub mod gemm_sm90;
pub mod gemm_tma;
pub mod layernorm;
pub mod lds_probe;
#[cfg(not(target_arch = "nvptx64"))]
pub mod npy;
pub mod rmsnorm;
pub mod rows;
pub mod softmax;
