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
/// CPU reference of [`reverse`](Reverse).
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
/// CPU reference of [`block_sum`](BlockSum) in f64 (the kernel's tree order differs from a
/// sequential sum, so compare with a tolerance).
pub fn block_sum_reference(x: &[f32]) -> Vec<f64> {
    x.chunks(BLOCK as usize)
        .map(|c| c.iter().map(|&v| v as f64).sum())
        .collect()
}

/// Bins of [`histogram`](Histogram).
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
/// CPU reference of [`histogram`](Histogram).
pub fn histogram_reference(values: &[u32]) -> Vec<u32> {
    let mut h = vec![0; BINS as usize];
    for &v in values {
        h[(v % BINS) as usize] += 1;
    }
    h
}

/// Rows of 32 u32 in one tile of [`multicast`](Multicast).
pub const MULTICAST_ROWS: u32 = 8;
/// Blocks per cluster of [`multicast`](Multicast).
pub const MULTICAST_CLUSTER: u32 = 2;

/// Thread-block clusters (sm_90): every block of a cluster of two receives all `tiles` tiles
/// (8 rows × 32 u32) of `input`, each copied once by the TMA engine and multicast into both
/// blocks' shared memory, through a ring of two stages; each block's warp 1 writes them to its
/// own copy of the tensor in `output` (from `block · tiles · 256`).
///
/// The ring is the producer/consumer pattern of a multicast GEMM: rank 0's thread 0 issues the
/// copies; each block's thread 0 waits until its stage is free and announces the stage's bytes
/// on its own "full" barrier (the copy completes them there); warp 1 waits for "full", reads,
/// and releases the stage on the "empty" barrier of *every* block of the cluster, because the
/// next copy writes both. The `cluster_sync`s order the barriers' `init` before any remote
/// use, and keep each block alive until the other no longer arrives on its barriers.
#[tile_kernel(block = 64, cluster = 2)]
pub fn multicast(input: Tma<u32, 2>, output: GlobalMut<u32>, tiles: u32) {
    let stage = shared!(u32; 2 * 256);
    // full[s] = s, empty[s] = 2 + s, in each block.
    let bars = shared!(Mbarrier; 4);
    let t = thread_idx();
    if t == 0 {
        for s in 0..2 {
            bars.init(s, 1);
            bars.init(2 + s, cluster_size());
        }
        fence_barrier_init();
    }
    cluster_sync();
    if warp_id() == 0 {
        if t == 0 {
            for j in 0..tiles {
                let (s, use_) = (j % 2, j / 2);
                if use_ > 0 {
                    bars.wait(2 + s, (use_ - 1) % 2);
                }
                bars.arrive_expect_tx(s, input.box_bytes());
                if cluster_ctarank() == 0 {
                    let row = (MULTICAST_ROWS * j) as i32;
                    let everyone = (1 << cluster_size()) - 1;
                    input.copy_to_shared_multicast(
                        [0, row],
                        (&stage, 256 * s),
                        (&bars, s),
                        everyone,
                    );
                }
            }
        }
    } else {
        let lane = lane_id();
        for j in 0..tiles {
            let s = j % 2;
            bars.wait(s, (j / 2) % 2);
            for r in 0..MULTICAST_ROWS {
                let row = (block_idx() * tiles + j) * MULTICAST_ROWS + r;
                output.store(row * 32 + lane, stage.load(256 * s + r * 32 + lane));
            }
            // The warp's reads are done before lane 0 releases the stage for it.
            warp_sync();
            if lane == 0 {
                for rank in 0..cluster_size() {
                    bars.arrive_cluster(2 + s, rank);
                }
            }
        }
    }
    cluster_sync();
}

#[cfg(not(target_arch = "nvptx64"))]
/// CPU reference of [`multicast`](Multicast) over `blocks` blocks: each block's copy of `x`
/// (rows of 32), its last tile padded with zeros.
pub fn multicast_reference(x: &[u32], blocks: u32) -> Vec<u32> {
    let tile = (MULTICAST_ROWS * 32) as usize;
    let mut copy = x.to_vec();
    copy.resize(x.len().div_ceil(tile) * tile, 0);
    (0..blocks).flat_map(|_| copy.iter().copied()).collect()
}
