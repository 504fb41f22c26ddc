//! # ck-examples — writing your own kernels with ck-rs
//!
//! Two kernels, written as a user's crate writes them (docs/writing-kernels.md):
//!
//! | module | kernel | what it shows |
//! |---|---|---|
//! | [`softmax`] | `softmax_rows` | a tile distribution, windows with padding, two `block_reduce_x` (max, sum) |
//! | [`transpose`] | `transpose_swizzled`, `transpose_plain` | a tile staged through shared memory behind a user-defined [`View`](ck_core::tile::View), and the bank conflicts a swizzle removes |
//!
//! A kernel crate needs the line below: on the GPU (`nvptx64`) there is no `std`, and kernel
//! entry points use the `ptx-kernel` ABI. Host-only code sits behind
//! `#[cfg(not(target_arch = "nvptx64"))]`.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx))]

pub mod softmax;
pub mod transpose;
