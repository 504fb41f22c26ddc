use ck_core::tile::DistributedTensor;
use ck_macros::tile_distribution;

tile_distribution! {
    struct Rows { warp_size: 32, h: { n: [lane: 32, vec: 4] }, p: [[n.lane]], y: [n.vec] }
}
tile_distribution! {
    struct Strided { warp_size: 32, h: { n: [vec: 4, lane: 32] }, p: [[n.lane]], y: [n.vec] }
}

// Same shape, different distributions: an elementwise op between them is a type error (CK
// silently combines unrelated registers).
fn add(a: &DistributedTensor<Rows, f32>, b: &DistributedTensor<Strided, f32>) -> DistributedTensor<Rows, f32> {
    a.zip_map(b, |x, y| x + y)
}

fn main() {}
