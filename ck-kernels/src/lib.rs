//! Kernels written with ck-rs, by operator family, each with its host launchers and CPU
//! reference: the library users depend on (the `ck` command is the `ck-cli` crate beside it,
//! `ck-kernels/cli/`).
//!
//! | family | what |
//! |---|---|
//! | [`gemm`] | GEMM: SIMT, `mma.sync`, wgmma, TMA (warp-specialised, stream-K), batched and grouped, fp8, the fused epilogue; [`gemm::auto`] picks the kernel |
//! | [`rows`] | row-wise operators: RMSNorm, add + RMSNorm, LayerNorm, softmax |
//! | [`attention`] | fused attention forward (wgmma, online softmax, GQA, causal) |
//! | [`glu`] | the gated linear unit's elementwise half (SwiGLU, GeGLU) and its backward, for training |
//! | [`rope`] | rotary embedding on a fused QKV projection, written in attention's layout |
//! | [`elementwise`] | copy and add on 16-byte vectors (the copy is the bandwidth reference) |
//! | [`probes`] | exercise and probe kernels that check the device layer and the emulator's profiler |
//!
//! [`op`] describes an operator once (tensors, shape rules, scalars, launch, check against the
//! CPU reference) and [`registry`] lists them all: the CLI, Python and the tests iterate it.
//! [`checks`] (host): the exercise kernels' checks, and the cross-check of every exercise and
//! operator on two backends (what `ck cross-check` and the tests run).
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx))]

pub mod attention;
#[cfg(not(target_arch = "nvptx64"))]
pub mod checks;
pub mod elementwise;
pub mod gemm;
pub mod glu;
pub mod op;
pub mod probes;
#[cfg(not(target_arch = "nvptx64"))]
pub mod registry;
pub mod rope;
pub mod rows;
