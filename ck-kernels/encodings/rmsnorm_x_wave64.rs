// RMSNorm X tile in CK's raw spelling for 64-lane waves (spec TV1).
tile_distribution! {
    pub struct RmsX {
        warp_size: 64,
        block_size: 256,
        r: [],
        h: [[2, 2, 4, 1], [2, 2, 16, 8]],
        p_major: [[1, 2], [1, 2]],
        p_minor: [[1, 1], [2, 2]],
        y_major: [1, 1, 2, 2],
        y_minor: [0, 3, 0, 3],
    }
}
