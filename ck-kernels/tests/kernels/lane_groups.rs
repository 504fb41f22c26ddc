//! CK's short-row RMSNorm configurations, their encodings copied (`probes::lane_groups`), on
//! the emulator: the row reduction inside lane groups (mean of squares), the column sums across
//! them (`block_reduce_x` through shared memory) and RMSNorm against fp64, and the copies
//! declared for 64- and 32-lane warps bit for bit the same. `ck cross-check` runs them on the
//! GPU.

use ck_core::host::Device;
use ck_kernels::checks::Rng;
use ck_kernels::probes::lane_groups::host::{reference, CONFIGS};

fn close(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g as f64 - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "{what}[{i}]: {g} vs {w}"
        );
    }
}

#[test]
fn cks_lane_group_configurations_run_on_both_warp_sizes() {
    let dev = Device::emulator();
    let eps = 1e-6;
    for pair in CONFIGS.chunks(2) {
        let (rows, cols) = pair[0].tile;
        let m = 3 * rows;
        let mut rng = Rng(7 + cols as u64);
        // Rows of different scales, so a row mixed with another would show.
        let x: Vec<f32> = (0..m * cols)
            .map(|i| rng.f32() * (1 + i / cols) as f32)
            .collect();
        let gamma: Vec<f32> = (0..cols).map(|_| 0.5 + rng.f32().abs()).collect();
        let want = reference(&x, &gamma, (rows as usize, cols as usize), eps);
        let mut outputs = Vec::new();
        for c in pair {
            // The sanitizer's faults (out-of-bounds, races) come back as errors.
            let (got, _) = c.run(&dev, &x, &gamma, m, eps).unwrap();
            close(
                &got.mean_square,
                &want.mean_square,
                &format!("{} mean of squares", c.name),
            );
            close(
                &got.column_sums,
                &want.column_sums,
                &format!("{} column sums", c.name),
            );
            close(&got.y, &want.y, &format!("{} y", c.name));
            outputs.push(got);
        }
        assert_eq!(pair[0].warp_size, 64);
        assert_eq!(
            outputs[0], outputs[1],
            "{} and {}: the same map",
            pair[0].name, pair[1].name
        );
    }
}
