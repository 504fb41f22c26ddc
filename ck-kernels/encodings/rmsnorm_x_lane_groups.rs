// CK's rmsnorm2d X tile for short rows (generate.py's trait `tm 8, tn 8, vn 8`), copied as CK
// writes it for one 64-lane wave: the lane dim spans 8 lanes, so the wave is eight lane groups,
// each owning one row of 64 columns (see docs/distributions.md, "Lane groups").
tile_distribution! {
    pub struct CkRmsX8x8 {
        warp_size: 64,
        block_size: 64,
        r: [],
        h: [[1, 8, 1, 1], [1, 1, 8, 8]],
        p_major: [[1, 2], [1, 2]],
        p_minor: [[1, 1], [2, 2]],
        y_major: [1, 1, 2, 2],
        y_minor: [0, 3, 0, 3],
    }
}
