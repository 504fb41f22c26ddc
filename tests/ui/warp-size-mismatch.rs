use ck_macros::tile_distribution;
tile_distribution! {
    // Spec TV1 (wave64) declared for 32-lane warps.
    struct D {
        warp_size: 32, r: [],
        h: [[2, 2, 4, 1], [2, 2, 16, 8]],
        p_major: [[1, 2], [1, 2]], p_minor: [[1, 1], [2, 2]],
        y_major: [1, 1, 2, 2], y_minor: [0, 3, 0, 3],
    }
}
fn main() {}
