use ck_macros::tile_distribution;
tile_distribution! {
    // P0 points at H[0][2], but H[0] has two components.
    struct D { warp_size: 32, r: [], h: [[32, 4]], p_major: [[1]], p_minor: [[2]], y_major: [1], y_minor: [1] }
}
fn main() {}
