use ck_macros::tile_distribution;
tile_distribution! {
    // REP is a const parameter: whether H[0][0] must be claimed is only known in const
    // evaluation, which reports the same rule.
    struct D<const REP: i32> { warp_size: 32, r: [], h: [[REP, 32, 4]], p_major: [[1]], p_minor: [[1]], y_major: [1], y_minor: [2] }
}
const LENGTHS: [ck_core::Index; 1] = D::<4>::X_LENGTHS;
fn main() {
    let _ = LENGTHS;
}
