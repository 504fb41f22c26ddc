use ck_macros::tile_distribution;
tile_distribution! {
    struct D { warp_size: 32, r: [], h: [[32, 0]], p_major: [[1]], p_minor: [[0]], y_major: [1], y_minor: [1] }
}
// Only the encoding's error is reported: code using the distribution still type-checks.
fn main() {
    let x: [ck_core::Index; 1] = D::x_index(D::partition_index(0), [0]);
    let _ = (x, D::X_LENGTHS, D::THREAD_BUFFER_SIZE);
}
