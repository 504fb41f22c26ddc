use ck_core::device::*;
use ck_macros::tile_kernel;

#[tile_kernel(block = 128, blocks = 2)]
fn k(output: GlobalMut<u32>) {
    output.store(thread_idx(), 0);
}
fn main() {}
