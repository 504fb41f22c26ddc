use ck_macros::tile_distribution;
tile_distribution! {
    struct D {
        warp_size: 32,
        h: { m: [lane: 32, vec: 4] },
        p: [[m.lane]],
        y: [m.vec, m.lane],
    }
}
fn main() {}
