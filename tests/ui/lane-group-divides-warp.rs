use ck_macros::tile_distribution;
tile_distribution! {
    // A lane dim of 3 · 8 = 24 lanes: a lane group must divide the 32 lanes of the warp.
    struct D {
        warp_size: 32, block_size: 96,
        h: { m: [warp: 4, lane: 3], n: [lane: 8, vec: 4] },
        p: [[m.warp], [m.lane, n.lane]],
        y: [n.vec],
    }
}
fn main() {}
