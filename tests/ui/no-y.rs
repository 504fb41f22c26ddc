use ck_macros::tile_distribution;
tile_distribution! {
    struct D {
        warp_size: 32,
        h: { row: [lane: 32] },
        p: [[row.lane]],
        y: [],
    }
}
fn main() {}
