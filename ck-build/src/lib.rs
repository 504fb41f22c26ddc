//! # ck-build — a kernel crate's PTX module: built, checked, embedded
//!
//! Every `#[tile_kernel]` of a crate compiles into one PTX module, `<crate_name>.ptx`:
//!
//! ```text
//! ck build-ptx --manifest-path my-kernels/Cargo.toml    # → my-kernels/target/ptx/my_kernels.ptx
//! ```
//!
//! builds the crate for `nvptx64-nvidia-cuda` ([`builder`], feature `builder`), gives kernels
//! declared with `min_blocks_per_sm` their launch bounds, assembles the module with `ptxas` and
//! reports registers, spills and shared memory per kernel. At run time the host finds the module
//! in `<target dir>/ptx/` (see `ck_core::host::module`) or, in release builds, embedded in the
//! binary by a one-line build script:
//!
//! ```text
//! // build.rs of a kernel crate (with `ck-build` as a build-dependency)
//! fn main() {
//!     ck_build::embed_ptx();
//! }
//! ```
//!
//! A build script never fails and never needs the PTX toolchain: where no module has been built,
//! nothing is embedded and a launch on the GPU reports `error[no-ptx]` with the command to run.

mod embed;
pub use embed::embed_ptx;

#[cfg(feature = "builder")]
pub mod builder;
