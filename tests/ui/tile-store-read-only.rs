use ck_core::device::Global;
use ck_core::tile::{make_tile_window, DistributedTensor, View1};
use ck_macros::tile_distribution;

tile_distribution! {
    struct Rows { warp_size: 32, h: { n: [lane: 32, vec: 4] }, p: [[n.lane]], y: [n.vec] }
}

// A kernel's `Global<T>` argument is read-only: storing a tile through a view of it is a type
// error that says which argument type to use instead.
fn store(x: Global<f32>, t: &DistributedTensor<Rows, f32>) {
    make_tile_window::<Rows, _>(View1::<_, f32, 4>::new(x, 128), [0]).store(t);
}

fn main() {}
