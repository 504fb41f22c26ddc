use ck_macros::tile_distribution;
tile_distribution! {
    struct D {
        warp_size: 32,
        h: { row: [lane: 32, vec: 4] },
        p: [[row.lanes]],
        y: [row.vec],
    }
}
fn main() {}
