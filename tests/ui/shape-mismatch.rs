use ck_macros::tile_distribution;
tile_distribution! {
    struct D {
        warp_size: 32, shape: [128, 16],
        h: { row: [lane: 32, vec: 4], col: [rep: 8] },
        p: [[row.lane]],
        y: [row.vec, col.rep],
    }
}
fn main() {}
