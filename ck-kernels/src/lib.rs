//! Kernels written with ck-rs, their host launchers and CPU references, and the `ck` command's
//! implementation ([`cli`]).
//!
//! | module | kernels |
//! |---|---|
//! | [`exercise`] | `reverse` (shared memory), `block_sum` (shuffles + shared), `histogram` (atomics) |
//! | [`bank_probe`] | `bank_probe`: a shared-memory access pattern whose bank conflicts are known |
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx))]

pub mod bank_probe;
#[cfg(not(target_arch = "nvptx64"))]
pub mod checks;
#[cfg(not(target_arch = "nvptx64"))]
pub mod cli;
pub mod elementwise;
pub mod exercise;
pub mod gemm;
pub mod lds_probe;
#[cfg(not(target_arch = "nvptx64"))]
pub mod npy;
pub mod rmsnorm;
