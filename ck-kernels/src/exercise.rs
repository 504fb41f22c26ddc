//! Kernels that exercise the device layer, each with a CPU reference.

use ck_core::device::*;
use ck_macros::tile_kernel;

/// Threads per block of the exercise kernels.
pub const BLOCK: u32 = 256;

/// Reverses each block's `BLOCK` elements through shared memory (`n` must be a multiple of
/// `BLOCK`).
#[tile_kernel(block = 256)]
pub fn reverse(input: Global<f32>, output: GlobalMut<f32>) {
    let tile = shared!(f32; 256);
    let t = thread_idx();
    let base = block_idx() * block_dim();
    tile.store(t, input.load(base + t));
    block_sync();
    output.store(base + t, tile.load(block_dim() - 1 - t));
}

#[cfg(not(target_arch = "nvptx64"))]
/// CPU reference of [`reverse`].
pub fn reverse_reference(x: &[f32]) -> Vec<f32> {
    x.chunks(BLOCK as usize)
        .flat_map(|c| c.iter().rev().copied())
        .collect()
}

/// `output[b] = Σ input[b·BLOCK .. (b+1)·BLOCK]` (elements past `n` count as 0): a warp
/// reduction with shuffles, warp sums through shared memory, then one more warp reduction.
#[tile_kernel(block = 256)]
pub fn block_sum(input: Global<f32>, output: GlobalMut<f32>, n: u32) {
    let partial = shared!(f32; 8);
    let i = block_idx() * block_dim() + thread_idx();
    let v = if i < n { input.load(i) } else { 0.0 };
    let warp_total = warp_reduce(v, |a, b| a + b);
    if lane_id() == 0 {
        partial.store(warp_id(), warp_total);
    }
    block_sync();
    if warp_id() == 0 {
        let w = if lane_id() < block_dim() / WARP_SIZE {
            partial.load(lane_id())
        } else {
            0.0
        };
        let total = warp_reduce(w, |a, b| a + b);
        if lane_id() == 0 {
            output.store(block_idx(), total);
        }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
/// CPU reference of [`block_sum`] in f64 (the kernel's tree order differs from a sequential
/// sum, so compare with a tolerance).
pub fn block_sum_reference(x: &[f32]) -> Vec<f64> {
    x.chunks(BLOCK as usize)
        .map(|c| c.iter().map(|&v| v as f64).sum())
        .collect()
}

/// Bins of [`histogram`].
pub const BINS: u32 = 64;

/// `bins[v % BINS] += 1` for every `v` of `values`: per-block counts with shared atomics, then
/// one global atomic per bin and block.
#[tile_kernel(block = 256)]
pub fn histogram(values: Global<u32>, bins: GlobalMut<u32>) {
    let local = shared!(u32; 64);
    let t = thread_idx();
    if t < BINS {
        local.store(t, 0);
    }
    block_sync();
    let mut i = block_idx() * block_dim() + t;
    while i < values.len() {
        local.atomic_add(values.load(i) % BINS, 1);
        i += grid_dim() * block_dim();
    }
    block_sync();
    if t < BINS {
        bins.atomic_add(t, local.load(t));
    }
}

#[cfg(not(target_arch = "nvptx64"))]
/// CPU reference of [`histogram`].
pub fn histogram_reference(values: &[u32]) -> Vec<u32> {
    let mut h = vec![0; BINS as usize];
    for &v in values {
        h[(v % BINS) as usize] += 1;
    }
    h
}
