use ck_core::device::*;
use ck_macros::{tile_distribution, tile_kernel};

tile_distribution! {
    struct Row { warp_size: 32, block_size: 128, h: { m: [warp: 4, lane: 32, vec: 4] }, p: [[m.warp], [m.lane]], y: [m.vec] }
}

// The kernel is launched with 256 threads, but the distribution spans 128.
#[tile_kernel(block = 256, distributions(Row))]
fn k(output: GlobalMut<u32>) {
    output.store(thread_idx(), 0);
}
fn main() {}
