use ck_core::device::*;
use ck_macros::tile_kernel;

#[tile_kernel(block = 32)]
fn k(output: GlobalMut<u32>, scale: Vec<f32>) {
    output.store(thread_idx(), scale.len() as u32);
}
fn main() {}
