use ck_macros::tile_distribution;
tile_distribution! {
    // Spec TV3: H[0][0] (length 4) is claimed by nobody.
    struct D { warp_size: 32, r: [], h: [[4, 32, 8]], p_major: [[1]], p_minor: [[1]], y_major: [1], y_minor: [2] }
}
fn main() {}
