use ck_macros::tile_distribution;
tile_distribution! {
    struct D { warp_size: 32, r: [], h: [[32, 4], []], p_major: [[1]], p_minor: [[0]], y_major: [1], y_minor: [1] }
}
fn main() {}
