//! The GEMM family: `C = act(alpha · A·B + beta · D + bias)`, row-major, f32 accumulation.
//!
//! Start at [`auto`]: it takes a problem and runs it on the kernel measured fastest for it. The
//! files, from the entry point down to the kernels:
//!
//! | file | what |
//! |---|---|
//! | [`auto`] | the entry point (host): picks the kernel for a problem and its epilogue (`ck run gemm`, Python) |
//! | [`describe`] | the family's operators of the registry (`linear`, `linear_fp8`, `gemm_a_km`, `gated_linear`): tensors, scalars, launch, fp64 check |
//! | [`linear`] | `nn.Linear`'s product (host): X·Wᵀ with the weight `[N, K]` read in place, on the TMA kernels of K-major B or, for any shape, `linear_simt_*`; its weight's gradient dYᵀ·X with dY read M-major |
//! | [`fused`] | the problem's arguments (host): [`fused::EpilogueArgs`], the C element type [`fused::GemmOutput`], their checks and the fp64 reference; launches on the `cp.async` wgmma kernels |
//! | [`choice`] | which `cp.async` bf16 kernel runs a shape ([`choice::Bf16Kernel`]) |
//! | [`epilogue`] | the fused epilogue in registers, on the device: activations, flags, `CElement` |
//! | [`mma_sync`] | `gemm_f32` and `linear_simt_*` (SIMT) and `gemm_bf16` (`mma.sync` + `ldmatrix` from XOR-swizzled LDS): any shape |
//! | [`wgmma`] | `gemm_bf16_wgmma*` (sm_90a): `cp.async` pipeline, 128-byte swizzle, warpgroup MMA, 128 × 256 or 128 × 128 tiles |
//! | [`tma`] | `gemm_tma_bf16*`, `gemm_fp8_*` (sm_90a): TMA, warp-specialised persistent blocks, 128 × 256 or 128 × 192 tiles; [`tma::stream_k`] shares few tiles of a long K out over idle SMs |
//! | [`grouped`] | `gemm_grouped_*`: a mixture-of-experts layer's products of different shapes in one launch (on the [`wgmma`] body, or on [`tma`] where the problems share N and K) |
//!
//! Dependencies point down the table's order: the kernels never import the host files, and
//! [`auto`] (B `[K, N]`) and [`linear`] (B `[N, K]`) are the only files that pick kernels.

#[cfg(not(target_arch = "nvptx64"))]
pub mod auto;
#[cfg(not(target_arch = "nvptx64"))]
pub mod choice;
#[cfg(not(target_arch = "nvptx64"))]
pub mod describe;
pub mod epilogue;
#[cfg(not(target_arch = "nvptx64"))]
pub mod fused;
pub mod grouped;
#[cfg(not(target_arch = "nvptx64"))]
pub mod linear;
pub mod mma_sync;
pub mod tma;
pub mod wgmma;
