//! The tutorial kernels on the emulator against CPU references, their bank-conflict counts, and
//! kernels of two crates (ck-kernels' and this one's) launched from one process.

use ck_core::host::{Device, DeviceBuffer, LaunchConfig};
use ck_examples::softmax::host as softmax;
use ck_examples::transpose::host::{self as transpose, Layout};
use ck_kernels::checks::Rng;

fn random(len: usize, scale: f32, seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed);
    (0..len).map(|_| rng.f32() * scale).collect()
}

#[test]
fn softmax_matches_fp64_on_odd_shapes() {
    let d = Device::emulator();
    for (i, &(m, n)) in [(1, 1), (3, 5), (9, 1000), (13, 1024), (17, 129)]
        .iter()
        .enumerate()
    {
        // Logits in [-10, 10]: the row max matters, and no exponential underflows.
        let x = random(m as usize * n as usize, 10.0, 7 + i as u64);
        let (y, _) = softmax::softmax(&d, &x, (m, n)).unwrap();
        let want = softmax::reference(&x, (m, n));
        for (k, (&got, &w)) in y.iter().zip(&want).enumerate() {
            assert!(
                (got as f64 - w).abs() <= 1e-5 * w,
                "{m}×{n} at ({}, {}): {got} vs {w}",
                k / n as usize,
                k % n as usize
            );
        }
    }
}

#[test]
fn softmax_subtracts_the_row_max() {
    // exp(1000) overflows f32; a kernel that forgot the max would give NaN.
    let d = Device::emulator();
    let x = [1000.0, 1000.0 + 2f32.ln(), 999.0, -1e30];
    let (y, _) = softmax::softmax(&d, &x, (1, 4)).unwrap();
    let want = softmax::reference(&x, (1, 4));
    for (&g, &w) in y.iter().zip(&want) {
        assert!((g as f64 - w).abs() <= 1e-6, "{y:?} vs {want:?}");
    }
}

#[test]
fn softmax_refuses_rows_it_cannot_hold_and_wrong_lengths() {
    let d = Device::emulator();
    let long = softmax::softmax(&d, &vec![0.0; 1025], (1, 1025)).unwrap_err();
    assert_eq!(long.rule(), "shape-unsupported");
    let wrong = softmax::softmax(&d, &[0.0; 5], (2, 3)).unwrap_err();
    assert_eq!(wrong.rule(), "shape-mismatch");
}

#[test]
fn transpose_equals_the_reference_for_both_layouts() {
    let d = Device::emulator();
    for &(m, n) in &[(1, 1), (64, 64), (65, 130), (3, 200), (130, 7)] {
        let x = random(m as usize * n as usize, 1.0, 11);
        let want = transpose::reference(&x, (m, n));
        for layout in [Layout::Swizzled, Layout::Plain] {
            let (y, _) = transpose::transpose(&d, &x, (m, n), layout).unwrap();
            assert_eq!(y, want, "{m}×{n} {layout:?}");
        }
    }
}

#[test]
fn the_swizzle_removes_the_column_read_conflicts() {
    // One 64 × 64 tile: 8 warps × 16 registers = 128 warp-level shared stores and 128 loads.
    // Stores write 32 consecutive words of a row (plain) or a permutation of them (swizzled):
    // one wavefront each. Loads read a column: plainly, 32 words in one bank (32 wavefronts,
    // 31 of them conflicts); swizzled, 32 banks (one wavefront).
    let d = Device::emulator();
    let x = random(64 * 64, 1.0, 3);
    let (_, s) = transpose::transpose(&d, &x, (64, 64), Layout::Swizzled).unwrap();
    let (_, p) = transpose::transpose(&d, &x, (64, 64), Layout::Plain).unwrap();
    assert_eq!(
        (s.shared_store_wavefronts, s.shared_store_conflicts),
        (128, 0)
    );
    assert_eq!(
        (s.shared_load_wavefronts, s.shared_load_conflicts),
        (128, 0)
    );
    assert_eq!(
        (p.shared_store_wavefronts, p.shared_store_conflicts),
        (128, 0)
    );
    assert_eq!(
        (p.shared_load_wavefronts, p.shared_load_conflicts),
        (128 * 32, 128 * 31)
    );
}

/// Kernels of ck-kernels and of this crate, one process, one device; on the GPU each crate's
/// module is loaded when its first kernel runs.
fn two_crates_on(d: &Device) {
    let x = random(4096, 1.0, 5);
    let xd = DeviceBuffer::from_slice(d, &x).unwrap();
    let mut copy = DeviceBuffer::zeros(d, x.len()).unwrap();
    ck_kernels::elementwise::CopyF32::launch(d, LaunchConfig::new(1, 256), &xd, &mut copy, 4096)
        .unwrap();
    assert_eq!(copy.to_vec().unwrap(), x);
    let mut t = DeviceBuffer::zeros(d, x.len()).unwrap();
    transpose::launch(d, &copy, &mut t, (64, 64), Layout::Swizzled).unwrap();
    assert_eq!(t.to_vec().unwrap(), transpose::reference(&x, (64, 64)));
}

#[test]
fn kernels_of_two_crates_run_in_one_process_on_the_emulator() {
    two_crates_on(&Device::emulator());
}

#[test]
fn kernels_of_two_crates_run_in_one_process_on_the_gpu() {
    match Device::cuda(0) {
        Ok(d) => two_crates_on(&d),
        Err(e) => eprintln!("skipped: no GPU here ({e})"),
    }
}
