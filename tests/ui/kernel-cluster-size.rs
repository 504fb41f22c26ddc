use ck_core::device::*;
use ck_macros::tile_kernel;

#[tile_kernel(block = 128, cluster = 16)]
fn k(output: GlobalMut<u32>) {
    output.store(thread_idx(), cluster_ctarank());
}
fn main() {}
