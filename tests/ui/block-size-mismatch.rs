use ck_macros::tile_distribution;
tile_distribution! {
    struct D {
        warp_size: 32, block_size: 256,
        h: { m: [warp: 2, lane: 2], n: [warp: 2, lane: 16, vec: 8] },
        p: [[m.warp, n.warp], [m.lane, n.lane]],
        y: [n.vec],
    }
}
fn main() {}
