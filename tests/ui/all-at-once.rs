use ck_macros::tile_distribution;
tile_distribution! {
    // Spec TV3, the docs' tile_window example: every violation is reported in one compile.
    struct D { warp_size: 64, r: [], h: [[4, 2], [4, 2]], p_major: [[1], [1]], p_minor: [[0], [0]], y_major: [1, 1], y_minor: [1, 1] }
}
fn main() {}
