use ck_core::device::*;
use ck_macros::{tile_distribution, tile_kernel};

tile_distribution! {
    struct Wave64 { warp_size: 64, block_size: 128, h: { m: [warp: 2, lane: 64, vec: 4] }, p: [[m.warp], [m.lane]], y: [m.vec] }
}

// A distribution written for AMD's 64-lane wavefronts: its lane digit would combine the wrong
// threads on a 32-lane warp.
#[tile_kernel(block = 128, distributions(Wave64))]
fn k(output: GlobalMut<u32>) {
    output.store(thread_idx(), 0);
}
fn main() {}
