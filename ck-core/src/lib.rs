//! # ck-core — CK Tile's index algebra in Rust
//!
//! Everything here is plain data and `const fn`: no allocation, no trait objects, so the same code
//! runs in the `tile_distribution!` macro at expansion time, in const evaluation, on the host and
//! (built for `nvptx64-nvidia-cuda`) on the GPU. The semantics are those of AMD's Composable Kernel
//! `ck_tile/core` (where its documentation and its code disagree, the code).
//!
//! | module | what | spec |
//! |---|---|---|
//! | [`bank`] | the shared-memory bank model and global sector count | — |
//! | [`dims`] | fixed-capacity multi-indices | §0 |
//! | [`lds`] | LDS tile layouts (XOR swizzle, plain) and their bank behaviour | §11 |
//! | [`magic`] | magic-number division used by merges | §1 |
//! | [`transform`] | the coordinate transforms (upper → lower) | §1 |
//! | [`adaptor`] | DAGs of transforms over hidden dimensions | §2.1 |
//! | [`descriptor`] | adaptors with one bottom dim: tensor memory layouts | §2.2 |
//! | [`coordinate`] | coordinates and incremental movement | §2.3 |
//! | [`sfc`] | space-filling curves (access order of a tile) | §7 |
//! | [`distribution`] | the trait generated distributions implement | §5 |
//! | `device` | kernels' primitives (ids, barriers, shuffles, memory, buffer views) | §3, §15 |
//! | `report` | a launch's counters and the emulator's kernel errors (a leaf: `host` and `device` both use it) | — |
//! | `host` | devices, buffers, launches (drives the emulator) | — |
//! | [`encoding`] | tile-distribution encodings, their checks, derived tables and algebra | §4, §5 |
//! | [`swizzle`] | the one XOR swizzle (CuTe's `Swizzle<B, M, S>`) behind the xor transform, the LDS layouts and wgmma | §11 |
//! | [`wgmma`] | Hopper wgmma shared-memory descriptors and the 128-byte swizzle | — |
//!
//! Bad parameters never panic in the host API: constructors return [`Error`], whose
//! [`Rule`] has a stable kebab-case name (`length-not-positive`, `sfc-not-divisible`, …).
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(asm_experimental_arch, stdarch_nvptx))]
#![deny(missing_docs)]

#[cfg(all(feature = "std", not(target_arch = "nvptx64")))]
#[macro_use]
extern crate std;

pub mod adaptor;
pub mod bank;
pub mod coordinate;
pub mod descriptor;
#[cfg(any(feature = "std", target_arch = "nvptx64"))]
pub mod device;
pub mod dims;
pub mod distribution;
pub mod encoding;
pub mod error;
#[cfg(all(feature = "std", not(target_arch = "nvptx64")))]
pub mod host;
pub mod kernel;
pub mod lds;
pub mod magic;
pub mod msg;
#[cfg(all(feature = "std", not(target_arch = "nvptx64")))]
pub mod report;
pub mod rules;
pub mod sfc;
pub mod swizzle;
#[cfg(any(feature = "std", target_arch = "nvptx64"))]
pub mod tile;
pub mod tma;
pub mod transform;
pub mod wgmma;

pub use adaptor::TensorAdaptor;
pub use coordinate::Coordinate;
pub use descriptor::TensorDescriptor;
pub use dims::{Dims, Index};
pub use distribution::TileDistribution;
pub use encoding::Encoding;
pub use error::{Error, Rule};
pub use sfc::SpaceFillingCurve;
pub use transform::Transform;
