use ck_macros::tile_distribution;
tile_distribution! {
    struct D { warp_size: 32, r: [4], h: [[32]], p_major: [[1]], p_minor: [[0]], y_major: [0], y_minor: [0] }
}
fn main() {}
