use ck_macros::tile_distribution;
tile_distribution! {
    struct D {
        warp_size: 32,
        h: [[2, 2, 32, 4]],
        p_major: [[1], [1], [1]], p_minor: [[0], [1], [2]],
        y_major: [1], y_minor: [3],
    }
}
fn main() {}
