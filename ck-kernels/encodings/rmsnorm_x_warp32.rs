// RMSNorm X tile for 32-lane warps (spec TV1c): `ck encoding ck-kernels/encodings/rmsnorm_x_warp32.rs`
tile_distribution! {
    /// 4 warps × 32 lanes cover an 8 × 512 tile; each thread holds 2 × 2 vectors of 8.
    pub struct RmsX32 {
        warp_size: 32,
        block_size: 128,
        h: { m: [repeat: 2, warp: 2, lane: 2, vec: 1], n: [repeat: 2, warp: 2, lane: 16, vec: 8] },
        p: [[m.warp, n.warp], [m.lane, n.lane]],
        y: [m.repeat, m.vec, n.repeat, n.vec],
    }
}
