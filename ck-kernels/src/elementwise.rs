//! Elementwise kernels on tile windows: copy and add, 16-byte vector accesses.
//!
//! One 1-D distribution per element size: 8 warps × 32 lanes × 16 bytes, repeated 4 times, so
//! consecutive lanes touch consecutive 16-byte chunks (every warp access is 512 contiguous
//! bytes) and each thread keeps 4 independent loads in flight.

use ck_core::device::*;
use ck_core::tile::{make_tile_window, View1};
use ck_macros::{tile_distribution, tile_kernel};

tile_distribution! {
    /// 4-byte elements: 4 × 8 × 32 × 4 = 4096 per block.
    pub struct Flat4 {
        warp_size: 32, block_size: 256,
        h: { i: [repeat: 4, warp: 8, lane: 32, vec: 4] },
        p: [[i.warp], [i.lane]],
        y: [i.repeat, i.vec],
    }
}

tile_distribution! {
    /// 2-byte elements: 4 × 8 × 32 × 8 = 8192 per block.
    pub struct Flat2 {
        warp_size: 32, block_size: 256,
        h: { i: [repeat: 4, warp: 8, lane: 32, vec: 8] },
        p: [[i.warp], [i.lane]],
        y: [i.repeat, i.vec],
    }
}

/// Threads per block of the elementwise kernels.
pub const BLOCK: u32 = 256;
/// f32 elements per block.
pub const TILE_F32: u32 = 4096;
/// bf16 elements per block.
pub const TILE_BF16: u32 = 8192;

/// `y = x` (f32).
#[tile_kernel(block = 256, distributions(Flat4))]
pub fn copy_f32(x: Global<f32>, y: GlobalMut<f32>, n: u32) {
    let origin = [(block_idx() * TILE_F32) as i32];
    let t = make_tile_window::<Flat4, _>(View1::<_, f32, 4>::new(x, n), origin).load::<f32>();
    make_tile_window::<Flat4, _>(View1::<_, f32, 4>::new(y, n), origin).store(&t);
}

/// `z = x + y` (f32).
#[tile_kernel(block = 256, distributions(Flat4))]
pub fn add_f32(x: Global<f32>, y: Global<f32>, z: GlobalMut<f32>, n: u32) {
    let origin = [(block_idx() * TILE_F32) as i32];
    let a = make_tile_window::<Flat4, _>(View1::<_, f32, 4>::new(x, n), origin).load::<f32>();
    let b = make_tile_window::<Flat4, _>(View1::<_, f32, 4>::new(y, n), origin).load::<f32>();
    make_tile_window::<Flat4, _>(View1::<_, f32, 4>::new(z, n), origin)
        .store(&a.zip_map(&b, |a, b| a + b));
}

/// `y = x` (bf16).
#[tile_kernel(block = 256, distributions(Flat2))]
pub fn copy_bf16(x: Global<Bf16>, y: GlobalMut<Bf16>, n: u32) {
    let origin = [(block_idx() * TILE_BF16) as i32];
    let t = make_tile_window::<Flat2, _>(View1::<_, Bf16, 8>::new(x, n), origin).load::<Bf16>();
    make_tile_window::<Flat2, _>(View1::<_, Bf16, 8>::new(y, n), origin).store(&t);
}

/// `z = x + y` (bf16 in and out, f32 arithmetic).
#[tile_kernel(block = 256, distributions(Flat2))]
pub fn add_bf16(x: Global<Bf16>, y: Global<Bf16>, z: GlobalMut<Bf16>, n: u32) {
    let origin = [(block_idx() * TILE_BF16) as i32];
    let a = make_tile_window::<Flat2, _>(View1::<_, Bf16, 8>::new(x, n), origin).load::<Bf16>();
    let b = make_tile_window::<Flat2, _>(View1::<_, Bf16, 8>::new(y, n), origin).load::<Bf16>();
    let c = a.zip_map(&b, |a, b| Bf16::from_f32(a.to_f32() + b.to_f32()));
    make_tile_window::<Flat2, _>(View1::<_, Bf16, 8>::new(z, n), origin).store(&c);
}
